/* pool_test.c: the generic single-use pool with a fake item (an int, numbered in the order fill
 * made it): fill, FIFO takes, no item handed out twice under concurrent takers, dead items
 * skipped and killed, a failing fill backing off with its text reported, free killing what is
 * ready and joining, and thread_start/fill/thread_end all on the refill thread. */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <string.h>
#include <unistd.h>

#include "clock.h"
#include "pool.h"
#include "unit.h"

#define MAXN 4096

struct fake {
    atomic_int next;          /* the next item's number */
    atomic_int fills, fails_left, killed, fill_calls;
    atomic_bool fail_always;
    atomic_char killed_map[MAXN];
    atomic_char dead_map[MAXN];
    pthread_t start_thread, fill_thread, end_thread;
    atomic_bool fill_on_one_thread, ended;
};

static int fake_fill(void *ctx, void *items, size_t want, size_t *got, struct plm_err *err)
{
    struct fake *f = ctx;
    atomic_fetch_add(&f->fill_calls, 1);
    if (!pthread_equal(pthread_self(), f->start_thread))
        atomic_store(&f->fill_on_one_thread, false);
    if (atomic_load(&f->fail_always) || atomic_load(&f->fails_left) > 0) {
        atomic_fetch_sub(&f->fails_left, 1);
        return plm_fail(err, EIO, PLM_E_INTERNAL, "boom %d", atomic_load(&f->fill_calls));
    }
    int *out = items;
    for (size_t i = 0; i < want; i++)
        out[i] = atomic_fetch_add(&f->next, 1);
    *got = want;
    atomic_fetch_add(&f->fills, 1);
    return 0;
}

static void fake_kill(void *ctx, void *item)
{
    struct fake *f = ctx;
    int v = *(int *)item;
    atomic_fetch_add(&f->killed, 1);
    if (v >= 0 && v < MAXN)
        atomic_fetch_add(&f->killed_map[v], 1);
}

static bool fake_alive(void *ctx, void *item)
{
    struct fake *f = ctx;
    int v = *(int *)item;
    return !(v >= 0 && v < MAXN && atomic_load(&f->dead_map[v]));
}

static int fake_start(void *ctx, struct plm_err *err)
{
    (void)err;
    struct fake *f = ctx;
    f->start_thread = pthread_self();
    return 0;
}

static void fake_end(void *ctx)
{
    struct fake *f = ctx;
    f->end_thread = pthread_self();
    atomic_store(&f->ended, true);
}

static const struct plm_pool_ops fake_ops = {.fill = fake_fill, .kill = fake_kill, .alive = fake_alive,
                                             .thread_start = fake_start, .thread_end = fake_end};

static struct plm_pool *fake_pool(struct fake *f, uint32_t size, uint32_t batch, uint32_t backoff_ms)
{
    atomic_store(&f->fill_on_one_thread, true);
    struct plm_pool_cfg cfg = {.item_size = sizeof(int), .size = size, .batch = batch,
                               .backoff_min_ms = backoff_ms, .backoff_max_ms = backoff_ms * 4};
    struct plm_err err = {0};
    struct plm_pool *p = plm_pool_new(&cfg, &fake_ops, f, &err);
    if (p && plm_pool_start(p, &err) < 0) {
        plm_pool_free(p);
        return NULL;
    }
    return p;
}

static void wait_ready(struct plm_pool *p, uint32_t n)
{
    struct plm_pool_stats st;
    for (int i = 0; i < 2000; i++) {
        plm_pool_stats(p, &st);
        if (st.ready >= n)
            return;
        usleep(1000);
    }
}

/* Fill up, FIFO order, dead ones skipped and killed, free kills the rest on the refill thread's
 * watch. */
static void test_fifo_dead_free(void)
{
    static struct fake f;
    struct plm_pool *p = fake_pool(&f, 8, 3, 10);
    CHECK(p != NULL);
    wait_ready(p, 8);
    struct plm_pool_stats st;
    plm_pool_stats(p, &st);
    CHECK(st.ready == 8 && st.made >= 8);
    atomic_store(&f.dead_map[1], 1);
    atomic_store(&f.dead_map[2], 1);
    int v = -1, w = -1;
    struct plm_err err = {0};
    CHECK(plm_pool_take(p, 0, &v, &err) == 0 && v == 0);
    CHECK(plm_pool_take(p, 0, &w, &err) == 0 && w == 3); /* 1 and 2 were dead */
    CHECK(atomic_load(&f.killed_map[1]) == 1 && atomic_load(&f.killed_map[2]) == 1);
    CHECK(atomic_load(&f.killed_map[0]) == 0 && atomic_load(&f.killed_map[3]) == 0);
    plm_pool_stats(p, &st);
    CHECK(st.dead == 2 && st.taken == 2);
    wait_ready(p, 8);
    int before = atomic_load(&f.killed);
    plm_pool_free(p);
    CHECK(atomic_load(&f.killed) - before == 8); /* everything still ready was killed */
    CHECK(atomic_load(&f.ended));
    CHECK(pthread_equal(f.end_thread, f.start_thread) && !pthread_equal(f.end_thread, pthread_self()));
    CHECK(atomic_load(&f.fill_on_one_thread));
    /* every item made is either taken (0, 3) or killed exactly once */
    int made = atomic_load(&f.next), bad = 0;
    for (int i = 0; i < made; i++)
        bad += (i == 0 || i == 3) ? atomic_load(&f.killed_map[i]) != 0 : atomic_load(&f.killed_map[i]) != 1;
    CHECK(bad == 0);
}

struct taker {
    struct plm_pool *p;
    int got[1024];
    int n;
};

static void *taker_main(void *arg)
{
    struct taker *t = arg;
    while (t->n < 200) {
        int v;
        struct plm_err err;
        if (plm_pool_take(t->p, 2000, &v, &err) < 0)
            break;
        t->got[t->n++] = v;
    }
    return NULL;
}

static void test_concurrent_takers(void)
{
    static struct fake f;
    struct plm_pool *p = fake_pool(&f, 4, 2, 10);
    CHECK(p != NULL);
    static struct taker t[4];
    pthread_t th[4];
    for (int i = 0; i < 4; i++) {
        t[i].p = p;
        pthread_create(&th[i], NULL, taker_main, &t[i]);
    }
    for (int i = 0; i < 4; i++)
        pthread_join(th[i], NULL);
    static char seen[MAXN];
    int dup = 0, total = 0;
    for (int i = 0; i < 4; i++) {
        total += t[i].n;
        for (int j = 0; j < t[i].n; j++) {
            int v = t[i].got[j];
            dup += v < 0 || v >= MAXN || seen[v]++;
            if (j > 0 && t[i].got[j] <= t[i].got[j - 1])
                dup++; /* one taker sees the ring's order */
        }
    }
    CHECK(total == 800);
    CHECK(dup == 0);
    plm_pool_free(p);
    int made = atomic_load(&f.next), both = 0;
    for (int i = 0; i < made && i < MAXN; i++)
        both += seen[i] + atomic_load(&f.killed_map[i]) != 1;
    CHECK(both == 0); /* each item made went to exactly one taker or was killed */
}

/* A failing fill backs off (a few calls, not a spin), its text reaches takers, free wakes it. */
static void test_failing_fill(void)
{
    static struct fake f;
    atomic_store(&f.fail_always, true);
    struct plm_pool *p = fake_pool(&f, 2, 1, 100);
    CHECK(p != NULL);
    int v;
    struct plm_err err = {0};
    CHECK(plm_pool_take(p, 350, &v, &err) < 0);
    CHECK(err.errnum == ETIMEDOUT && strncmp(err.msg, "boom ", 5) == 0);
    int calls = atomic_load(&f.fill_calls);
    CHECK(calls >= 2 && calls <= 5); /* 0, 100, 300 ms: backoff doubling from 100 */
    plm_err_clear(&err);
    CHECK(plm_pool_take(p, 0, &v, &err) < 0 && err.errnum == ETIMEDOUT && strstr(err.msg, "boom"));
    /* recovery: the next good fill clears the text and fills */
    atomic_store(&f.fail_always, false);
    CHECK(plm_pool_take(p, 3000, &v, &err) == 0 && v == 0);
    /* free during a long backoff returns at once */
    atomic_store(&f.fail_always, true);
    int v2;
    while (plm_pool_take(p, 0, &v2, &err) == 0)
        ;
    usleep(50000);
    uint64_t t0 = clock_mono_ms();
    plm_pool_free(p);
    CHECK(clock_mono_ms() - t0 < 300);
    CHECK(atomic_load(&f.ended));
}

static int fail_start(void *ctx, struct plm_err *err)
{
    (void)ctx;
    return plm_fail(err, EPERM, PLM_E_INTERNAL, "no zygote today");
}

static void test_start_fails(void)
{
    static struct fake f;
    static struct plm_pool_ops ops;
    ops = fake_ops;
    ops.thread_start = fail_start;
    struct plm_pool_cfg cfg = {.item_size = sizeof(int), .size = 2, .batch = 1, .backoff_min_ms = 10};
    struct plm_err err = {0};
    struct plm_pool *p = plm_pool_new(&cfg, &ops, &f, &err);
    CHECK(p != NULL);
    CHECK(plm_pool_start(p, &err) < 0 && strcmp(err.msg, "no zygote today") == 0);
    plm_pool_free(p);
    CHECK(atomic_load(&f.ended) && atomic_load(&f.fill_calls) == 0);
}

int main(void)
{
    test_fifo_dead_free();
    test_concurrent_takers();
    test_failing_fill();
    test_start_fails();
    return unit_done();
}
