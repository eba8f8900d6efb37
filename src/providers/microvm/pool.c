/* pool.c: booted (or restored), seeded, single-use VMs waiting for their one request, on the
 * core pool (core/pool.h): its refill thread makes one VM per fill.
 * Owns: every VM in the pool (through core/pool). A taken VM belongs to its run.
 * Invariant: a VM enters the pool only after its SEED was answered (its entropy is its own); a VM
 *   is never handed out twice; free() joins the thread and kills every VM still waiting.
 *   The thread that starts a VM is its parent-death thread: pool VMs are started by the refill
 *   thread (core/pool runs fill there), which lives until free(). */
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "../../core/pool.h"
#include "mv_int.h"

struct mv_pool {
    struct mv_state *s;
    uint32_t size;
    struct plm_pool *pool;
};

/* One seeded VM: restored from the template when there is one, else cold-booted. */
static int make_vm(struct mv_state *s, struct mv_vm *vm, struct plm_err *err)
{
    enum mv_boot how = s->template_fd >= 0 ? MV_BOOT_RESTORE : MV_BOOT_COLD;
    if (mv_vm_start(s, how, s->kvm, MV_BOOT_TIMEOUT_MS, vm, err) < 0)
        return -1;
    if (mv_vm_seed(vm, MV_SEED_TIMEOUT_MS, err) < 0) {
        mv_vm_kill(vm);
        return -1;
    }
    return 0;
}

static int pool_fill(void *ctx, void *items, size_t want, size_t *got, struct plm_err *err)
{
    struct mv_pool *p = ctx;
    if (want == 0)
        return 0;
    if (make_vm(p->s, items, err) < 0)
        return -1;
    *got = 1;
    return 0;
}

static void pool_kill(void *ctx, void *item)
{
    (void)ctx;
    mv_vm_kill(item);
}

/* A VM that died while it waited (killed from outside) is dropped, not handed out. */
static bool pool_alive(void *ctx, void *item)
{
    (void)ctx;
    struct mv_vm *vm = item;
    struct pollfd pf = {.fd = vm->chan, .events = POLLIN | POLLRDHUP};
    pid_t gone = waitpid(vm->pid, NULL, WNOHANG);
    if (gone == 0 && poll(&pf, 1, 0) == 0)
        return true;
    /* Exited (now reaped: never signal its pid again), or its channel closed or spoke unasked:
     * gone or going. */
    if (gone == vm->pid)
        vm->pid = -1;
    return false;
}

static void pool_full(void *ctx)
{
    struct mv_pool *p = ctx;
    plm_progress("microvm", "pool", "%s pool full: %u VMs ready", p->s->proj ? "snippet" : "project", p->size);
}

static const struct plm_pool_ops mv_pool_ops = {
    .fill = pool_fill, .kill = pool_kill, .alive = pool_alive, .on_full = pool_full};

struct mv_pool *mv_pool_new(struct mv_state *s, uint32_t size, struct plm_err *err)
{
    struct mv_pool *p = calloc(1, sizeof *p);
    if (!p) {
        plm_fail(err, ENOMEM, PLM_E_INTERNAL, "microvm: out of memory");
        return NULL;
    }
    p->s = s;
    p->size = size > MV_MAX_POOL ? MV_MAX_POOL : size;
    /* Backoff: a failed boot is retried after 1 s (free() still wakes it at once). */
    struct plm_pool_cfg cfg = {
        .item_size = sizeof(struct mv_vm), .size = p->size, .batch = 1, .backoff_min_ms = 1000, .backoff_max_ms = 1000};
    p->pool = plm_pool_new(&cfg, &mv_pool_ops, p, err);
    if (!p->pool || plm_pool_start(p->pool, err) < 0) {
        if (err)
            plm_err_wrap(err, "microvm");
        mv_pool_free(p);
        return NULL;
    }
    return p;
}

int mv_pool_take(struct mv_pool *p, struct mv_vm *vm, struct plm_err *err)
{
    struct plm_err empty;
    if (plm_pool_take(p->pool, 0, vm, &empty) == 0)
        return 0;
    /* Empty: start one in this thread (it dies with this thread, after the run at the latest). */
    return make_vm(p->s, vm, err);
}

int mv_pool_take_parked(struct mv_pool *p, uint32_t timeout_ms, struct mv_vm *vm, struct plm_err *err)
{
    struct plm_err e;
    if (plm_pool_take(p->pool, timeout_ms, vm, &e) == 0)
        return 0;
    return plm_fail(err, ETIMEDOUT, PLM_E_UNAVAILABLE, "microvm: no VM came up within %u ms%s%s", timeout_ms,
                    e.errnum == ETIMEDOUT && e.msg[0] ? ": " : "", e.errnum == ETIMEDOUT ? e.msg : "");
}

void mv_pool_free(struct mv_pool *p)
{
    if (!p)
        return;
    plm_pool_free(p->pool);
    free(p);
}
