/* spend.c: the paid allowance's books (spend.h).
 * Owns: the per-caller counts of the current UTC day, the daemon's count and the list of holds not
 * yet settled. Every count is in milliseconds; allowances are stated in seconds.
 * Invariant: a count always includes every open hold's reservation (in full) plus what settled
 * holds were charged in that day, so a refusal can never be dodged by running concurrently. */
#include "spend.h"

#include "clock.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define DAY_MS 86400000LL

struct spend_hold {
    struct spend_hold *next;
    char caller[128];
    uint64_t want_ms;
    int64_t start_ms;
    int64_t day;  /* the UTC day it is counted in now */
    bool carried; /* taken before `day` began and still open at its midnight */
};

struct caller_count {
    struct caller_count *next;
    char caller[128];
    uint64_t ms;
};

struct spend {
    pthread_mutex_t mu;
    uint64_t daemon_ms; /* 0 = no daemon-wide allowance */
    spend_clock now;
    void *now_ctx;
    int64_t day;
    uint64_t total_ms;
    struct caller_count *callers; /* today's only: dropped at midnight */
    struct spend_hold *open;
    uint64_t refused_caller, refused_daemon;
};

static int64_t real_clock(void *ctx)
{
    (void)ctx;
    return clock_unix_ms();
}

struct spend *spend_new(uint64_t daemon_secs, spend_clock now, void *now_ctx)
{
    struct spend *s = calloc(1, sizeof *s);
    if (!s)
        return NULL;
    pthread_mutex_init(&s->mu, NULL);
    s->daemon_ms = daemon_secs * 1000;
    s->now = now ? now : real_clock;
    s->now_ctx = now_ctx;
    s->day = INT64_MIN;
    return s;
}

static void drop_callers(struct spend *s)
{
    while (s->callers) {
        struct caller_count *c = s->callers;
        s->callers = c->next;
        free(c);
    }
}

void spend_free(struct spend *s)
{
    if (!s)
        return;
    drop_callers(s);
    while (s->open) {
        struct spend_hold *h = s->open;
        s->open = h->next;
        free(h);
    }
    pthread_mutex_destroy(&s->mu);
    free(s);
}

/* The caller's count for today, created at zero; NULL only out of memory. mu held. */
static struct caller_count *count_of(struct spend *s, const char *caller, bool create)
{
    for (struct caller_count *c = s->callers; c; c = c->next)
        if (!strcmp(c->caller, caller))
            return c;
    if (!create)
        return NULL;
    struct caller_count *c = calloc(1, sizeof *c);
    if (!c)
        return NULL;
    strncpy(c->caller, caller, sizeof c->caller - 1);
    c->next = s->callers;
    s->callers = c;
    return c;
}

static int64_t day_of(int64_t unix_ms)
{
    return unix_ms >= 0 ? unix_ms / DAY_MS : (unix_ms - DAY_MS + 1) / DAY_MS;
}

/* Rolls the books over at a new UTC day: every open hold is counted in the new day in full (it may
 * run all of its reservation there). Returns now. mu held. */
static int64_t roll(struct spend *s)
{
    int64_t now = s->now(s->now_ctx);
    int64_t d = day_of(now);
    if (d == s->day)
        return now;
    s->day = d;
    s->total_ms = 0;
    drop_callers(s);
    for (struct spend_hold *h = s->open; h; h = h->next) {
        h->day = d;
        h->carried = true;
        struct caller_count *c = count_of(s, h->caller, true);
        if (c) /* out of memory loses one caller's carried count, never the daemon's */
            c->ms += h->want_ms;
        s->total_ms += h->want_ms;
    }
    return now;
}

static uint64_t secs_up(uint64_t ms)
{
    return (ms + 999) / 1000;
}

static int refuse_caller(struct spend *s, uint64_t allowance_s, uint64_t spent_ms, uint64_t want_ms,
                         enum spend_what what, struct plm_err *err)
{
    s->refused_caller++;
    uint64_t left = allowance_s > secs_up(spent_ms) ? allowance_s - secs_up(spent_ms) : 0;
    if (what == SPEND_SESSION)
        return plm_refuse(err, PLM_E_CAPACITY, PLM_REFUSAL_CAPACITY,
                          "paid budget: this caller has %llu of its %llu paid seconds a day left until 00:00 UTC, "
                          "and this session needs %llu more (the call's timeout, the idle time before it is "
                          "suspended and the provider's teardown); a shorter timeout or idle time needs less",
                          (unsigned long long)left, (unsigned long long)allowance_s,
                          (unsigned long long)secs_up(want_ms));
    return plm_refuse(err, PLM_E_CAPACITY, PLM_REFUSAL_CAPACITY,
                      "paid budget: this caller has %llu of its %llu paid seconds a day left until 00:00 UTC, and "
                      "this run needs %llu (its timeout plus the provider's teardown); a shorter timeout needs less",
                      (unsigned long long)left, (unsigned long long)allowance_s, (unsigned long long)secs_up(want_ms));
}

static int refuse_daemon(struct spend *s, enum spend_what what, struct plm_err *err)
{
    s->refused_daemon++;
    /* no numbers: they would tell one caller what the others spent */
    return plm_refuse(err, PLM_E_CAPACITY, PLM_REFUSAL_CAPACITY,
                      "paid budget: the daemon's paid allowance for today cannot cover this %s until 00:00 UTC; %s",
                      what == SPEND_SESSION ? "session" : "run",
                      what == SPEND_SESSION ? "a shorter timeout or idle time needs less" : "a shorter timeout needs less");
}

/* mu held. */
static int take(struct spend *s, const char *caller, uint64_t caller_secs, uint64_t want_ms, enum spend_what what,
                struct spend_hold **out, struct plm_err *err)
{
    int64_t now = roll(s);
    struct caller_count *c = count_of(s, caller, true);
    struct spend_hold *h = calloc(1, sizeof *h);
    if (!c || !h) {
        free(h);
        return plm_refuse(err, PLM_E_CAPACITY, PLM_REFUSAL_CAPACITY, "paid budget: out of memory keeping the books");
    }
    if (caller_secs > 0 && c->ms + want_ms > caller_secs * 1000) {
        free(h);
        return refuse_caller(s, caller_secs, c->ms, want_ms, what, err);
    }
    if (s->daemon_ms > 0 && s->total_ms + want_ms > s->daemon_ms) {
        free(h);
        return refuse_daemon(s, what, err);
    }
    c->ms += want_ms;
    s->total_ms += want_ms;
    strncpy(h->caller, caller, sizeof h->caller - 1);
    h->want_ms = want_ms;
    h->start_ms = now;
    h->day = s->day;
    h->next = s->open;
    s->open = h;
    *out = h;
    return 0;
}

static void subtract(uint64_t *v, uint64_t by)
{
    *v = *v > by ? *v - by : 0;
}

/* Settles h: charges took_ms (at most its reservation), gives the rest back, frees h. mu held. */
static uint64_t give(struct spend *s, struct spend_hold *h, uint64_t took_ms)
{
    uint64_t charged = took_ms < h->want_ms ? took_ms : h->want_ms;
    roll(s); /* a settle that is the first thing after midnight is carried like a later one */
    for (struct spend_hold **p = &s->open; *p; p = &(*p)->next)
        if (*p == h) {
            *p = h->next;
            break;
        }
    if (h->day == s->day) {
        uint64_t counted = charged;
        if (h->carried) { /* only the part it ran after midnight belongs to this day */
            int64_t after = h->start_ms + (int64_t)took_ms - s->day * DAY_MS;
            counted = after <= 0 ? 0 : (uint64_t)after < charged ? (uint64_t)after : charged;
        }
        struct caller_count *c = count_of(s, h->caller, false);
        if (c)
            subtract(&c->ms, h->want_ms - counted);
        subtract(&s->total_ms, h->want_ms - counted);
    } /* else: counted in a day that has ended */
    free(h);
    return charged;
}

int spend_reserve(struct spend *s, const char *caller, uint64_t caller_secs, uint64_t want_ms, enum spend_what what,
                  struct spend_hold **out, struct plm_err *err)
{
    pthread_mutex_lock(&s->mu);
    int rc = take(s, caller ? caller : "", caller_secs, want_ms, what, out, err);
    pthread_mutex_unlock(&s->mu);
    return rc;
}

uint64_t spend_settle(struct spend *s, struct spend_hold *h, uint64_t took_ms)
{
    if (!h)
        return 0;
    pthread_mutex_lock(&s->mu);
    uint64_t charged = give(s, h, took_ms);
    pthread_mutex_unlock(&s->mu);
    return charged;
}

void spend_spent(struct spend *s, const char *caller, uint64_t *caller_ms, uint64_t *total_ms)
{
    pthread_mutex_lock(&s->mu);
    roll(s);
    struct caller_count *c = count_of(s, caller, false);
    *caller_ms = c ? c->ms : 0;
    *total_ms = s->total_ms;
    pthread_mutex_unlock(&s->mu);
}

uint64_t spend_refused(struct spend *s, bool daemon)
{
    pthread_mutex_lock(&s->mu);
    uint64_t n = daemon ? s->refused_daemon : s->refused_caller;
    pthread_mutex_unlock(&s->mu);
    return n;
}

void spend_meter_init(struct spend_meter *m, struct spend *s, const char *caller, uint64_t caller_secs)
{
    memset(m, 0, sizeof *m);
    m->s = s;
    strncpy(m->caller, caller ? caller : "", sizeof m->caller - 1);
    m->caller_secs = caller_secs;
}

int spend_meter_cover(struct spend_meter *m, uint64_t want_ms, struct plm_err *err)
{
    struct spend *s = m->s;
    pthread_mutex_lock(&s->mu);
    int64_t now = s->now(s->now_ctx);
    int rc = 0;
    if (!m->h) {
        rc = take(s, m->caller, m->caller_secs, want_ms, SPEND_SESSION, &m->h, err);
        if (rc == 0)
            m->since_ms = now;
        goto out;
    }
    uint64_t ran = now > m->since_ms ? (uint64_t)(now - m->since_ms) : 0;
    uint64_t held = m->h->want_ms;
    if (ran + want_ms <= held)
        goto out;
    m->charged_ms += give(s, m->h, ran);
    m->h = NULL;
    rc = take(s, m->caller, m->caller_secs, want_ms, SPEND_SESSION, &m->h, err);
    if (rc < 0) {
        /* what the old hold still covered was just given back under this same lock, so it fits
         * again: the session stays covered as far as it was */
        struct plm_err ignored;
        if (take(s, m->caller, m->caller_secs, held > ran ? held - ran : 0, SPEND_SESSION, &m->h, &ignored) < 0)
            m->h = NULL; /* out of memory only: the session is then metered afresh at its next cover */
    }
    m->since_ms = now;
out:
    pthread_mutex_unlock(&s->mu);
    return rc;
}

uint64_t spend_meter_stop(struct spend_meter *m)
{
    if (!m->h)
        return m->charged_ms;
    struct spend *s = m->s;
    pthread_mutex_lock(&s->mu);
    int64_t now = s->now(s->now_ctx);
    m->charged_ms += give(s, m->h, now > m->since_ms ? (uint64_t)(now - m->since_ms) : 0);
    m->h = NULL;
    pthread_mutex_unlock(&s->mu);
    return m->charged_ms;
}

bool spend_meter_running(const struct spend_meter *m)
{
    return m->h != NULL;
}
