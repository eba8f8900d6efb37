/* pool.c: the zygote and the pool of ready, never-used QuickJS workers (monitor side).
 * Owns: the zygote process and its control socket (refill thread only), the ready ring (under
 *   mu), every worker until qjs_pool_take() hands it out.
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
#include "confine.h"
#include "frame.h"
#include "quickjs.h"

/* Zygote replies (HELLO, SPAWNED) must arrive within this. */
#define POOL_CTL_MS 5000
/* SPAWNs sent before reading their replies. */
#define POOL_BATCH 16
/* Killed workers waiting for the reaper; when full, the caller reaps synchronously. */
#define POOL_REAP_MAX 1024

struct qjs_pool {
    struct qjs_pool_cfg cfg;
    pthread_mutex_t mu;
    pthread_cond_t cv_ready;  /* takers: a worker arrived, or the pool stopped */
    pthread_cond_t cv_refill; /* refill thread: a worker left, or stop */
    struct qjs_worker *ring;  /* cfg.size slots, FIFO */
    size_t head, n;
    bool stop;
    int started;              /* 0 pending, 1 zygote up once, -1 first start failed */
    struct plm_err start_err;
    bool zygote_up;
    unsigned ns;
    char broken[200];         /* last zygote failure, "" while healthy */
    pid_t reap[POOL_REAP_MAX]; /* SIGKILLed, not yet waited for (under mu) */
    size_t reap_head, reap_n;
    pthread_cond_t cv_reap;
    pthread_t reaper;
    pid_t zyg_pid_pub;        /* zyg_pid for readers on other threads (atomic) */
    uint64_t recycled;        /* zygotes retired for their fork count or age (atomic) */
    /* Refill thread only: */
    pid_t zyg_pid;
    int zyg_fd;
    uint32_t zyg_forks;       /* SPAWNs sent to the current zygote */
    int64_t zyg_born_ms;      /* when it said HELLO */
    uint64_t seq;
    pthread_t thread;
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
    pthread_mutex_lock(&p->mu);
    p->zygote_up = false;
    pthread_mutex_unlock(&p->mu);
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
    pthread_mutex_lock(&p->mu);
    p->zygote_up = true;
    p->ns = ns;
    p->broken[0] = 0;
    pthread_mutex_unlock(&p->mu);
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
    struct qjs_worker stale[QJS_MAX_POOL];
    size_t n = 0;
    pthread_mutex_lock(&p->mu);
    while (p->n > 0 && n < QJS_MAX_POOL) {
        stale[n++] = p->ring[p->head];
        p->head = (p->head + 1) % p->cfg.size;
        p->n--;
    }
    pthread_mutex_unlock(&p->mu);
    for (size_t i = 0; i < n; i++)
        qjs_pool_discard(p, &stale[i]);
    return 0;
}

/* Sleeps on cv_refill (mu held) until a worker is wanted, stop, or the zygote's age is up. */
static void wait_for_work(struct qjs_pool *p)
{
    while (!p->stop && p->n >= p->cfg.size) {
        if (p->zyg_fd < 0) {
            pthread_cond_wait(&p->cv_refill, &p->mu);
            continue;
        }
        int64_t due = p->zyg_born_ms + (int64_t)p->cfg.zygote_age_ms;
        if ((int64_t)clock_mono_ms() >= due)
            return;
        struct timespec dl = {.tv_sec = (time_t)(due / 1000), .tv_nsec = (long)(due % 1000) * 1000000};
        pthread_cond_timedwait(&p->cv_refill, &p->mu, &dl);
    }
}

/* The refill thread's backoff: 20 ms doubling to 1 s after a failure, 0 after a success. */
struct refill {
    unsigned backoff_ms;
    int64_t retry_ms;
    struct plm_err err;
};

static unsigned next_backoff(unsigned ms)
{
    return ms ? (ms * 2 > 1000 ? 1000 : ms * 2) : 20;
}

static void say_broken(struct qjs_pool *p, const char *why, bool wake)
{
    pthread_mutex_lock(&p->mu);
    snprintf(p->broken, sizeof p->broken, "%.190s", why);
    if (wake)
        pthread_cond_broadcast(&p->cv_ready);
    pthread_mutex_unlock(&p->mu);
}

/* A spent zygote is replaced, at most once per backoff. */
static void recycle_if_spent(struct qjs_pool *p, struct refill *r)
{
    if (!zygote_spent(p) || (r->backoff_ms && (int64_t)clock_mono_ms() < r->retry_ms))
        return;
    if (zygote_recycle(p, &r->err) < 0) {
        char why[sizeof p->broken];
        snprintf(why, sizeof why, "recycling the zygote: %.170s", r->err.msg);
        say_broken(p, why, false);
        r->backoff_ms = next_backoff(r->backoff_ms);
        r->retry_ms = (int64_t)clock_mono_ms() + r->backoff_ms;
    } else {
        r->backoff_ms = 0;
    }
}

/* A zygote to fork from: started again (after the backoff) when the last one stopped. */
static bool have_zygote(struct qjs_pool *p, struct refill *r)
{
    if (p->zyg_fd >= 0)
        return true;
    if (r->backoff_ms)
        usleep(r->backoff_ms * 1000);
    if (zygote_start(p, &r->err) < 0) {
        say_broken(p, r->err.msg, true);
        r->backoff_ms = next_backoff(r->backoff_ms);
        return false;
    }
    return true;
}

/* One batch of fresh workers forked and put in the ring (ended when the pool stopped or filled
 * meanwhile). */
static void add_batch(struct qjs_pool *p, size_t need, struct refill *r)
{
    struct qjs_worker fresh[POOL_BATCH];
    size_t got = 0;
    /* A spent zygote that could not be replaced still serves (within the backoff): better a
     * run on an old layout than no run. Otherwise never past its fork budget. */
    size_t left = p->zyg_forks < p->cfg.zygote_forks ? p->cfg.zygote_forks - p->zyg_forks : POOL_BATCH;
    size_t batch = need > POOL_BATCH ? POOL_BATCH : need;
    if (spawn_batch(p, batch > left ? left : batch, fresh, &got) < 0) {
        zygote_stop(p);
        say_broken(p, "zygote stopped answering; restarting it", false);
        r->backoff_ms = r->backoff_ms ? r->backoff_ms : 20;
    } else if (got > 0) {
        r->backoff_ms = 0;
    }
    pthread_mutex_lock(&p->mu);
    for (size_t i = 0; i < got; i++) {
        if (p->stop || p->n >= p->cfg.size) {
            qjs_worker_end(&fresh[i]);
            continue;
        }
        p->ring[(p->head + p->n) % p->cfg.size] = fresh[i];
        p->n++;
    }
    pthread_cond_broadcast(&p->cv_ready);
    pthread_mutex_unlock(&p->mu);
}

static void *refill_main(void *arg)
{
    struct qjs_pool *p = arg;
    struct refill r = {0};
    int first = zygote_start(p, &r.err);
    pthread_mutex_lock(&p->mu);
    p->started = first < 0 ? -1 : 1;
    p->start_err = r.err;
    pthread_cond_broadcast(&p->cv_ready);
    pthread_mutex_unlock(&p->mu);
    if (first < 0)
        return NULL;
    for (;;) {
        pthread_mutex_lock(&p->mu);
        wait_for_work(p);
        bool stop = p->stop;
        pthread_mutex_unlock(&p->mu);
        if (stop)
            break;
        recycle_if_spent(p, &r);
        pthread_mutex_lock(&p->mu);
        size_t need = p->cfg.size - p->n;
        pthread_mutex_unlock(&p->mu);
        if (need == 0) {
            if (zygote_spent(p)) /* the recycle failed: try again after the backoff */
                usleep(r.backoff_ms * 1000);
            continue;
        }
        if (have_zygote(p, &r))
            add_batch(p, need, &r);
    }
    zygote_stop(p);
    return NULL;
}

struct qjs_pool *qjs_pool_new(const struct qjs_pool_cfg *cfg, struct plm_err *err)
{
    struct qjs_pool *p = calloc(1, sizeof *p);
    if (!p)
        return plm_fail(err, ENOMEM, PLM_E_INTERNAL, "pool: out of memory"), NULL;
    p->cfg = *cfg;
    p->zyg_fd = -1;
    p->zyg_pid = -1;
    p->ring = calloc(cfg->size, sizeof *p->ring);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_mutex_init(&p->mu, NULL);
    pthread_cond_init(&p->cv_ready, &ca);
    pthread_cond_init(&p->cv_refill, &ca);
    pthread_cond_init(&p->cv_reap, &ca);
    pthread_condattr_destroy(&ca);
    if (!p->ring || pthread_create(&p->reaper, NULL, reaper_main, p) != 0) {
        free(p->ring);
        free(p);
        return plm_fail(err, errno, PLM_E_INTERNAL, "pool: cannot start"), NULL;
    }
    if (pthread_create(&p->thread, NULL, refill_main, p) != 0) {
        pthread_mutex_lock(&p->mu);
        p->stop = true;
        pthread_cond_broadcast(&p->cv_reap);
        pthread_mutex_unlock(&p->mu);
        pthread_join(p->reaper, NULL);
        free(p->ring);
        free(p);
        return plm_fail(err, errno, PLM_E_INTERNAL, "pool: cannot start"), NULL;
    }
    pthread_mutex_lock(&p->mu);
    while (p->started == 0)
        pthread_cond_wait(&p->cv_ready, &p->mu);
    int started = p->started;
    if (started < 0 && err)
        *err = p->start_err;
    pthread_mutex_unlock(&p->mu);
    if (started < 0) {
        qjs_pool_free(p);
        return NULL;
    }
    return p;
}

void qjs_pool_free(struct qjs_pool *p)
{
    if (!p)
        return;
    pthread_mutex_lock(&p->mu);
    p->stop = true;
    pthread_cond_broadcast(&p->cv_refill);
    pthread_cond_broadcast(&p->cv_ready);
    pthread_cond_broadcast(&p->cv_reap);
    pthread_mutex_unlock(&p->mu);
    pthread_join(p->thread, NULL);
    pthread_join(p->reaper, NULL); /* it drains its queue before leaving */
    for (size_t i = 0; i < p->n; i++)
        qjs_worker_end(&p->ring[(p->head + i) % p->cfg.size]);
    pthread_cond_destroy(&p->cv_reap);
    pthread_cond_destroy(&p->cv_ready);
    pthread_cond_destroy(&p->cv_refill);
    pthread_mutex_destroy(&p->mu);
    free(p->ring);
    free(p);
}

int qjs_pool_take(struct qjs_pool *p, uint32_t wait_ms, struct qjs_worker *out, struct plm_err *err)
{
    struct timespec dl;
    clock_gettime(CLOCK_MONOTONIC, &dl);
    dl.tv_sec += wait_ms / 1000;
    dl.tv_nsec += (long)(wait_ms % 1000) * 1000000;
    if (dl.tv_nsec >= 1000000000) {
        dl.tv_sec++;
        dl.tv_nsec -= 1000000000;
    }
    pthread_mutex_lock(&p->mu);
    while (p->n == 0 && !p->stop) {
        pthread_cond_signal(&p->cv_refill);
        if (pthread_cond_timedwait(&p->cv_ready, &p->mu, &dl) == ETIMEDOUT && p->n == 0) {
            char why[sizeof p->broken];
            snprintf(why, sizeof why, "%s", p->broken[0] ? p->broken : "pool busy");
            pthread_mutex_unlock(&p->mu);
            return plm_fail(err, ETIMEDOUT, PLM_E_INTERNAL,
                               "no quickjs worker within %u ms: %s", wait_ms, why);
        }
    }
    if (p->stop) {
        pthread_mutex_unlock(&p->mu);
        return plm_fail(err, 0, PLM_E_INTERNAL, "quickjs provider is shutting down");
    }
    *out = p->ring[p->head];
    p->head = (p->head + 1) % p->cfg.size;
    p->n--;
    pthread_cond_signal(&p->cv_refill);
    pthread_mutex_unlock(&p->mu);
    return 0;
}

unsigned qjs_pool_ns(struct qjs_pool *p)
{
    pthread_mutex_lock(&p->mu);
    unsigned ns = p->ns;
    pthread_mutex_unlock(&p->mu);
    return ns;
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
    pthread_mutex_lock(&p->mu);
    bool up = p->zygote_up && !p->stop;
    pthread_mutex_unlock(&p->mu);
    return up;
}
