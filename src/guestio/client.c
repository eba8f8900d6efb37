/* client.c: the daemon's side of the guestio split (guestio.h, docs/privsep.md): the listener,
 * the helper process, the connection table and the handler threads. The OpenSSH monitor: it
 * holds every authority (the handler, i.e. the broker and its credential) and decides only on
 * canonical frames; the helper holds the guest's bytes and nothing else.
 * Owns: the listening socket, the helper (pid and channel), one descriptor of every accepted
 *   connection until the helper says DONE (kept only to answer 503 if the helper fails; the
 *   daemon never reads from it), the frame queues, and every handler thread.
 * Trusts: nothing from the helper: every frame is decoded by frame.c, must be permitted by the
 *   connection's state (CALL once, while GIVEN; DONE while GIVEN or REPLIED; HELLO once, at
 *   spawn), and the helper must keep its deadlines; anything else kills it.
 * Invariants:
 *  - one monitor thread per server does all I/O on the listener and the channel, never blocks
 *    but in poll(2), and owns every spawn (so the helper's parent-death signal follows it);
 *  - a connection is in the table from accept to DONE (or to the helper's failure, when it
 *    gets 503 if it was still owed an answer); at most conn_max are, so the listener is not
 *    polled at the cap and the kernel's backlog holds the rest;
 *  - after gio_server_stop returns, the helper is reaped, the listener and every connection
 *    closed, no handler call begins, and only threads inside a held `call` remain. */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "../core/clock.h"
#include "../core/cleanup.h"
#include "client.h"
#include "frame.h"
#include "guestio.h"
#include "launch.h"


enum sst { S_FREE = 0, S_GIVEN, S_CALLED, S_REPLIED };

struct slot {
    uint64_t id;
    int fd; /* ours; the helper has its own copy */
    enum sst st;
    int64_t since;   /* when it entered st */
    bool reply_sent; /* the helper has (part of) the REPLY: it may have written to the guest */
};


struct gio_server {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    struct gio_limits lim;
    struct gio_handler h;
    int lfd, wake, exe_fd;
    struct gio_ids ids;
    char mode[8 + 256]; /* the helper's mode argument ("http" or "guard:<path>") */
    pthread_t monitor;
    bool monitor_started;
    /* under mu */
    bool stopping;
    int start_state; /* 0 pending, 1 up, -1 failed */
    struct plm_err start_err;
    unsigned refs, calls_in, n_live;
    struct slot slots[GIO_CONN_CAP];
    struct obuf *sq_head, *sq_tail; /* replies from handler threads */
    struct gio_stats stats;
    /* monitor thread only */
    pid_t pid;
    int chan;
    uint64_t next_id;
    struct obuf *q_head, *q_tail; /* frames on their way to the helper */
    int64_t q_progress;
    uint8_t rx_hdr[F16_HDR_LEN];
    size_t rx_hhave, rx_plhave;
    struct f16_hdr rx_h;
    uint8_t *rx_pl;
};

struct callctx {
    struct gio_server *s;
    uint64_t id;
    char method[GIO_METHOD_MAX + 1];
    char *target;
    struct gio_gcall g; /* guard mode: points into frame */
    uint8_t *frame; /* the CALL or GCALL payload: the body points into it */
    const uint8_t *body;
    size_t len;
};

static atomic_uint g_threads;

unsigned gio_threads(void)
{
    return atomic_load(&g_threads);
}

bool gio_quiesce(uint32_t timeout_ms)
{
    int64_t until = (int64_t)clock_mono_ms() + timeout_ms;
    while (atomic_load(&g_threads) && (int64_t)clock_mono_ms() < until) {
        struct timespec ts = {0, 10 * 1000000L};
        nanosleep(&ts, NULL);
    }
    return atomic_load(&g_threads) == 0;
}

static void wake(struct gio_server *s)
{
    uint64_t one = 1;
    if (write(s->wake, &one, sizeof one) < 0) {
        /* EAGAIN: a wake-up is already pending, which is all we need */
    }
}

static struct slot *slot_by_id(struct gio_server *s, uint64_t id)
{
    for (unsigned i = 0; i < s->lim.conn_max; i++)
        if (s->slots[i].st != S_FREE && s->slots[i].id == id)
            return &s->slots[i];
    return NULL;
}

/* ---- the helper process -------------------------------------------------------------------- */

static void reap_helper(struct gio_server *s)
{
    if (s->chan >= 0)
        close(s->chan);
    s->chan = -1;
    int status = -1;
    bool had = s->pid > 0;
    if (had) {
        kill(s->pid, SIGKILL);
        while (waitpid(s->pid, &status, 0) < 0 && errno == EINTR)
            ;
    }
    s->pid = -1;
    obuf_free_list(s->q_head);
    s->q_head = s->q_tail = NULL;
    free(s->rx_pl);
    s->rx_pl = NULL;
    s->rx_hhave = s->rx_plhave = 0;
    pthread_mutex_lock(&s->mu);
    s->stats.helper_pid = 0;
    if (had)
        s->stats.last_status = status;
    pthread_mutex_unlock(&s->mu);
}

/* Under mu: forgets every connection (answering 503 first to those still owed an answer when
 * `answer`) and every queued reply, in one critical section, so a handler thread finishing
 * later finds no slot and can never queue a reply for the next helper. */
static void drop_all_locked(struct gio_server *s, bool answer)
{
    for (unsigned i = 0; i < s->lim.conn_max; i++) {
        struct slot *sl = &s->slots[i];
        if (sl->st == S_FREE)
            continue;
        if (sl->fd >= 0) {
            /* Owed an answer, and the helper cannot have started one: 503. */
            if (answer && (sl->st == S_GIVEN || sl->st == S_CALLED || (sl->st == S_REPLIED && !sl->reply_sent)))
                gio_refuse(sl->fd, 503, "host api socket unavailable\n");
            else
                close(sl->fd); /* the helper may have written part of the answer: just end it */
        }
        *sl = (struct slot){.fd = -1};
    }
    s->n_live = 0;
    obuf_free_list(s->sq_head);
    s->sq_head = s->sq_tail = NULL;
}

/* The helper failed (died, broke the protocol, or overran a deadline): it is killed and reaped
 * first, so nobody else writes to the guests; then every connection still owed an answer
 * gets 503 and every connection is closed. A handler call in flight finds its slot gone and
 * its answer is dropped. */
static void helper_failed(struct gio_server *s, bool violation)
{
    reap_helper(s);
    pthread_mutex_lock(&s->mu);
    s->stats.failures++;
    s->stats.violations += violation;
    drop_all_locked(s, true);
    pthread_mutex_unlock(&s->mu);
}

/* Spawns a helper (launch.c) and records it; 0 or -1. */
static int spawn_helper(struct gio_server *s, struct plm_err *err)
{
    struct gio_spawn sp = {.exe_fd = s->exe_fd, .ids = s->ids, .lim = s->lim, .mode = s->mode};
    int status = -1;
    pthread_mutex_lock(&s->mu);
    s->stats.helpers++;
    pthread_mutex_unlock(&s->mu);
    int r = gio_helper_spawn(&sp, &s->pid, &s->chan, &status, err);
    pthread_mutex_lock(&s->mu);
    if (r < 0)
        s->stats.last_status = status;
    else
        s->stats.helper_pid = s->pid;
    pthread_mutex_unlock(&s->mu);
    return r;
}

/* ---- handler threads ------------------------------------------------------------------------- */

static void server_free(struct gio_server *s)
{
    if (s->wake >= 0)
        close(s->wake);
    if (s->exe_fd >= 0)
        close(s->exe_fd);
    obuf_free_list(s->sq_head);
    pthread_cond_destroy(&s->cv);
    pthread_mutex_destroy(&s->mu);
    free(s);
}

static void callctx_free(struct callctx *c)
{
    free(c->target);
    free(c->frame);
    free(c);
}

/* Under mu: queues b (or, when it could not be built, a short 503) as the answer of sl, a
 * connection in S_CALLED. When not even that fits in memory the slot is marked overdue, so the
 * monitor fails the helper closed rather than leave the guest waiting. */
static void answer_locked(struct gio_server *s, struct slot *sl, struct obuf *b)
{
    static const char oom[] = "host api socket out of memory\n";
    if (!b)
        b = reply_frame(sl->id, 503, CT_TEXT, (const uint8_t *)oom, sizeof oom - 1);
    sl->st = S_REPLIED;
    sl->since = b ? (int64_t)clock_mono_ms() : 0;
    if (b)
        obuf_push(&s->sq_head, &s->sq_tail, b);
    wake(s);
}

static void *call_main(void *arg)
{
    struct callctx *c = arg;
    struct gio_server *s = c->s;
    struct plm_host_reply rep = {0};
    if (s->lim.guard_path)
        s->h.guard(s->h.ctx, &c->g, &rep);
    else
        s->h.call(s->h.ctx, c->method, c->target, c->body, c->len, &rep);
    if (s->h.release)
        s->h.release(s->h.ctx);
    struct obuf *b = reply_frame(c->id, rep.status, rep.content_type, rep.body, rep.len);
    free(rep.body);
    free(rep.content_type);
    uint64_t id = c->id;
    callctx_free(c);
    pthread_mutex_lock(&s->mu);
    struct slot *sl = slot_by_id(s, id);
    if (!s->stopping && sl && sl->st == S_CALLED) {
        answer_locked(s, sl, b);
        b = NULL;
    }
    s->calls_in--;
    bool last = --s->refs == 0;
    atomic_fetch_sub(&g_threads, 1);
    pthread_cond_broadcast(&s->cv);
    pthread_mutex_unlock(&s->mu);
    obuf_free_list(b);
    if (last)
        server_free(s);
    return NULL;
}

/* ---- frames from the helper ------------------------------------------------------------------ */

/* 0, or -1 for a protocol violation. Takes s->rx_pl. */
/* The call's context from the decoded frame; the frame's payload moves into it (the method,
 * target and body point there). */
static void fill_callctx(struct callctx *c, struct gio_server *s, const struct gio_call *call, const struct gio_gcall *g)
{
    c->s = s;
    c->id = s->rx_h.seq;
    if (call->method_len) /* a GCALL has neither (guard mode) */
        memcpy(c->method, call->method, call->method_len);
    c->method[call->method_len] = 0;
    if (call->target_len)
        memcpy(c->target, call->target, call->target_len);
    c->target[call->target_len] = 0;
    c->g = *g;
    c->frame = s->rx_pl;
    s->rx_pl = NULL;
    c->body = call->body;
    c->len = call->body_len;
}

/* The handler's thread (detached). When it cannot start, the hold is given back and the guest
 * gets 503 for this call. */
static void start_call(struct gio_server *s, struct callctx *c)
{
    pthread_attr_t a;
    pthread_attr_init(&a);
    /* The handler runs the broker (libcurl, TLS) on this stack: smaller than the default but
     * not tight; virtual until touched. */
    pthread_attr_setstacksize(&a, 1024 * 1024);
    pthread_attr_setdetachstate(&a, PTHREAD_CREATE_DETACHED);
    pthread_t th;
    int r = pthread_create(&th, &a, call_main, c);
    pthread_attr_destroy(&a);
    if (r == 0)
        return;
    if (s->h.release)
        s->h.release(s->h.ctx);
    callctx_free(c);
    pthread_mutex_lock(&s->mu);
    atomic_fetch_sub(&g_threads, 1);
    s->calls_in--;
    s->refs--;
    struct slot *sl = slot_by_id(s, s->rx_h.seq);
    if (sl && sl->st == S_CALLED)
        answer_locked(s, sl,
                      reply_frame(sl->id, 503, CT_TEXT, (const uint8_t *)"host api socket cannot take more calls\n", 39));
    pthread_cond_broadcast(&s->cv);
    pthread_mutex_unlock(&s->mu);
}

static int on_call(struct gio_server *s)
{
    struct gio_call call = {0};
    struct gio_gcall g = {0};
    if (s->lim.guard_path ? gio_gcall_decode(s->rx_pl, s->rx_h.len, &g) < 0 || g.body_len > s->lim.body_max
                          : gio_call_decode(s->rx_pl, s->rx_h.len, &call) < 0 || call.body_len > s->lim.body_max)
        return -1;
    struct callctx *c = calloc(1, sizeof *c);
    if (c)
        c->target = malloc(call.target_len + 1);
    pthread_mutex_lock(&s->mu);
    struct slot *sl = slot_by_id(s, s->rx_h.seq);
    if (!sl || sl->st != S_GIVEN || s->stopping) {
        /* A CALL only once, only for a connection it was given (else the helper broke the
         * protocol); a server that is stopping drops a valid one. */
        bool given = sl && sl->st == S_GIVEN;
        pthread_mutex_unlock(&s->mu);
        if (c)
            callctx_free(c);
        return given ? 0 : -1;
    }
    sl->st = S_CALLED;
    sl->since = (int64_t)clock_mono_ms();
    if (!c || !c->target) {
        answer_locked(s, sl, NULL);
        pthread_mutex_unlock(&s->mu);
        if (c)
            callctx_free(c);
        return 0;
    }
    fill_callctx(c, s, &call, &g);
    /* The hold is taken while the run is certainly live: the stopper sets `stopping` under
     * this lock before it returns, so the handler's context outlives this call. */
    if (s->h.hold)
        s->h.hold(s->h.ctx);
    s->calls_in++;
    s->refs++;
    atomic_fetch_add(&g_threads, 1);
    pthread_mutex_unlock(&s->mu);
    start_call(s, c);
    return 0;
}

static int on_done(struct gio_server *s)
{
    pthread_mutex_lock(&s->mu);
    struct slot *sl = slot_by_id(s, s->rx_h.seq);
    int r = -1;
    if (sl && (sl->st == S_GIVEN || sl->st == S_REPLIED)) {
        if (sl->fd >= 0)
            close(sl->fd);
        *sl = (struct slot){.fd = -1};
        s->n_live--;
        r = 0;
    }
    pthread_mutex_unlock(&s->mu);
    return r; /* DONE for a connection with a call in flight, or for none: a violation */
}

/* Reads what the helper wrote: 0 when it would block, -1 when the helper is gone, -2 for a
 * protocol violation. */
static int read_helper(struct gio_server *s)
{
    for (;;) {
        uint8_t *dst;
        size_t want;
        if (s->rx_hhave < F16_HDR_LEN) {
            dst = s->rx_hdr + s->rx_hhave;
            want = F16_HDR_LEN - s->rx_hhave;
        } else {
            dst = s->rx_pl + s->rx_plhave;
            want = s->rx_h.len - s->rx_plhave;
        }
        /* recv, not recvmsg: a descriptor the helper tries to pass is discarded by the kernel */
        ssize_t n = want ? recv(s->chan, dst, want, MSG_DONTWAIT) : 0;
        if (want && n < 0 && (errno == EAGAIN || errno == EINTR))
            return 0;
        if (want && n <= 0)
            return -1;
        if (s->rx_hhave < F16_HDR_LEN) {
            s->rx_hhave += (size_t)n;
            if (s->rx_hhave < F16_HDR_LEN)
                continue;
            /* The cap is checked before anything is reserved; HELLO is only valid at spawn. */
            if (gio_hdr_decode(s->rx_hdr, GIO_TO_DAEMON, &s->rx_h) < 0 || s->rx_h.type == GIO_T_HELLO)
                return -2;
            s->rx_pl = malloc(s->rx_h.len ? s->rx_h.len : 1);
            if (!s->rx_pl)
                return -2; /* cannot take the frame: treated like a broken helper */
            s->rx_plhave = 0;
        } else {
            s->rx_plhave += (size_t)n;
        }
        if (s->rx_plhave < s->rx_h.len)
            continue;
        /* Each mode has its own request frame; the stream types never come to a server. */
        uint16_t want_call = s->lim.guard_path ? GIO_T_GCALL : GIO_T_CALL;
        int r = s->rx_h.type == want_call ? on_call(s) : s->rx_h.type == GIO_T_DONE ? on_done(s) : -1;
        free(s->rx_pl);
        s->rx_pl = NULL;
        s->rx_hhave = s->rx_plhave = 0;
        if (r < 0)
            return -2;
    }
}

/* Sends queued frames: 0 (done or would block) or -1 (the helper is gone). */
static int flush_helper(struct gio_server *s)
{
    while (s->q_head) {
        struct obuf *b = s->q_head;
        ssize_t n;
        if (b->off == 0 && b->reply_to) {
            pthread_mutex_lock(&s->mu);
            struct slot *sl = slot_by_id(s, b->reply_to);
            if (sl)
                sl->reply_sent = true;
            pthread_mutex_unlock(&s->mu);
        }
        if (b->off == 0 && b->pass_fd >= 0) {
            union {
                char buf[CMSG_SPACE(sizeof(int))];
                struct cmsghdr align;
            } cm;
            memset(&cm, 0, sizeof cm);
            struct iovec iov = {b->p, b->len};
            struct msghdr mh = {
                .msg_iov = &iov, .msg_iovlen = 1, .msg_control = cm.buf, .msg_controllen = sizeof cm.buf};
            struct cmsghdr *h = CMSG_FIRSTHDR(&mh);
            h->cmsg_level = SOL_SOCKET;
            h->cmsg_type = SCM_RIGHTS;
            h->cmsg_len = CMSG_LEN(sizeof(int));
            memcpy(CMSG_DATA(h), &b->pass_fd, sizeof(int));
            n = sendmsg(s->chan, &mh, MSG_DONTWAIT | MSG_NOSIGNAL);
        } else {
            n = send(s->chan, b->p + b->off, b->len - b->off, MSG_DONTWAIT | MSG_NOSIGNAL);
        }
        if (n < 0 && (errno == EAGAIN || errno == EINTR))
            return 0;
        if (n <= 0)
            return -1;
        s->q_progress = (int64_t)clock_mono_ms();
        b->off += (size_t)n;
        if (b->off < b->len)
            return 0;
        s->q_head = b->next;
        if (!s->q_head)
            s->q_tail = NULL;
        free(b->p);
        free(b);
    }
    return 0;
}

/* ---- the monitor thread ---------------------------------------------------------------------- */

static void accept_one(struct gio_server *s, unsigned *spawns_left)
{
    int fd = accept4(s->lfd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
    if (fd < 0) {
        if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM) {
            struct timespec ts = {0, 50 * 1000000L}; /* the listener stays readable: back off */
            nanosleep(&ts, NULL);
        }
        return;
    }
    if (s->pid <= 0) {
        /* A failed spawn counts too: a helper that cannot start is not retried without bound. */
        struct plm_err e = {0};
        if (!*spawns_left || ((*spawns_left)--, spawn_helper(s, &e) < 0)) {
            gio_refuse(fd, 503, "host api socket unavailable\n");
            return;
        }
    }
    struct obuf *b = frame_buf(GIO_T_CONN, s->next_id + 1, 0);
    if (!b) {
        gio_refuse(fd, 503, "host api socket out of memory\n");
        return;
    }
    pthread_mutex_lock(&s->mu);
    struct slot *sl = NULL;
    for (unsigned i = 0; i < s->lim.conn_max && !sl; i++)
        if (s->slots[i].st == S_FREE)
            sl = &s->slots[i];
    if (sl) {
        *sl = (struct slot){.id = ++s->next_id, .fd = fd, .st = S_GIVEN, .since = (int64_t)clock_mono_ms()};
        s->n_live++;
    }
    pthread_mutex_unlock(&s->mu);
    if (!sl) { /* cannot happen: the listener is not polled at the cap */
        obuf_free_list(b);
        gio_refuse(fd, 503, "host api socket is at capacity\n");
        return;
    }
    b->pass_fd = fd;
    if (!s->q_head)
        s->q_progress = (int64_t)clock_mono_ms();
    obuf_push(&s->q_head, &s->q_tail, b);
}

/* The next moment a connection the helper holds becomes overdue (INT64_MAX when none), and
 * whether one already is. The helper enforces head/read/write deadlines itself; past them plus
 * GIO_GRACE_MS it is not doing its job (looping, wedged or hostile). */
static int64_t next_overdue(struct gio_server *s, int64_t now, bool *overdue)
{
    int64_t next = INT64_MAX;
    pthread_mutex_lock(&s->mu);
    for (unsigned i = 0; i < s->lim.conn_max; i++) {
        const struct slot *sl = &s->slots[i];
        int64_t due = INT64_MAX;
        if (sl->st == S_GIVEN)
            due = sl->since + s->lim.read_ms + GIO_GRACE_MS;
        else if (sl->st == S_REPLIED)
            due = sl->since + s->lim.write_ms + s->lim.head_ms + GIO_GRACE_MS;
        if (due < next)
            next = due;
    }
    pthread_mutex_unlock(&s->mu);
    if (s->q_head && s->q_progress + s->lim.write_ms + GIO_GRACE_MS < next)
        next = s->q_progress + s->lim.write_ms + GIO_GRACE_MS;
    *overdue = next <= now;
    return next;
}

static void *monitor_main(void *arg)
{
    struct gio_server *s = arg;
    struct plm_err e = {0};
    int r = spawn_helper(s, &e);
    pthread_mutex_lock(&s->mu);
    s->start_state = r < 0 ? -1 : 1;
    s->start_err = e;
    pthread_cond_broadcast(&s->cv);
    pthread_mutex_unlock(&s->mu);
    unsigned spawns_left = GIO_RESTART_MAX;
    int64_t window_start = (int64_t)clock_mono_ms();
    while (r == 0) {
        pthread_mutex_lock(&s->mu);
        bool stopping = s->stopping, full = s->n_live >= s->lim.conn_max;
        if (s->sq_head) {
            if (!s->q_head)
                s->q_progress = (int64_t)clock_mono_ms();
            if (s->q_tail)
                s->q_tail->next = s->sq_head;
            else
                s->q_head = s->sq_head;
            s->q_tail = s->sq_tail;
            s->sq_head = s->sq_tail = NULL;
        }
        pthread_mutex_unlock(&s->mu);
        if (stopping)
            break;
        if (s->lim.restart_window_ms && (int64_t)clock_mono_ms() - window_start >= s->lim.restart_window_ms) {
            window_start = (int64_t)clock_mono_ms(); /* a long-lived listener's budget refills */
            spawns_left = GIO_RESTART_MAX;
        }
        if (s->pid > 0 && flush_helper(s) < 0) {
            helper_failed(s, false);
            continue;
        }
        int64_t now = (int64_t)clock_mono_ms();
        bool overdue = false;
        int64_t next = next_overdue(s, now, &overdue);
        if (overdue && s->pid > 0) {
            helper_failed(s, true);
            continue;
        }
        int timeout = next - now > 1000 ? 1000 : (int)(next - now);
        struct pollfd p[3] = {
            {full ? -1 : s->lfd, POLLIN, 0},
            {s->wake, POLLIN, 0},
            {s->chan, (short)(POLLIN | (s->q_head ? POLLOUT : 0)), 0},
        };
        if (poll(p, s->chan >= 0 ? 3 : 2, timeout < 0 ? 0 : timeout) < 0 && errno != EINTR)
            break; /* cannot happen with valid descriptors; stop still cleans up */
        uint64_t v;
        if ((p[1].revents & POLLIN) && read(s->wake, &v, sizeof v) < 0) {
            /* EAGAIN: another wake-up consumed it */
        }
        if (s->chan >= 0 && (p[2].revents & (POLLIN | POLLHUP | POLLERR))) {
            int rr = read_helper(s);
            if (rr < 0) {
                helper_failed(s, rr == -2);
                continue;
            }
        }
        if (p[0].revents & POLLIN)
            accept_one(s, &spawns_left);
    }
    /* Stopping (or the first spawn failed): no answers, everything closed. */
    reap_helper(s);
    pthread_mutex_lock(&s->mu);
    drop_all_locked(s, false);
    pthread_mutex_unlock(&s->mu);
    close(s->lfd);
    s->lfd = -1;
    atomic_fetch_sub(&g_threads, 1);
    return NULL;
}

/* ---- start and stop -------------------------------------------------------------------------- */

static int check_limits(const struct gio_limits *l, struct plm_err *err)
{
    if (l->conn_max < 1 || l->conn_max > GIO_CONN_CAP || l->head_max < 64 || l->head_max > GIO_HEAD_CAP ||
        l->body_max > (l->guard_path ? GIO_GBODY_MAX : GIO_BODY_MAX) || !l->head_ms || !l->read_ms || !l->write_ms)
        return plm_fail(err, EINVAL, PLM_E_INTERNAL, "guestio: limits out of range");
    size_t pl = l->guard_path ? strlen(l->guard_path) : 0;
    bool path_ok = !l->guard_path || (pl >= 1 && pl < 256 && l->guard_path[0] == '/');
    for (size_t i = 0; path_ok && i < pl; i++)
        path_ok = gio_target_byte((uint8_t)l->guard_path[i]) && (uint8_t)l->guard_path[i] < 0x7f;
    if (!path_ok)
        return plm_fail(err, EINVAL, PLM_E_INTERNAL, "guestio: limits out of range");
    return 0;
}

int gio_server_start(int listen_fd, const struct gio_limits *lim, const struct gio_handler *h, const char *helper_path,
                     struct gio_server **out, struct plm_err *err)
{
    *out = NULL;
    cleanup_close int lfd = listen_fd;
    if (!h || !lim || (lim->guard_path ? !h->guard : !h->call) || check_limits(lim, err) < 0)
        return plm_fail(err, EINVAL, PLM_E_INTERNAL, "guestio: nothing to serve");
    struct gio_server *s = calloc(1, sizeof *s);
    if (!s)
        return plm_fail(err, ENOMEM, PLM_E_INTERNAL, "guestio: out of memory");
    pthread_mutex_init(&s->mu, NULL);
    pthread_cond_init(&s->cv, NULL);
    s->lim = *lim;
    s->h = *h;
    if (lim->guard_path)
        snprintf(s->mode, sizeof s->mode, "guard:%s", lim->guard_path);
    else
        snprintf(s->mode, sizeof s->mode, "http");
    s->lim.guard_path = lim->guard_path ? s->mode + 6 : NULL; /* ours: the caller's may go */
    if (!s->h.hold || !s->h.release)
        s->h.hold = s->h.release = NULL; /* half a pair is no hold: stop then waits */
    s->lfd = s->wake = s->exe_fd = s->chan = -1;
    s->pid = -1;
    s->refs = 1;
    s->stats.last_status = -1;
    for (unsigned i = 0; i < GIO_CONN_CAP; i++)
        s->slots[i].fd = -1;
    if (gio_helper_ids(&s->ids, err) < 0 || (s->exe_fd = gio_helper_open(helper_path, err)) < 0) {
        server_free(s);
        return plm_err_wrap(err, "guestio");
    }
    if (fcntl(lfd, F_SETFL, O_NONBLOCK) < 0 || (s->wake = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)) < 0) {
        plm_fail(err, errno, PLM_E_INTERNAL, "guestio: %s", strerror(errno));
        server_free(s);
        return -1;
    }
    s->lfd = take_fd(&lfd);
    atomic_fetch_add(&g_threads, 1);
    int r = pthread_create(&s->monitor, NULL, monitor_main, s);
    if (r != 0) {
        atomic_fetch_sub(&g_threads, 1);
        close(s->lfd);
        server_free(s);
        return plm_fail(err, r, PLM_E_INTERNAL, "guestio thread: %s", strerror(r));
    }
    s->monitor_started = true;
    pthread_mutex_lock(&s->mu);
    while (s->start_state == 0)
        pthread_cond_wait(&s->cv, &s->mu);
    bool ok = s->start_state > 0;
    if (!ok && err)
        *err = s->start_err;
    pthread_mutex_unlock(&s->mu);
    if (!ok) {
        gio_server_stop(s);
        return plm_err_wrap(err, "guestio");
    }
    *out = s;
    return 0;
}

void gio_server_stop(struct gio_server *s)
{
    if (!s)
        return;
    pthread_mutex_lock(&s->mu);
    s->stopping = true; /* from here no handler call begins */
    pthread_mutex_unlock(&s->mu);
    wake(s);
    if (s->monitor_started)
        pthread_join(s->monitor, NULL);
    pthread_mutex_lock(&s->mu);
    /* Without hold/release the handler's context dies when we return: wait for every call. */
    while (!s->h.hold && s->calls_in)
        pthread_cond_wait(&s->cv, &s->mu);
    bool last = --s->refs == 0;
    pthread_mutex_unlock(&s->mu);
    if (last)
        server_free(s);
}

void gio_server_stats(struct gio_server *s, struct gio_stats *out)
{
    pthread_mutex_lock(&s->mu);
    *out = s->stats;
    out->live = s->n_live;
    pthread_mutex_unlock(&s->mu);
}
