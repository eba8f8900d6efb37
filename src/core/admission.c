/* admission.c: the code limiter (global concurrency, per-caller concurrency, per-caller token
 * bucket), and the memory budget across held slots (SANDBOX_TOTAL_MEMORY_MB). It sheds and never
 * queues, so a refused caller learns at once and retries. The budget is reserved with the slot
 * and given back by the slot's one adm_release, so no path can keep memory it no longer runs in.
 * Owns: one entry per caller key ever admitted. Callers are authenticated principals (a bounded,
 * configured set), so the table stays small. Locking: one mutex guards everything; every
 * operation is O(1) on average and never blocks on I/O. */
#include "admission.h"

#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#define ADM_BUCKETS 256
#define MILLI 1000u

struct adm_key {
    struct adm_key *next;
    uint32_t inflight;
    uint64_t tokens_milli; /* token bucket in thousandths of a run */
    uint64_t refilled_ms;
    char name[];
};

struct adm {
    pthread_mutex_t mu;
    struct adm_config cfg;
    uint32_t inflight;
    uint64_t shed[ADM_SHED_N];
    struct adm_key *buckets[ADM_BUCKETS];
};

static uint32_t hash_key(const char *s)
{
    uint32_t h = 2166136261u; /* FNV-1a */
    for (; *s; s++)
        h = (h ^ (unsigned char)*s) * 16777619u;
    return h % ADM_BUCKETS;
}

struct adm *adm_new(const struct adm_config *cfg)
{
    struct adm *a = calloc(1, sizeof *a);
    if (!a)
        return NULL;
    pthread_mutex_init(&a->mu, NULL);
    a->cfg = *cfg;
    if (a->cfg.max_concurrent == 0)
        a->cfg.max_concurrent = 1;
    if (a->cfg.per_key_concurrent == 0)
        a->cfg.per_key_concurrent = 1;
    if (a->cfg.rate_per_min && a->cfg.rate_burst == 0)
        a->cfg.rate_burst = a->cfg.rate_per_min;
    return a;
}

void adm_free(struct adm *a)
{
    if (!a)
        return;
    for (size_t i = 0; i < ADM_BUCKETS; i++) {
        struct adm_key *k = a->buckets[i];
        while (k) {
            struct adm_key *next = k->next;
            free(k);
            k = next;
        }
    }
    pthread_mutex_destroy(&a->mu);
    free(a);
}

static struct adm_key *find_key(struct adm *a, const char *caller, bool create, uint64_t now_ms)
{
    uint32_t h = hash_key(caller);
    for (struct adm_key *k = a->buckets[h]; k; k = k->next)
        if (strcmp(k->name, caller) == 0)
            return k;
    if (!create)
        return NULL;
    size_t len = strlen(caller);
    struct adm_key *k = calloc(1, sizeof *k + len + 1);
    if (!k)
        return NULL;
    memcpy(k->name, caller, len + 1);
    k->tokens_milli = (uint64_t)a->cfg.rate_burst * MILLI; /* a new caller starts with a full bucket */
    k->refilled_ms = now_ms;
    k->next = a->buckets[h];
    a->buckets[h] = k;
    return k;
}

static void refill(const struct adm *a, struct adm_key *k, uint64_t now_ms)
{
    if (now_ms <= k->refilled_ms)
        return;
    uint64_t elapsed = now_ms - k->refilled_ms;
    uint64_t cap = (uint64_t)a->cfg.rate_burst * MILLI;
    /* rate_per_min runs per 60000 ms = rate_per_min milli-runs per 60 ms */
    uint64_t add = elapsed * a->cfg.rate_per_min / 60;
    k->tokens_milli = k->tokens_milli + add > cap ? cap : k->tokens_milli + add;
    k->refilled_ms = now_ms;
}

int adm_acquire(struct adm *a, const char *caller, uint64_t now_ms, struct plm_err *err)
{
    return adm_acquire_parts(a, caller, now_ms, true, true, err);
}

int adm_acquire_parts(struct adm *a, const char *caller, uint64_t now_ms, bool slot, bool token, struct plm_err *err)
{
    if (!caller)
        caller = "";
    pthread_mutex_lock(&a->mu);
    if (slot && a->inflight >= a->cfg.max_concurrent) {
        a->shed[ADM_SHED_AT_CAPACITY]++;
        pthread_mutex_unlock(&a->mu);
        return plm_refuse(err, PLM_E_CAPACITY, PLM_REFUSAL_CAPACITY, "sandbox is at capacity, retry shortly");
    }
    /* 64-bit: inflight <= 1024 and run_memory_mb < 2^32, so the product cannot overflow. */
    uint64_t reserved = (uint64_t)a->inflight * a->cfg.run_memory_mb;
    if (slot && a->cfg.total_memory_mb && reserved + a->cfg.run_memory_mb > a->cfg.total_memory_mb) {
        uint32_t total = a->cfg.total_memory_mb, need = a->cfg.run_memory_mb;
        a->shed[ADM_SHED_MEMORY]++;
        pthread_mutex_unlock(&a->mu);
        return plm_refuse(err, PLM_E_CAPACITY, PLM_REFUSAL_CAPACITY,
                           "memory budget exhausted: %llu of %u MB reserved and a run needs %u MB, retry shortly",
                           (unsigned long long)reserved, total, need);
    }
    struct adm_key *k = find_key(a, caller, true, now_ms);
    if (!k) {
        pthread_mutex_unlock(&a->mu);
        return plm_refuse(err, PLM_E_CAPACITY, PLM_REFUSAL_CAPACITY, "sandbox is at capacity, retry shortly");
    }
    if (slot && k->inflight >= a->cfg.per_key_concurrent) {
        uint32_t n = k->inflight;
        a->shed[ADM_SHED_PER_KEY]++;
        pthread_mutex_unlock(&a->mu);
        return plm_refuse(err, PLM_E_CAPACITY, PLM_REFUSAL_CAPACITY,
                           "per-caller concurrency limit reached (%u in flight)", n);
    }
    if (token && a->cfg.rate_per_min) {
        refill(a, k, now_ms);
        if (k->tokens_milli < MILLI) {
            uint32_t rate = a->cfg.rate_per_min;
            a->shed[ADM_SHED_RATE]++;
            pthread_mutex_unlock(&a->mu);
            return plm_refuse(err, PLM_E_CAPACITY, PLM_REFUSAL_CAPACITY, "rate limit: %u runs/min per caller",
                               rate);
        }
        k->tokens_milli -= MILLI;
    }
    if (slot) {
        k->inflight++;
        a->inflight++;
    }
    pthread_mutex_unlock(&a->mu);
    return 0;
}

void adm_release(struct adm *a, const char *caller)
{
    if (!caller)
        caller = "";
    pthread_mutex_lock(&a->mu);
    struct adm_key *k = find_key(a, caller, false, 0);
    if (k && k->inflight)
        k->inflight--;
    if (a->inflight)
        a->inflight--;
    pthread_mutex_unlock(&a->mu);
}

uint32_t adm_inflight(struct adm *a)
{
    pthread_mutex_lock(&a->mu);
    uint32_t n = a->inflight;
    pthread_mutex_unlock(&a->mu);
    return n;
}

uint64_t adm_memory_reserved(struct adm *a)
{
    pthread_mutex_lock(&a->mu);
    uint64_t n = (uint64_t)a->inflight * a->cfg.run_memory_mb;
    pthread_mutex_unlock(&a->mu);
    return n;
}

uint64_t adm_shed_count(struct adm *a, enum adm_shed why)
{
    pthread_mutex_lock(&a->mu);
    uint64_t n = why < ADM_SHED_N ? a->shed[why] : 0;
    pthread_mutex_unlock(&a->mu);
    return n;
}
