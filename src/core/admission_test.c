/* admission_test.c: shedding order, per-caller limits, token bucket refill, release. */
#include "admission.h"
#include "unit.h"

int main(void)
{
    struct plm_err err = {0};
    struct adm_config cfg = {.max_concurrent = 3, .per_key_concurrent = 2, .rate_per_min = 0};
    struct adm *a = adm_new(&cfg);
    CHECK(adm_acquire(a, "alice", 0, &err) == 0);
    CHECK(adm_acquire(a, "alice", 0, &err) == 0);
    CHECK(adm_acquire(a, "alice", 0, &err) < 0 && err.kind == PLM_E_CAPACITY && err.refusal == PLM_REFUSAL_CAPACITY);
    CHECK_STR(err.msg, "per-caller concurrency limit reached (2 in flight)");
    CHECK(adm_acquire(a, "bob", 0, &err) == 0);
    CHECK(adm_acquire(a, "carol", 0, &err) < 0);
    CHECK_STR(err.msg, "sandbox is at capacity, retry shortly");
    CHECK(adm_inflight(a) == 3);
    CHECK(adm_shed_count(a, ADM_SHED_AT_CAPACITY) == 1 && adm_shed_count(a, ADM_SHED_PER_KEY) == 1);
    adm_release(a, "alice");
    CHECK(adm_acquire(a, "carol", 0, &err) == 0);
    adm_release(a, "alice");
    adm_release(a, "bob");
    adm_release(a, "carol");
    CHECK(adm_inflight(a) == 0);
    adm_free(a);

    /* 60 runs/min, burst 2: two at once, the third waits a second of refill. */
    cfg = (struct adm_config){.max_concurrent = 8, .per_key_concurrent = 8, .rate_per_min = 60, .rate_burst = 2};
    a = adm_new(&cfg);
    CHECK(adm_acquire(a, "k", 1000, &err) == 0);
    adm_release(a, "k");
    CHECK(adm_acquire(a, "k", 1000, &err) == 0);
    adm_release(a, "k");
    CHECK(adm_acquire(a, "k", 1000, &err) < 0);
    CHECK_STR(err.msg, "rate limit: 60 runs/min per caller");
    CHECK(adm_acquire(a, "k", 1500, &err) < 0);
    CHECK(adm_acquire(a, "k", 2000, &err) == 0);
    adm_release(a, "k");
    CHECK(adm_acquire(a, "other", 2000, &err) == 0); /* buckets are per caller */
    adm_release(a, "other");
    /* the bucket never exceeds its burst, however long idle */
    CHECK(adm_acquire(a, "k", 1000000, &err) == 0);
    adm_release(a, "k");
    CHECK(adm_acquire(a, "k", 1000000, &err) == 0);
    adm_release(a, "k");
    CHECK(adm_acquire(a, "k", 1000000, &err) < 0);
    CHECK(adm_shed_count(a, ADM_SHED_RATE) == 3);
    /* a refused run holds no slot */
    CHECK(adm_inflight(a) == 0);
    adm_free(a);

    /* SANDBOX_TOTAL_MEMORY_MB=600 with 256 MB runs: two fit, the third is shed as capacity before
     * the per-caller limit is looked at; a token-only call (a running session) needs no memory. */
    cfg = (struct adm_config){.max_concurrent = 8, .per_key_concurrent = 8, .total_memory_mb = 600,
                              .run_memory_mb = 256};
    a = adm_new(&cfg);
    CHECK(adm_acquire(a, "k", 0, &err) == 0 && adm_acquire(a, "j", 0, &err) == 0);
    CHECK(adm_memory_reserved(a) == 512);
    CHECK(adm_acquire(a, "k", 0, &err) < 0 && err.kind == PLM_E_CAPACITY && err.refusal == PLM_REFUSAL_CAPACITY);
    CHECK_STR(err.msg, "memory budget exhausted: 512 of 600 MB reserved and a run needs 256 MB, retry shortly");
    CHECK(adm_shed_count(a, ADM_SHED_MEMORY) == 1 && adm_inflight(a) == 2);
    CHECK(adm_acquire_parts(a, "k", 0, false, true, &err) == 0);
    adm_release(a, "j");
    CHECK(adm_memory_reserved(a) == 256);
    CHECK(adm_acquire(a, "k", 0, &err) == 0); /* released memory is usable again */
    adm_release(a, "k");
    adm_release(a, "k");
    CHECK(adm_memory_reserved(a) == 0);
    adm_free(a);
    return unit_done();
}
