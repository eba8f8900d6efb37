/* provider.h: the one ops table every sandbox provider implements.
 * A provider knows nothing of HTTP or JSON. The daemon calls preflight/smoke_test at startup,
 * then run_* from many threads at once: every run_* must be thread-safe.
 * Invariant: a run_* that returns < 0 sets err->refusal != NONE only when it provably launched
 * nothing; otherwise the caller must assume the code may have run. */
#pragma once
#include <stdbool.h>
#include <stdint.h>

#include "err.h"
#include "evidence.h"
#include "request.h"
#include "tier.h"

struct plm_payload_env {
    char identity[160];          /* content-addressed, never a tag; "" when unsupported */
    uint32_t max_timeout_ms;     /* ceiling; 0 = unsupported */
    uint32_t default_timeout_ms; /* used when the request states <= 0 */
    char software_identity[160];
    const char *languages[4];    /* NULL-terminated */
};

struct plm_describe {
    const char *sandbox; /* provider name as reported on answers */
    enum plm_tier tier;  /* current tier, as proved */
    bool supports_project, supports_javascript_grants, supports_project_grants, supports_module;
    struct plm_payload_env javascript, project, module;
    uint32_t memory_mb, pids, disk_mb;
    double cpus;
    const char *policy;                  /* "" or plimsoll-evidence:sha256:<hex> */
    const struct plm_evidence *evidence; /* NULL when the provider proved nothing */
};

/* Per-run context the daemon hands a provider. */
struct plm_run_ctx {
    const char *caller;    /* principal id, "" in open dev mode */
    uint32_t timeout_ms;   /* already clamped to the provider's default and ceiling */
    enum plm_tier floor;   /* parsed floor, re-checked by the provider before launch */
    const char *trace_id;  /* filtered, or NULL */
};

struct plm_provider;

struct plm_provider_ops {
    const char *name; /* "disabled", "quickjs", "docker" ... */
    enum plm_tier (*tier)(struct plm_provider *p);
    void (*describe)(struct plm_provider *p, struct plm_describe *out);
    /* Cheap, bounded, runs no guest code; may be called often (cached by the provider). */
    int (*preflight)(struct plm_provider *p, struct plm_err *err);
    /* Starts real throwaway sandboxes with negative probes; startup only. A failure stops startup. */
    int (*smoke_test)(struct plm_provider *p, struct plm_err *err);
    /* Fills out->kind = PLM_KIND_JAVASCRIPT and out->js; sandbox/isolation/environment too. */
    int (*run_javascript)(struct plm_provider *p, const struct plm_run_ctx *ctx,
                          const struct plm_request *req, struct plm_result *out, struct plm_err *err);
    /* NULL when projects are unsupported. */
    int (*run_project)(struct plm_provider *p, const struct plm_run_ctx *ctx,
                       const struct plm_request *req, struct plm_result *out, struct plm_err *err);
    void (*destroy)(struct plm_provider *p);
};

struct plm_provider {
    const struct plm_provider_ops *ops;
    void *state;
};

/* Calls destroy and frees p; NULL-safe. */
void plm_provider_free(struct plm_provider *p);
