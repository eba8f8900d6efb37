/* pool.h: the one single-use pool every provider keeps its ready sandboxes in (issue 25).
 * A FIFO ring of fixed-size items (copied in and out: a pid and an fd, a VM's handles), filled
 * by one refill thread through the provider's ops, emptied by takes; nothing is ever handed out
 * twice or returned.
 * Owns: the ring, every item in it (until a take hands it out or ops->kill ends it) and the
 *   refill thread.
 * Invariant: every ops callback runs without the pool's lock held. fill (and thread_start,
 *   thread_end) run ON the refill thread, which lives from plm_pool_start() until plm_pool_free():
 *   a child's parent-death signal (PR_SET_PDEATHSIG) is bound to the thread that forked it, not
 *   the process, so children a provider starts in fill (or a zygote started in thread_start)
 *   outlive every request thread and die only when the pool is freed. A provider that starts
 *   children elsewhere (microvm's make-it-now fallback) binds them to that thread instead. */
#pragma once
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "err.h"

struct plm_pool;

struct plm_pool_ops {
    /* Refill thread. Makes up to `want` items into items[] (item_size bytes each, contiguous) and
     * sets *got. 0: the batch is done (err->msg non-empty keeps a warning as the pool's last
     * error; empty clears it). -1: it failed (err says why; the *got items made before the failure
     * still count): the thread backs off (backoff_min_ms doubling up to backoff_max_ms, reset by
     * the next 0) and the text is kept for takes that time out; so does a 0 that made nothing (no
     * spin). want is 0 only for the tending call of idle_until below. */
    int (*fill)(void *ctx, void *items, size_t want, size_t *got, struct plm_err *err);
    /* Ends an item that will never be handed out: dropped at take as dead, made when the ring was
     * full or stopping, drained, or still ready at free. Any thread. */
    void (*kill)(void *ctx, void *item);
    /* Optional, the taking thread: whether a ready item is still usable. A dead one is killed and
     * skipped. May change the item (to record that it was reaped) before kill sees it. */
    bool (*alive)(void *ctx, void *item);
    /* Optional, refill thread, first: what fill needs for its whole life (quickjs's zygote). A
     * failure makes plm_pool_start() fail with its err. */
    int (*thread_start)(void *ctx, struct plm_err *err);
    /* Optional, refill thread, last (after thread_start, failed or not): releases what it set up. */
    void (*thread_end)(void *ctx);
    /* Optional, refill thread: while the ring is full the thread sleeps until this CLOCK_MONOTONIC
     * millisecond (0: until a take or free), then calls fill with want 0 so that the provider can
     * tend what it owns (quickjs retires an old zygote). */
    uint64_t (*idle_until)(void *ctx);
    /* Optional, refill thread: the ring was full for the first time. */
    void (*on_full)(void *ctx);
};

struct plm_pool_cfg {
    size_t item_size;         /* bytes of one item */
    uint32_t size;            /* ready items to keep (>= 1) */
    uint32_t batch;           /* most items one fill call makes (>= 1) */
    uint32_t backoff_min_ms;  /* first wait after a failed fill (>= 1) */
    uint32_t backoff_max_ms;  /* the doubling stops here */
};

struct plm_pool_stats {
    uint32_t ready;    /* in the ring now */
    uint64_t made;     /* items fill made */
    uint64_t taken;    /* handed out */
    uint64_t dead;     /* found dead at take, killed */
    uint64_t failures; /* fill calls that failed */
};

/* The pool, not yet filling. NULL with err (ENOMEM) on failure. ops and ctx must outlive it. */
struct plm_pool *plm_pool_new(const struct plm_pool_cfg *cfg, const struct plm_pool_ops *ops, void *ctx,
                              struct plm_err *err);
/* Starts the refill thread; returns once ops->thread_start (if any) has answered, with its err when
 * it failed (the thread has then ended; only free() is left to do). */
int plm_pool_start(struct plm_pool *p, struct plm_err *err);
/* Stops the refill thread (waking it at once from any backoff or idle wait) and joins it, then kills
 * every item still ready. Takers must be gone. NULL-safe. */
void plm_pool_free(struct plm_pool *p);
/* The oldest live ready item into *item, waiting up to wait_ms for the refill thread (0: do not
 * wait). -1 with err: ETIMEDOUT with kind PLM_E_UNAVAILABLE and the last fill failure as its text
 * ("" when none), or ECANCELED while the pool is stopping. */
int plm_pool_take(struct plm_pool *p, uint32_t wait_ms, void *item, struct plm_err *err);
/* Takes every ready item out and kills it (quickjs: the workers of a zygote retired for age).
 * From the ops on the refill thread only (it uses the refill thread's spare item). */
void plm_pool_drain(struct plm_pool *p);
void plm_pool_stats(struct plm_pool *p, struct plm_pool_stats *out);
