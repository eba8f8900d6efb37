/* session_registry_test.c: caps (§3.2), simultaneous opens, least-recently-used replacement,
 * tombstones, one waiter per turn, timer generations (sessions.md §8 items 12, 13, 16-18, 20-22,
 * 31, 36). */
#include "session_registry.h"

#include <pthread.h>
#include <stdatomic.h>
#include <string.h>
#include <unistd.h>

#include "unit.h"

static struct sreg_session *open_one(struct sreg *r, const char *caller, const char *owner, uint64_t now)
{
    struct sreg_reservation res;
    struct plm_err err = {0};
    if (sreg_reserve(r, &res, caller, owner, &err) < 0)
        return NULL;
    for (size_t i = 0; i < res.n_victims; i++)
        sreg_victim_done(r, &res, i, true);
    struct sreg_session *s = sreg_commit(r, &res, (void *)1, now);
    return s;
}

/* Simultaneous opens against a cap of 1: exactly one reservation wins. */
static struct sreg *shared;
static atomic_int winners, losers;
static pthread_barrier_t gate;
static void *racer(void *arg)
{
    (void)arg;
    struct sreg_reservation res;
    struct plm_err err = {0};
    pthread_barrier_wait(&gate);
    if (sreg_reserve(shared, &res, "c", NULL, &err) == 0) {
        atomic_fetch_add(&winners, 1);
        usleep(20000); /* the provider "opening" */
        sreg_unreserve(shared, &res);
    } else if (err.kind == PLM_E_CAPACITY && err.refusal == PLM_REFUSAL_CAPACITY) {
        atomic_fetch_add(&losers, 1);
    }
    return NULL;
}

struct waiter_arg {
    struct sreg *r;
    struct sreg_session *s;
    int rc;
    struct plm_err err;
};
static void *waiter(void *p)
{
    struct waiter_arg *a = p;
    a->rc = sreg_turn_take(a->r, a->s, 5000, &a->err);
    if (a->rc == 0)
        sreg_turn_give(a->r, a->s);
    return NULL;
}

int main(void)
{
    struct plm_err err = {0};
    CHECK(strcmp(plm_session_end_name(PLM_END_REPLACED), "replaced") == 0);

    /* daemon-wide cap */
    struct sreg *r = sreg_new(&(struct sreg_cfg){.max_sessions = 2});
    struct sreg_session *a = open_one(r, "c1", NULL, 1), *b = open_one(r, "c2", NULL, 2);
    CHECK(a && b && strlen(a->id) == 32 && strcmp(a->id, b->id) != 0);
    char fp[PLM_HEX_SHA256];
    rec_session_fingerprint(a->id, fp);
    CHECK_STR(a->fp, fp);
    struct sreg_reservation res;
    CHECK(sreg_reserve(r, &res, "c3", NULL, &err) < 0 && err.kind == PLM_E_CAPACITY &&
          err.refusal == PLM_REFUSAL_CAPACITY && strstr(err.msg, "most this daemon keeps"));
    /* lookup is bound to the caller: a foreign caller and an unknown id are the same miss */
    struct sreg_session *hit = sreg_lookup(r, a->id, "c1", 3);
    CHECK(hit == a && a->claimed);
    sreg_put(r, hit);
    CHECK(sreg_lookup(r, a->id, "c2", 3) == NULL);
    CHECK(sreg_lookup(r, "00000000000000000000000000000000", "c1", 3) == NULL);
    CHECK(sreg_lookup(r, "short", "c1", 3) == NULL);
    /* a close (remove) frees the place; a second lookup misses */
    sreg_remove(r, a);
    CHECK(sreg_lookup(r, a->id, "c1", 3) == NULL);
    sreg_put(r, a);
    struct sreg_session *c = open_one(r, "c3", NULL, 4);
    CHECK(c != NULL);
    /* an ended session frees its place but stays as a tombstone for its owner's close */
    sreg_set_end(r, c, PLM_END_EXPIRED, "lifetime passed");
    struct sreg_counts k;
    sreg_counts(r, &k);
    CHECK(k.open == 1 && k.tombstones == 1);
    hit = sreg_lookup(r, c->id, "c3", 5);
    CHECK(hit == c && sreg_end_of(r, c, NULL, 0) == PLM_END_EXPIRED);
    sreg_put(r, hit);
    /* the first end wins; UNCLAIMED overrides only CLOSED */
    sreg_set_end(r, c, PLM_END_UNCLAIMED, "x");
    CHECK(sreg_end_of(r, c, NULL, 0) == PLM_END_EXPIRED);
    /* a tombstone past 10 minutes is a miss, and forgotten once its handle is gone */
    uint64_t later = c->ended_ms + SREG_TOMBSTONE_MS + 1;
    CHECK(sreg_lookup(r, c->id, "c3", later) == NULL);
    CHECK(sreg_take_handle(r, c) == (void *)1 && sreg_take_handle(r, c) == NULL);
    struct sreg_due due[4];
    CHECK(sreg_due(r, later, due, 4) == 0);
    sreg_counts(r, &k);
    CHECK(k.tombstones == 0 && k.open == 1);
    sreg_put(r, c);
    sreg_remove(r, b);
    sreg_put(r, b);
    sreg_free(r);

    /* per-caller cap counts every open session; other callers unaffected (item 16) */
    r = sreg_new(&(struct sreg_cfg){.max_sessions = 10, .per_caller = 2});
    a = open_one(r, "u", NULL, 1);
    b = open_one(r, "u", NULL, 2);
    CHECK(sreg_reserve(r, &res, "u", NULL, &err) < 0 && strstr(err.msg, "most one caller keeps"));
    c = open_one(r, "v", NULL, 3);
    CHECK(c != NULL);
    sreg_remove(r, a);
    sreg_put(r, a);
    a = open_one(r, "u", NULL, 4);
    CHECK(a != NULL);
    /* a reservation counts while the provider opens (item 13) and gives its place back */
    CHECK(sreg_reserve(r, &res, "w", NULL, &err) == 0);
    sreg_counts(r, &k);
    CHECK(k.opening == 1);
    sreg_unreserve(r, &res);
    sreg_counts(r, &k);
    CHECK(k.opening == 0);
    sreg_put(r, a);
    sreg_put(r, b);
    sreg_put(r, c);
    sreg_free(r);

    /* per-owner cap 2: the third open replaces the least recently used (item 17) */
    r = sreg_new(&(struct sreg_cfg){.max_sessions = 3, .per_owner = 2});
    struct sreg_session *o1 = open_one(r, "p", "u1", 10), *o2 = open_one(r, "p", "u1", 20);
    struct sreg_session *other = open_one(r, "q", "u1", 5); /* another caller's u1 never meets */
    sreg_touch(r, o1, 30);                                 /* o2 is now the least recently used */
    CHECK(sreg_reserve(r, &res, "p", "u1", &err) == 0 && res.n_victims == 1 && res.victims[0] == o2);
    /* the daemon is full (3), yet the victim's place passes to this open (item 19) */
    CHECK(o2->busy); /* no call can start on a victim */
    sreg_victim_done(r, &res, 0, true);
    struct sreg_session *o3 = sreg_commit(r, &res, (void *)1, 40);
    CHECK(o3 != NULL && sreg_end_of(r, o2, NULL, 0) == PLM_END_REPLACED && !o2->busy);
    CHECK(sreg_end_of(r, o1, NULL, 0) == PLM_END_NONE && sreg_end_of(r, other, NULL, 0) == PLM_END_NONE);
    /* a refused open closes nothing: the victims come back (item 20) */
    CHECK(sreg_reserve(r, &res, "p", "u1", &err) == 0 && res.n_victims == 1 && res.victims[0] == o1);
    sreg_unreserve(r, &res);
    CHECK(!o1->replaced && !o1->busy && sreg_end_of(r, o1, NULL, 0) == PLM_END_NONE);
    /* a victim whose close failed stays open and counted (item 21) */
    CHECK(sreg_reserve(r, &res, "p", "u1", &err) == 0 && res.n_victims == 1);
    sreg_victim_done(r, &res, 0, false);
    sreg_unreserve(r, &res);
    sreg_counts(r, &k);
    CHECK(k.open == 3 && !o1->replaced);
    /* every session of the owner busy: refused, nothing closed (item 18) */
    CHECK(sreg_turn_try(r, o1) && sreg_turn_try(r, o3));
    CHECK(sreg_reserve(r, &res, "p", "u1", &err) < 0 && err.refusal == PLM_REFUSAL_CAPACITY &&
          strstr(err.msg, "none can be closed now"));
    CHECK(!o1->replaced && !o3->replaced);
    sreg_turn_give(r, o1);
    sreg_turn_give(r, o3);
    /* an ended session is no victim and keeps its end (item 22) */
    sreg_set_end(r, o1, PLM_END_DISK_EXCEEDED, "disk");
    CHECK(sreg_reserve(r, &res, "p", "u1", &err) == 0 && res.n_victims == 0);
    sreg_unreserve(r, &res);
    CHECK(sreg_end_of(r, o1, NULL, 0) == PLM_END_DISK_EXCEEDED);
    /* no owner: uncounted by the per-owner cap */
    CHECK(sreg_reserve(r, &res, "p", "", &err) == 0 && res.n_victims == 0);
    sreg_unreserve(r, &res);

    /* one waiter per turn (item 31) */
    CHECK(sreg_turn_try(r, o3));
    pthread_t t;
    struct waiter_arg w1 = {.r = r, .s = o3};
    pthread_create(&t, NULL, waiter, &w1);
    for (int i = 0; i < 5000 && __atomic_load_n(&o3->waiters, __ATOMIC_SEQ_CST) != 1; i++)
        usleep(1000); /* until the first waiter is parked */
    CHECK(sreg_turn_take(r, o3, 1000, &err) < 0 && err.kind == PLM_E_CAPACITY &&
          strstr(err.msg, "already waiting"));
    CHECK(!sreg_turn_try(r, o3)); /* a timer never jumps the queue */
    sreg_turn_give(r, o3);
    pthread_join(t, NULL);
    CHECK(w1.rc == 0);
    /* a waiter that runs out of time is refused, marked capacity */
    CHECK(sreg_turn_try(r, o3));
    CHECK(sreg_turn_take(r, o3, 50, &err) < 0 && err.kind == PLM_E_DEADLINE && err.refusal == PLM_REFUSAL_CAPACITY);
    sreg_turn_give(r, o3);

    /* timers: due ones are handed out once; re-arming makes the old generation stale */
    sreg_arm(r, o3, 100);
    CHECK(sreg_due(r, 99, due, 4) == 0);
    CHECK(sreg_due(r, 100, due, 4) == 1 && due[0].s == o3);
    uint64_t g = due[0].gen;
    CHECK(sreg_gen_current(r, o3, g));
    sreg_arm(r, o3, 500);
    CHECK(!sreg_gen_current(r, o3, g));
    sreg_put(r, due[0].s);
    CHECK(sreg_due(r, 200, due, 4) == 0);
    sreg_arm(r, o3, 0);
    CHECK(sreg_due(r, 1000, due, 4) == 0);

    sreg_put(r, o1);
    sreg_put(r, o2);
    sreg_put(r, o3);
    sreg_put(r, other);
    sreg_free(r);

    /* simultaneous opens at cap 1: one wins, the other is refused before any provider (item 13) */
    for (int round = 0; round < 20; round++) {
        shared = sreg_new(&(struct sreg_cfg){.max_sessions = 1});
        atomic_store(&winners, 0);
        atomic_store(&losers, 0);
        pthread_barrier_init(&gate, NULL, 4);
        pthread_t ts[4];
        for (int i = 0; i < 4; i++)
            pthread_create(&ts[i], NULL, racer, NULL);
        for (int i = 0; i < 4; i++)
            pthread_join(ts[i], NULL);
        pthread_barrier_destroy(&gate);
        if (atomic_load(&winners) + atomic_load(&losers) != 4 || atomic_load(&winners) < 1)
            CHECK(!"race accounting");
        sreg_free(shared);
    }
    /* sequential after the race: the place was given back */
    shared = sreg_new(&(struct sreg_cfg){.max_sessions = 1});
    CHECK(sreg_reserve(shared, &res, "c", NULL, &err) == 0);
    struct sreg_reservation res2;
    CHECK(sreg_reserve(shared, &res2, "d", NULL, &err) < 0);
    sreg_unreserve(shared, &res);
    CHECK(sreg_reserve(shared, &res2, "d", NULL, &err) == 0);
    sreg_unreserve(shared, &res2);
    sreg_free(shared);
    return unit_done();
}
