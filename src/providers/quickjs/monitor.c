/* monitor.c: the daemon's side of one worker's life: READY, one request, one answer, the end.
 * Owns: the worker it took from the pool, from take to kill-and-reap (whatever happens); with a
 *   grant, the run's host calls in flight (each on a helper thread, at most one at a time).
 * Trusts: nothing a worker sends. Every frame is decoded field by field, checked against
 *   mon_table for the current state (and, for HOST_CALL, the run's grant), capped before
 *   allocation and consumed exactly; anything else kills the worker and discards its output
 *   (STYLE.md §5). The credential never comes near: host calls go to ctx->host_api->call, and
 *   only its {status, body} goes back to the worker.
 * Invariant: a worker answers at most one request and is always SIGKILLed and reaped before
 *   the run returns (deadline + grace at the latest), even while the broker is still working
 *   on a host call; no host call is started after the run's deadline; an error after the code
 *   was sent is never marked as a refusal. */
#include "../../core/clock.h"
#include "qjs_int.h"

#include <dirent.h>
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "../../core/limits.h"
#include "../../core/provider.h"
#include "frame.h"

enum mon_state { MON_SPAWNED, MON_RUNNING, MON_PROBING };

#define MON_ONCE 0x1u  /* the state's one answer: receiving it ends the state */
#define MON_MANY 0x2u  /* any number, while the state lasts */
#define MON_GRANT 0x4u /* only when the run carries a grant (ctx->host_api) */

/* What a worker may send, and when. Anything not listed for the current state kills it. */
static const struct mon_rule {
    uint16_t type;
    enum mon_state state;
    unsigned how;
    const char *why;
} mon_table[] = {
    {QF_READY, MON_SPAWNED, MON_ONCE, "worker confined, engine started, waiting for its one request"},
    {QF_RESULT, MON_RUNNING, MON_ONCE, "the snippet's outcome, once"},
    {QF_HOST_CALL, MON_RUNNING, MON_MANY | MON_GRANT,
     "a host API call of a granted run: any number (the broker keeps the budget), one outstanding at a "
     "time, none started after the deadline"},
    {QF_PROBE_RESULT, MON_PROBING, MON_ONCE, "a probe's syscall returned (startup evidence only)"},
};

enum mon_rc { MON_OK = 0, MON_TIMEOUT, MON_EOF, MON_VIOLATION };

/* The MON_ONCE rows one worker has used (bit i = mon_table[i]): a worker's whole life, except for
 * a session's kept worker, whose RESULT is once per RUN (mon_session_run starts each run with only
 * READY marked, so a second RESULT within one run is still a violation). */
struct mon_seen {
    unsigned once;
};

/* The bit of the MON_ONCE row for (type, state); 0 when there is none. */
static unsigned mon_once_bit(uint16_t type, enum mon_state st)
{
    for (size_t i = 0; i < sizeof mon_table / sizeof mon_table[0]; i++)
        if (mon_table[i].type == type && mon_table[i].state == st && (mon_table[i].how & MON_ONCE))
            return 1u << i;
    return 0;
}

/* The table, enforced: the row for (type, state) must exist, a MON_GRANT row needs a grant, and a
 * MON_ONCE row admits its frame once per worker (a second READY, RESULT or PROBE_RESULT is a
 * violation even where the state machine would not otherwise look). */
static bool admit(uint16_t type, enum mon_state st, bool grant, struct mon_seen *seen)
{
    for (size_t i = 0; i < sizeof mon_table / sizeof mon_table[0]; i++) {
        const struct mon_rule *r = &mon_table[i];
        if (r->type != type || r->state != st)
            continue;
        if ((r->how & MON_GRANT) && !grant)
            return false;
        if (r->how & MON_ONCE) {
            if (seen->once & (1u << i))
                return false;
            seen->once |= 1u << i;
        }
        return true;
    }
    return false;
}

/* After a MON_ONCE frame that ends its state the worker owes nothing until we speak (READY) or
 * ever again (RESULT, PROBE_RESULT: it exits). Bytes already queued behind it are a second frame
 * and a violation. EOF is fine: the worker exited after its answer. A worker cannot send later
 * ones: after its answer it is SIGKILLed at once. */
static bool nothing_queued(int fd)
{
    uint8_t b;
    ssize_t k;
    do
        k = recv(fd, &b, 1, MSG_PEEK | MSG_DONTWAIT);
    while (k < 0 && errno == EINTR);
    return k == 0 || (k < 0 && errno == EAGAIN);
}

static int poll_ms(int64_t left)
{
    return (int)(left > 60000 ? 60000 : left < 0 ? 0 : left);
}

/* Reads exactly n bytes before deadline (ms, monotonic). */
static enum mon_rc read_exact(int fd, uint8_t *buf, size_t n, int64_t deadline)
{
    while (n > 0) {
        ssize_t k = recv(fd, buf, n, MSG_DONTWAIT);
        if (k > 0) {
            buf += k;
            n -= (size_t)k;
            continue;
        }
        if (k == 0)
            return MON_EOF;
        if (errno == EINTR)
            continue;
        if (errno != EAGAIN)
            return MON_EOF;
        int64_t left = deadline - (int64_t)clock_mono_ms();
        if (left <= 0)
            return MON_TIMEOUT;
        struct pollfd pfd = {.fd = fd, .events = POLLIN};
        if (poll(&pfd, 1, poll_ms(left)) < 0 && errno != EINTR)
            return MON_EOF;
    }
    return MON_OK;
}

/* One frame permitted in state `st` (with or without a grant), echoing `seq`. *payload is
 * malloc'd (NULL when empty). */
static enum mon_rc recv_frame(int fd, enum mon_state st, bool grant, struct mon_seen *seen, uint64_t seq,
                              int64_t deadline, struct f16_hdr *h, uint8_t **payload)
{
    uint8_t hb[F16_HDR_LEN];
    *payload = NULL;
    enum mon_rc rc = read_exact(fd, hb, sizeof hb, deadline);
    if (rc != MON_OK)
        return rc;
    /* Fail closed: type/flags/len checked, then the table, before a byte of payload is taken. */
    if (qf_hdr_decode(hb, h) < 0 || !admit(h->type, st, grant, seen) || h->seq != seq)
        return MON_VIOLATION;
    if (h->len == 0)
        return MON_OK;
    uint8_t *p = malloc(h->len);
    if (!p)
        return MON_VIOLATION;
    rc = read_exact(fd, p, h->len, deadline);
    if (rc != MON_OK) {
        free(p);
        return rc;
    }
    *payload = p;
    return MON_OK;
}

/* One frame made of up to three parts (empty ones skipped); the caller keeps len within the
 * type's cap. */
static enum mon_rc send_frame3(int fd, uint16_t type, uint64_t seq, const void *a, size_t alen, const void *b,
                               size_t blen, const void *c, size_t clen, int64_t deadline)
{
    uint8_t hb[F16_HDR_LEN];
    f16_hdr_encode(hb, &(struct f16_hdr){.len = (uint32_t)(alen + blen + clen), .type = type, .flags = 0, .seq = seq});
    struct iovec iov[4] = {{hb, sizeof hb}, {(void *)a, alen}, {(void *)b, blen}, {(void *)c, clen}};
    size_t idx = 0;
    while (idx < 4) {
        if (iov[idx].iov_len == 0) {
            idx++;
            continue;
        }
        struct msghdr msg = {.msg_iov = iov + idx, .msg_iovlen = 4 - idx};
        ssize_t k = sendmsg(fd, &msg, MSG_DONTWAIT | MSG_NOSIGNAL);
        if (k < 0) {
            if (errno == EINTR)
                continue;
            if (errno != EAGAIN)
                return MON_EOF;
            int64_t left = deadline - (int64_t)clock_mono_ms();
            if (left <= 0)
                return MON_TIMEOUT;
            struct pollfd pfd = {.fd = fd, .events = POLLOUT};
            poll(&pfd, 1, poll_ms(left));
            continue;
        }
        size_t done = (size_t)k;
        while (idx < 4 && done >= iov[idx].iov_len) {
            done -= iov[idx].iov_len;
            idx++;
        }
        if (idx < 4) {
            iov[idx].iov_base = (uint8_t *)iov[idx].iov_base + done;
            iov[idx].iov_len -= done;
        }
    }
    return MON_OK;
}

static enum mon_rc send_frame(int fd, uint16_t type, uint64_t seq, const void *a, size_t alen, int64_t deadline)
{
    return send_frame3(fd, type, seq, a, alen, NULL, 0, NULL, 0, deadline);
}

static uint64_t next_seq(void)
{
    static uint64_t seq;
    return __atomic_add_fetch(&seq, 1, __ATOMIC_RELAXED);
}

static void describe_status(int st, char *buf, size_t len)
{
    if (st == -1)
        snprintf(buf, len, "not reaped");
    else if (WIFSIGNALED(st))
        snprintf(buf, len, "killed by signal %d (%s)", WTERMSIG(st), strsignal(WTERMSIG(st)));
    else if (WIFEXITED(st))
        snprintf(buf, len, "exited with status %d", WEXITSTATUS(st));
    else
        snprintf(buf, len, "wait status %#x", st);
}

/* READY, exactly once, and nothing behind it. */
static enum mon_rc expect_ready(int fd, struct mon_seen *seen)
{
    struct f16_hdr h;
    uint8_t *pl;
    enum mon_rc rc = recv_frame(fd, MON_SPAWNED, false, seen, 0, (int64_t)clock_mono_ms() + MON_READY_MS, &h, &pl);
    free(pl);
    if (rc == MON_OK && !nothing_queued(fd))
        rc = MON_VIOLATION;
    return rc;
}

/* A taken worker must say READY first; one that cannot (or says more) is replaced before any
 * code is sent. */
static int take_ready(struct qjs_pool *p, struct qjs_worker *w, struct mon_seen *seen, struct plm_err *err)
{
    char why[96] = "";
    for (int attempt = 0; attempt < 3; attempt++) {
        if (qjs_pool_take(p, 10000, w, err) < 0)
            return -1;
        *seen = (struct mon_seen){0};
        enum mon_rc rc = expect_ready(w->fd, seen);
        if (rc == MON_OK)
            return 0;
        describe_status(qjs_worker_end(w), why, sizeof why);
    }
    return plm_fail(err, 0, PLM_E_INTERNAL, "quickjs workers fail to start: last %s", why);
}

static int copy_bytes(struct plm_bytes *dst, const uint8_t *src, uint32_t n)
{
    dst->data = NULL;
    dst->len = 0;
    if (n == 0)
        return 0;
    dst->data = malloc(n);
    if (!dst->data)
        return -1;
    memcpy(dst->data, src, n);
    dst->len = n;
    return 0;
}

/* ---- host calls (grants): performed off the monitor's thread, so the deadline keeps ticking ----
 *
 * ctx->host_api->call blocks up to 60 s upstream, longer than any run may last, and the run
 * must still end at its deadline. So each call runs on a detached helper thread while this
 * thread keeps watching the worker and the clock. When the deadline passes first, the call is
 * abandoned (its answer is dropped when it comes), the worker is told QF_HR_DEADLINE and ends
 * as timed out, and the run returns; the daemon then calls grant_end -> brk_run_end, which
 * cancels the upstream request within about a second. A call whose helper has not yet begun
 * it when it is abandoned is never begun (CALL_PENDING -> CALL_CANCELLED), so no call starts
 * after run_javascript returns. The helper never touches the run or ctx: it holds copies of
 * the callback and of the request, and a hold on cb_ctx (plm_host_api.hold) taken here while
 * the run is live, so a call still in flight when the daemon ends the grant finds its broker
 * ended (503), never freed. */

enum { CALL_PENDING, CALL_CALLING, CALL_DONE, CALL_CANCELLED };

struct mon_call {
    atomic_int refs;  /* the monitor's and the helper's; the last one frees */
    atomic_int state; /* CALL_*: PENDING -> CALLING -> DONE, or PENDING -> CANCELLED */
    int efd;          /* eventfd the helper signals after DONE; closed by the last ref */
    uint32_t call_no;
    void (*call)(void *cb_ctx, const char *method, const char *raw_target, const uint8_t *body, size_t len,
                 struct plm_host_reply *out);
    void (*release)(void *cb_ctx); /* NULL when the API has no hold */
    void *cb_ctx;
    char method[QF_HOST_METHOD_MAX + 1]; /* NUL-terminated copies of checked text */
    char *path;
    uint8_t *payload; /* the HOST_CALL payload; body points into it */
    const uint8_t *body;
    size_t body_len;
    struct plm_host_reply reply; /* the helper's, until state DONE (seq_cst) hands it over */
};

static void call_unref(struct mon_call *c)
{
    if (atomic_fetch_sub(&c->refs, 1) != 1)
        return;
    if (c->efd >= 0)
        close(c->efd);
    free(c->path);
    free(c->payload);
    free(c->reply.body);
    free(c->reply.content_type); /* the worker's client reads only status and body */
    free(c);
}

static void *call_main(void *arg)
{
    struct mon_call *c = arg;
    int expect = CALL_PENDING;
    if (atomic_compare_exchange_strong(&c->state, &expect, CALL_CALLING)) {
        c->call(c->cb_ctx, c->method, c->path, c->body_len ? c->body : NULL, c->body_len, &c->reply);
        atomic_store(&c->state, CALL_DONE);
        uint64_t one = 1;
        ssize_t k = write(c->efd, &one, sizeof one);
        (void)k; /* cannot fail on a fresh eventfd; the state is what counts */
    }
    if (c->release)
        c->release(c->cb_ctx);
    call_unref(c);
    return NULL;
}

/* Drops the monitor's interest in a call: one not yet begun never will be. */
static void call_abandon(struct mon_call **pc)
{
    struct mon_call *c = *pc;
    if (!c)
        return;
    int expect = CALL_PENDING;
    atomic_compare_exchange_strong(&c->state, &expect, CALL_CANCELLED);
    call_unref(c);
    *pc = NULL;
}

/* One run on the monitor's side. */
struct mon_run {
    int fd;
    struct mon_seen *seen;          /* the worker's MON_ONCE rows, READY already among them */
    uint64_t seq;                   /* the RUN's; every frame of the run echoes it */
    const struct plm_host_api *api; /* NULL: the run has no grant and HOST_CALL kills */
    int64_t soft, hard;             /* the run's deadline; the kill (deadline + grace) */
    uint32_t calls;                 /* HOST_CALLs received (the last call_no) */
    struct mon_call *call;          /* the outstanding one, or NULL */
};

static const char msg_no_broker[] = "host api broker unavailable\n";
static const char msg_upstream[] = "host api unavailable\n";

static enum mon_rc send_reply(struct mon_run *run, uint32_t call_no, uint32_t status, uint32_t flags, const void *body,
                              size_t len)
{
    uint8_t fixed[QF_HOST_REPLY_FIXED];
    qf_host_reply_encode_fixed(fixed, call_no, status, flags, (uint32_t)len);
    return send_frame3(run->fd, QF_HOST_REPLY, run->seq, fixed, sizeof fixed, body, len, NULL, 0, run->hard);
}

/* Starts the helper. Takes payload (freed on every path). Returns -1 when no helper could be
 * had; the call was then not made. */
static int call_start(struct mon_run *run, const struct qf_host_call *hc, uint8_t *payload)
{
    struct mon_call *c = calloc(1, sizeof *c);
    if (!c) {
        free(payload);
        return -1;
    }
    c->efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    c->path = malloc((size_t)hc->path_len + 1);
    c->payload = payload;
    if (c->efd < 0 || !c->path) {
        atomic_init(&c->refs, 1);
        call_unref(c);
        return -1;
    }
    c->call_no = hc->call_no;
    c->call = run->api->call;
    c->cb_ctx = run->api->cb_ctx;
    memcpy(c->method, hc->method, hc->method_len); /* <= QF_HOST_METHOD_MAX, checked by the decoder */
    c->method[hc->method_len] = 0;
    memcpy(c->path, hc->path, hc->path_len);
    c->path[hc->path_len] = 0;
    c->body = hc->body;
    c->body_len = hc->body_len;
    atomic_init(&c->state, CALL_PENDING);
    atomic_init(&c->refs, 2);
    pthread_attr_t attr;
    pthread_t t;
    if (run->api->hold && run->api->release) {
        run->api->hold(c->cb_ctx);
        c->release = run->api->release;
    }
    int r = pthread_attr_init(&attr);
    if (r == 0) {
        pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
        r = pthread_create(&t, &attr, call_main, c);
        pthread_attr_destroy(&attr);
    }
    if (r != 0) {
        if (c->release)
            c->release(c->cb_ctx);
        atomic_store(&c->refs, 1);
        call_unref(c);
        return -1;
    }
    run->call = c;
    return 0;
}

/* A HOST_CALL that mon_table let through (RUNNING, the run has a grant). Takes payload.
 * Re-checks what the table cannot see, in case the worker got corrupted: a grant, one call at
 * a time, the next call number, every field decoded and consumed exactly, text without NUL. */
static enum mon_rc mon_answer_host_call(struct mon_run *run, const struct f16_hdr *h, uint8_t *payload)
{
    struct qf_host_call hc;
    if (!run->api || run->call || !payload || qf_host_call_decode(payload, h->len, &hc) < 0 ||
        run->calls == UINT32_MAX || hc.call_no != run->calls + 1) {
        free(payload);
        return MON_VIOLATION;
    }
    run->calls++;
    /* The run's time is over: the broker is not asked any more; the worker ends as timed out. */
    if ((int64_t)clock_mono_ms() >= run->soft) {
        free(payload);
        return send_reply(run, hc.call_no, 0, QF_HR_DEADLINE, NULL, 0);
    }
    if (call_start(run, &hc, payload) < 0)
        return send_reply(run, hc.call_no, 503, 0, msg_no_broker, sizeof msg_no_broker - 1);
    return MON_OK;
}

/* The helper is done: the broker's answer goes to the worker as it is, unless it breaks the
 * provider.h contract (then 502, as the broker answers a broken upstream). */
static enum mon_rc mon_finish_call(struct mon_run *run)
{
    struct mon_call *c = run->call;
    const struct plm_host_reply *r = &c->reply;
    enum mon_rc rc;
    if (r->status < 100 || r->status > 599 || r->len > QF_HOST_REPLY_MAX || (r->len && !r->body))
        rc = send_reply(run, c->call_no, 502, 0, msg_upstream, sizeof msg_upstream - 1);
    else
        rc = send_reply(run, c->call_no, (uint32_t)r->status, 0, r->body, r->len);
    call_abandon(&run->call); /* DONE: only drops the reference */
    return rc;
}

/* The RUNNING state: host calls (with a grant) until the one RESULT, whose payload is returned
 * in *result. */
static enum mon_rc mon_running(struct mon_run *run, struct f16_hdr *h, uint8_t **result)
{
    *result = NULL;
    for (;;) {
        int64_t now = (int64_t)clock_mono_ms();
        if (run->call && now >= run->soft) {
            /* The deadline passed while the broker works on a call. The worker is blocked on
             * its reply and cannot see its own deadline: tell it, and let the call go. */
            uint32_t no = run->call->call_no;
            call_abandon(&run->call);
            enum mon_rc rc = send_reply(run, no, 0, QF_HR_DEADLINE, NULL, 0);
            if (rc != MON_OK)
                return rc;
            continue;
        }
        if (now >= run->hard)
            return MON_TIMEOUT;
        struct pollfd pf[2] = {{.fd = run->fd, .events = POLLIN},
                               {.fd = run->call ? run->call->efd : -1, .events = POLLIN}};
        int n = poll(pf, 2, poll_ms((run->call ? run->soft : run->hard) - now));
        if (n < 0 && errno != EINTR)
            return MON_EOF;
        if (n <= 0)
            continue;
        if (run->call && (pf[1].revents & POLLIN) && atomic_load(&run->call->state) == CALL_DONE) {
            enum mon_rc rc = mon_finish_call(run);
            if (rc != MON_OK)
                return rc;
            continue;
        }
        if (!pf[0].revents)
            continue;
        if (run->call) {
            /* One outstanding call at a time: a worker waiting for its reply sends nothing. */
            uint8_t b;
            ssize_t k = recv(run->fd, &b, 1, MSG_PEEK | MSG_DONTWAIT);
            if (k > 0)
                return MON_VIOLATION;
            if (k < 0 && (errno == EAGAIN || errno == EINTR))
                continue;
            return MON_EOF;
        }
        uint8_t *pl = NULL;
        enum mon_rc rc = recv_frame(run->fd, MON_RUNNING, run->api != NULL, run->seen, run->seq, run->hard, h, &pl);
        if (rc != MON_OK)
            return rc;
        if (h->type == QF_RESULT) {
            if (!nothing_queued(run->fd)) {
                free(pl); /* a second answer behind the first: neither is trusted */
                return MON_VIOLATION;
            }
            *result = pl;
            return MON_OK;
        }
        rc = mon_answer_host_call(run, h, pl);
        if (rc != MON_OK)
            return rc;
    }
}

/* The request's checks that need no worker. */
static int check_request(size_t len, const char *client_js, const struct plm_host_api *api, size_t *client_len,
                         struct plm_err *err)
{
    if (len == 0 || len > LIM_CODE_MAX)
        return plm_refuse(err, PLM_E_INVALID, PLM_REFUSAL_REQUEST, "code must be 1..%u bytes", LIM_CODE_MAX);
    *client_len = client_js ? strnlen(client_js, QF_CLIENT_MAX + 1) : 0;
    if (*client_len > QF_CLIENT_MAX)
        return plm_refuse(err, PLM_E_UNSUPPORTED, PLM_REFUSAL_UNSUPPORTED,
                           "the grant's client script is over the quickjs transport's %u KiB; nothing ran",
                           QF_CLIENT_MAX / 1024);
    if (api && !api->call)
        return plm_fail(err, 0, PLM_E_INTERNAL, "a grant without a host api callback");
    return 0;
}

/* RUN to RESULT on a READY worker: the frame out, then the RUNNING state. *pl is the RESULT's
 * payload on MON_OK. */
static enum mon_rc exchange(struct mon_run *run, const char *code, size_t len, const char *client_js, size_t client_len,
                            uint32_t timeout_ms, int64_t t0, struct f16_hdr *h, uint8_t **pl)
{
    uint8_t fixed[QF_RUN_FIXED];
    qf_run_encode_fixed(fixed, timeout_ms, client_js ? QF_RUN_GRANT : 0, (uint32_t)client_len);
    run->soft = t0 + timeout_ms;
    run->hard = run->soft + MON_GRACE_MS;
    *pl = NULL;
    enum mon_rc rc =
        send_frame3(run->fd, QF_RUN, run->seq, fixed, sizeof fixed, client_js, client_len, code, len, run->hard);
    if (rc == MON_OK)
        rc = mon_running(run, h, pl);
    call_abandon(&run->call); /* a call still out is the broker's to cancel (grant_end) */
    return rc;
}

/* The RESULT's payload (taken, freed) into out. */
static int take_result(const struct f16_hdr *h, uint8_t *pl, struct plm_js_result *out, struct plm_err *err)
{
    struct qf_result res;
    if (qf_result_decode(pl, h->len, &res) < 0) {
        free(pl);
        return plm_fail(err, 0, PLM_E_UNAVAILABLE, "quickjs worker sent a malformed result");
    }
    out->exit_code = res.exit_code;
    out->timed_out = res.flags & QF_RES_TIMED_OUT;
    out->out_truncated = res.flags & QF_RES_OUT_TRUNC;
    out->err_truncated = res.flags & QF_RES_ERR_TRUNC;
    int r = copy_bytes(&out->out, res.out, res.out_len);
    if (r == 0)
        r = copy_bytes(&out->err, res.err, res.err_len);
    free(pl);
    if (r < 0) {
        plm_bytes_done(&out->out);
        return plm_fail(err, ENOMEM, PLM_E_INTERNAL, "out of memory copying the result");
    }
    return 0;
}

int mon_run_js(struct qjs_pool *p, const char *code, size_t len, const char *client_js, const struct plm_host_api *api,
               uint32_t timeout_ms, struct plm_js_result *out, int64_t *duration_ms, struct plm_err *err)
{
    memset(out, 0, sizeof *out);
    size_t client_len;
    if (check_request(len, client_js, api, &client_len, err) < 0)
        return -1;
    cleanup_worker struct qjs_worker w = {.pid = -1, .fd = -1};
    struct mon_seen seen;
    if (take_ready(p, &w, &seen, err) < 0)
        return -1;

    struct mon_run run = {.fd = w.fd, .seen = &seen, .seq = next_seq(), .api = api};
    int64_t t0 = (int64_t)clock_mono_ms();
    struct f16_hdr h;
    uint8_t *pl = NULL;
    enum mon_rc rc = exchange(&run, code, len, client_js, client_len, timeout_ms, t0, &h, &pl);
    *duration_ms = (int64_t)clock_mono_ms() - t0;

    if (rc == MON_TIMEOUT) {
        /* The worker missed its own deadline by the whole grace (stuck in a native operation):
         * still a timed-out result, without the output it had not sent. */
        qjs_pool_discard(p, &w);
        out->exit_code = 124;
        out->timed_out = true;
        return 0;
    }
    if (rc != MON_OK) {
        char st[96];
        describe_status(qjs_worker_end(&w), st, sizeof st);
        /* A worker that died mid-run may have been ended by its own guest (an engine fault) as well
         * as from outside: the sandbox went away, the code may have run (docs/privsep.md). */
        return plm_fail(err, 0, PLM_E_UNAVAILABLE, "quickjs worker %s: %s",
                           rc == MON_VIOLATION ? "broke the protocol" : "died mid-run", st);
    }
    /* The answer is in: the worker has nothing left to do. */
    qjs_pool_discard(p, &w);
    return take_result(&h, pl, out, err);
}

int mon_play(int fd, const char *code, size_t len, const char *client_js, const struct plm_host_api *api,
             uint32_t timeout_ms, struct plm_js_result *out, struct plm_err *err)
{
    memset(out, 0, sizeof *out);
    size_t client_len;
    if (check_request(len, client_js, api, &client_len, err) < 0)
        return -1;
    struct mon_seen seen = {0};
    enum mon_rc rc = expect_ready(fd, &seen);
    if (rc != MON_OK)
        return plm_fail(err, 0, rc == MON_VIOLATION ? PLM_E_UNAVAILABLE : PLM_E_INTERNAL,
                           "quickjs worker %s before its request", rc == MON_VIOLATION ? "broke the protocol" : "failed");
    struct mon_run run = {.fd = fd, .seen = &seen, .seq = next_seq(), .api = api};
    struct f16_hdr h;
    uint8_t *pl = NULL;
    rc = exchange(&run, code, len, client_js, client_len, timeout_ms, (int64_t)clock_mono_ms(), &h, &pl);
    if (rc != MON_OK)
        return plm_fail(err, 0, rc == MON_VIOLATION ? PLM_E_UNAVAILABLE : PLM_E_INTERNAL,
                           "quickjs worker %s",
                           rc == MON_VIOLATION ? "broke the protocol" : rc == MON_TIMEOUT ? "timed out" : "died mid-run");
    return take_result(&h, pl, out, err);
}

/* ---- probes: the same path, a PROBE instead of a RUN, plus a look from outside ---- */

int mon_probe(struct qjs_pool *p, uint32_t probe, struct mon_probe_outcome *o, struct plm_err *err)
{
    memset(o, 0, sizeof *o);
    o->exit_status = -1;
    cleanup_worker struct qjs_worker w = {.pid = -1, .fd = -1};
    struct mon_seen seen;
    if (take_ready(p, &w, &seen, err) < 0)
        return -1;
    o->seccomp_mode = mon_proc_field(w.pid, "Seccomp");
    o->no_new_privs = mon_proc_field(w.pid, "NoNewPrivs");
    o->n_fds = mon_proc_fds(w.pid);
    mon_proc_creds(w.pid, &o->creds);
    o->own_netns = mon_proc_other_ns(w.pid, "net");
    o->own_ipcns = mon_proc_other_ns(w.pid, "ipc");
    o->own_mntns = mon_proc_other_ns(w.pid, "mnt");

    uint64_t seq = next_seq();
    uint8_t id[4];
    f16_put_u32(id, probe);
    int64_t deadline = (int64_t)clock_mono_ms() + 10000;
    enum mon_rc rc = send_frame(w.fd, QF_PROBE, seq, id, sizeof id, deadline);
    struct f16_hdr h;
    uint8_t *pl = NULL;
    if (rc == MON_OK)
        rc = recv_frame(w.fd, MON_PROBING, false, &seen, seq, deadline, &h, &pl);
    if (rc == MON_OK) {
        struct f16_reader r;
        f16_reader_init(&r, pl, h.len);
        o->ret = f16_get_i64(&r);
        o->err = (int)f16_get_u32(&r);
        o->returned = f16_reader_finish(&r) == 0;
    }
    free(pl);
    if (!o->returned) {
        /* No answer: let it finish dying on its own before we look at how (SIGSYS?). */
        int st = -1;
        for (int i = 0; i < 200; i++) {
            pid_t r = waitpid(w.pid, &st, WNOHANG);
            if (r == w.pid) {
                w.pid = -1;
                break;
            }
            usleep(5000);
        }
        if (w.pid > 0)
            st = qjs_worker_end(&w);
        if (st != -1 && WIFSIGNALED(st)) {
            o->killed = true;
            o->signal = WTERMSIG(st);
        } else if (st != -1 && WIFEXITED(st)) {
            o->exit_status = WEXITSTATUS(st);
        }
    }
    return 0; /* cleanup_worker kills and reaps whatever is left */
}

/* ---- sessions (session.c): one worker kept across runs ---- */

int mon_session_take(struct qjs_pool *p, struct qjs_worker *w, struct plm_err *err)
{
    struct mon_seen seen;
    return take_ready(p, w, &seen, err);
}

int mon_session_run(struct qjs_worker *w, const char *code, size_t len, uint32_t timeout_ms,
                    struct plm_js_result *out, int64_t *duration_ms, bool *ended, struct plm_err *err)
{
    memset(out, 0, sizeof *out);
    *ended = true;
    struct mon_seen seen = {.once = mon_once_bit(QF_READY, MON_SPAWNED)};
    struct mon_run run = {.fd = w->fd, .seen = &seen, .seq = next_seq()};
    uint8_t fixed[QF_RUN_FIXED];
    qf_run_encode_fixed(fixed, timeout_ms, QF_RUN_SESSION, 0);
    int64_t t0 = (int64_t)clock_mono_ms();
    run.soft = t0 + timeout_ms;
    run.hard = run.soft + MON_GRACE_MS;
    enum mon_rc rc = send_frame3(w->fd, QF_RUN, run.seq, fixed, sizeof fixed, NULL, 0, code, len, run.hard);
    struct f16_hdr h;
    uint8_t *pl = NULL;
    if (rc == MON_OK)
        rc = mon_running(&run, &h, &pl);
    *duration_ms = (int64_t)clock_mono_ms() - t0;
    if (rc == MON_TIMEOUT) { /* stuck past its own deadline: the interpreter is killed */
        qjs_worker_end(w);
        out->exit_code = 124;
        out->timed_out = true;
        return 0;
    }
    if (rc != MON_OK) {
        char st[96];
        describe_status(qjs_worker_end(w), st, sizeof st);
        return plm_fail(err, 0, PLM_E_UNAVAILABLE, "quickjs session worker %s: %s",
                           rc == MON_VIOLATION ? "broke the protocol" : "died mid-run", st);
    }
    struct qf_result res;
    if (qf_result_decode(pl, h.len, &res) < 0) {
        free(pl);
        qjs_worker_end(w);
        return plm_fail(err, 0, PLM_E_UNAVAILABLE, "quickjs worker sent a malformed result");
    }
    out->exit_code = res.exit_code;
    out->timed_out = res.flags & QF_RES_TIMED_OUT;
    out->out_truncated = res.flags & QF_RES_OUT_TRUNC;
    out->err_truncated = res.flags & QF_RES_ERR_TRUNC;
    *ended = (res.flags & QF_RES_ENDED) != 0;
    if (*ended)
        qjs_worker_end(w); /* it is exiting on its own: reap it */
    int r = copy_bytes(&out->out, res.out, res.out_len);
    if (r == 0)
        r = copy_bytes(&out->err, res.err, res.err_len);
    free(pl);
    if (r < 0) {
        plm_bytes_done(&out->out);
        return plm_fail(err, ENOMEM, PLM_E_INTERNAL, "out of memory copying the result");
    }
    return 0;
}
