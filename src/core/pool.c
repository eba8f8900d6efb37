/* pool.c: the generic single-use pool (pool.h): one ring, one lock, two condvars, one refill
 * thread.
 * Owns: the ring and its items, the refill thread, the fill scratch (refill thread only).
 * Invariant: an item enters the ring once (from the scratch, under mu) and leaves it once (to a
 *   taker, or to ops->kill); ops run without mu; the hot take path is the lock and one copy. */
#include "pool.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "clock.h"

struct plm_pool {
    struct plm_pool_cfg cfg;
    const struct plm_pool_ops *ops;
    void *ctx;
    pthread_mutex_t mu;
    pthread_cond_t cv_ready;  /* takers: an item arrived, or stop */
    pthread_cond_t cv_refill; /* refill thread: an item left, or stop */
    unsigned char *ring;      /* cfg.size items, FIFO from head */
    size_t head, n;
    bool stop, announced;
    int started;              /* 0 pending, 1 running, -1 thread_start failed */
    bool joinable;
    struct plm_err start_err;
    char last_error[sizeof ((struct plm_err *)0)->msg];
    struct plm_pool_stats st;
    unsigned char *scratch;   /* cfg.batch items: fill's output (refill thread only) */
    unsigned char *spare;     /* one item: drain's (refill thread only) */
    pthread_t thread;
};

static void *slot(struct plm_pool *p, size_t i)
{
    return p->ring + ((p->head + i) % p->cfg.size) * p->cfg.item_size;
}

struct plm_pool *plm_pool_new(const struct plm_pool_cfg *cfg, const struct plm_pool_ops *ops, void *ctx,
                              struct plm_err *err)
{
    struct plm_pool *p = calloc(1, sizeof *p);
    if (p) {
        p->cfg = *cfg;
        p->cfg.size = cfg->size ? cfg->size : 1;
        p->cfg.batch = cfg->batch ? cfg->batch : 1;
        p->cfg.backoff_min_ms = cfg->backoff_min_ms ? cfg->backoff_min_ms : 1;
        if (p->cfg.backoff_max_ms < p->cfg.backoff_min_ms)
            p->cfg.backoff_max_ms = p->cfg.backoff_min_ms;
        p->ring = calloc(p->cfg.size, cfg->item_size);
        p->scratch = calloc(p->cfg.batch, cfg->item_size);
        p->spare = calloc(1, cfg->item_size);
    }
    if (!p || !p->ring || !p->scratch || !p->spare) {
        if (p) {
            free(p->ring);
            free(p->scratch);
            free(p->spare);
        }
        free(p);
        plm_fail(err, ENOMEM, PLM_E_INTERNAL, "pool: out of memory");
        return NULL;
    }
    p->ops = ops;
    p->ctx = ctx;
    pthread_mutex_init(&p->mu, NULL);
    clock_cond_init(&p->cv_ready);
    clock_cond_init(&p->cv_refill);
    return p;
}

/* Under mu, while the ring is full: sleeps until there is room, stop, or the provider's idle
 * deadline. Returns true when fill should be called (with want 0 if still full). */
static bool wait_for_room(struct plm_pool *p)
{
    if (!p->announced && p->ops->on_full) {
        p->announced = true;
        pthread_mutex_unlock(&p->mu);
        p->ops->on_full(p->ctx);
        pthread_mutex_lock(&p->mu);
        return false; /* the ring may have changed meanwhile: look again */
    }
    uint64_t due = 0;
    if (p->ops->idle_until) {
        /* Read without the lock (ops never run under it); a take meanwhile is seen just below. */
        pthread_mutex_unlock(&p->mu);
        due = p->ops->idle_until(p->ctx);
        pthread_mutex_lock(&p->mu);
    }
    if (p->stop || p->n < p->cfg.size)
        return !p->stop;
    if (!due) {
        pthread_cond_wait(&p->cv_refill, &p->mu);
        return false;
    }
    if (clock_mono_ms() >= due)
        return true;
    struct timespec dl = clock_mono_at(due);
    pthread_cond_timedwait(&p->cv_refill, &p->mu, &dl);
    return false;
}

/* Under mu: the backoff after a failed fill; takes do not cut it short, stop does. */
static void back_off(struct plm_pool *p, uint32_t ms)
{
    uint64_t until = clock_mono_ms() + ms;
    struct timespec dl = clock_mono_at(until);
    while (!p->stop && clock_mono_ms() < until)
        pthread_cond_timedwait(&p->cv_refill, &p->mu, &dl);
}

/* Under mu: the fill's items into the ring; the ones that do not fit (stop, or full) are moved to
 * the front of the scratch and their count returned, to be killed after the unlock. */
static size_t put_batch(struct plm_pool *p, size_t got)
{
    size_t extra = 0, sz = p->cfg.item_size;
    for (size_t i = 0; i < got; i++) {
        unsigned char *it = p->scratch + i * sz;
        if (p->stop || p->n >= p->cfg.size) {
            memmove(p->scratch + extra++ * sz, it, sz);
            continue;
        }
        memcpy(slot(p, p->n), it, sz);
        p->n++;
    }
    p->st.made += got;
    if (got > extra)
        pthread_cond_broadcast(&p->cv_ready);
    return extra;
}

static void refill_loop(struct plm_pool *p)
{
    uint32_t backoff = 0;
    pthread_mutex_lock(&p->mu);
    while (!p->stop) {
        if (p->n >= p->cfg.size && !wait_for_room(p))
            continue;
        size_t room = p->cfg.size - p->n;
        size_t want = room < p->cfg.batch ? room : p->cfg.batch;
        pthread_mutex_unlock(&p->mu);
        struct plm_err e = {0};
        size_t got = 0;
        int r = p->ops->fill(p->ctx, p->scratch, want, &got, &e);
        if (got > want)
            got = want; /* a provider bug must not overrun the scratch */
        pthread_mutex_lock(&p->mu);
        size_t extra = put_batch(p, got);
        snprintf(p->last_error, sizeof p->last_error, "%s", e.msg);
        if (extra) {
            pthread_mutex_unlock(&p->mu);
            for (size_t i = 0; i < extra; i++)
                p->ops->kill(p->ctx, p->scratch + i * p->cfg.item_size);
            pthread_mutex_lock(&p->mu);
        }
        if (r < 0)
            p->st.failures++;
        /* A fill that made nothing it was asked for (or a tending call that left the ring full)
         * backs off too: never a spin. */
        if (r < 0 || (!got && (want || p->n >= p->cfg.size))) {
            backoff = backoff ? (backoff * 2 > p->cfg.backoff_max_ms ? p->cfg.backoff_max_ms : backoff * 2)
                              : p->cfg.backoff_min_ms;
            back_off(p, backoff);
        } else {
            backoff = 0;
        }
    }
    pthread_mutex_unlock(&p->mu);
}

static void *refill_main(void *arg)
{
    struct plm_pool *p = arg;
    struct plm_err e = {0};
    int r = p->ops->thread_start ? p->ops->thread_start(p->ctx, &e) : 0;
    pthread_mutex_lock(&p->mu);
    p->started = r < 0 ? -1 : 1;
    p->start_err = e;
    pthread_cond_broadcast(&p->cv_ready);
    pthread_mutex_unlock(&p->mu);
    if (r == 0)
        refill_loop(p);
    if (p->ops->thread_end)
        p->ops->thread_end(p->ctx);
    return NULL;
}

int plm_pool_start(struct plm_pool *p, struct plm_err *err)
{
    int e = pthread_create(&p->thread, NULL, refill_main, p);
    if (e)
        return plm_fail(err, e, PLM_E_INTERNAL, "pool: refill thread: %s", strerror(e));
    p->joinable = true;
    pthread_mutex_lock(&p->mu);
    while (p->started == 0)
        pthread_cond_wait(&p->cv_ready, &p->mu);
    int started = p->started;
    if (started < 0 && err)
        *err = p->start_err;
    pthread_mutex_unlock(&p->mu);
    return started < 0 ? -1 : 0;
}

void plm_pool_free(struct plm_pool *p)
{
    if (!p)
        return;
    pthread_mutex_lock(&p->mu);
    p->stop = true;
    pthread_cond_broadcast(&p->cv_refill);
    pthread_cond_broadcast(&p->cv_ready);
    pthread_mutex_unlock(&p->mu);
    if (p->joinable)
        pthread_join(p->thread, NULL);
    for (size_t i = 0; i < p->n; i++)
        p->ops->kill(p->ctx, slot(p, i));
    pthread_cond_destroy(&p->cv_ready);
    pthread_cond_destroy(&p->cv_refill);
    pthread_mutex_destroy(&p->mu);
    free(p->ring);
    free(p->scratch);
    free(p->spare);
    free(p);
}

/* Under mu: the head item out into *item. */
static void pop(struct plm_pool *p, void *item)
{
    memcpy(item, slot(p, 0), p->cfg.item_size);
    p->head = (p->head + 1) % p->cfg.size;
    p->n--;
    pthread_cond_signal(&p->cv_refill);
}

int plm_pool_take(struct plm_pool *p, uint32_t wait_ms, void *item, struct plm_err *err)
{
    /* No clock reading when the caller will not wait (the quickjs take path). */
    struct timespec dl = wait_ms ? clock_mono_after(wait_ms) : (struct timespec){0};
    pthread_mutex_lock(&p->mu);
    for (;;) {
        while (p->n == 0 && !p->stop) {
            pthread_cond_signal(&p->cv_refill);
            if (!wait_ms || (pthread_cond_timedwait(&p->cv_ready, &p->mu, &dl) == ETIMEDOUT && p->n == 0)) {
                char why[sizeof p->last_error];
                snprintf(why, sizeof why, "%s", p->last_error);
                pthread_mutex_unlock(&p->mu);
                return plm_fail(err, ETIMEDOUT, PLM_E_UNAVAILABLE, "%s", why);
            }
        }
        if (p->stop) {
            pthread_mutex_unlock(&p->mu);
            return plm_fail(err, ECANCELED, PLM_E_UNAVAILABLE, "the pool is stopping");
        }
        pop(p, item);
        if (!p->ops->alive) {
            p->st.taken++;
            pthread_mutex_unlock(&p->mu);
            return 0;
        }
        pthread_mutex_unlock(&p->mu);
        bool up = p->ops->alive(p->ctx, item);
        if (!up)
            p->ops->kill(p->ctx, item);
        pthread_mutex_lock(&p->mu);
        if (up) {
            p->st.taken++;
            pthread_mutex_unlock(&p->mu);
            return 0;
        }
        p->st.dead++;
    }
}

void plm_pool_drain(struct plm_pool *p)
{
    for (;;) {
        pthread_mutex_lock(&p->mu);
        if (p->n == 0) {
            pthread_mutex_unlock(&p->mu);
            return;
        }
        pop(p, p->spare);
        pthread_mutex_unlock(&p->mu);
        p->ops->kill(p->ctx, p->spare);
    }
}

void plm_pool_stats(struct plm_pool *p, struct plm_pool_stats *out)
{
    pthread_mutex_lock(&p->mu);
    *out = p->st;
    out->ready = (uint32_t)p->n;
    pthread_mutex_unlock(&p->mu);
}
