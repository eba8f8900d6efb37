/* relay.c: one connection of the gate (gate.h): the client's bytes to MHD, request by request,
 * each head checked before MHD sees it, and MHD's answers back.
 * relay_pump runs every step that can move bytes, in a loop, until none can; the epoll interest
 * is then exactly the set of sockets a step is waiting on (a read or write that returned
 * EAGAIN), so a level-triggered wake-up always finds work and nothing spins. A socket nobody
 * waits on is taken out of epoll (a closed socketpair end would otherwise report HUP forever).
 * Client -> MHD: C_HEAD reads until httphead_check decides; a valid head and then exactly its
 * Content-Length bytes are "cleared" (in_ok) and written to MHD; then C_ANSWER waits until
 * respframe saw the whole answer before the next head is read (one request at a time).
 * Chunked request bodies are refused 411 (docs/decisions.md). */
#include "gate_int.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
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
        ssize_t r = recv(c->cfd, buf, n, MSG_DONTWAIT);
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
        ssize_t r = send(c->cfd, buf, n, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (r >= 0)
            return r;
        if (errno == EINTR)
            continue;
        return errno == EAGAIN || errno == EWOULDBLOCK ? IO_AGAIN : IO_FAIL;
    }
}

/* Grows *buf toward max; false when it is at max already or out of memory. */
static bool grow(char **buf, size_t *cap, size_t max)
{
    if (*cap >= max)
        return false;
    size_t n = *cap ? *cap * 2 : 4096;
    if (n > max)
        n = max;
    char *p = realloc(*buf, n);
    if (!p)
        return false;
    *buf = p;
    *cap = n;
    return true;
}

static void set_interest(struct gate *g, int fd, uint64_t id, unsigned *have, unsigned want)
{
    if (fd < 0 || *have == want)
        return;
    struct epoll_event ev = {.events = want, .data.u64 = id};
    int op = !want ? EPOLL_CTL_DEL : *have ? EPOLL_CTL_MOD : EPOLL_CTL_ADD;
    if (epoll_ctl(g->ep, op, fd, op == EPOLL_CTL_DEL ? NULL : &ev) == 0 || op == EPOLL_CTL_DEL)
        *have = want;
}

static void drop_mhd(struct gate *g, struct conn *c)
{
    if (c->mfd < 0)
        return;
    set_interest(g, c->mfd, 0, &c->ev_m, 0);
    close(c->mfd); /* MHD reads EOF and ends its connection */
    c->mfd = -1;
    if (c->in_ok) { /* bytes cleared for that connection never go to the next one */
        memmove(c->in, c->in + c->in_ok, c->in_len - c->in_ok);
        c->in_len -= c->in_ok;
        c->in_ok = 0;
    }
    c->mhd_eof = c->mhd_dead = c->mhd_shut = c->rf_unknown = false;
}

void relay_close(struct gate *g, struct conn *c)
{
    if (c->st == C_FREE)
        return;
    drop_mhd(g, c);
    set_interest(g, c->cfd, 0, &c->ev_c, 0);
    tls_conn_free(c->tls);
    close(c->cfd);
    gate_peer_release(g, &c->key);
    free(c->in);
    free(c->out);
    if (c->busy)
        atomic_fetch_sub(&g->n_busy, 1);
    c->st = C_FREE;
    g->n_conns--;
}

static bool out_empty(const struct conn *c) { return c->out_len == c->out_off; }

static bool idle(const struct conn *c)
{
    return c->st == C_HEAD && !c->in_len && !c->answers_due && out_empty(c);
}

/* Our last byte is queued: shut our side and drop what the peer still sends for a moment, so
 * the close is a FIN after the answer rather than a reset that could discard it. */
static void begin_linger(struct gate *g, struct conn *c, uint64_t now)
{
    drop_mhd(g, c);
    if (c->client_eof) {
        relay_close(g, c);
        return;
    }
    if (c->tls && c->hs_done)
        tls_conn_bye(c->tls);
    shutdown(c->cfd, SHUT_WR);
    c->st = C_LINGER;
    c->linger_from = now;
    c->lingered = 0;
    c->in_len = c->in_ok = 0;
}

/* Our own short answer, after whatever of MHD's is still queued, then close. */
static void refuse(struct gate *g, struct conn *c, unsigned status, const char *reason, const char *why, uint64_t now)
{
    drop_mhd(g, c);
    char msg[512];
    int n = snprintf(msg, sizeof msg,
                     "HTTP/1.1 %u %s\r\nContent-Type: text/plain; charset=utf-8\r\nConnection: close\r\n"
                     "Content-Length: %zu\r\n\r\n%s\n",
                     status, reason, strlen(why) + 1, why);
    if (n < 0 || (size_t)n >= sizeof msg) {
        relay_close(g, c);
        return;
    }
    if (c->out_off) {
        memmove(c->out, c->out + c->out_off, c->out_len - c->out_off);
        c->out_len -= c->out_off;
        c->out_off = 0;
    }
    if (c->out_cap < c->out_len + (size_t)n) {
        char *p = realloc(c->out, c->out_len + (size_t)n);
        if (!p) {
            relay_close(g, c);
            return;
        }
        c->out = p;
        c->out_cap = c->out_len + (size_t)n;
    }
    memcpy(c->out + c->out_len, msg, (size_t)n);
    c->out_len += (size_t)n;
    c->st = C_REFUSE;
    c->linger_from = now;
    c->in_len = c->in_ok = 0;
}

static int open_mhd(struct gate *g, struct conn *c)
{
    int sv[2];
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, sv) < 0)
        return -1;
    /* MHD closes sv[1] itself when it cannot take it; it sees the client's own address */
    if (MHD_add_connection(g->mhd, sv[1], (struct sockaddr *)&c->addr, c->alen) != MHD_YES) {
        close(sv[0]);
        return -1;
    }
    c->mfd = sv[0];
    c->ev_m = 0;
    c->mhd_eof = c->mhd_dead = c->mhd_shut = c->rf_unknown = false;
    return 0;
}

static bool can_read_client(const struct conn *c)
{
    if (c->client_eof || (c->tls && !c->hs_done))
        return false;
    if (c->st == C_LINGER)
        return true;
    return (c->st == C_HEAD || c->st == C_BODY) && !c->mhd_dead && (c->in_len < c->in_cap || c->in_cap < RELAY_IN_MAX);
}

static bool can_read_mhd(const struct conn *c)
{
    return c->mfd >= 0 && !c->mhd_eof && (c->out_len < c->out_cap || c->out_cap < RELAY_OUT_MAX || c->out_off);
}

/* Each step returns the bytes it moved, 1 for a change of state, 0 for nothing; after one that
 * closed the connection c->st is C_FREE. */
static size_t step_read_client(struct gate *g, struct conn *c, uint64_t now)
{
    if (!can_read_client(c))
        return 0;
    if (c->st == C_LINGER) {
        ssize_t r = io_recv(c, g->scratch, sizeof g->scratch);
        if (r == IO_AGAIN)
            return 0;
        if (r <= 0 || (c->lingered += (size_t)r) > 1024 * 1024)
            relay_close(g, c);
        return 1;
    }
    if (c->in_len == c->in_cap && !grow(&c->in, &c->in_cap, RELAY_IN_MAX))
        return c->in_cap < RELAY_IN_MAX ? (relay_close(g, c), 1) : 0; /* out of memory */
    ssize_t r = io_recv(c, c->in + c->in_len, c->in_cap - c->in_len);
    if (r == IO_AGAIN)
        return 0;
    if (r == IO_FAIL) {
        relay_close(g, c);
        return 1;
    }
    if (r == 0) {
        c->client_eof = true;
        return 1;
    }
    if (c->st == C_HEAD && c->in_len == c->in_ok && !c->head_from)
        c->head_from = now; /* this head's 5 s start with its first byte */
    c->in_len += (size_t)r;
    return (size_t)r;
}

static size_t step_frame(struct gate *g, struct conn *c, uint64_t now)
{ /* calls itself once, from a valid head into its body */
    switch (c->st) {
    case C_HEAD: {
        if (c->in_len == c->in_ok)
            return 0;
        /* The full check runs only once the head may have ended (an empty line, CRLF or bare
         * LF style), grown past the limit, or the peer closed: a head trickled byte by byte
         * costs one search of each new byte, not a rescan of the whole head per byte. */
        const char *head = c->in + c->in_ok;
        size_t len = c->in_len - c->in_ok, from = c->scanned > 2 ? c->scanned - 2 : 0;
        bool ended = memmem(head + from, len - from, "\n\n", 2) || memmem(head + from, len - from, "\n\r\n", 3);
        c->scanned = len;
        if (!ended && len <= LIM_HEADER_MAX && !c->client_eof)
            return 0;
        struct httphead h;
        switch (httphead_check(head, len, &h)) {
        case HTTPHEAD_MORE:
            if (c->client_eof)
                relay_close(g, c); /* the peer ended inside a head */
            return c->client_eof;
        case HTTPHEAD_BAD: refuse(g, c, 400, "Bad Request", h.why, now); return 1;
        case HTTPHEAD_TOO_LARGE: refuse(g, c, 431, "Request Header Fields Too Large", h.why, now); return 1;
        case HTTPHEAD_OK: break;
        }
        if (h.chunked) {
            refuse(g, c, 411, "Length Required", "a chunked request body is not accepted: send Content-Length", now);
            return 1;
        }
        if (c->mfd < 0 && open_mhd(g, c) < 0) {
            refuse(g, c, 503, "Service Unavailable", "too many connections in progress, retry shortly", now);
            return 1;
        }
        c->in_ok += h.head_len;
        c->scanned = 0;
        c->answers_due++;
        respframe_expect(&c->rf, h.is_head);
        c->body_left = h.content_length;
        c->head_from = 0;
        c->body_from = now;
        c->st = c->body_left ? C_BODY : C_ANSWER;
        if (c->st == C_BODY)
            step_frame(g, c, now); /* clear the body bytes already here: MHD gets one write, one wake-up */
        return 1;
    }
    case C_BODY: {
        size_t avail = c->in_len - c->in_ok;
        size_t take = avail < c->body_left ? avail : (size_t)c->body_left;
        c->in_ok += take;
        c->body_left -= take;
        if (c->body_left == 0) {
            c->st = C_ANSWER;
            return 1;
        }
        return take;
    }
    case C_ANSWER:
        if (c->answers_due || c->rf_unknown)
            return 0;
        c->st = C_HEAD;
        c->idle_from = now;
        if (c->in_len > c->in_ok)
            c->head_from = now; /* the next head arrived early (pipelined): its 5 s start now */
        gate_timer_at(g, now + RELAY_PARK_MS);
        return 1;
    default:
        return 0;
    }
}

static size_t step_write_mhd(struct conn *c)
{
    if (!c->in_ok || c->mfd < 0 || c->mhd_dead)
        return 0;
    ssize_t n = send(c->mfd, c->in, c->in_ok, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n < 0) {
        if (errno == EAGAIN || errno == EWOULDBLOCK)
            return 0;
        if (errno == EINTR)
            return 1;
        c->mhd_dead = true; /* MHD closed its end: its EOF and answer follow */
        c->in_len = c->in_ok = 0;
        return 1;
    }
    memmove(c->in, c->in + n, c->in_len - (size_t)n);
    c->in_len -= (size_t)n;
    c->in_ok -= (size_t)n;
    return (size_t)n;
}

static size_t step_read_mhd(struct conn *c, uint64_t now)
{
    if (!can_read_mhd(c))
        return 0;
    if (out_empty(c))
        c->out_off = c->out_len = 0;
    if (c->out_len == c->out_cap && !grow(&c->out, &c->out_cap, RELAY_OUT_MAX)) {
        if (!c->out_off)
            return 0;
        memmove(c->out, c->out + c->out_off, c->out_len - c->out_off);
        c->out_len -= c->out_off;
        c->out_off = 0;
    }
    ssize_t n = recv(c->mfd, c->out + c->out_len, c->out_cap - c->out_len, MSG_DONTWAIT);
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
        return 0;
    /* a full buffer with more waiting: take it all before writing, so one answer leaves in one
     * send rather than a segment per buffer */
    while (n > 0 && c->out_len + (size_t)n == c->out_cap && grow(&c->out, &c->out_cap, RELAY_OUT_MAX)) {
        ssize_t more = recv(c->mfd, c->out + c->out_len + n, c->out_cap - c->out_len - (size_t)n, MSG_DONTWAIT);
        if (more <= 0)
            break; /* EAGAIN, or EOF/error seen again on the next step */
        n += more;
    }
    if (n <= 0) {
        if (n < 0 && errno == EINTR)
            return 1;
        c->mhd_eof = true;
        return 1;
    }
    if (!c->rf_unknown) {
        int k = respframe_feed(&c->rf, c->out + c->out_len, (size_t)n);
        if (k < 0 || (unsigned)k > c->answers_due)
            c->rf_unknown = true; /* no further request on this connection: it ends with MHD's */
        else
            c->answers_due -= (unsigned)k;
    }
    if (out_empty(c))
        c->last_write = now; /* the client's time to take the answer starts now */
    c->out_len += (size_t)n;
    return (size_t)n;
}

static size_t step_write_client(struct gate *g, struct conn *c, uint64_t now)
{
    if (out_empty(c) || (c->tls && !c->hs_done))
        return 0;
    ssize_t r = io_send(c, c->out + c->out_off, c->out_len - c->out_off);
    if (r == IO_AGAIN)
        return 0;
    if (r < 0) {
        relay_close(g, c);
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
        relay_close(g, c);
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
    if (c->st == C_REFUSE && out_empty(c))
        begin_linger(g, c, now);
    else if (c->mhd_eof && out_empty(c) && c->st != C_LINGER)
        begin_linger(g, c, now); /* MHD ended the connection (Connection: close, HTTP/1.0, an error) */
    else if (idle(c) && (c->client_eof || g->draining))
        relay_close(g, c);
    else if (c->client_eof && !c->in_ok && c->mfd >= 0 && !c->mhd_shut && c->st != C_LINGER) {
        shutdown(c->mfd, SHUT_WR); /* the client half-closed inside a request: MHD sees it as before */
        c->mhd_shut = true;
    }
    return c->st != C_FREE;
}

static void set_busy(struct gate *g, struct conn *c)
{
    bool busy = c->st == C_BODY || c->st == C_ANSWER || c->st == C_REFUSE || (c->st == C_HEAD && c->in_len > c->in_ok) ||
                !out_empty(c);
    if (busy != c->busy) {
        c->busy = busy;
        if (busy)
            atomic_fetch_add(&g->n_busy, 1);
        else
            atomic_fetch_sub(&g->n_busy, 1);
    }
}

void relay_pump(struct gate *g, struct conn *c)
{
    uint64_t now = clock_mono_ms();
    size_t moved = 0, step;
    do {
        step = step_handshake(g, c);
        if (c->st != C_FREE)
            step += step_read_client(g, c, now);
        if (c->st != C_FREE)
            step += step_frame(g, c, now);
        if (c->st != C_FREE)
            step += step_write_mhd(c);
        if (c->st != C_FREE)
            step += step_read_mhd(c, now);
        if (c->st != C_FREE)
            step += step_write_client(g, c, now);
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
    unsigned want_c = 0, want_m = 0;
    if (c->tls && !c->hs_done) {
        want_c = tls_conn_wants_write(c->tls) ? EPOLLOUT : EPOLLIN;
    } else {
        if (can_read_client(c))
            want_c |= EPOLLIN;
        if (!out_empty(c))
            want_c |= EPOLLOUT;
    }
    if (can_read_mhd(c))
        want_m |= EPOLLIN;
    if (c->in_ok && c->mfd >= 0 && !c->mhd_dead)
        want_m |= EPOLLOUT;
    unsigned i = index_of(g, c);
    set_interest(g, c->cfd, (uint64_t)i << 1, &c->ev_c, want_c);
    set_interest(g, c->mfd, ((uint64_t)i << 1) | 1, &c->ev_m, want_m);
    gate_timer_at(g, relay_deadline(g, c));
}

void relay_start(struct gate *g, struct conn *c)
{
    uint64_t now = clock_mono_ms();
    c->st = C_HEAD;
    c->head_from = now; /* the first head (and a TLS handshake) within 5 s of the accept */
    c->idle_from = now;
    relay_pump(g, c);
}

void relay_on_event(struct gate *g, struct conn *c, bool mhd_side, uint32_t events)
{
    if (!mhd_side && (events & (EPOLLERR | EPOLLHUP))) {
        relay_close(g, c); /* reset, or both directions closed: nothing can reach the client */
        return;
    }
    if (mhd_side && (events & EPOLLERR))
        c->mhd_eof = c->mhd_dead = true;
    relay_pump(g, c);
}

uint64_t relay_deadline(const struct gate *g, const struct conn *c)
{
    switch (c->st) {
    case C_HEAD: {
        if (c->head_from)
            return c->head_from + g->cfg.header_ms;
        uint64_t d = c->idle_from + LIM_IDLE_MS;
        if (c->mfd >= 0 && idle(c) && c->idle_from + RELAY_PARK_MS < d)
            d = c->idle_from + RELAY_PARK_MS;
        if (!out_empty(c) && c->last_write + LIM_IDLE_MS < d)
            d = c->last_write + LIM_IDLE_MS;
        return d;
    }
    case C_BODY: return c->body_from + LIM_BODY_READ_MS;
    case C_ANSWER: return out_empty(c) ? UINT64_MAX : c->last_write + LIM_IDLE_MS;
    case C_REFUSE:
    case C_LINGER: return c->linger_from + RELAY_LINGER_MS;
    default: return UINT64_MAX;
    }
}

void relay_expire(struct gate *g, struct conn *c, uint64_t now)
{
    switch (c->st) {
    case C_HEAD:
        if (c->head_from && now >= c->head_from + g->cfg.header_ms) {
            if (c->tls && !c->hs_done) {
                relay_close(g, c);
                return;
            }
            refuse(g, c, 408, "Request Timeout", "request headers not complete within 5 s", now);
            break;
        }
        if (!c->head_from && now >= c->idle_from + LIM_IDLE_MS) {
            relay_close(g, c); /* idle between requests for 2 min */
            return;
        }
        if (!out_empty(c) && now >= c->last_write + LIM_IDLE_MS) {
            relay_close(g, c); /* the client stopped taking its answer */
            return;
        }
        if (c->mfd >= 0 && idle(c) && now >= c->idle_from + RELAY_PARK_MS) {
            drop_mhd(g, c); /* park: no thread or MHD connection while idle */
            if (!c->in_len) { /* and no buffers */
                free(c->in);
                c->in = NULL;
                c->in_cap = 0;
            }
            free(c->out);
            c->out = NULL;
            c->out_cap = c->out_len = c->out_off = 0;
        }
        break;
    case C_BODY: /* the body took longer than 30 s in total: close, as MHD did before */
    case C_ANSWER: /* the client took nothing of its answer for 2 min */
    case C_REFUSE:
    case C_LINGER: relay_close(g, c); return;
    default: return;
    }
    relay_pump(g, c);
}

void relay_drain(struct gate *g, struct conn *c)
{
    if (idle(c))
        relay_close(g, c);
}
