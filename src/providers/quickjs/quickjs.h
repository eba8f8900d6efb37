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

struct qjs_config {
    uint32_t memory_mb;          /* engine cap per run; 0 -> 256; clamped to [16, 4096] */
    uint32_t pool_size;          /* workers kept ready; 0 -> 4; clamped to 64 (use max-concurrent) */
    const char *worker_path;     /* NULL: plimsoll-qjs-worker next to /proc/self/exe, then the
                                  * build directory's */
    uint32_t default_timeout_ms; /* 0 -> 5000 */
    uint32_t max_timeout_ms;     /* 0 -> 30000; never above 30000 */
};

/* Opens and hashes the worker binary (the engine identity), starts the zygote and the pool.
 * No guest code runs and nothing is proven until ops->smoke_test succeeds; until then tier() is
 * `unknown` and Describe carries no evidence. Returns NULL and fills err on failure. */
struct plm_provider *qjs_provider_new(const struct qjs_config *cfg, struct plm_err *err);
