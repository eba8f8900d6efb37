/* quickjs.h: the `quickjs` provider (process tier): QuickJS-ng 0.17.0 in pre-forked, seccomp-
 * locked worker processes, one snippet per worker (docs/quickjs.md).
 * Projects and modules are unsupported (run_project is NULL). */
#pragma once
#include <stdint.h>

#include "../../core/provider.h"

#define QJS_DEFAULT_MEMORY_MB 256u
#define QJS_MIN_MEMORY_MB 16u
#define QJS_MAX_MEMORY_MB 4096u     /* larger values are clamped (as the reference clamps) */
#define QJS_DEFAULT_TIMEOUT_MS 5000u
#define QJS_MAX_TIMEOUT_MS 30000u
#define QJS_DEFAULT_POOL 4u
#define QJS_MAX_POOL 64u
#define QJS_WORKER_NAME "plimsoll-qjs-worker"
/* The zygote (and so the address layout its workers share) is replaced after this many workers
 * or this age, whichever comes first (docs/quickjs.md, Zygote recycling). */
#define QJS_DEFAULT_ZYGOTE_FORKS 1000u
#define QJS_MAX_ZYGOTE_FORKS 1000000u
#define QJS_DEFAULT_ZYGOTE_AGE_S 600u
#define QJS_MAX_ZYGOTE_AGE_S 86400u

struct qjs_config {
    uint32_t memory_mb;          /* engine cap per run; 0 -> 256; clamped to [16, 4096] */
    uint32_t pool_size;          /* workers kept ready; 0 -> 4; clamped to 64 (use max-concurrent) */
    const char *worker_path;     /* NULL: plimsoll-qjs-worker next to /proc/self/exe, then the
                                  * build directory's */
    uint32_t default_timeout_ms; /* 0 -> 5000 */
    uint32_t max_timeout_ms;     /* 0 -> 30000; never above 30000 */
    uint32_t zygote_forks;       /* 0 -> QJS_DEFAULT_ZYGOTE_FORKS; else 1..QJS_MAX_ZYGOTE_FORKS */
    uint32_t zygote_age_s;       /* 0 -> QJS_DEFAULT_ZYGOTE_AGE_S; else 1..QJS_MAX_ZYGOTE_AGE_S */
};

/* Reads SANDBOX_QUICKJS_ZYGOTE_FORKS and SANDBOX_QUICKJS_ZYGOTE_AGE_S through `get` (getenv)
 * into cfg; unset or empty keeps the default. A value that is not a decimal integer in range
 * returns -1 with err naming the variable (startup must stop). */
int qjs_config_from_env(struct qjs_config *cfg, char *(*get)(const char *), struct plm_err *err);

/* Opens and hashes the worker binary (the engine identity), starts the zygote and the pool.
 * No guest code runs and nothing is proven until ops->smoke_test succeeds; until then tier() is
 * `unknown` and Describe carries no evidence. Returns NULL and fills err on failure. */
struct plm_provider *qjs_provider_new(const struct qjs_config *cfg, struct plm_err *err);
