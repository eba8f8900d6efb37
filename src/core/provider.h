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
#include "session_end.h"
#include "tier.h"

struct plm_payload_env {
    char identity[160];          /* content-addressed, never a tag; "" when unsupported */
    uint32_t max_timeout_ms;     /* ceiling; 0 = unsupported */
    uint32_t default_timeout_ms; /* used when the request states <= 0 */
    char software_identity[160];
    const char *languages[9];    /* NULL-terminated; a module environment lists its models here */
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
    /* Billed by the second (e2b): the most a sandbox can bill past a run's timeout (create,
     * delete, the provider's own lifetime margin), which a paid reservation adds. 0 = not metered. */
    uint32_t billing_teardown_ms;
    /* A session's snippet can carry a grant (ctx->host_api) the way a run's does. */
    bool supports_session_grants;
};

/* One answer of the host API to the guest: an HTTP status and a body the guest receives as text. */
struct plm_host_reply {
    int status;    /* 100..599 */
    uint8_t *body; /* len bytes, malloc'd, owned by the receiver (free()); NULL when len is 0 */
    size_t len;
    char *content_type; /* the answer's Content-Type, sanitised (printable ASCII); malloc'd, owned
                         * by the receiver; NULL = application/octet-stream */
};

/* A run's grant (issue 6): the capability to call listed routes of one HTTP API through the
 * daemon's broker. Providers only transport: every rule (routes, budgets, breaker, credential)
 * is applied inside `call`, and the credential never reaches a provider or a guest.
 * Guest contract (src/broker/client_js.h): `client_js` is a classic script, evaluated before the
 * snippet, that expects a global __plimsoll_host_send(method, path, body) returning
 * {status, body} (or a Promise of it); `node_preload` is the same as an ES module for
 * `node --import`, speaking HTTP over the unix socket $HOST_API_SOCKET. */
struct plm_host_api {
    const char *profile;      /* profile name, for logs only */
    const char *client_js;    /* never NULL when a grant is present */
    const char *node_preload; /* never NULL when a grant is present */
    /* Thread-safe. method and raw_target are exactly as the guest sent them; body may be NULL
     * when len is 0. Always fills out. After the run's code has ended every call is refused
     * (503 "host api grant has ended"), but cb_ctx itself is freed when the run returns unless
     * held: a transport thread that may still be inside, or about to enter, `call` once
     * run_javascript/run_project has returned must hold(cb_ctx) while the run is live (before it
     * hands the call to that thread) and release(cb_ctx) when it is done with it. */
    void (*call)(void *cb_ctx, const char *method, const char *raw_target, const uint8_t *body, size_t len,
                 struct plm_host_reply *out);
    void (*hold)(void *cb_ctx);
    void (*release)(void *cb_ctx);
    void *cb_ctx;
};

/* Per-run context the daemon hands a provider. */
struct plm_run_ctx {
    const char *caller;                  /* principal id, "" in open dev mode */
    uint32_t timeout_ms;                 /* already clamped to the provider's default and ceiling */
    enum plm_tier floor;                 /* parsed floor, re-checked by the provider before launch */
    const char *trace_id;                /* filtered, or NULL */
    const struct plm_host_api *host_api; /* NULL: fully isolated (no grant) */
};

struct plm_provider;

/* Sessions (sessions.md §4, §6). A provider keeps sessions only when it fills session_open; the
 * daemon serialises calls per session (one at a time) but different sessions run concurrently. */
struct plm_session; /* the provider's own */
struct plm_session_spec {
    const char *caller;
    enum plm_tier floor;        /* re-checked by the provider against the tier it measures */
    uint64_t lifetime_ms;       /* effective lifetime (the provider may end it EXPIRED at this) */
    uint64_t disk_bytes;        /* 0: unmeasured */
    const char *languages[3];   /* the cell-language hint, stated order, NULL-terminated */
};
struct plm_session_opened {
    enum plm_tier tier;               /* measured at open */
    char software_identity[160];      /* its JavaScript environment's software identity */
    char environment[160];            /* its JavaScript environment's identity */
};

struct plm_provider_ops {
    const char *name; /* "disabled", "quickjs", "docker" ... */
    enum plm_tier (*tier)(struct plm_provider *p);
    void (*describe)(struct plm_provider *p, struct plm_describe *out);
    /* Cheap, bounded, runs no guest code; may be called often (cached by the provider). */
    int (*preflight)(struct plm_provider *p, struct plm_err *err);
    /* Starts real throwaway sandboxes with negative probes; startup only. A failure stops startup. */
    int (*smoke_test)(struct plm_provider *p, struct plm_err *err);
    /* Fills out->kind = PLM_KIND_JAVASCRIPT, out->js and out->tier (the tier it measured for this
     * run; unset = unknown, which meets no floor). Every run and session op states only that: the
     * daemon stamps sandbox, isolation, environment and software identity once (plm_result_stamp),
     * from this run's Describe or the session's open. */
    int (*run_javascript)(struct plm_provider *p, const struct plm_run_ctx *ctx,
                          const struct plm_request *req, struct plm_result *out, struct plm_err *err);
    /* NULL when projects are unsupported. */
    int (*run_project)(struct plm_provider *p, const struct plm_run_ctx *ctx,
                       const struct plm_request *req, struct plm_result *out, struct plm_err *err);
    /* NULL when modules are unsupported; the daemon also asks describe()'s supports_module, which a
     * provider states only once its startup proof ran a module row (issue 21). Fills
     * out->kind = PLM_KIND_MODULE and out->module. */
    int (*run_module)(struct plm_provider *p, const struct plm_run_ctx *ctx, const struct plm_request *req,
                      struct plm_result *out, struct plm_err *err);
    /* ---- sessions: every pointer NULL = no sessions ---- */
    /* The session environment Describe states (field 18): identity, ceiling, cell languages. */
    void (*session_env)(struct plm_provider *p, struct plm_payload_env *out);
    /* Opens one sandbox for a session. < 0 with a refusal only when nothing was left behind. */
    int (*session_open)(struct plm_provider *p, const struct plm_session_spec *spec, struct plm_session **out,
                        struct plm_session_opened *info, struct plm_err *err);
    /* One snippet or project inside the session (req->kind javascript or project), or NULL. */
    int (*session_run)(struct plm_provider *p, struct plm_session *s, const struct plm_run_ctx *ctx,
                       const struct plm_request *req, struct plm_result *out, enum plm_session_end *ended,
                       struct plm_err *err);
    /* One cell (req->kind cell). *ended: set when the call ended the whole session (not when only
     * the interpreter ended, which the result says). A refusal means the code was not handed over. */
    int (*session_run_cell)(struct plm_provider *p, struct plm_session *s, const struct plm_run_ctx *ctx,
                            const struct plm_request *req, struct plm_result *out, enum plm_session_end *ended,
                            struct plm_err *err);
    /* Idle suspend; NULL = never suspends. *holds_memory: the suspended sandbox keeps its memory
     * (the daemon then keeps its concurrency slot). Resume is implicit in the next call. */
    int (*session_suspend)(struct plm_provider *p, struct plm_session *s, bool *holds_memory, struct plm_err *err);
    /* Ends the sandbox, waits (bounded) until it is gone and frees s. Returns < 0 when the
     * sandbox could not be proved gone (s is still freed; the provider reaps it later). */
    int (*session_close)(struct plm_provider *p, struct plm_session *s, struct plm_err *err);
    void (*destroy)(struct plm_provider *p);
};

struct plm_provider {
    const struct plm_provider_ops *ops;
    void *state;
};

/* Startup progress: a provider whose proof takes long (microvm: ~15 s under TCG) reports each step
 * so an operator sees it is not hung. The daemon points the hook at its log (info,
 * event provider_progress); unset, reports go nowhere. Any thread may report; detail is the
 * provider's own text, never guest output. */
typedef void (*plm_progress_fn)(const char *provider, const char *step, const char *detail);
void plm_progress_set(plm_progress_fn fn);
void plm_progress(const char *provider, const char *step, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* Calls destroy and frees p; NULL-safe. */
void plm_provider_free(struct plm_provider *p);
