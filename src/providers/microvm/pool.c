/* pool.c: booted (or restored), seeded, single-use VMs waiting for their one request, refilled
 * by one background thread (as the quickjs and docker pools are).
 * Owns: every VM in the ring and the refill thread. A taken VM belongs to its run.
 * Invariant: a VM enters the ring only after its SEED was answered (its entropy is its own); a VM
 *   is never handed out twice; free() joins the thread and kills every VM still waiting.
 *   The thread that starts a VM is its parent-death thread: pool VMs are started by the refill
 *   thread, which lives until free(). */
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>

#include "mv_int.h"

struct mv_pool {
    struct mv_state *s;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    struct mv_vm ready[MV_MAX_POOL];
    uint32_t n, size;
    bool stop, started, announced; /* announced: the first time it was full was logged */
    pthread_t thread;
    char last_error[512];
};

/* One seeded VM: restored from the template when there is one, else cold-booted. */
static int make_vm(struct mv_state *s, struct mv_vm *vm, struct plm_err *err)
{
    enum mv_boot how = s->template_fd >= 0 ? MV_BOOT_RESTORE : MV_BOOT_COLD;
    if (mv_vm_start(s, how, s->kvm, MV_BOOT_TIMEOUT_MS, vm, err) < 0)
        return -1;
    if (mv_vm_seed(vm, how == MV_BOOT_RESTORE ? MV_SEED_TIMEOUT_MS : MV_SEED_TIMEOUT_MS, err) < 0) {
        mv_vm_kill(vm);
        return -1;
    }
    return 0;
}

static void *refill(void *arg)
{
    struct mv_pool *p = arg;
    pthread_mutex_lock(&p->mu);
    while (!p->stop) {
        if (p->n >= p->size) {
            pthread_cond_wait(&p->cv, &p->mu);
            continue;
        }
        pthread_mutex_unlock(&p->mu);
        struct mv_vm vm;
        struct plm_err err = {0};
        int r = make_vm(p->s, &vm, &err);
        pthread_mutex_lock(&p->mu);
        if (r < 0) {
            snprintf(p->last_error, sizeof p->last_error, "%s", err.msg);
            /* Back off, but wake at once for free(). */
            struct timespec ts;
            clock_gettime(CLOCK_REALTIME, &ts);
            ts.tv_sec += 1;
            pthread_cond_timedwait(&p->cv, &p->mu, &ts);
            continue;
        }
        if (p->stop || p->n >= p->size) {
            pthread_mutex_unlock(&p->mu);
            mv_vm_kill(&vm);
            pthread_mutex_lock(&p->mu);
            continue;
        }
        p->ready[p->n++] = vm;
        pthread_cond_broadcast(&p->cv); /* a session open may be waiting for it */
        if (p->n == p->size && !p->announced) {
            p->announced = true;
            plm_progress("microvm", "pool", "%s pool full: %u VMs ready", p->s->proj ? "snippet" : "project", p->size);
        }
    }
    pthread_mutex_unlock(&p->mu);
    return NULL;
}

struct mv_pool *mv_pool_new(struct mv_state *s, uint32_t size, struct plm_err *err)
{
    struct mv_pool *p = calloc(1, sizeof *p);
    if (!p) {
        plm_fail(err, ENOMEM, PLM_E_INTERNAL, "microvm: out of memory");
        return NULL;
    }
    p->s = s;
    p->size = size > MV_MAX_POOL ? MV_MAX_POOL : size;
    pthread_mutex_init(&p->mu, NULL);
    pthread_cond_init(&p->cv, NULL);
    int e = pthread_create(&p->thread, NULL, refill, p);
    if (e) {
        pthread_mutex_destroy(&p->mu);
        pthread_cond_destroy(&p->cv);
        free(p);
        plm_fail(err, e, PLM_E_INTERNAL, "microvm: refill thread: %s", strerror(e));
        return NULL;
    }
    p->started = true;
    return p;
}

/* Under p->mu: the next ready VM that is still alive, or false. */
static bool take_ready(struct mv_pool *p, struct mv_vm *vm)
{
    while (p->n > 0) {
        *vm = p->ready[--p->n];
        pthread_cond_signal(&p->cv);
        /* A VM that died while it waited (killed from outside) is dropped, not handed out. */
        struct pollfd pf = {.fd = vm->chan, .events = POLLIN | POLLRDHUP};
        pid_t gone = waitpid(vm->pid, NULL, WNOHANG);
        if (gone != 0 || poll(&pf, 1, 0) != 0) {
            /* Exited (now reaped: never signal its pid again), or its channel closed or spoke
             * unasked: gone or going. */
            if (gone == vm->pid)
                vm->pid = -1;
            mv_vm_kill(vm);
            continue;
        }
        return true;
    }
    return false;
}

int mv_pool_take(struct mv_pool *p, struct mv_vm *vm, struct plm_err *err)
{
    pthread_mutex_lock(&p->mu);
    bool got = take_ready(p, vm);
    pthread_cond_signal(&p->cv);
    pthread_mutex_unlock(&p->mu);
    if (got)
        return 0;
    /* Empty: start one in this thread (it dies with this thread, after the run at the latest). */
    return make_vm(p->s, vm, err);
}

int mv_pool_take_parked(struct mv_pool *p, uint32_t timeout_ms, struct mv_vm *vm, struct plm_err *err)
{
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_sec += timeout_ms / 1000;
    until.tv_nsec += (long)(timeout_ms % 1000) * 1000000;
    if (until.tv_nsec >= 1000000000) {
        until.tv_sec++;
        until.tv_nsec -= 1000000000;
    }
    pthread_mutex_lock(&p->mu);
    int r = 0;
    while (!take_ready(p, vm)) {
        pthread_cond_signal(&p->cv);
        if (p->stop || pthread_cond_timedwait(&p->cv, &p->mu, &until) == ETIMEDOUT) {
            r = plm_fail(err, ETIMEDOUT, PLM_E_UNAVAILABLE,
                            "microvm: no VM came up within %u ms%s%s", timeout_ms, p->last_error[0] ? ": " : "",
                            p->last_error);
            break;
        }
    }
    pthread_mutex_unlock(&p->mu);
    return r;
}

void mv_pool_free(struct mv_pool *p)
{
    if (!p)
        return;
    pthread_mutex_lock(&p->mu);
    p->stop = true;
    pthread_cond_broadcast(&p->cv);
    pthread_mutex_unlock(&p->mu);
    if (p->started)
        pthread_join(p->thread, NULL);
    for (uint32_t i = 0; i < p->n; i++)
        mv_vm_kill(&p->ready[i]);
    pthread_mutex_destroy(&p->mu);
    pthread_cond_destroy(&p->cv);
    free(p);
}
