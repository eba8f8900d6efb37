/* helper.c: plimsoll-guestio, the confined process that reads guest-written HTTP
 * (docs/privsep.md). The daemon spawns it, hands it accepted guest connections (CONN, with the
 * descriptor in SCM_RIGHTS), and gets back one canonical CALL per request (method, raw target,
 * body); it answers with a REPLY, which this process writes to the guest as HTTP.
 * Owns: every guest connection it was given (until it sends DONE for it), their buffers, and
 *   its end of the channel.
 * Trusts: the daemon's frames only after gio_hdr_decode/gio_reply_decode (a bad one ends the
 *   process); nothing a guest sends.
 * Invariant: nothing is read from any guest before gio_confine() has returned 0; every
 *   connection is bounded in bytes (head_max + body_max, one reply) and time (head, read and
 *   write deadlines), and at most conn_max are held, so a guest costs what it always did; the
 *   process is single-threaded and never blocks except in poll(2). */
#include <errno.h>
#include <jansson.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "../core/clock.h"
#include "guardparse.h"
#include "confine.h"
#include "frame.h"
#include "guestio.h"
#include "helper.h"
#include "http.h"

#define CT_TEXT "text/plain; charset=utf-8"
#define CONTINUE "HTTP/1.1 100 Continue\r\n\r\n"

enum cst { C_HEAD, C_BODY, C_WAIT, C_WRITE, C_DRAIN };

struct hconn {
    uint64_t id;
    int fd;
    enum cst st;
    int64_t t0, dl; /* given at; the deadline of the current state */
    uint8_t *head;
    size_t have, hend;
    struct gio_http_req req;
    uint64_t want;    /* the declared body */
    size_t take, got; /* the part forwarded, and what we have of it */
    size_t early;     /* body bytes that came with the head */
    uint8_t *body;
    uint8_t *out; /* bytes to write to the guest (an interim 100 or the answer) */
    size_t out_len, out_off;
    uint64_t drain_left;
};

struct qbuf {
    struct qbuf *next;
    uint8_t *p;
    size_t len, off;
};

static struct gio_limits L;
static const char *guard_path; /* guard mode: the one path served; NULL in http mode */
static struct hconn *conns[GIO_CONN_CAP];
static unsigned n_conns;
static uint64_t last_id;
static struct qbuf *q_head, *q_tail; /* frames to the daemon */
/* descriptors that arrived on the channel, in order; each CONN takes the oldest */
static int fdq[GIO_CONN_CAP + 8];
static unsigned fdq_n;

static _Noreturn void die(int status)
{
    _exit(status);
}

/* ---- frames to the daemon ------------------------------------------------------------------ */

static void queue(uint8_t *p, size_t len)
{
    struct qbuf *b = calloc(1, sizeof *b);
    if (!b)
        die(GIO_EXIT_NOMEM);
    b->p = p;
    b->len = len;
    if (q_tail)
        q_tail->next = b;
    else
        q_head = b;
    q_tail = b;
}

static uint8_t *frame_new(uint16_t type, uint64_t seq, size_t payload)
{
    uint8_t *f = malloc(F16_HDR_LEN + payload);
    if (!f)
        die(GIO_EXIT_NOMEM);
    struct f16_hdr h = {.len = (uint32_t)payload, .type = type, .flags = 0, .seq = seq};
    f16_hdr_encode(f, &h);
    return f;
}

static void flush_queue(void)
{
    while (q_head) {
        struct qbuf *b = q_head;
        ssize_t n = send(GIO_CHAN_FD, b->p + b->off, b->len - b->off, MSG_DONTWAIT | MSG_NOSIGNAL);
        if (n < 0 && (errno == EAGAIN || errno == EINTR))
            return;
        if (n <= 0)
            die(0); /* the daemon is gone or stopping */
        b->off += (size_t)n;
        if (b->off < b->len)
            return;
        q_head = b->next;
        if (!q_head)
            q_tail = NULL;
        free(b->p);
        free(b);
    }
}

/* ---- connections ----------------------------------------------------------------------------- */

static void conn_close(unsigned i)
{
    struct hconn *c = conns[i];
    close(c->fd);
    queue(frame_new(GIO_T_DONE, c->id, 0), F16_HDR_LEN);
    free(c->head);
    free(c->body);
    free(c->out);
    free(c);
    conns[i] = conns[--n_conns];
    conns[n_conns] = NULL;
}

/* Sets c->out to a complete answer and enters C_WRITE. */
static void answer(struct hconn *c, int status, const char *ctype, const uint8_t *body, size_t len)
{
    bool head_only = !strcmp(c->req.method, "HEAD") || status == 204 || status == 304;
    char head[320];
    size_t hn = gio_http_head(head, sizeof head, status, ctype, len);
    if (!hn) {
        hn = gio_http_head(head, sizeof head, status, "application/octet-stream", len);
        if (!hn)
            die(GIO_EXIT_PROTOCOL);
    }
    /* The guard's capacity answer tells the guest when to retry (providers.md §5.4). */
    static const char retry[] = "Retry-After: 1\r\n";
    if (guard_path && status == 503 && hn + sizeof retry - 1 < sizeof head) {
        memmove(head + hn - 2 + sizeof retry - 1, head + hn - 2, 2);
        memcpy(head + hn - 2, retry, sizeof retry - 1);
        hn += sizeof retry - 1;
    }
    size_t total = hn + (head_only ? 0 : len);
    free(c->out);
    c->out = malloc(total ? total : 1);
    if (!c->out)
        die(GIO_EXIT_NOMEM);
    memcpy(c->out, head, hn);
    if (!head_only && len)
        memcpy(c->out + hn, body, len);
    c->out_len = total;
    c->out_off = 0;
    c->st = C_WRITE;
    c->dl = (int64_t)clock_mono_ms() + L.write_ms;
}

static void answer_text(struct hconn *c, int status, const char *text)
{
    answer(c, status, CT_TEXT, (const uint8_t *)text, strlen(text));
    c->want = 0; /* a framing refusal ends the connection: nothing is drained */
}

static void send_call(struct hconn *c)
{
    struct gio_call call = {
        .method = (const uint8_t *)c->req.method,
        .method_len = strlen(c->req.method),
        .target = (const uint8_t *)c->req.target,
        .target_len = strlen(c->req.target),
        .body = c->body,
        .body_len = c->got,
    };
    size_t n = gio_call_size(call.method_len, call.target_len, call.body_len);
    if (!n) {
        answer_text(c, 400, "malformed request\n");
        return;
    }
    uint8_t *f = frame_new(GIO_T_CALL, c->id, n);
    if (gio_call_encode(f + F16_HDR_LEN, n, &call) != n) {
        free(f);
        answer_text(c, 400, "malformed request\n");
        return;
    }
    queue(f, F16_HDR_LEN + n);
    free(c->body);
    c->body = NULL;
    c->st = C_WAIT; /* until the REPLY: the guest is not read meanwhile */
}

/* ---- guard mode (the e2b egress guard, docs/privsep.md) ---------------------------------------- */

static void answer_json_error(struct hconn *c, int status, const char *msg)
{
    char body[160];
    int n = snprintf(body, sizeof body, "{\"error\":\"%s\"}", msg);
    answer(c, status, "application/json", (const uint8_t *)body, n > 0 ? (size_t)n : 0);
    c->want = 0;
}

/* One GCALL: the credential as sent (the daemon compares it) and the request's verdict. */
static void send_gcall(struct hconn *c, struct gio_gcall *g)
{
    g->cred = (const uint8_t *)c->req.cred;
    g->cred_len = strlen(c->req.cred);
    size_t n = gio_gcall_size(g);
    uint8_t *f = n ? frame_new(GIO_T_GCALL, c->id, n) : NULL;
    if (!f || gio_gcall_encode(f + F16_HDR_LEN, n, g) != n) {
        free(f);
        answer_json_error(c, 400, "bad guard request: malformed request");
        return;
    }
    queue(f, F16_HDR_LEN + n);
    free(c->body);
    c->body = NULL;
    c->st = C_WAIT;
}

/* The body is in: parse it (guardparse.c) and forward the canonical call or the refusal. */
static void guard_body_complete(struct hconn *c)
{
    struct e2b_guard_call call;
    char why[GIO_WHY_MAX + 1];
    struct gio_gcall g = {.verdict = GIO_V_CALL};
    if (e2b_guard_parse(c->body, c->got, &call, why, sizeof why)) {
        /* the reason is ours (fixed words); keep only what a JSON string can carry as is */
        size_t k = 0;
        for (size_t i = 0; why[i] && k < GIO_WHY_MAX; i++)
            if (why[i] >= 0x20 && why[i] <= 0x7e && why[i] != '"' && why[i] != '\\')
                why[k++] = why[i];
        why[k] = 0;
        g = (struct gio_gcall){.verdict = GIO_V_BAD, .why = (const uint8_t *)why, .why_len = k ? k : 1};
        if (!k)
            g.why = (const uint8_t *)"?";
        send_gcall(c, &g);
        return;
    }
    for (int m = 0; m < GIO_GM_COUNT; m++)
        if (!strcmp(call.method, gio_gmethod_name[m]))
            g.method = m;
    g.path = (const uint8_t *)call.path;
    g.path_len = strlen(call.path);
    g.body = call.body;
    g.body_len = call.len;
    send_gcall(c, &g);
    e2b_guard_call_done(&call);
}

/* The checks that need no secret, in the guard's order (guard.h): the path (404), the
 * credential header's presence (401); returns false when the connection was answered. The
 * token itself is the daemon's to judge. */
static bool guard_head(struct hconn *c)
{
    if (strcmp(c->req.method, "POST") || strcmp(c->req.target, guard_path)) {
        answer_json_error(c, 404, "not found");
        return false;
    }
    if (c->req.cred_count > 1) {
        answer_json_error(c, 400, "bad guard request: the credential header came more than once");
        return false;
    }
    if (!c->req.cred || !c->req.cred[0]) {
        answer_json_error(c, 401, "missing egress guard credential");
        return false;
    }
    size_t cl = strlen(c->req.cred);
    bool ok = cl <= GIO_CRED_MAX;
    for (size_t i = 0; ok && i < cl; i++)
        ok = (uint8_t)c->req.cred[i] > 0x20 && (uint8_t)c->req.cred[i] < 0x7f;
    if (!ok) {
        answer_json_error(c, 401, "unknown or expired egress guard credential");
        return false;
    }
    if (c->req.content_length > GIO_GBODY_MAX) {
        /* 413, but only after the daemon has checked the token: nothing of the body is kept */
        struct gio_gcall g = {.verdict = GIO_V_TOO_LARGE};
        c->take = 0;
        c->want = c->req.content_length;
        c->early = c->have - c->hend;
        send_gcall(c, &g);
        return false;
    }
    return true;
}

static void body_complete(struct hconn *c)
{
    if (guard_path)
        guard_body_complete(c);
    else
        send_call(c);
}

static void head_complete(struct hconn *c)
{
    int st = gio_http_parse(c->head, c->hend, guard_path ? E2B_GUARD_HEADER : NULL, &c->req);
    if (st) {
        answer_text(c, st,
                    st == 411   ? "Transfer-Encoding is not accepted; send Content-Length\n"
                    : st == 505 ? "HTTP version not supported\n"
                                : "malformed request\n");
        return;
    }
    if (guard_path && !guard_head(c))
        return;
    /* At most one byte past the body cap goes on: the broker answers 413 then. */
    c->want = c->req.content_length;
    c->take = c->want > L.body_max ? L.body_max : (size_t)c->want;
    if (c->take && !(c->body = malloc(c->take))) {
        answer_text(c, 503, "host api socket out of memory\n");
        return;
    }
    c->early = c->have - c->hend;
    c->got = c->early < c->take ? c->early : c->take;
    if (c->got)
        memcpy(c->body, c->head + c->hend, c->got);
    if (c->got == c->take) {
        body_complete(c);
        return;
    }
    c->st = C_BODY;
    c->dl = c->t0 + L.read_ms;
    if (c->req.expect_continue) {
        c->out = malloc(sizeof CONTINUE - 1);
        if (!c->out)
            die(GIO_EXIT_NOMEM);
        memcpy(c->out, CONTINUE, sizeof CONTINUE - 1);
        c->out_len = sizeof CONTINUE - 1;
        c->out_off = 0;
    }
}

/* Returns false when the connection is to be closed. */
static bool on_readable(struct hconn *c)
{
    if (c->st == C_HEAD) {
        if (c->have == L.head_max) {
            answer_text(c, 431, "request header section too large\n");
            return true;
        }
        ssize_t n = recv(c->fd, c->head + c->have, L.head_max - c->have, MSG_DONTWAIT);
        if (n < 0 && (errno == EAGAIN || errno == EINTR))
            return true;
        if (n <= 0)
            return false; /* ended before a complete head: no one to answer */
        size_t before = c->have;
        c->have += (size_t)n;
        /* Only a blank line ending in the new bytes is new (no quadratic rescans). */
        size_t from = before > 2 ? before - 2 : 0, e = gio_http_head_end(c->head + from, c->have - from);
        if (e) {
            c->hend = from + e;
            head_complete(c);
        } else if (c->have == L.head_max) {
            answer_text(c, 431, "request header section too large\n");
        }
        return true;
    }
    if (c->st == C_BODY) {
        ssize_t n = recv(c->fd, c->body + c->got, c->take - c->got, MSG_DONTWAIT);
        if (n < 0 && (errno == EAGAIN || errno == EINTR))
            return true;
        if (n <= 0)
            return false; /* the guest did not send what it declared: nothing is called */
        c->got += (size_t)n;
        if (c->got == c->take) {
            free(c->out); /* an unsent interim 100 is moot now */
            c->out = NULL;
            c->out_len = c->out_off = 0;
            body_complete(c);
        }
        return true;
    }
    if (c->st == C_DRAIN) {
        uint8_t tmp[16384];
        size_t want = c->drain_left < sizeof tmp ? (size_t)c->drain_left : sizeof tmp;
        ssize_t n = recv(c->fd, tmp, want, MSG_DONTWAIT);
        if (n < 0 && (errno == EAGAIN || errno == EINTR))
            return true;
        if (n <= 0)
            return false;
        c->drain_left -= (uint64_t)n;
        return c->drain_left > 0;
    }
    return true;
}

static bool on_writable(struct hconn *c)
{
    ssize_t n = send(c->fd, c->out + c->out_off, c->out_len - c->out_off, MSG_DONTWAIT | MSG_NOSIGNAL);
    if (n < 0 && (errno == EAGAIN || errno == EINTR))
        return true;
    if (n <= 0)
        return false;
    c->out_off += (size_t)n;
    if (c->out_off < c->out_len)
        return true;
    free(c->out);
    c->out = NULL;
    c->out_len = c->out_off = 0;
    if (c->st != C_WRITE)
        return true; /* the interim 100 went out; keep reading the body */
    /* The rest of a declared body we did not take is read and dropped, bounded in bytes and
     * time, so the guest sees our answer and then a clean end rather than a reset. */
    size_t consumed = c->early > c->take ? c->early : c->take;
    if (c->want <= consumed)
        return false;
    c->drain_left = c->want - consumed > GIO_DRAIN_MAX ? GIO_DRAIN_MAX : c->want - consumed;
    c->st = C_DRAIN;
    c->dl = (int64_t)clock_mono_ms() + L.head_ms;
    return true;
}

/* ---- frames from the daemon ------------------------------------------------------------------ */

static void on_conn(uint64_t id)
{
    if (!fdq_n || n_conns >= L.conn_max || id <= last_id)
        die(GIO_EXIT_PROTOCOL);
    last_id = id;
    struct hconn *c = calloc(1, sizeof *c);
    if (!c || !(c->head = malloc(L.head_max)))
        die(GIO_EXIT_NOMEM);
    c->id = id;
    c->fd = fdq[0];
    memmove(fdq, fdq + 1, --fdq_n * sizeof fdq[0]);
    c->st = C_HEAD;
    c->t0 = (int64_t)clock_mono_ms();
    c->dl = c->t0 + L.head_ms;
    conns[n_conns++] = c;
}

static void on_reply(uint64_t id, const uint8_t *p, size_t len)
{
    struct gio_reply r;
    if (gio_reply_decode(p, len, &r) < 0)
        die(GIO_EXIT_PROTOCOL);
    for (unsigned i = 0; i < n_conns; i++) {
        struct hconn *c = conns[i];
        if (c->id != id)
            continue;
        if (c->st != C_WAIT)
            die(GIO_EXIT_PROTOCOL);
        char ct[GIO_CTYPE_MAX + 1];
        memcpy(ct, r.ctype, r.ctype_len);
        ct[r.ctype_len] = 0;
        answer(c, r.status, r.ctype_len ? ct : "application/octet-stream", r.body, r.body_len);
        return;
    }
    die(GIO_EXIT_PROTOCOL); /* a REPLY for no connection we wait on */
}

/* The channel reader: a header, then exactly its payload. */
static uint8_t rx_hdr[F16_HDR_LEN];
static size_t rx_hhave;
static struct f16_hdr rx_h;
static uint8_t *rx_pl;
static size_t rx_plhave;

static void on_frame(void)
{
    if (rx_h.type == GIO_T_CONN)
        on_conn(rx_h.seq);
    else
        on_reply(rx_h.seq, rx_pl, rx_h.len);
    free(rx_pl);
    rx_pl = NULL;
    rx_hhave = rx_plhave = 0;
}

static void read_channel(void)
{
    for (;;) {
        uint8_t *dst;
        size_t want;
        if (rx_hhave < F16_HDR_LEN) {
            dst = rx_hdr + rx_hhave;
            want = F16_HDR_LEN - rx_hhave;
        } else {
            dst = rx_pl + rx_plhave;
            want = rx_h.len - rx_plhave;
        }
        union {
            char buf[CMSG_SPACE(sizeof(int) * 8)];
            struct cmsghdr align;
        } cm;
        struct iovec iov = {dst, want};
        struct msghdr mh = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = cm.buf, .msg_controllen = sizeof cm.buf};
        ssize_t n = recvmsg(GIO_CHAN_FD, &mh, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
        if (n < 0 && (errno == EAGAIN || errno == EINTR))
            return;
        if (n <= 0)
            die(0); /* the daemon closed the channel: stop */
        if (mh.msg_flags & MSG_CTRUNC)
            die(GIO_EXIT_PROTOCOL);
        for (struct cmsghdr *h = CMSG_FIRSTHDR(&mh); h; h = CMSG_NXTHDR(&mh, h)) {
            if (h->cmsg_level != SOL_SOCKET || h->cmsg_type != SCM_RIGHTS)
                die(GIO_EXIT_PROTOCOL);
            size_t k = (h->cmsg_len - CMSG_LEN(0)) / sizeof(int);
            for (size_t j = 0; j < k; j++) {
                int fd;
                memcpy(&fd, CMSG_DATA(h) + j * sizeof(int), sizeof fd);
                if (fdq_n == sizeof fdq / sizeof fdq[0])
                    die(GIO_EXIT_PROTOCOL);
                fdq[fdq_n++] = fd;
            }
        }
        if (rx_hhave < F16_HDR_LEN) {
            rx_hhave += (size_t)n;
            if (rx_hhave < F16_HDR_LEN)
                continue;
            if (gio_hdr_decode(rx_hdr, GIO_TO_HELPER, &rx_h) < 0)
                die(GIO_EXIT_PROTOCOL);
            rx_pl = malloc(rx_h.len ? rx_h.len : 1);
            if (!rx_pl)
                die(GIO_EXIT_NOMEM);
        } else {
            rx_plhave += (size_t)n;
        }
        if (rx_plhave == rx_h.len)
            on_frame();
    }
}

/* ---- the loop ---------------------------------------------------------------------------------- */

static int parse_u32(const char *s, uint32_t lo, uint32_t hi, uint32_t *out)
{
    char *end;
    errno = 0;
    unsigned long v = strtoul(s, &end, 10);
    if (errno || end == s || *end || s[0] == '-' || v < lo || v > hi)
        return -1;
    *out = (uint32_t)v;
    return 0;
}

/* argv: parent-pid uid gid conn_max head_max body_max head_ms read_ms write_ms mode; uid and gid
 * are "-" when the daemon is not root (there are no ids to drop then); mode is "http" (the
 * docker grant socket), "guard:<path>" (the e2b guard) or "stream:microvm" (a VM's channel). */
static int parse_args(int argc, char **argv, struct gio_walls *w)
{
    uint32_t v[9] = {0};
    if (argc != 11)
        die(GIO_EXIT_USAGE);
    int mode = GIO_MODE_HTTP;
    if (!strncmp(argv[10], "guard:/", 7)) {
        mode = GIO_MODE_GUARD;
        guard_path = argv[10] + 6;
    } else if (!strcmp(argv[10], "stream:microvm")) {
        mode = GIO_MODE_STREAM;
    } else if (strcmp(argv[10], "http")) {
        die(GIO_EXIT_USAGE);
    }
    w->drop_ids = strcmp(argv[2], "-") != 0;
    for (int i = 1; i < 10; i++) {
        if ((i == 2 || i == 3) && !w->drop_ids)
            continue;
        uint32_t hi = i == 4 ? GIO_CONN_CAP : i == 5 ? GIO_HEAD_CAP : i == 6 ? GIO_GBODY_MAX + 1 : 0x7fffffff;
        if (parse_u32(argv[i], 1, hi, &v[i - 1]) < 0)
            die(GIO_EXIT_USAGE);
    }
    w->parent = (pid_t)v[0];
    w->uid = (uid_t)v[1];
    w->gid = (gid_t)v[2];
    L.conn_max = v[3];
    L.head_max = v[4];
    L.body_max = v[5];
    L.head_ms = v[6];
    L.read_ms = v[7];
    L.write_ms = v[8];
    if (mode != GIO_MODE_GUARD && L.body_max > GIO_BODY_MAX)
        die(GIO_EXIT_USAGE);
    w->max_fds = 4 + L.conn_max + 8 + 1;
    /* per connection: a head, a body, its CALL frame, a REPLY frame and the answer built from it */
    w->max_mem = (96ull << 20) + (uint64_t)L.conn_max * (L.head_max + 2ull * L.body_max + 2ull * GIO_REPLY_MAX + 4096);
    /* the guard parses one JSON body at a time (single-threaded): jansson's tree of at most
     * 2 MiB of input */
    if (mode == GIO_MODE_GUARD)
        w->max_mem += 256ull << 20;
    if (mode == GIO_MODE_STREAM)
        w->max_mem = (96ull << 20) + 3ull * GIO_GUEST_MAX;
    return mode;
}

/* HELLO, queued: the daemon's proof that the walls are up (sent after gio_confine only). */
static void queue_hello(void)
{
    uint8_t hello[F16_HDR_LEN + 4];
    struct f16_hdr h = {.len = 4, .type = GIO_T_HELLO, .flags = 0, .seq = 0};
    f16_hdr_encode(hello, &h);
    gio_hello_encode(hello + F16_HDR_LEN, GIO_VERSION);
    uint8_t *f = malloc(sizeof hello);
    if (!f)
        die(GIO_EXIT_NOMEM);
    memcpy(f, hello, sizeof hello);
    queue(f, sizeof hello);
}

/* Closes every connection past its state's deadline (without an answer); returns the next
 * deadline, at most a minute away. */
static int64_t expire_conns(int64_t now)
{
    int64_t next = now + 60000;
    for (unsigned i = 0; i < n_conns;) {
        struct hconn *c = conns[i];
        if (c->st != C_WAIT && now >= c->dl) {
            conn_close(i);
            continue;
        }
        if (c->st != C_WAIT && c->dl < next)
            next = c->dl;
        i++;
    }
    return next;
}

/* What each connection waits for: its request bytes in the reading states, room for its
 * answer while one is pending. */
static void poll_set(struct pollfd *p)
{
    p[0] = (struct pollfd){GIO_CHAN_FD, (short)(POLLIN | (q_head ? POLLOUT : 0)), 0};
    for (unsigned i = 0; i < n_conns; i++) {
        struct hconn *c = conns[i];
        short ev = 0;
        if (c->st == C_HEAD || c->st == C_BODY || c->st == C_DRAIN)
            ev |= POLLIN;
        if (c->out && c->out_off < c->out_len)
            ev |= POLLOUT;
        p[1 + i] = (struct pollfd){ev ? c->fd : -1, ev, 0};
    }
}

/* The polled connections' events, from the end, so closing one (which moves the last into its
 * place) never skips an unvisited entry. */
static void serve_conns(const struct pollfd *p, unsigned polled)
{
    for (unsigned i = polled; i-- > 0;) {
        if (!p[1 + i].revents || i >= n_conns)
            continue;
        struct hconn *c = conns[i];
        bool keep = true;
        if (p[1 + i].revents & POLLOUT)
            keep = on_writable(c);
        if (keep && (p[1 + i].revents & (POLLIN | POLLHUP | POLLERR)) && c->st != C_WRITE && c->st != C_WAIT)
            keep = on_readable(c);
        else if (keep && c->st == C_WRITE && (p[1 + i].revents & (POLLHUP | POLLERR)) && !(p[1 + i].revents & POLLOUT))
            keep = false;
        if (!keep)
            conn_close(i);
    }
}

int main(int argc, char **argv)
{
    struct gio_walls w = {0};
    int mode = parse_args(argc, argv, &w);
    /* jansson seeds its hash tables from /dev/urandom on first use: now, before the filter */
    if (mode == GIO_MODE_GUARD)
        json_object_seed(0);
    if (gio_confine(&w) < 0)
        die(GIO_EXIT_CONFINE);
    queue_hello();
    if (mode == GIO_MODE_STREAM) {
        while (q_head) {
            struct pollfd c = {GIO_CHAN_FD, POLLOUT, 0};
            if (poll(&c, 1, -1) < 0 && errno != EINTR)
                die(GIO_EXIT_PROTOCOL);
            flush_queue();
        }
        gio_stream_helper_main(); /* never returns */
    }

    struct pollfd p[1 + GIO_CONN_CAP];
    for (;;) {
        int64_t now = (int64_t)clock_mono_ms();
        int64_t next = expire_conns(now);
        poll_set(p);
        unsigned polled = n_conns;
        int r = poll(p, 1 + polled, (int)(next - now));
        if (r < 0 && errno != EINTR)
            die(GIO_EXIT_PROTOCOL);
        if (r <= 0)
            continue;
        serve_conns(p, polled);
        if (p[0].revents & POLLOUT)
            flush_queue();
        if (p[0].revents & (POLLIN | POLLHUP | POLLERR))
            read_channel();
        flush_queue();
    }
}
