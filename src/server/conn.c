/* conn.c: one connection of the gate (gate.h): its requests, each head checked strictly, each
 * body read to exactly its declared length, handed to the handler, and its answers, in order.
 * conn_pump runs every step that can move bytes, in a loop, until none can; the epoll interest
 * is then exactly what a step waits on (a read or write that returned EAGAIN), so a
 * level-triggered wake-up always finds work and nothing spins.
 * A request is parsed only once the answer to the one before it is queued (pipelining answered
 * in order) and while fewer than CONN_OUT_HIGH answer bytes wait for the client. Chunked request
 * bodies are refused 411; an Expect other than 100-continue 417 (docs/decisions.md). */
#include "gate_int.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/epoll.h>
#include <time.h>
#include <unistd.h>

#include "../core/clock.h"
#include "httphead.h"

#define PUMP_BUDGET (512u * 1024) /* bytes one pump moves before letting other connections run */
#define IO_AGAIN (-1)
#define IO_FAIL (-2)

static unsigned index_of(const struct gate *g, const struct conn *c) { return (unsigned)(c - g->conns); }

static ssize_t io_recv(struct conn *c, void *buf, size_t n)
{
    if (c->tls)
        return tls_conn_recv(c->tls, buf, n); /* TLS_AGAIN == IO_AGAIN, TLS_FAIL == IO_FAIL */
    for (;;) {
        ssize_t r = recv(c->fd, buf, n, MSG_DONTWAIT);
        if (r >= 0)
            return r;
        if (errno == EINTR)
            continue;
        return errno == EAGAIN || errno == EWOULDBLOCK ? IO_AGAIN : IO_FAIL;
    }
}

static ssize_t io_send(struct conn *c, const void *buf, size_t n)
{
    if (c->tls)
        return tls_conn_send(c->tls, buf, n);
    for (;;) {
        ssize_t r = send(c->fd, buf, n, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (r >= 0)
            return r;
        if (errno == EINTR)
            continue;
        return errno == EAGAIN || errno == EWOULDBLOCK ? IO_AGAIN : IO_FAIL;
    }
}

static void set_interest(struct gate *g, struct conn *c, unsigned want)
{
    if (c->ev == want)
        return;
    struct epoll_event ev = {.events = want, .data.u64 = ((uint64_t)c->gen << 32) | index_of(g, c)};
    int op = !want ? EPOLL_CTL_DEL : c->ev ? EPOLL_CTL_MOD : EPOLL_CTL_ADD;
    if (epoll_ctl(g->ep, op, c->fd, op == EPOLL_CTL_DEL ? NULL : &ev) == 0 || op == EPOLL_CTL_DEL)
        c->ev = want;
}

void gate_req_free(struct gate *g, struct gate_req *rq)
{
    if (!rq)
        return;
    if (g->cfg.handler.done)
        g->cfg.handler.done(g->cfg.handler.cls, rq);
    if (rq->resp.body_owned)
        free(rq->resp.body);
    if (rq->peer_fd >= 0)
        close(rq->peer_fd);
    free(rq->head);
    free(rq->body);
    free(rq);
}

void conn_close(struct gate *g, struct conn *c)
{
    if (c->st == C_FREE)
        return;
    gate_req_free(g, c->rq); /* C_WORK: the worker holds it; its completion finds the slot moved on */
    c->rq = NULL;
    set_interest(g, c, 0);
    tls_conn_free(c->tls);
    close(c->fd);
    gate_peer_release(g, &c->key);
    free(c->in);
    free(c->out);
    c->in = c->out = NULL;
    if (c->busy)
        atomic_fetch_sub(&g->n_busy, 1);
    c->busy = false;
    c->st = C_FREE;
    g->n_conns--;
}

static bool out_empty(const struct conn *c) { return c->out_len == c->out_off; }

static bool idle(const struct conn *c) { return c->st == C_HEAD && !c->in_len && out_empty(c); }

/* Appends n bytes for the client; false out of memory. */
static bool out_add(struct conn *c, const void *p, size_t n, uint64_t now)
{
    if (out_empty(c)) {
        c->out_off = c->out_len = 0;
        c->last_write = now; /* the client's time to take the answer starts now */
    }
    if (c->out_cap - c->out_len < n && c->out_off) {
        memmove(c->out, c->out + c->out_off, c->out_len - c->out_off);
        c->out_len -= c->out_off;
        c->out_off = 0;
    }
    if (c->out_cap - c->out_len < n) {
        size_t cap = c->out_cap ? c->out_cap : 4096;
        while (cap - c->out_len < n)
            cap *= 2;
        char *q = realloc(c->out, cap);
        if (!q)
            return false;
        c->out = q;
        c->out_cap = cap;
    }
    memcpy(c->out + c->out_len, p, n);
    c->out_len += n;
    return true;
}

/* Our last byte is queued: shut our side and drop what the peer still sends for a moment, so
 * the close is a FIN after the answer rather than a reset that could discard it. */
static void begin_linger(struct gate *g, struct conn *c, uint64_t now)
{
    if (c->client_eof) {
        conn_close(g, c);
        return;
    }
    if (c->tls && c->hs_done)
        tls_conn_bye(c->tls);
    shutdown(c->fd, SHUT_WR);
    c->st = C_LINGER;
    c->linger_from = now;
    c->lingered = 0;
    c->in_len = 0;
}

/* Our own short answer (the head was refused), after whatever is still queued, then close. */
static void refuse(struct gate *g, struct conn *c, unsigned status, const char *reason, const char *why, uint64_t now)
{
    char msg[512];
    int n = snprintf(msg, sizeof msg,
                     "HTTP/1.1 %u %s\r\nContent-Type: text/plain; charset=utf-8\r\nConnection: close\r\n"
                     "Content-Length: %zu\r\n\r\n%s\n",
                     status, reason, strlen(why) + 1, why);
    gate_req_free(g, c->rq);
    c->rq = NULL;
    if (n < 0 || (size_t)n >= sizeof msg || !out_add(c, msg, (size_t)n, now)) {
        conn_close(g, c);
        return;
    }
    c->st = C_CLOSING;
    c->in_len = 0;
}

static const char *reason_of(unsigned status)
{
    switch (status) {
    case 200: return "OK";
    case 400: return "Bad Request";
    case 401: return "Unauthorized";
    case 403: return "Forbidden";
    case 404: return "Not Found";
    case 405: return "Method Not Allowed";
    case 408: return "Request Timeout";
    case 409: return "Conflict";
    case 411: return "Length Required";
    case 412: return "Precondition Failed";
    case 413: return "Content Too Large";
    case 415: return "Unsupported Media Type";
    case 417: return "Expectation Failed";
    case 421: return "Misdirected Request";
    case 429: return "Too Many Requests";
    case 431: return "Request Header Fields Too Large";
    case 499: return "Client Closed Request";
    case 500: return "Internal Server Error";
    case 501: return "Not Implemented";
    case 503: return "Service Unavailable";
    case 504: return "Gateway Timeout";
    default: return "Status";
    }
}

static const char *date_line(struct gate *g)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    if (ts.tv_sec != g->date_sec) {
        struct tm tm;
        gmtime_r(&ts.tv_sec, &tm);
        strftime(g->date, sizeof g->date, "Date: %a, %d %b %Y %H:%M:%S GMT\r\n", &tm);
        g->date_sec = ts.tv_sec;
    }
    return g->date;
}

static void next_head(struct conn *c, uint64_t now)
{
    c->st = C_HEAD;
    c->idle_from = now;
    c->scanned = 0;
    c->head_from = c->in_len ? now : 0; /* a pipelined head already here: its 5 s start now */
}

/* Queues rq's answer and frees rq. `early`: answered before its body was read. */
static void answer(struct gate *g, struct conn *c, struct gate_req *rq, bool early, uint64_t now)
{
    struct gate_resp *rs = &rq->resp;
    bool close = rs->close || !rq->keep_alive || g->draining || c->client_eof;
    if (early && rq->content_length > LIM_BODY_MAX)
        close = true; /* not worth reading to keep the connection */
    char head[2048];
    int n = snprintf(head, sizeof head, "HTTP/1.1 %u %s\r\n%.*s%sContent-Length: %zu\r\n%s\r\n", rs->status,
                     reason_of(rs->status), (int)rs->hdr_len, rs->hdr, date_line(g), rs->len,
                     close ? "Connection: close\r\n" : rq->http10 ? "Connection: keep-alive\r\n" : "");
    unsigned long long body_left = early ? rq->content_length : 0;
    bool ok = n > 0 && (size_t)n < sizeof head && out_add(c, head, (size_t)n, now) &&
              (rq->is_head || !rs->len || out_add(c, rs->body, rs->len, now));
    gate_req_free(g, rq);
    if (!ok) {
        conn_close(g, c);
        return;
    }
    if (close) {
        c->st = C_CLOSING;
        c->in_len = 0; /* whatever followed is never read as a request */
    } else if (body_left) {
        c->st = C_DISCARD; /* the body still comes: its bytes are dropped, then the next head */
        c->discard_left = body_left;
        c->body_from = now;
    } else {
        next_head(c, now);
    }
}

void conn_on_done(struct gate *g, struct conn *c, struct gate_req *rq)
{
    answer(g, c, rq, false, clock_mono_ms());
    conn_pump(g, c);
}

/* Splits the request line of rq's head copy: "METHOD SP target SP version CRLF". */
static void cut_request_line(struct gate_req *rq)
{
    char *sp1 = memchr(rq->head, ' ', rq->head_len);
    char *sp2 = memchr(sp1 + 1, ' ', rq->head_len - (size_t)(sp1 + 1 - rq->head));
    rq->http10 = memcmp(sp2 + 1, "HTTP/1.0", 8) == 0;
    *sp1 = *sp2 = 0;
    rq->method = rq->head;
    rq->path = sp1 + 1;
    char *q = strchr(sp1 + 1, '?');
    rq->query = q ? q + 1 : "";
    if (q)
        *q = 0;
}

/* Connection: close / keep-alive tokens of every Connection field; the version's default. */
static bool wants_keep_alive(const struct gate_req *rq)
{
    bool close = false, keep = false;
    const char *end = rq->head + rq->head_len;
    const char *p = memchr(rq->head, '\n', rq->head_len) + 1;
    for (; p + 2 <= end && p[0] != '\r'; p = memchr(p, '\n', (size_t)(end - p)) + 1) {
        if (strncasecmp(p, "Connection:", 11) != 0)
            continue;
        const char *v = p + 11, *nl = memchr(v, '\r', (size_t)(end - v));
        while (v < nl) {
            while (v < nl && (*v == ' ' || *v == '\t' || *v == ','))
                v++;
            const char *t = v;
            while (v < nl && *v != ',' && *v != ' ' && *v != '\t')
                v++;
            if (v - t == 5 && strncasecmp(t, "close", 5) == 0)
                close = true;
            if (v - t == 10 && strncasecmp(t, "keep-alive", 10) == 0)
                keep = true;
        }
    }
    return !close && (!rq->http10 || keep);
}

static struct gate_req *new_req(struct conn *c, const struct httphead *h)
{
    struct gate_req *rq = calloc(1, sizeof *rq);
    if (!rq || !(rq->head = malloc(h->head_len + 1))) {
        free(rq);
        return NULL;
    }
    memcpy(rq->head, c->in, h->head_len);
    rq->head[h->head_len] = 0;
    rq->head_len = h->head_len;
    rq->content_length = h->content_length;
    rq->is_head = h->is_head;
    rq->local = &c->local;
    rq->peer_fd = -1;
    cut_request_line(rq);
    rq->keep_alive = wants_keep_alive(rq);
    rq->resp.status = 500;
    return rq;
}

/* After the body (or at once without one): the handler's second step, or the worker's. */
static void body_complete(struct gate *g, struct conn *c, struct gate_req *rq, bool work, uint64_t now)
{
    c->rq = NULL;
    enum gate_next next = work ? GATE_WORK : g->cfg.handler.on_body(g->cfg.handler.cls, rq);
    if (next == GATE_WORK) /* the worker's view of the client (gate_req_peer_gone); none if no fd is left */
        rq->peer_fd = fcntl(c->fd, F_DUPFD_CLOEXEC, 0);
    if (next == GATE_WORK && gate_submit(g, c, rq) == 0)
        return;
    if (next == GATE_WORK) { /* not one worker thread could start */
        gate_resp_text(&rq->resp, 503, "no worker thread could start, retry shortly\n");
        rq->resp.close = true;
    }
    answer(g, c, rq, false, now);
}

/* Returns 1 when something changed. */
static size_t frame_head(struct gate *g, struct conn *c, uint64_t now)
{
    if (!c->in_len || c->out_len - c->out_off > CONN_OUT_HIGH)
        return 0;
    /* The full check runs only once the head may have ended (an empty line, CRLF or bare LF
     * style), grown past the limit, or the peer closed: a head trickled byte by byte costs one
     * search of each new byte, not a rescan of the whole head per byte. */
    size_t len = c->in_len, from = c->scanned > 2 ? c->scanned - 2 : 0;
    bool ended = memmem(c->in + from, len - from, "\n\n", 2) || memmem(c->in + from, len - from, "\n\r\n", 3);
    c->scanned = len;
    if (!ended && len <= LIM_HEADER_MAX && !c->client_eof)
        return 0;
    struct httphead h;
    switch (httphead_check(c->in, len, &h)) {
    case HTTPHEAD_MORE:
        if (c->client_eof)
            conn_close(g, c); /* the peer ended inside a head */
        return c->client_eof;
    case HTTPHEAD_BAD: refuse(g, c, 400, "Bad Request", h.why, now); return 1;
    case HTTPHEAD_TOO_LARGE: refuse(g, c, 431, "Request Header Fields Too Large", h.why, now); return 1;
    case HTTPHEAD_OK: break;
    }
    if (h.chunked) {
        refuse(g, c, 411, "Length Required", "a chunked request body is not accepted: send Content-Length", now);
        return 1;
    }
    struct gate_req *rq = new_req(c, &h);
    if (!rq) {
        refuse(g, c, 503, "Service Unavailable", "out of memory, retry shortly", now);
        return 1;
    }
    memmove(c->in, c->in + h.head_len, c->in_len - h.head_len);
    c->in_len -= h.head_len;
    c->scanned = 0;
    c->head_from = 0;
    const char *ex;
    size_t exl;
    unsigned n_expect = gate_req_header(rq, "Expect", &ex, &exl);
    if (n_expect && !rq->http10) { /* RFC 9110 §10.1.1: HTTP/1.0 expectations are ignored */
        if (n_expect > 1 || exl != 12 || strncasecmp(ex, "100-continue", 12) != 0) {
            c->rq = rq;
            refuse(g, c, 417, "Expectation Failed", "the only expectation understood is 100-continue", now);
            return 1;
        }
        rq->expect_continue = true;
    }
    enum gate_next next = g->cfg.handler.on_head(g->cfg.handler.cls, rq);
    if (next == GATE_ANSWER || (rq->content_length > LIM_BODY_MAX && next != GATE_ANSWER)) {
        if (next != GATE_ANSWER) /* a handler that let an oversized body through: never buffered */
            gate_resp_text(&rq->resp, 413, "request body exceeds 8 MiB\n");
        if (rq->expect_continue && rq->content_length > c->in_len)
            rq->resp.close = true; /* the client may or may not send it: the framing is lost */
        answer(g, c, rq, true, now);
        return 1;
    }
    if (!rq->content_length) {
        body_complete(g, c, rq, next == GATE_WORK, now);
        return 1;
    }
    if (!(rq->body = malloc(rq->content_length))) {
        c->rq = rq;
        refuse(g, c, 503, "Service Unavailable", "out of memory, retry shortly", now);
        return 1;
    }
    if (rq->expect_continue && c->in_len < rq->content_length &&
        !out_add(c, "HTTP/1.1 100 Continue\r\n\r\n", 25, now)) {
        c->rq = rq;
        conn_close(g, c);
        return 1;
    }
    c->rq = rq;
    c->st = C_BODY;
    c->body_from = now;
    c->body_to_work = next == GATE_WORK;
    return 1;
}

static size_t frame_body(struct gate *g, struct conn *c, uint64_t now)
{
    struct gate_req *rq = c->rq;
    size_t want = (size_t)(rq->content_length - rq->body_len);
    size_t take = c->in_len < want ? c->in_len : want;
    if (take) {
        memcpy(rq->body + rq->body_len, c->in, take);
        rq->body_len += take;
        memmove(c->in, c->in + take, c->in_len - take);
        c->in_len -= take;
    }
    if (rq->body_len == rq->content_length) {
        body_complete(g, c, rq, c->body_to_work, now);
        return 1;
    }
    return take;
}

static size_t step_frame(struct gate *g, struct conn *c, uint64_t now)
{
    switch (c->st) {
    case C_HEAD: return frame_head(g, c, now);
    case C_BODY: return frame_body(g, c, now);
    case C_DISCARD: {
        size_t take = c->in_len < c->discard_left ? c->in_len : (size_t)c->discard_left;
        memmove(c->in, c->in + take, c->in_len - take);
        c->in_len -= take;
        c->discard_left -= take;
        if (!c->discard_left) {
            next_head(c, now);
            return 1;
        }
        return take;
    }
    default: return 0;
    }
}

static bool can_read(const struct conn *c)
{
    if (c->client_eof || (c->tls && !c->hs_done))
        return false;
    if (c->st == C_LINGER)
        return true;
    return (c->st == C_HEAD || c->st == C_BODY || c->st == C_DISCARD) && c->in_len < CONN_IN_MAX;
}

static size_t step_read(struct gate *g, struct conn *c, uint64_t now)
{
    if (!can_read(c) || c->drained)
        return 0;
    if (c->st == C_LINGER) {
        ssize_t r = io_recv(c, g->scratch, sizeof g->scratch);
        if (r == IO_AGAIN)
            return 0;
        if (r <= 0 || (c->lingered += (size_t)r) > 1024 * 1024)
            conn_close(g, c);
        return 1;
    }
    char *dst;
    size_t room;
    struct gate_req *rq = c->rq;
    if (c->st == C_BODY && !c->in_len) { /* straight into the body: no copy for large bodies */
        dst = rq->body + rq->body_len;
        room = (size_t)(rq->content_length - rq->body_len);
    } else {
        if (c->in_cap < CONN_IN_MAX && c->in_cap - c->in_len < 2048) {
            size_t cap = c->in_cap ? c->in_cap * 2 : 4096;
            char *p = realloc(c->in, cap < CONN_IN_MAX ? cap : CONN_IN_MAX);
            if (!p) {
                conn_close(g, c);
                return 1;
            }
            c->in = p;
            c->in_cap = cap < CONN_IN_MAX ? cap : CONN_IN_MAX;
        }
        dst = c->in + c->in_len;
        room = c->in_cap - c->in_len;
    }
    ssize_t r = io_recv(c, dst, room);
    if (r == IO_AGAIN)
        return 0;
    if (r == IO_FAIL) {
        conn_close(g, c);
        return 1;
    }
    if (r == 0) {
        c->client_eof = true;
        return 1;
    }
    /* A short read took all the socket held; TLS may still hold decrypted bytes the socket no
     * longer shows, which epoll would never report: then read on */
    c->drained = (size_t)r < room && (!c->tls || !tls_conn_pending(c->tls));
    if (dst == c->in + c->in_len) {
        if (c->st == C_HEAD && !c->in_len && !c->head_from)
            c->head_from = now; /* this head's 5 s start with its first byte */
        c->in_len += (size_t)r;
    } else {
        rq->body_len += (size_t)r;
    }
    return (size_t)r;
}

static size_t step_write(struct gate *g, struct conn *c, uint64_t now)
{
    if (out_empty(c) || (c->tls && !c->hs_done))
        return 0;
    ssize_t r = io_send(c, c->out + c->out_off, c->out_len - c->out_off);
    if (r == IO_AGAIN)
        return 0;
    if (r < 0) {
        conn_close(g, c);
        return 1;
    }
    c->out_off += (size_t)r;
    if (out_empty(c))
        c->out_off = c->out_len = 0;
    c->last_write = now;
    return (size_t)r;
}

static size_t step_handshake(struct gate *g, struct conn *c)
{
    if (!c->tls || c->hs_done)
        return 0;
    int r = tls_conn_handshake(c->tls);
    if (r == TLS_AGAIN)
        return 0;
    if (r < 0) {
        conn_close(g, c);
        return 1;
    }
    c->hs_done = true;
    return 1;
}

/* After the steps: the ends of a connection's life. Returns false when it was closed. */
static bool settle(struct gate *g, struct conn *c, uint64_t now)
{
    if (c->st == C_FREE)
        return false;
    if (c->st == C_CLOSING && out_empty(c))
        begin_linger(g, c, now);
    else if (idle(c) && (c->client_eof || g->draining))
        conn_close(g, c);
    else if (c->client_eof && out_empty(c) && (c->st == C_BODY || c->st == C_DISCARD))
        conn_close(g, c); /* the peer ended inside a body */
    return c->st != C_FREE;
}

static void set_busy(struct gate *g, struct conn *c)
{
    bool busy = c->st == C_BODY || c->st == C_WORK || c->st == C_DISCARD || c->st == C_CLOSING ||
                (c->st == C_HEAD && c->in_len) || !out_empty(c);
    if (busy != c->busy) {
        c->busy = busy;
        if (busy)
            atomic_fetch_add(&g->n_busy, 1);
        else
            atomic_fetch_sub(&g->n_busy, 1);
    }
}

void conn_pump(struct gate *g, struct conn *c)
{
    uint64_t now = clock_mono_ms();
    size_t moved = 0, step;
    c->drained = false; /* a new wake-up: the socket may hold more */
    do {
        step = step_handshake(g, c);
        if (c->st != C_FREE)
            step += step_read(g, c, now);
        if (c->st != C_FREE)
            step += step_frame(g, c, now);
        if (c->st != C_FREE)
            step += step_write(g, c, now);
        if (!settle(g, c, now))
            return;
        moved += step;
    } while (step && moved < PUMP_BUDGET);
    if (step && !c->again) { /* more to move: after the other connections had their turn */
        c->again = true;
        unsigned i = index_of(g, c);
        g->again_next[i] = g->again_head;
        g->again_head = i + 1;
    }
    set_busy(g, c);
    unsigned want = 0;
    if (c->tls && !c->hs_done) {
        want = tls_conn_wants_write(c->tls) ? EPOLLOUT : EPOLLIN;
    } else {
        if (can_read(c))
            want |= EPOLLIN;
        if (!out_empty(c))
            want |= EPOLLOUT;
    }
    set_interest(g, c, want);
    gate_timer_at(g, conn_deadline(g, c));
}

void conn_start(struct gate *g, struct conn *c)
{
    uint64_t now = clock_mono_ms();
    c->st = C_HEAD;
    c->head_from = now; /* the first head (and a TLS handshake) within 5 s of the accept */
    c->idle_from = now;
    conn_pump(g, c);
}

void conn_on_event(struct gate *g, struct conn *c, uint32_t events)
{
    if (events & (EPOLLERR | EPOLLHUP)) {
        conn_close(g, c); /* reset, or both directions closed: nothing can reach the client */
        return;
    }
    conn_pump(g, c);
}

static bool holds_buffers(const struct conn *c) { return c->in_cap || c->out_cap; }

uint64_t conn_deadline(const struct gate *g, const struct conn *c)
{
    uint64_t stalled = out_empty(c) ? UINT64_MAX : c->last_write + LIM_IDLE_MS;
    switch (c->st) {
    case C_HEAD: {
        if (c->head_from)
            return c->head_from + g->cfg.header_ms;
        uint64_t d = c->idle_from + LIM_IDLE_MS;
        if (idle(c) && holds_buffers(c) && c->idle_from + GATE_PARK_MS < d)
            d = c->idle_from + GATE_PARK_MS;
        return d < stalled ? d : stalled;
    }
    case C_BODY:
    case C_DISCARD: return c->body_from + LIM_BODY_READ_MS;
    case C_WORK:
    case C_CLOSING: return stalled;
    case C_LINGER: return c->linger_from + GATE_LINGER_MS;
    default: return UINT64_MAX;
    }
}

void conn_expire(struct gate *g, struct conn *c, uint64_t now)
{
    switch (c->st) {
    case C_HEAD:
        if (c->head_from && now >= c->head_from + g->cfg.header_ms) {
            if (c->tls && !c->hs_done) {
                conn_close(g, c);
                return;
            }
            refuse(g, c, 408, "Request Timeout", "request headers not complete within 5 s", now);
            break;
        }
        if ((!c->head_from && now >= c->idle_from + LIM_IDLE_MS) ||
            (!out_empty(c) && now >= c->last_write + LIM_IDLE_MS)) {
            conn_close(g, c); /* idle between requests for 2 min, or not taking its answer */
            return;
        }
        if (idle(c) && now >= c->idle_from + GATE_PARK_MS) { /* park: no buffers while idle */
            free(c->in);
            free(c->out);
            c->in = c->out = NULL;
            c->in_cap = c->out_cap = c->out_len = c->out_off = 0;
        }
        break;
    case C_WORK:
        if (now >= conn_deadline(g, c))
            conn_close(g, c);
        return;
    default: /* a body past 30 s, an answer not taken for 2 min, the end of a linger */
        conn_close(g, c);
        return;
    }
    conn_pump(g, c);
}

void conn_drain(struct gate *g, struct conn *c)
{
    if (idle(c))
        conn_close(g, c);
}
