/* admission.h: the code limiter. It sheds, never queues: global concurrency, per-caller
 * concurrency and a per-caller token bucket (wire.md §11.2 step 17). Thread-safe.
 * Invariant: every successful adm_acquire is matched by exactly one adm_release. */
#pragma once
#include <stdbool.h>
#include <stdint.h>

#include "err.h"

struct adm;

struct adm_config {
    uint32_t max_concurrent;     /* >= 1 */
    uint32_t per_key_concurrent; /* >= 1 */
    uint32_t rate_per_min;       /* 0 disables the bucket */
    uint32_t rate_burst;         /* >= 1 when rate_per_min > 0 */
    /* SANDBOX_TOTAL_MEMORY_MB: every slot (a run, or a session's sandbox holding its memory)
     * reserves run_memory_mb of it while held; 0 = no budget. */
    uint32_t total_memory_mb, run_memory_mb;
};

enum adm_shed { ADM_SHED_AT_CAPACITY, ADM_SHED_PER_KEY, ADM_SHED_RATE, ADM_SHED_MEMORY, ADM_SHED_N };

struct adm *adm_new(const struct adm_config *cfg);
void adm_free(struct adm *a);
/* now_ms is a monotonic clock reading. On refusal: PLM_E_CAPACITY / capacity. */
int adm_acquire(struct adm *a, const char *caller, uint64_t now_ms, struct plm_err *err);
/* Sessions (sessions.md §3.3): a slot without a rate token (a call resuming a suspended
 * session), a token without a slot (a call on a running session, which holds its slot), or
 * both. Only a successful call that took a slot is matched by adm_release. */
int adm_acquire_parts(struct adm *a, const char *caller, uint64_t now_ms, bool slot, bool token, struct plm_err *err);
void adm_release(struct adm *a, const char *caller);
uint32_t adm_inflight(struct adm *a);
/* MB of SANDBOX_TOTAL_MEMORY_MB the held slots reserve now. */
uint64_t adm_memory_reserved(struct adm *a);
uint64_t adm_shed_count(struct adm *a, enum adm_shed why);
