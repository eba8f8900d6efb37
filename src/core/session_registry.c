/* session_registry.c: see session_registry.h. A linked list under one mutex: caps are tens to
 * thousands of sessions, every operation is a short walk, and nothing here blocks on I/O except
 * a turn waiter, which waits on the entry's own condition variable. */
#include "session_registry.h"

#include "clock.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>

struct sreg {
    pthread_mutex_t mu;
    struct sreg_cfg cfg;
    struct sreg_session *head;
    struct sreg_reservation *opening;
};

const char *plm_session_end_name(enum plm_session_end e)
{
    static const char *const names[] = {"",         "closed",   "expired",  "disk_exceeded",
                                        "main_process_ended",   "boundary_failed",
                                        "sandbox_changed",      "shutdown", "replaced",
                                        "not_found", "unclaimed"};
    return (unsigned)e < sizeof names / sizeof *names ? names[e] : "unknown";
}

struct sreg *sreg_new(const struct sreg_cfg *cfg)
{
    struct sreg *r = calloc(1, sizeof *r);
    if (!r)
        return NULL;
    pthread_mutex_init(&r->mu, NULL);
    r->cfg = *cfg;
    return r;
}

static void entry_free(struct sreg_session *s)
{
    pthread_cond_destroy(&s->turn_cv);
    free(s->caller);
    free(s->owner);
    for (size_t i = 0; i < s->n_rule_ids; i++)
        free(s->rule_ids[i]);
    free(s->rule_ids);
    for (size_t i = 0; i < s->n_grant_caps; i++)
        free(s->grant_caps[i]);
    free(s->grant_caps);
    free(s);
}

void sreg_free(struct sreg *r)
{
    if (!r)
        return;
    for (struct sreg_session *s = r->head, *next; s; s = next) {
        next = s->next;
        entry_free(s);
    }
    pthread_mutex_destroy(&r->mu);
    free(r);
}

static bool same(const char *a, const char *b) { return strcmp(a ? a : "", b ? b : "") == 0; }

/* "Open" for the caps: linked, not ended, not being replaced (§3.2). */
static bool counts(const struct sreg_session *s) { return !s->removed && s->end == PLM_END_NONE && !s->replaced; }

#define refuse(err, ...) plm_refuse(err, PLM_E_CAPACITY, PLM_REFUSAL_CAPACITY, __VA_ARGS__)

/* Picks `need` least-recently-used idle sessions of (caller, owner); false when too few. */
static bool pick_victims(struct sreg *r, struct sreg_reservation *res, const char *caller, const char *owner,
                         size_t need)
{
    if (need > SREG_MAX_VICTIMS)
        return false;
    for (size_t k = 0; k < need; k++) {
        struct sreg_session *best = NULL;
        for (struct sreg_session *s = r->head; s; s = s->next) {
            if (!counts(s) || s->busy || s->waiters || !same(s->caller, caller) || !same(s->owner, owner))
                continue;
            if (!best || s->lru < best->lru)
                best = s;
        }
        if (!best)
            return false;
        best->replaced = true; /* so the next pick skips it */
        res->victims[res->n_victims++] = best;
    }
    return true;
}

static void restore_victims(struct sreg_reservation *res)
{
    for (size_t i = 0; i < res->n_victims; i++)
        if (res->victims[i])
            res->victims[i]->replaced = false;
    res->n_victims = 0;
}

int sreg_reserve(struct sreg *r, struct sreg_reservation *res, const char *caller, const char *owner,
                 struct plm_err *err)
{
    memset(res, 0, sizeof *res);
    if (owner && !*owner)
        owner = NULL;
    res->caller = strdup(caller ? caller : "");
    res->owner = owner ? strdup(owner) : NULL;
    if (!res->caller || (owner && !res->owner)) {
        free(res->caller);
        free(res->owner);
        return plm_fail(err, ENOMEM, PLM_E_INTERNAL, "out of memory reserving a session");
    }
    pthread_mutex_lock(&r->mu);
    unsigned open_all = 0, open_caller = 0, held_owner = 0;
    for (struct sreg_session *s = r->head; s; s = s->next) {
        if (!counts(s))
            continue;
        open_all++;
        if (same(s->caller, caller)) {
            open_caller++;
            if (owner && same(s->owner, owner))
                held_owner++;
        }
    }
    unsigned opening_all = 0, opening_caller = 0, opening_owner = 0;
    for (struct sreg_reservation *o = r->opening; o; o = o->next) {
        opening_all++;
        if (same(o->caller, caller)) {
            opening_caller++;
            if (owner && same(o->owner, owner))
                opening_owner++;
        }
    }
    int rc = 0;
    /* 1. per owner: victims first, so their places pass to this open */
    if (owner && r->cfg.per_owner > 0) {
        long need = (long)held_owner + opening_owner + 1 - (long)r->cfg.per_owner;
        if (need > 0) {
            if (!pick_victims(r, res, caller, owner, (size_t)need)) {
                restore_victims(res);
                rc = refuse(err, "this owner has %u sessions open (the most one owner keeps) and none can be "
                                 "closed now",
                            held_owner);
                goto out;
            }
            open_all -= (unsigned)need;
            open_caller -= (unsigned)need;
        }
    }
    /* 2. daemon-wide */
    if (open_all + opening_all >= r->cfg.max_sessions) {
        restore_victims(res);
        rc = refuse(err, "%u sessions are open, the most this daemon keeps", open_all + opening_all);
        goto out;
    }
    /* 3. per caller */
    if (r->cfg.per_caller > 0 && open_caller + opening_caller >= r->cfg.per_caller) {
        restore_victims(res);
        rc = refuse(err, "this caller has %u sessions open, the most one caller keeps", open_caller + opening_caller);
        goto out;
    }
    for (size_t i = 0; i < res->n_victims; i++) {
        res->victims[i]->busy = true; /* no call starts on a victim */
        res->victims[i]->refs++;
    }
    res->active = true;
    res->next = r->opening;
    r->opening = res;
out:
    pthread_mutex_unlock(&r->mu);
    if (rc < 0) {
        free(res->caller);
        free(res->owner);
        res->caller = res->owner = NULL;
    }
    return rc;
}

static void unlink_reservation(struct sreg *r, struct sreg_reservation *res)
{
    for (struct sreg_reservation **pp = &r->opening; *pp; pp = &(*pp)->next)
        if (*pp == res) {
            *pp = res->next;
            break;
        }
    res->active = false;
}

static void put_locked(struct sreg *r, struct sreg_session *s);

static void settle_victim(struct sreg *r, struct sreg_session *v, bool closed)
{
    if (closed)
        v->replaced = true;
    else
        v->replaced = false;
    if (closed && (v->end == PLM_END_NONE || v->end == PLM_END_CLOSED)) {
        v->end = PLM_END_REPLACED;
        snprintf(v->end_detail, sizeof v->end_detail, "closed to make room for a newer session of the same owner");
        v->ended_ms = clock_mono_ms();
    }
    v->busy = false;
    pthread_cond_broadcast(&v->turn_cv);
    put_locked(r, v);
}

void sreg_unreserve(struct sreg *r, struct sreg_reservation *res)
{
    if (!res->active)
        return;
    pthread_mutex_lock(&r->mu);
    for (size_t i = 0; i < res->n_victims; i++)
        if (res->victims[i]) {
            settle_victim(r, res->victims[i], false);
            res->victims[i] = NULL;
        }
    res->n_victims = 0;
    unlink_reservation(r, res);
    pthread_mutex_unlock(&r->mu);
    free(res->caller);
    free(res->owner);
    res->caller = res->owner = NULL;
}

void sreg_victim_done(struct sreg *r, struct sreg_reservation *res, size_t i, bool closed)
{
    pthread_mutex_lock(&r->mu);
    if (i < res->n_victims && res->victims[i]) {
        settle_victim(r, res->victims[i], closed);
        res->victims[i] = NULL;
    }
    pthread_mutex_unlock(&r->mu);
}

static const char hexd[] = "0123456789abcdef";

struct sreg_session *sreg_commit(struct sreg *r, struct sreg_reservation *res, void *handle, uint64_t now_ms)
{
    uint8_t raw[16];
    size_t got = 0;
    while (got < sizeof raw) {
        ssize_t k = getrandom(raw + got, sizeof raw - got, 0);
        if (k < 0 && errno == EINTR)
            continue;
        if (k <= 0)
            return NULL;
        got += (size_t)k;
    }
    struct sreg_session *s = calloc(1, sizeof *s);
    if (!s)
        return NULL;
    for (size_t i = 0; i < sizeof raw; i++) {
        s->id[2 * i] = hexd[raw[i] >> 4];
        s->id[2 * i + 1] = hexd[raw[i] & 15];
    }
    rec_session_fingerprint(s->id, s->fp);
    clock_cond_init(&s->turn_cv);
    pthread_mutex_lock(&r->mu);
    /* the reservation's strings move into the entry */
    s->caller = res->caller;
    s->owner = res->owner;
    res->caller = res->owner = NULL;
    for (size_t i = 0; i < res->n_victims; i++)
        if (res->victims[i]) { /* unsettled victims stay open */
            settle_victim(r, res->victims[i], false);
            res->victims[i] = NULL;
        }
    unlink_reservation(r, res);
    s->handle = handle;
    s->lru = now_ms;
    s->refs = 2; /* the registry's and the caller's */
    s->next = r->head;
    r->head = s;
    pthread_mutex_unlock(&r->mu);
    return s;
}

struct sreg_session *sreg_lookup(struct sreg *r, const char *id, const char *caller, uint64_t now_ms)
{
    if (!id || strlen(id) != 32)
        return NULL;
    pthread_mutex_lock(&r->mu);
    struct sreg_session *hit = NULL;
    for (struct sreg_session *s = r->head; s; s = s->next) {
        /* comparing the whole id every time: the match is not a timing oracle for its prefix */
        unsigned diff = 0;
        for (size_t i = 0; i < 32; i++)
            diff |= (unsigned)(s->id[i] ^ id[i]);
        if (diff || s->removed || !same(s->caller, caller))
            continue;
        if (s->end != PLM_END_NONE && s->ended_ms && now_ms > s->ended_ms + SREG_TOMBSTONE_MS)
            continue; /* a tombstone past its time is a miss */
        hit = s;
        s->refs++;
        s->claimed = true;
        break;
    }
    pthread_mutex_unlock(&r->mu);
    return hit;
}

static void put_locked(struct sreg *r, struct sreg_session *s)
{
    (void)r;
    if (--s->refs == 0)
        entry_free(s);
}

void sreg_put(struct sreg *r, struct sreg_session *s)
{
    if (!s)
        return;
    pthread_mutex_lock(&r->mu);
    put_locked(r, s);
    pthread_mutex_unlock(&r->mu);
}

int sreg_turn_take(struct sreg *r, struct sreg_session *s, uint64_t wait_ms, struct plm_err *err)
{
    pthread_mutex_lock(&r->mu);
    if (!s->busy) {
        s->busy = true;
        pthread_mutex_unlock(&r->mu);
        return 0;
    }
    if (s->waiters > 0) {
        pthread_mutex_unlock(&r->mu);
        return plm_refuse(err, PLM_E_CAPACITY, PLM_REFUSAL_CAPACITY,
                          "another call is already waiting for this session's turn");
    }
    s->waiters++;
    struct timespec until = clock_mono_after(wait_ms);
    int rc = 0;
    while (s->busy && rc != ETIMEDOUT)
        rc = pthread_cond_timedwait(&s->turn_cv, &r->mu, &until);
    s->waiters--;
    if (s->busy) {
        pthread_mutex_unlock(&r->mu);
        return plm_refuse(err, PLM_E_DEADLINE, PLM_REFUSAL_CAPACITY,
                          "the wait for this session's turn ran out; nothing ran");
    }
    s->busy = true;
    pthread_mutex_unlock(&r->mu);
    return 0;
}

bool sreg_turn_try(struct sreg *r, struct sreg_session *s)
{
    pthread_mutex_lock(&r->mu);
    bool ok = !s->busy && !s->waiters;
    if (ok)
        s->busy = true;
    pthread_mutex_unlock(&r->mu);
    return ok;
}

void sreg_turn_give(struct sreg *r, struct sreg_session *s)
{
    pthread_mutex_lock(&r->mu);
    s->busy = false;
    pthread_cond_signal(&s->turn_cv);
    pthread_mutex_unlock(&r->mu);
}

void sreg_set_end(struct sreg *r, struct sreg_session *s, enum plm_session_end why, const char *detail)
{
    pthread_mutex_lock(&r->mu);
    bool override = (why == PLM_END_REPLACED || why == PLM_END_UNCLAIMED) && s->end == PLM_END_CLOSED;
    if (s->end == PLM_END_NONE || override) {
        s->end = why;
        snprintf(s->end_detail, sizeof s->end_detail, "%s", detail ? detail : "");
        s->ended_ms = clock_mono_ms();
        s->timer_due_ms = 0;
        s->timer_gen++;
    }
    pthread_mutex_unlock(&r->mu);
}

enum plm_session_end sreg_end_of(struct sreg *r, struct sreg_session *s, char *detail, size_t n)
{
    pthread_mutex_lock(&r->mu);
    enum plm_session_end e = s->end;
    if (detail && n)
        snprintf(detail, n, "%s", s->end_detail);
    pthread_mutex_unlock(&r->mu);
    return e;
}

void sreg_chain_get(struct sreg *r, struct sreg_session *s, uint64_t *calls, char last[PLM_HEX_SHA256])
{
    pthread_mutex_lock(&r->mu);
    *calls = s->calls;
    memcpy(last, s->last_sha256, PLM_HEX_SHA256);
    pthread_mutex_unlock(&r->mu);
}

void sreg_chain_advance(struct sreg *r, struct sreg_session *s, const char record_sha256[PLM_HEX_SHA256])
{
    pthread_mutex_lock(&r->mu);
    s->calls++;
    memcpy(s->last_sha256, record_sha256, PLM_HEX_SHA256);
    pthread_mutex_unlock(&r->mu);
}

void sreg_touch(struct sreg *r, struct sreg_session *s, uint64_t now_ms)
{
    pthread_mutex_lock(&r->mu);
    s->lru = now_ms;
    pthread_mutex_unlock(&r->mu);
}

void sreg_remove(struct sreg *r, struct sreg_session *s)
{
    pthread_mutex_lock(&r->mu);
    if (!s->removed) {
        s->removed = true;
        s->timer_due_ms = 0;
        s->timer_gen++;
        for (struct sreg_session **pp = &r->head; *pp; pp = &(*pp)->next)
            if (*pp == s) {
                *pp = s->next;
                break;
            }
        put_locked(r, s); /* the registry's reference; the caller still holds its own */
    }
    pthread_mutex_unlock(&r->mu);
}

void sreg_set_suspended(struct sreg *r, struct sreg_session *s, bool suspended, bool holds_slot)
{
    pthread_mutex_lock(&r->mu);
    s->suspended = suspended;
    s->holds_slot = holds_slot;
    pthread_mutex_unlock(&r->mu);
}

bool sreg_is_suspended(struct sreg *r, struct sreg_session *s, bool *holds_slot)
{
    pthread_mutex_lock(&r->mu);
    bool v = s->suspended;
    if (holds_slot)
        *holds_slot = s->holds_slot;
    pthread_mutex_unlock(&r->mu);
    return v;
}

void sreg_arm(struct sreg *r, struct sreg_session *s, uint64_t due_ms)
{
    pthread_mutex_lock(&r->mu);
    s->timer_gen++;
    s->timer_due_ms = s->end == PLM_END_NONE && !s->removed ? due_ms : 0;
    pthread_mutex_unlock(&r->mu);
}

size_t sreg_due(struct sreg *r, uint64_t now_ms, struct sreg_due *out, size_t n)
{
    size_t k = 0;
    pthread_mutex_lock(&r->mu);
    for (struct sreg_session **pp = &r->head; *pp;) {
        struct sreg_session *s = *pp;
        if (s->end != PLM_END_NONE && !s->handle && s->ended_ms && now_ms > s->ended_ms + SREG_TOMBSTONE_MS) {
            *pp = s->next; /* a tombstone nobody collected: forgotten */
            s->removed = true;
            put_locked(r, s);
            continue;
        }
        if (k < n && s->timer_due_ms && now_ms >= s->timer_due_ms) {
            s->timer_due_ms = 0;
            s->refs++;
            out[k++] = (struct sreg_due){.s = s, .gen = s->timer_gen};
        }
        pp = &s->next;
    }
    pthread_mutex_unlock(&r->mu);
    return k;
}

bool sreg_gen_current(struct sreg *r, struct sreg_session *s, uint64_t gen)
{
    pthread_mutex_lock(&r->mu);
    bool v = s->timer_gen == gen && !s->removed;
    pthread_mutex_unlock(&r->mu);
    return v;
}

size_t sreg_all(struct sreg *r, struct sreg_session **out, size_t n)
{
    size_t k = 0;
    pthread_mutex_lock(&r->mu);
    for (struct sreg_session *s = r->head; s && k < n; s = s->next) {
        s->refs++;
        out[k++] = s;
    }
    pthread_mutex_unlock(&r->mu);
    return k;
}

void sreg_counts(struct sreg *r, struct sreg_counts *c)
{
    memset(c, 0, sizeof *c);
    pthread_mutex_lock(&r->mu);
    for (struct sreg_session *s = r->head; s; s = s->next) {
        if (counts(s))
            c->open++;
        else if (s->end != PLM_END_NONE)
            c->tombstones++;
    }
    for (struct sreg_reservation *o = r->opening; o; o = o->next)
        c->opening++;
    pthread_mutex_unlock(&r->mu);
}

void *sreg_take_handle(struct sreg *r, struct sreg_session *s)
{
    pthread_mutex_lock(&r->mu);
    void *h = s->handle;
    s->handle = NULL;
    pthread_mutex_unlock(&r->mu);
    return h;
}

bool sreg_is_claimed(struct sreg *r, struct sreg_session *s)
{
    pthread_mutex_lock(&r->mu);
    bool v = s->claimed;
    pthread_mutex_unlock(&r->mu);
    return v;
}

bool sreg_is_removed(struct sreg *r, struct sreg_session *s)
{
    pthread_mutex_lock(&r->mu);
    bool v = s->removed;
    pthread_mutex_unlock(&r->mu);
    return v;
}
