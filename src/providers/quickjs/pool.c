/* pool.c: the zygote and the pool of ready, never-used QuickJS workers (monitor side).
 * Owns: the zygote process and its control socket (refill thread only), every worker until
 *   qjs_pool_take() hands it out (the ready ring, its waits and backoff are core/pool.h's: this
 *   file is its fill, thread_start and thread_end ops, and the reaper).
 * Trusts: the zygote's replies only after qf_hdr_decode(); a worker not at all (the pool never
 *   reads from one: the monitor checks READY when it takes it).
 * Invariant: one long-lived refill thread spawns the zygote (its parent-death signal, and its
 *   workers', is bound to that thread) and owns every spawn; a zygote makes at most
 *   cfg.zygote_forks workers and lives at most cfg.zygote_age_ms, then a new one is started
 *   BEFORE the old one goes (so the pool never reports itself down for a recycle; workers
 *   already forked, ready or running, are the daemon's children and unaffected); a worker is in
 *   the ring at most once and leaves it exactly once, to a run or to qjs_worker_end(); nothing
 *   is ever reused. A discarded worker is SIGKILLed by the caller and only then queued for the
 *   reaper thread, so no signal ever targets a reaped (reusable) pid. */
#include "../../core/clock.h"
#include "qjs_int.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "../../core/cleanup.h"
#include "../../core/pool.h"
#include "confine.h"
#include "frame.h"
#include "quickjs.h"

/* Zygote replies (HELLO, SPAWNED) must arrive within this. */
#define POOL_CTL_MS 5000
/* SPAWNs sent before reading their replies. */
#define POOL_BATCH 16
/* Killed workers waiting for the reaper; when full, the caller reaps synchronously. */
#define POOL_REAP_MAX 1024

/* The refill thread's backoff for zygote recycles: 20 ms doubling to 1 s after a failure, 0 after
 * a success (a failed fill itself is backed off by core/pool). */
struct refill {
    unsigned backoff_ms;
    int64_t retry_ms;
    struct plm_err err;
};

struct qjs_pool {
    struct qjs_pool_cfg cfg;
    struct plm_pool *pool;
    pthread_mutex_t mu;       /* the reap queue */
    bool stop;                /* the reaper: drain and leave */
    bool zygote_up;           /* atomic */
    unsigned ns;              /* atomic */
    pid_t reap[POOL_REAP_MAX]; /* SIGKILLed, not yet waited for (under mu) */
    size_t reap_head, reap_n;
    pthread_cond_t cv_reap;
    pthread_t reaper;
    bool reaper_up;
    pid_t zyg_pid_pub;        /* zyg_pid for readers on other threads (atomic) */
    uint64_t recycled;        /* zygotes retired for their fork count or age (atomic) */
    /* Refill thread only: */
    pid_t zyg_pid;
    int zyg_fd;
    uint32_t zyg_forks;       /* SPAWNs sent to the current zygote */
    int64_t zyg_born_ms;      /* when it said HELLO */
    uint64_t seq;
    char broken[200];         /* last zygote failure, "" while healthy */
    struct refill r;
};

int qjs_worker_end(struct qjs_worker *w)
{
    int status = -1;
    if (w->pid > 0) {
        kill(w->pid, SIGKILL);
        while (waitpid(w->pid, &status, 0) < 0 && errno == EINTR)
            ;
        w->pid = -1;
    }
    if (w->fd >= 0) {
        close(w->fd);
        w->fd = -1;
    }
    return status;
}

/* Waits for one control message; returns its length, 0 on EOF/timeout/error. */
static ssize_t ctl_recv(int fd, uint8_t *buf, size_t cap, int timeout_ms)
{
    int64_t end = (int64_t)clock_mono_ms() + timeout_ms;
    for (;;) {
        int64_t left = end - (int64_t)clock_mono_ms();
        if (left <= 0)
            return 0;
        struct pollfd pfd = {.fd = fd, .events = POLLIN};
        int r = poll(&pfd, 1, (int)left);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            return 0;
        ssize_t n = recv(fd, buf, cap, MSG_DONTWAIT | MSG_TRUNC);
        if (n < 0 && (errno == EINTR || errno == EAGAIN))
            continue;
        if (n <= 0 || (size_t)n > cap)
            return 0; /* error, EOF, or a message longer than any valid one */
        return n;
    }
}

static void zygote_stop(struct qjs_pool *p)
{
    if (p->zyg_fd >= 0)
        close(p->zyg_fd); /* the zygote exits on EOF */
    p->zyg_fd = -1;
    __atomic_store_n(&p->zyg_pid_pub, 0, __ATOMIC_RELEASE);
    if (p->zyg_pid > 0) {
        kill(p->zyg_pid, SIGKILL);
        while (waitpid(p->zyg_pid, NULL, 0) < 0 && errno == EINTR)
            ;
    }
    p->zyg_pid = -1;
    __atomic_store_n(&p->zygote_up, false, __ATOMIC_RELEASE);
}

/* posix_spawn (vfork+exec underneath: safe in a multi-threaded daemon) of the worker binary
 * through the descriptor we hashed, so what runs is what the identity names. */
static int zygote_start(struct qjs_pool *p, struct plm_err *err)
{
    int sv[2];
    if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) < 0)
        return plm_fail(err, errno, PLM_E_INTERNAL, "zygote socketpair: %s", strerror(errno));
    cleanup_close int mine = sv[0];
    cleanup_close int theirs = sv[1];
    if (theirs <= 4) { /* dup2(3, 3) would keep CLOEXEC, and 4 is the binary's: move it */
        int moved = fcntl(theirs, F_DUPFD_CLOEXEC, 5);
        if (moved < 0)
            return plm_fail(err, errno, PLM_E_INTERNAL, "zygote fd: %s", strerror(errno));
        close(theirs);
        theirs = moved;
    }
    char path[64], mem[16], cpu[16], ppid[16];
    /* The child sees the binary as fd 4 (dup2 clears CLOEXEC; the zygote closes it first thing)
     * and everything from 5 up is closed before the exec. */
    snprintf(path, sizeof path, "/proc/self/fd/4");
    snprintf(mem, sizeof mem, "%u", p->cfg.memory_mb);
    snprintf(cpu, sizeof cpu, "%u", p->cfg.cpu_seconds);
    snprintf(ppid, sizeof ppid, "%d", (int)getpid());
    char *const argv[] = {"plimsoll-qjs-zygote", "--zygote", mem, cpu, ppid, NULL};
    char *const envp[] = {NULL}; /* no environment crosses into the sandbox */

    posix_spawn_file_actions_t fa;
    posix_spawnattr_t attr;
    sigset_t none, all;
    sigemptyset(&none);
    sigfillset(&all);
    posix_spawn_file_actions_init(&fa);
    posix_spawnattr_init(&attr);
    /* Binary first: exe_fd may itself be 3. */
    posix_spawn_file_actions_adddup2(&fa, p->cfg.exe_fd, 4);
    posix_spawn_file_actions_adddup2(&fa, theirs, 3);
#if defined(__GLIBC__) && (__GLIBC__ > 2 || (__GLIBC__ == 2 && __GLIBC_MINOR__ >= 34))
    posix_spawn_file_actions_addclosefrom_np(&fa, 5);
#endif
    posix_spawnattr_setsigmask(&attr, &none);
    posix_spawnattr_setsigdefault(&attr, &all);
    posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
    pid_t pid;
    int rc = posix_spawn(&pid, path, &fa, &attr, argv, envp);
    posix_spawn_file_actions_destroy(&fa);
    posix_spawnattr_destroy(&attr);
    if (rc != 0)
        return plm_fail(err, rc, PLM_E_INTERNAL, "spawn zygote: %s", strerror(rc));
    cleanup_pid pid_t zyg = pid;
    close(take_fd(&theirs));

    uint8_t buf[F16_HDR_LEN + 8];
    struct f16_hdr h;
    ssize_t n = ctl_recv(mine, buf, sizeof buf, POOL_CTL_MS);
    if (n < (ssize_t)F16_HDR_LEN || qf_hdr_decode(buf, &h) < 0 || h.type != QF_HELLO ||
        (ssize_t)(F16_HDR_LEN + h.len) != n) {
        int st = 0;
        kill(zyg, SIGKILL);
        waitpid(take_pid(&zyg), &st, 0);
        return plm_fail(err, 0, PLM_E_INTERNAL,
                           "zygote did not start (status %d, signal %d)", WIFEXITED(st) ? WEXITSTATUS(st) : -1,
                           WIFSIGNALED(st) ? WTERMSIG(st) : 0);
    }
    struct f16_reader r;
    f16_reader_init(&r, buf + F16_HDR_LEN, h.len);
    unsigned ns = f16_get_u32(&r);
    if (f16_reader_finish(&r) < 0)
        return plm_fail(err, 0, PLM_E_INTERNAL, "zygote HELLO malformed");
    p->zyg_pid = take_pid(&zyg);
    __atomic_store_n(&p->zyg_pid_pub, p->zyg_pid, __ATOMIC_RELEASE);
    p->zyg_fd = take_fd(&mine);
    p->zyg_forks = 0;
    p->zyg_born_ms = (int64_t)clock_mono_ms();
    __atomic_store_n(&p->ns, ns, __ATOMIC_RELAXED);
    __atomic_store_n(&p->zygote_up, true, __ATOMIC_RELEASE);
    p->broken[0] = 0;
    return 0;
}

static int send_spawn(int zfd, uint64_t seq, int fd)
{
    uint8_t h[F16_HDR_LEN];
    f16_hdr_encode(h, &(struct f16_hdr){.len = 0, .type = QF_SPAWN, .flags = 0, .seq = seq});
    union {
        struct cmsghdr c;
        char space[CMSG_SPACE(sizeof(int))];
    } cm;
    memset(&cm, 0, sizeof cm);
    struct iovec iov = {.iov_base = h, .iov_len = sizeof h};
    struct msghdr msg = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = &cm, .msg_controllen = sizeof cm};
    struct cmsghdr *c = CMSG_FIRSTHDR(&msg);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN(sizeof(int));
    memcpy(CMSG_DATA(c), &fd, sizeof fd);
    ssize_t n;
    do
        n = sendmsg(zfd, &msg, MSG_NOSIGNAL);
    while (n < 0 && errno == EINTR);
    return n == (ssize_t)sizeof h ? 0 : -1;
}

/* Asks the zygote for n workers; appends the ones it made to out. -1 when the zygote failed. */
static int spawn_batch(struct qjs_pool *p, size_t n, struct qjs_worker *out, size_t *got)
{
    int pend[POOL_BATCH];
    uint64_t seqs[POOL_BATCH];
    size_t sent = 0;
    int rc = 0;
    for (; sent < n; sent++) {
        int sv[2];
        if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0)
            break;
        seqs[sent] = ++p->seq;
        int ok = send_spawn(p->zyg_fd, seqs[sent], sv[1]);
        close(sv[1]);
        if (ok < 0) {
            close(sv[0]);
            rc = -1;
            break;
        }
        pend[sent] = sv[0];
        p->zyg_forks++;
    }
    for (size_t i = 0; i < sent; i++) {
        uint8_t buf[F16_HDR_LEN + 8];
        struct f16_hdr h;
        ssize_t k = rc < 0 ? 0 : ctl_recv(p->zyg_fd, buf, sizeof buf, POOL_CTL_MS);
        struct f16_reader r;
        uint32_t pid = 0;
        if (k == (ssize_t)sizeof buf && qf_hdr_decode(buf, &h) == 0 && h.type == QF_SPAWNED &&
            h.seq == seqs[i]) {
            f16_reader_init(&r, buf + F16_HDR_LEN, h.len);
            pid = f16_get_u32(&r);
            (void)f16_get_u32(&r); /* the zygote's errno, when pid is 0 */
            if (f16_reader_finish(&r) < 0)
                pid = 0, rc = -1;
        } else {
            rc = -1; /* a silent or confused zygote is replaced */
        }
        if (pid == 0 || pid > (uint32_t)INT32_MAX) {
            close(pend[i]);
            continue;
        }
        int fl = fcntl(pend[i], F_GETFL);
        if (fl < 0 || fcntl(pend[i], F_SETFL, fl | O_NONBLOCK) < 0) {
            struct qjs_worker w = {(pid_t)pid, pend[i]};
            qjs_worker_end(&w);
            continue;
        }
        out[(*got)++] = (struct qjs_worker){.pid = (pid_t)pid, .fd = pend[i]};
    }
    return rc;
}

/* Waiting for a SIGKILLed worker blocks until the kernel has torn its address space down,
 * which is most of a run's latency on some hosts; runs hand that wait to this thread. */
static void *reaper_main(void *arg)
{
    struct qjs_pool *p = arg;
    pthread_mutex_lock(&p->mu);
    for (;;) {
        while (p->reap_n == 0 && !p->stop)
            pthread_cond_wait(&p->cv_reap, &p->mu);
        if (p->reap_n == 0)
            break; /* stopping, and nothing left to reap */
        pid_t pid = p->reap[p->reap_head];
        p->reap_head = (p->reap_head + 1) % POOL_REAP_MAX;
        p->reap_n--;
        pthread_mutex_unlock(&p->mu);
        while (waitpid(pid, NULL, 0) < 0 && errno == EINTR)
            ;
        pthread_mutex_lock(&p->mu);
    }
    pthread_mutex_unlock(&p->mu);
    return NULL;
}

void qjs_pool_discard(struct qjs_pool *p, struct qjs_worker *w)
{
    if (w->fd >= 0)
        close(w->fd);
    w->fd = -1;
    if (w->pid <= 0)
        return;
    kill(w->pid, SIGKILL); /* before it leaves our hands: the pid cannot have been reused */
    pthread_mutex_lock(&p->mu);
    if (p->reap_n < POOL_REAP_MAX) {
        p->reap[(p->reap_head + p->reap_n) % POOL_REAP_MAX] = w->pid;
        p->reap_n++;
        w->pid = -1;
        pthread_cond_signal(&p->cv_reap);
    }
    pthread_mutex_unlock(&p->mu);
    if (w->pid > 0)
        qjs_worker_end(w);
}

/* The current zygote has made its last worker or lived its time. */
static bool zygote_spent(const struct qjs_pool *p)
{
    return p->zyg_fd >= 0 &&
           (p->zyg_forks >= p->cfg.zygote_forks || (int64_t)clock_mono_ms() - p->zyg_born_ms >= (int64_t)p->cfg.zygote_age_ms);
}

/* Replaces a spent zygote: the new one is started first, and only once it said HELLO is the old
 * one closed and reaped, so the pool never reports itself down and no run waits longer than a
 * refill. Workers already forked are the daemon's children and live on; after a recycle for age
 * the ready ones (which ran nothing) are discarded too, so an idle pool does not hand out a
 * layout older than the bound. When the new zygote cannot start, the old one keeps serving and
 * the next attempt waits for the backoff. */
static int zygote_recycle(struct qjs_pool *p, struct plm_err *err)
{
    bool by_age = p->zyg_forks < p->cfg.zygote_forks;
    pid_t old_pid = p->zyg_pid;
    int old_fd = p->zyg_fd;
    uint32_t old_forks = p->zyg_forks;
    int64_t old_born = p->zyg_born_ms;
    p->zyg_pid = -1;
    p->zyg_fd = -1;
    if (zygote_start(p, err) < 0) {
        p->zyg_pid = old_pid;
        p->zyg_fd = old_fd;
        p->zyg_forks = old_forks;
        p->zyg_born_ms = old_born;
        __atomic_store_n(&p->zyg_pid_pub, old_pid, __ATOMIC_RELEASE);
        return -1;
    }
    close(old_fd); /* the old zygote exits on EOF; the kill is for one that would not */
    kill(old_pid, SIGKILL);
    while (waitpid(old_pid, NULL, 0) < 0 && errno == EINTR)
        ;
    __atomic_add_fetch(&p->recycled, 1, __ATOMIC_RELAXED);
    if (!by_age)
        return 0;
    plm_pool_drain(p->pool); /* each to qjs_pool_discard */
    return 0;
}

static unsigned next_backoff(unsigned ms)
{
    return ms ? (ms * 2 > 1000 ? 1000 : ms * 2) : 20;
}

static void say_broken(struct qjs_pool *p, const char *why)
{
    snprintf(p->broken, sizeof p->broken, "%.190s", why);
}

/* A spent zygote is replaced, at most once per backoff. */
static void recycle_if_spent(struct qjs_pool *p, struct refill *r)
{
    if (!zygote_spent(p) || (r->backoff_ms && (int64_t)clock_mono_ms() < r->retry_ms))
        return;
    if (zygote_recycle(p, &r->err) < 0) {
        char why[sizeof p->broken];
        snprintf(why, sizeof why, "recycling the zygote: %.170s", r->err.msg);
        say_broken(p, why);
        r->backoff_ms = next_backoff(r->backoff_ms);
        r->retry_ms = (int64_t)clock_mono_ms() + r->backoff_ms;
    } else {
        r->backoff_ms = 0;
    }
}

/* A zygote to fork from: started again when the last one stopped (the pool has backed off
 * since the failure that stopped it). */
static bool have_zygote(struct qjs_pool *p, struct refill *r)
{
    if (p->zyg_fd >= 0)
        return true;
    if (zygote_start(p, &r->err) < 0) {
        say_broken(p, r->err.msg);
        r->backoff_ms = next_backoff(r->backoff_ms);
        return false;
    }
    return true;
}

/* One batch of fresh workers forked into out. -1 when the zygote failed (it is stopped, to be
 * restarted after the pool's backoff). */
static int add_batch(struct qjs_pool *p, size_t need, struct qjs_worker *out, size_t *got, struct refill *r)
{
    /* A spent zygote that could not be replaced still serves (within the backoff): better a
     * run on an old layout than no run. Otherwise never past its fork budget. */
    size_t left = p->zyg_forks < p->cfg.zygote_forks ? p->cfg.zygote_forks - p->zyg_forks : POOL_BATCH;
    size_t batch = need > POOL_BATCH ? POOL_BATCH : need;
    if (spawn_batch(p, batch > left ? left : batch, out, got) < 0) {
        zygote_stop(p);
        say_broken(p, "zygote stopped answering; restarting it");
        r->backoff_ms = r->backoff_ms ? r->backoff_ms : 20;
        return -1;
    }
    if (*got == 0) { /* the zygote answered, but forked nothing: back off rather than spin */
        say_broken(p, "the zygote could not fork a worker");
        return -1;
    }
    r->backoff_ms = 0;
    return 0;
}

/* core/pool's fill, on the refill thread: recycle a spent zygote, then a batch from the zygote.
 * want 0: the ring is full and the zygote's age is up (idle_until). */
static int pool_fill(void *ctx, void *items, size_t want, size_t *got, struct plm_err *err)
{
    struct qjs_pool *p = ctx;
    recycle_if_spent(p, &p->r);
    int rc = 0;
    if (want == 0)
        rc = zygote_spent(p) ? -1 : 0; /* the recycle failed: try again after the backoff */
    else if (!have_zygote(p, &p->r) || add_batch(p, want, items, got, &p->r) < 0)
        rc = -1;
    if (rc < 0 || p->broken[0]) /* the text a timed-out take reports ("" while healthy) */
        plm_fail(err, 0, PLM_E_INTERNAL, "%s", p->broken[0] ? p->broken : "zygote spent");
    return rc;
}

static int pool_thread_start(void *ctx, struct plm_err *err)
{
    return zygote_start(ctx, err);
}

static void pool_thread_end(void *ctx)
{
    zygote_stop(ctx);
}

static void pool_kill(void *ctx, void *item)
{
    qjs_pool_discard(ctx, item);
}

/* While the ring is full the refill thread wakes when the zygote's age is up. */
static uint64_t pool_idle_until(void *ctx)
{
    struct qjs_pool *p = ctx;
    return p->zyg_fd < 0 ? 0 : (uint64_t)(p->zyg_born_ms + (int64_t)p->cfg.zygote_age_ms);
}

static const struct plm_pool_ops qjs_pool_ops = {.fill = pool_fill,
                                                 .kill = pool_kill,
                                                 .thread_start = pool_thread_start,
                                                 .thread_end = pool_thread_end,
                                                 .idle_until = pool_idle_until};

struct qjs_pool *qjs_pool_new(const struct qjs_pool_cfg *cfg, struct plm_err *err)
{
    struct qjs_pool *p = calloc(1, sizeof *p);
    if (!p)
        return plm_fail(err, ENOMEM, PLM_E_INTERNAL, "pool: out of memory"), NULL;
    p->cfg = *cfg;
    p->zyg_fd = -1;
    p->zyg_pid = -1;
    pthread_mutex_init(&p->mu, NULL);
    clock_cond_init(&p->cv_reap);
    if (pthread_create(&p->reaper, NULL, reaper_main, p) != 0) {
        plm_fail(err, errno, PLM_E_INTERNAL, "pool: cannot start");
        qjs_pool_free(p);
        return NULL;
    }
    p->reaper_up = true;
    struct plm_pool_cfg pc = {.item_size = sizeof(struct qjs_worker),
                              .size = cfg->size,
                              .batch = POOL_BATCH,
                              .backoff_min_ms = 20,
                              .backoff_max_ms = 1000};
    /* The zygote is started by the pool's refill thread (thread_start): its parent-death signal,
     * and its workers', are bound to that thread, which lives until free. */
    p->pool = plm_pool_new(&pc, &qjs_pool_ops, p, err);
    if (!p->pool || plm_pool_start(p->pool, err) < 0) {
        qjs_pool_free(p);
        return NULL;
    }
    return p;
}

void qjs_pool_free(struct qjs_pool *p)
{
    if (!p)
        return;
    plm_pool_free(p->pool); /* joins the refill thread (which stops the zygote), discards the ready */
    pthread_mutex_lock(&p->mu);
    p->stop = true;
    pthread_cond_broadcast(&p->cv_reap);
    pthread_mutex_unlock(&p->mu);
    if (p->reaper_up)
        pthread_join(p->reaper, NULL); /* it drains its queue before leaving */
    pthread_cond_destroy(&p->cv_reap);
    pthread_mutex_destroy(&p->mu);
    free(p);
}

int qjs_pool_take(struct qjs_pool *p, uint32_t wait_ms, struct qjs_worker *out, struct plm_err *err)
{
    struct plm_err e; /* filled only on failure: the hot path stays the lock and one copy */
    if (plm_pool_take(p->pool, wait_ms, out, &e) == 0)
        return 0;
    if (e.errnum == ETIMEDOUT)
        return plm_fail(err, ETIMEDOUT, PLM_E_INTERNAL, "no quickjs worker within %u ms: %.200s", wait_ms,
                        e.msg[0] ? e.msg : "pool busy");
    return plm_fail(err, 0, PLM_E_INTERNAL, "quickjs provider is shutting down");
}

unsigned qjs_pool_ns(struct qjs_pool *p)
{
    return __atomic_load_n(&p->ns, __ATOMIC_RELAXED);
}

uint64_t qjs_pool_recycled(struct qjs_pool *p)
{
    return __atomic_load_n(&p->recycled, __ATOMIC_RELAXED);
}

pid_t qjs_pool_zygote_pid(struct qjs_pool *p)
{
    return __atomic_load_n(&p->zyg_pid_pub, __ATOMIC_ACQUIRE);
}

bool qjs_pool_alive(struct qjs_pool *p)
{
    return __atomic_load_n(&p->zygote_up, __ATOMIC_ACQUIRE);
}
