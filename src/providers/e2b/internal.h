/* internal.h: what the e2b provider's files share. Not for use outside src/providers/e2b. */
#pragma once
#include <curl/curl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "../../core/clock.h"
#include "../../core/evidence.h"
#include "../../core/provider.h"
#include "e2b.h"
#include "guard.h"
#include "stream.h"

#define E2B_DEFAULT_API "https://api.e2b.app"
#define E2B_DEFAULT_DOMAIN "e2b.app"
#define E2B_ENVD_PORT 49983
#define E2B_PROJECT_DIR "/home/user/project"         /* (spec) */
#define E2B_SNIPPET_PATH "/tmp/plimsoll-snippet.cjs"  /* (spec) */
#define E2B_STEP_PATH "/tmp/plimsoll-step.sh"         /* (spec) */
#define E2B_HOST_MODULE "/tmp/plimsoll-e2b-host.mjs"  /* (spec) */
#define E2B_CA_BUNDLE "/etc/ssl/certs/ca-certificates.crt"
#define E2B_DEFAULT_TIMEOUT_MS 30000u  /* (spec) */
#define E2B_MAX_TIMEOUT_MS 120000u     /* (spec) */
/* What a run's VM can bill past its timeout: E2B ends it itself 10 s after the budget (create_body),
 * and the create and delete requests take up to 20 s more. The paid allowance reserves this. */
#define E2B_BILLING_TEARDOWN_MS 30000u
#define E2B_ARTIFACTS_MAX (8u * 1024 * 1024) /* (spec) in total */
#define E2B_CONTROL_TIMEOUT_MS 30000L  /* one control-plane call */
#define E2B_DELETE_TIMEOUT_MS 10000L   /* (spec) one delete attempt */
#define E2B_ANSWER_MAX (1u * 1024 * 1024) /* a control-plane or file-write answer */
#define E2B_ORPHAN_AGE_S 60            /* (spec) the reconcile spares younger sandboxes */
#define E2B_SMOKE_MS 90000u            /* (spec) */
#define E2B_EXIT_TIMEOUT 124
#define E2B_EXIT_BUDGET 153

struct e2b_state {
    char api_key[256];
    char template_id[128];
    char api_base[512];  /* no trailing slash */
    char envd_tmpl[512]; /* with {sandbox} */
    char domain[256];
    char ca_file[512];
    bool endpoints_default;
    char guard_url[512]; /* "" = no guard: grants are unsupported */
    char guard_host[256];
    enum e2b_session_grants { E2B_SG_NONE, E2B_SG_SESSION, E2B_SG_CALL } session_grants; /* E2B_SESSION_GRANTS */
    uint32_t memory_mb, disk_mb, cpus; /* maxima, 0 = none */
    char instance[17];                 /* metadata instance=<this>: the reconcile's key */
    uint32_t reconcile_s;

    struct e2b_guard *guard; /* NULL without a guard */

    /* One connection and DNS cache for every call (control plane and envd): a run makes at least
     * four calls, and against E2B each new connection is a TLS handshake. */
    CURLSH *share;
    pthread_mutex_t share_mu[CURL_LOCK_DATA_LAST];

    atomic_bool proven;
    atomic_bool python3; /* the template runs python3 (the startup proof saw it): python cells */
    char python_version[32];
    struct plm_evidence card;
    char kernel[128], envd_version[64];

    pthread_mutex_t mu; /* tracked[] */
    char (*tracked)[64];
    size_t n_tracked, cap_tracked;

    pthread_t reconciler;
    bool reconciler_started;
    pthread_mutex_t rmu;
    pthread_cond_t rcv;
    bool stopping;
    int64_t reconcile_at_ms; /* an extra reconcile asked for (a create without an ID) */
};

/* ---- endpoints.c: URL rules --------------------------------------------------------------- */
/* "http" is allowed only for a loopback host. out: base URL without a trailing slash. */
int e2b_check_base_url(const char *var, const char *url, bool want_sandbox_slot, char *out, size_t cap,
                       struct plm_err *err);
/* providers.md §6 guard URL rules; out = normalised URL, host = lower-cased host. */
int e2b_check_guard_url(const char *url, char *out, size_t cap, char *host, size_t hcap, struct plm_err *err);
bool e2b_host_is_loopback(const char *host);

/* ---- api.c: control plane and envd over libcurl ------------------------------------------- */
struct e2b_answer {
    long status; /* 0 = no answer (transport error) */
    char *body;  /* NUL-terminated, up to the cap */
    size_t len;
    bool over; /* the answer exceeded the cap (cut) */
    bool timed_out; /* the call's time ran out */
    char why[160];
};
void e2b_answer_done(struct e2b_answer *a);

struct e2b_sandbox {
    char id[64];
    char envd_token[256];
    char traffic_token[256];
    char envd_base[640];
    char envd_version[64];
};

/* A CURL handle set up for every call: no redirects, no proxy, http(s) only, the CA, no signals. */
CURL *e2b_curl(struct e2b_state *s, long timeout_ms);
/* One request with a JSON/empty body and a capped answer. Returns 0 when an answer came. */
int e2b_request(struct e2b_state *s, const char *method, const char *url, struct curl_slist *headers,
                const char *body, size_t blen, curl_mime *mime, CURL *h, long timeout_ms, size_t cap,
                struct e2b_answer *a);
/* POST /sandboxes. On failure err says whether a VM may exist (see api.c). grant_token NULL: no
 * grant. The sandbox is tracked as soon as an ID is known. */
/* PUT /sandboxes/{id}/network: E2B replaces the running sandbox's egress with deny-all, plus the
 * guard's rule carrying grant_token when it is not NULL (E2B_SESSION_GRANTS=call). */
int e2b_set_network(struct e2b_state *s, const char *id, const char *grant_token, struct plm_err *err);
int e2b_create(struct e2b_state *s, uint32_t budget_ms, const char *grant_token, struct e2b_sandbox *sb,
               struct plm_err *err);
/* GET /sandboxes/{id} and the caps; called only when a cap is set. */
int e2b_check_resources(struct e2b_state *s, const struct e2b_sandbox *sb, char *observed, size_t ocap,
                        struct plm_err *err);
/* DELETE with 3 tries (404 = gone); untracks on success; logs a failure. Returns 0 when gone. */
int e2b_delete(struct e2b_state *s, const char *id);
/* GET /sandboxes?metadata=instance=<ours>: kills the untracked ones older than min_age_s. */
int e2b_reconcile_once(struct e2b_state *s, int min_age_s, struct plm_err *err);

/* envd files */
struct e2b_upload {
    const char *path; /* absolute guest path */
    const char *data;
    size_t len;
};
int e2b_write_files(struct e2b_state *s, const struct e2b_sandbox *sb, const struct e2b_upload *f, size_t n,
                    int64_t deadline_ms, struct plm_err *err);
/* 1 = found (content filled, up to cap; *over when cut), 0 = missing (404), -1 = error. */
int e2b_read_file(struct e2b_state *s, const struct e2b_sandbox *sb, const char *path, size_t cap,
                  int64_t deadline_ms, struct plm_bytes *out, bool *over, struct plm_err *err);

/* ---- process.c ------------------------------------------------------------------------------ */
struct e2b_env {
    const char *key, *value;
};
struct e2b_proc_result {
    struct plm_bytes out, err;
    bool out_truncated, err_truncated, timed_out;
    int32_t exit_code;
    int64_t duration_ms;
};
/* process.Process/Start; waits for the end event or the deadline. A stream without an end event,
 * a trailer error or a frame over the limit is -1 (the guest may have run). */
int e2b_process(struct e2b_state *s, const struct e2b_sandbox *sb, const char *cmd, const char *const *args,
                size_t nargs, const char *cwd, const struct e2b_env *envs, size_t nenvs, int64_t deadline_ms,
                struct e2b_proc_result *r, struct plm_err *err);

/* The Start request's Connect envelope (JSON); with_stdin keeps the process's stdin open for
 * SendInput. malloc'd; NULL out of memory. */
char *e2b_start_body(const char *cmd, const char *const *args, size_t nargs, const char *cwd,
                     const struct e2b_env *envs, size_t nenvs, bool with_stdin, size_t *len);
/* Headers of an envd Connect call: its content type (application/connect+json for a stream,
 * application/json for a unary call), the protocol version, envd's tokens, Connect-Timeout-Ms. */
struct curl_slist *e2b_connect_headers(const struct e2b_sandbox *sb, const char *content_type, long timeout_ms);

/* ---- envdctl.c: what sessions add (unary envd calls, liveness) --------------------------------- */
int e2b_send_input(struct e2b_state *s, const struct e2b_sandbox *sb, int64_t pid, const uint8_t *data, size_t len,
                   int64_t deadline_ms, struct plm_err *err);
/* SIGKILL (kill9) or SIGTERM: the only two signals envd's API carries. */
int e2b_send_signal(struct e2b_state *s, const struct e2b_sandbox *sb, int64_t pid, bool kill9, long timeout_ms,
                    struct plm_err *err);
/* GET /sandboxes/{id}: 1 running, 0 gone (404), -1 unknown (no answer or another status). */
int e2b_sandbox_alive(struct e2b_state *s, const struct e2b_sandbox *sb);

/* ---- track.c (the tracked set), reconcile.c (the thread, the sweeps) -------------------------- */
int e2b_track(struct e2b_state *s, const char *id);
void e2b_untrack(struct e2b_state *s, const char *id);
bool e2b_is_tracked(struct e2b_state *s, const char *id);
int e2b_reconciler_start(struct e2b_state *s, struct plm_err *err);
void e2b_reconciler_stop(struct e2b_state *s);
void e2b_reconcile_soon(struct e2b_state *s, int delay_s);
/* Deletes every still-tracked sandbox (SIGTERM path, destroy). */
void e2b_delete_all(struct e2b_state *s);
/* SIGTERM / destroy: delete_all, then a reconcile of every untracked sandbox of our label. */
void e2b_shutdown_sweep(struct e2b_state *s);

/* ---- run.c / project.c / smoke.c ----------------------------------------------------------- */
int e2b_gate(struct e2b_state *s, const struct plm_run_ctx *ctx, const struct plm_request *req, struct plm_err *err);
int e2b_run_snippet(struct e2b_state *s, const struct plm_run_ctx *ctx, const struct plm_request *req,
                    struct plm_result *out, struct plm_err *err);
int e2b_run_project(struct e2b_state *s, const struct plm_run_ctx *ctx, const struct plm_request *req,
                    struct plm_result *out, struct plm_err *err);
int e2b_smoke(struct e2b_state *s, struct plm_err *err);
/* "/home/user/project/<rel>" when rel stays inside, else -1 (the caller reports illegal file path). */
int e2b_project_path(const char *rel, char *out, size_t cap);
/* The guest-side host module (guard transport + client), malloc'd; NULL out of memory. */
char *e2b_host_module(const char *guard_url, const char *client_js);
/* The snippet file: the guard transport and client (when granted), then the code. */
char *e2b_snippet_text(const char *guard_url, const char *client_js, const char *code);
/* The same, inside an existing sandbox (a session's): no create, no delete, no grant. cwd NULL =
 * envd's default. */
int e2b_snippet_in(struct e2b_state *s, const struct e2b_sandbox *sb, const struct plm_run_ctx *ctx,
                   const struct plm_request *req, const char *cwd, struct plm_result *out, struct plm_err *err);
int e2b_project_in(struct e2b_state *s, const struct e2b_sandbox *sb, const struct plm_run_ctx *ctx,
                   const struct plm_request *req, struct plm_result *out, struct plm_err *err);
/* e2b.c: the environment identity Describe, results and records state (the endpoint included
 * when it is not E2B's default). */
void e2b_identity(struct e2b_state *s, char *out, size_t cap);

/* ---- session.c: sessions (one sandbox each), the ops table's session entries ------------------ */
void e2b_ops_session_env(struct plm_provider *p, struct plm_payload_env *e);
int e2b_ops_session_open(struct plm_provider *p, const struct plm_session_spec *spec, struct plm_session **out,
                         struct plm_session_opened *info, struct plm_err *err);
int e2b_ops_session_run(struct plm_provider *p, struct plm_session *ss, const struct plm_run_ctx *ctx,
                        const struct plm_request *req, struct plm_result *out, enum plm_session_end *ended,
                        struct plm_err *err);
int e2b_ops_session_cell(struct plm_provider *p, struct plm_session *ss, const struct plm_run_ctx *ctx,
                         const struct plm_request *req, struct plm_result *out, enum plm_session_end *ended,
                         struct plm_err *err);
int e2b_ops_session_close(struct plm_provider *p, struct plm_session *ss, struct plm_err *err);

/* ---- util.c ---------------------------------------------------------------------------------- */
/* The core monotonic clock (core/clock.h), signed for the deadline arithmetic of this folder. */
static inline int64_t e2b_mono_ms(void) { return (int64_t)clock_mono_ms(); }
void e2b_log(const char *level, const char *event, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
int e2b_random_hex(char *out, size_t nbytes); /* out gets 2*nbytes hex + NUL */
