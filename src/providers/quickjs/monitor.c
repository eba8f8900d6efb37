/* monitor.c: the daemon's side of one worker's life: READY, one request, one answer, the end.
 * Owns: the worker it took from the pool, from take to kill-and-reap (whatever happens).
 * Trusts: nothing a worker sends. Every frame is decoded field by field, checked against
 *   mon_table for the current state, capped before allocation and consumed exactly; anything
 *   else kills the worker and discards its output (STYLE.md §5).
 * Invariant: a worker answers at most one request and is always SIGKILLed and reaped before
 *   the run returns (deadline + grace at the latest); an error after the code was sent is never
 *   marked as a refusal. */
#include "qjs_int.h"

#include <dirent.h>
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "../../core/limits.h"
#include "frame.h"

enum mon_state { MON_SPAWNED, MON_RUNNING, MON_PROBING };

/* What a worker may send, and when. Each is allowed once per state; the state then ends. */
static const struct mon_rule {
    uint16_t type;
    enum mon_state state;
    const char *why;
} mon_table[] = {
    {QF_READY, MON_SPAWNED, "worker confined, engine started, waiting for its one request"},
    {QF_RESULT, MON_RUNNING, "the snippet's outcome, once"},
    {QF_PROBE_RESULT, MON_PROBING, "a probe's syscall returned (startup evidence only)"},
};

enum mon_rc { MON_OK = 0, MON_TIMEOUT, MON_EOF, MON_VIOLATION };

static int64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static bool permitted(uint16_t type, enum mon_state st)
{
    for (size_t i = 0; i < sizeof mon_table / sizeof mon_table[0]; i++)
        if (mon_table[i].type == type && mon_table[i].state == st)
            return true;
    return false;
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
        int64_t left = deadline - now_ms();
        if (left <= 0)
            return MON_TIMEOUT;
        struct pollfd pfd = {.fd = fd, .events = POLLIN};
        if (poll(&pfd, 1, (int)(left > 60000 ? 60000 : left)) < 0 && errno != EINTR)
            return MON_EOF;
    }
    return MON_OK;
}

/* One frame permitted in state `st`, echoing `seq`. *payload is malloc'd (NULL when empty). */
static enum mon_rc recv_frame(int fd, enum mon_state st, uint64_t seq, int64_t deadline, struct qf_hdr *h,
                              uint8_t **payload)
{
    uint8_t hb[QF_HDR_LEN];
    *payload = NULL;
    enum mon_rc rc = read_exact(fd, hb, sizeof hb, deadline);
    if (rc != MON_OK)
        return rc;
    /* Fail closed: type/flags/len checked, then the table, before a byte of payload is taken. */
    if (qf_hdr_decode(hb, h) < 0 || !permitted(h->type, st) || h->seq != seq)
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

static enum mon_rc send_frame(int fd, uint16_t type, uint64_t seq, const void *a, size_t alen, const void *b,
                              size_t blen, int64_t deadline)
{
    uint8_t hb[QF_HDR_LEN];
    qf_hdr_encode(hb, &(struct qf_hdr){.len = (uint32_t)(alen + blen), .type = type, .flags = 0, .seq = seq});
    struct iovec iov[3] = {{hb, sizeof hb}, {(void *)a, alen}, {(void *)b, blen}};
    size_t idx = 0;
    while (idx < 3) {
        if (iov[idx].iov_len == 0) {
            idx++;
            continue;
        }
        struct msghdr msg = {.msg_iov = iov + idx, .msg_iovlen = 3 - idx};
        ssize_t k = sendmsg(fd, &msg, MSG_DONTWAIT | MSG_NOSIGNAL);
        if (k < 0) {
            if (errno == EINTR)
                continue;
            if (errno != EAGAIN)
                return MON_EOF;
            int64_t left = deadline - now_ms();
            if (left <= 0)
                return MON_TIMEOUT;
            struct pollfd pfd = {.fd = fd, .events = POLLOUT};
            poll(&pfd, 1, (int)(left > 60000 ? 60000 : left));
            continue;
        }
        size_t done = (size_t)k;
        while (idx < 3 && done >= iov[idx].iov_len) {
            done -= iov[idx].iov_len;
            idx++;
        }
        if (idx < 3) {
            iov[idx].iov_base = (uint8_t *)iov[idx].iov_base + done;
            iov[idx].iov_len -= done;
        }
    }
    return MON_OK;
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

/* A taken worker must say READY first; one that cannot is replaced before any code is sent. */
static int take_ready(struct qjs_pool *p, struct qjs_worker *w, struct plm_err *err)
{
    char why[96] = "";
    for (int attempt = 0; attempt < 3; attempt++) {
        if (qjs_pool_take(p, 10000, w, err) < 0)
            return -1;
        struct qf_hdr h;
        uint8_t *pl;
        enum mon_rc rc = recv_frame(w->fd, MON_SPAWNED, 0, now_ms() + MON_READY_MS, &h, &pl);
        free(pl);
        if (rc == MON_OK)
            return 0;
        describe_status(qjs_worker_end(w), why, sizeof why);
    }
    return plm_err_set(err, 0, PLM_E_INTERNAL, PLM_REFUSAL_NONE, "quickjs workers fail to start: last %s", why);
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

int mon_run_js(struct qjs_pool *p, const char *code, size_t len, uint32_t timeout_ms,
               struct plm_js_result *out, int64_t *duration_ms, struct plm_err *err)
{
    memset(out, 0, sizeof *out);
    if (len == 0 || len > LIM_CODE_MAX)
        return plm_err_set(err, 0, PLM_E_INVALID, PLM_REFUSAL_REQUEST, "code must be 1..%u bytes", LIM_CODE_MAX);
    cleanup_worker struct qjs_worker w = {.pid = -1, .fd = -1};
    if (take_ready(p, &w, err) < 0)
        return -1;

    uint64_t seq = next_seq();
    uint8_t fixed[QF_RUN_FIXED];
    qf_put_u32(fixed, timeout_ms);
    int64_t t0 = now_ms();
    int64_t hard = t0 + timeout_ms + MON_GRACE_MS;
    enum mon_rc rc = send_frame(w.fd, QF_RUN, seq, fixed, sizeof fixed, code, len, hard);
    struct qf_hdr h;
    uint8_t *pl = NULL;
    if (rc == MON_OK)
        rc = recv_frame(w.fd, MON_RUNNING, seq, hard, &h, &pl);
    *duration_ms = now_ms() - t0;

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
        return plm_err_set(err, 0, PLM_E_INTERNAL, PLM_REFUSAL_NONE, "quickjs worker %s: %s",
                           rc == MON_VIOLATION ? "broke the protocol" : "died mid-run", st);
    }
    /* The answer is in: the worker has nothing left to do. */
    qjs_pool_discard(p, &w);
    struct qf_result res;
    if (qf_result_decode(pl, h.len, &res) < 0) {
        free(pl);
        return plm_err_set(err, 0, PLM_E_INTERNAL, PLM_REFUSAL_NONE, "quickjs worker sent a malformed result");
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
        return plm_err_set(err, ENOMEM, PLM_E_INTERNAL, PLM_REFUSAL_NONE, "out of memory copying the result");
    }
    return 0;
}

/* ---- probes: the same path, a PROBE instead of a RUN, plus a look from outside ---- */

static int status_field(pid_t pid, const char *key)
{
    char path[64], line[256];
    snprintf(path, sizeof path, "/proc/%d/status", (int)pid);
    FILE *f = fopen(path, "re");
    if (!f)
        return -1;
    int v = -1;
    size_t klen = strlen(key);
    while (fgets(line, sizeof line, f))
        if (strncmp(line, key, klen) == 0 && line[klen] == ':') {
            v = (int)strtol(line + klen + 1, NULL, 10);
            break;
        }
    fclose(f);
    return v;
}

static int count_fds(pid_t pid)
{
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/fd", (int)pid);
    DIR *d = opendir(path);
    if (!d)
        return -1;
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)))
        if (e->d_name[0] != '.')
            n++;
    closedir(d);
    return n;
}

static bool other_ns(pid_t pid, const char *ns)
{
    char a[64], b[64];
    struct stat sa, sb;
    snprintf(a, sizeof a, "/proc/%d/ns/%s", (int)pid, ns);
    snprintf(b, sizeof b, "/proc/self/ns/%s", ns);
    if (stat(a, &sa) < 0 || stat(b, &sb) < 0)
        return false;
    return sa.st_ino != sb.st_ino || sa.st_dev != sb.st_dev;
}

int mon_probe(struct qjs_pool *p, uint32_t probe, struct mon_probe_outcome *o, struct plm_err *err)
{
    memset(o, 0, sizeof *o);
    o->exit_status = -1;
    cleanup_worker struct qjs_worker w = {.pid = -1, .fd = -1};
    if (take_ready(p, &w, err) < 0)
        return -1;
    o->seccomp_mode = status_field(w.pid, "Seccomp");
    o->no_new_privs = status_field(w.pid, "NoNewPrivs");
    o->n_fds = count_fds(w.pid);
    o->own_netns = other_ns(w.pid, "net");
    o->own_ipcns = other_ns(w.pid, "ipc");
    o->own_mntns = other_ns(w.pid, "mnt");

    uint64_t seq = next_seq();
    uint8_t id[4];
    qf_put_u32(id, probe);
    int64_t deadline = now_ms() + 10000;
    enum mon_rc rc = send_frame(w.fd, QF_PROBE, seq, id, sizeof id, NULL, 0, deadline);
    struct qf_hdr h;
    uint8_t *pl = NULL;
    if (rc == MON_OK)
        rc = recv_frame(w.fd, MON_PROBING, seq, deadline, &h, &pl);
    if (rc == MON_OK) {
        struct qf_reader r;
        qf_reader_init(&r, pl, h.len);
        o->ret = qf_get_i64(&r);
        o->err = (int)qf_get_u32(&r);
        o->returned = qf_reader_finish(&r) == 0;
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
