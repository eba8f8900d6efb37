/* broker.h: the transport-agnostic per-run grant broker (providers.md §5.3, §5.6).
 *
 * One brk_run serves one run of guest code: transports (the quickjs worker's framed host call,
 * the docker unix socket, an egress guard) hand every guest call to brk_call() and send back the
 * brk_reply exactly as given. All policy lives here: the check order, the budgets, the route
 * match, the circuit breaker, the upstream call and the trace. A transport never adds, drops or
 * rewrites anything, and never sees the credential.
 *
 * Check order of brk_call (each refusal is a plain-text answer, "<message>\n", with
 * Content-Type "text/plain; charset=utf-8"):
 *    1. no run (NULL)                 503 host api broker unavailable            (not counted)
 *    2. run ended                     503 host api grant has ended               denied
 *    3. 16 calls already in flight    429 host api broker is at capacity         denied
 *    4. call budget spent             429 host api call budget for this run is exhausted  denied
 *    5-6. method / raw target / route 403 forbidden by sandbox capability allowlist       denied
 *    7. a per-route cap spent         429 host api call budget for this route is exhausted denied
 *    8. circuit breaker open          503 host api is shedding load: upstream reported degraded  shed
 *    9. body over 1 MiB               413 host api request body too large        denied
 *   12. run ended meanwhile           503 host api grant has ended               denied
 *   13-16. upstream round trip: the upstream's status, body and Content-Type, or
 *                                     502 host api unavailable (transport error, timeout,
 *                                     Content-Length or body over 4 MiB, status outside 100..599)
 * Steps 3-4: the budget counts allowed and refused attempts alike, but not capacity refusals.
 *
 * Threads: brk_call may run on any number of threads at once (16 get a slot, the rest are
 * refused); brk_run_end may run concurrently with calls. A thread that may call after the owner's
 * brk_run_free holds a reference (brk_run_hold/brk_run_release). */
#pragma once
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "../core/err.h"
#include "profiles.h"

#define BRK_BODY_MAX (1u * 1024 * 1024)     /* (spec) request body */
#define BRK_RESPONSE_MAX (4u * 1024 * 1024) /* (spec) upstream response body */
#define BRK_CONCURRENCY 16                  /* (spec) calls in flight per run */
#define BRK_TRACE_ROWS 256                  /* (spec) trace rows kept per run */
#define BRK_CALL_TIMEOUT_MS 60000u          /* (spec) one upstream call, headers and body */
#define BRK_CONNECT_TIMEOUT_MS 10000u       /* connecting, inside the call timeout (ours) */
#define BRK_PROBE_TIMEOUT_MS 2000u          /* (spec) one health probe */
#define BRK_END_WAIT_MS 2000u               /* (spec) brk_run_end waits this long for calls */
#define BRK_RETRY_AFTER_MIN_S 1             /* (spec) breaker window clamp */
#define BRK_RETRY_AFTER_MAX_S 30
#define BRK_BUDGET_MS_MAX (24u * 3600 * 1000) /* a run budget (JWT lifetime) above this is refused */

#define BRK_CT_TEXT "text/plain; charset=utf-8"
#define BRK_CT_OCTET "application/octet-stream"

#define BRK_MSG_NO_BROKER "host api broker unavailable"
#define BRK_MSG_ENDED "host api grant has ended"
#define BRK_MSG_CAPACITY "host api broker is at capacity"
#define BRK_MSG_BUDGET "host api call budget for this run is exhausted"
#define BRK_MSG_FORBIDDEN "forbidden by sandbox capability allowlist"
#define BRK_MSG_ROUTE_BUDGET "host api call budget for this route is exhausted"
#define BRK_MSG_SHED "host api is shedding load: upstream reported degraded"
#define BRK_MSG_TOO_LARGE "host api request body too large"
#define BRK_MSG_UPSTREAM "host api unavailable"

/* One answer to the guest. The caller owns it and releases it with brk_reply_done(). */
struct brk_reply {
    int status;    /* HTTP status, 100..599 */
    uint8_t *body; /* len bytes (NULL when len is 0); not NUL-terminated */
    size_t len;
    const char *content_type; /* never NULL after brk_call: BRK_CT_TEXT for broker answers,
                               * else the upstream's (sanitised), or BRK_CT_OCTET */
    char *ct_owned;           /* private: storage behind content_type when it was copied */
};
void brk_reply_done(struct brk_reply *r);

struct brk_run;

/* Starts a run's broker: freezes a deep copy of the profile (without its secrets) and mints the
 * run's credential: the static token, or an HS256 JWT with sub = caller, the profile's scopes
 * and exp = now + ceil(budget_ms / 1000) s. Refusals are pre-dispatch: PLM_E_PERMISSION /
 * permission (caller not allowed, a subject that "requires a stable authenticated subject", a
 * mint failure); PLM_E_INVALID / request for budget_ms outside 1..BRK_BUDGET_MS_MAX. */
struct brk_run *brk_run_new(const struct brk_profile *p, const char *caller, uint32_t budget_ms, struct plm_err *err);
/* Sessions (issue 23 item 1): one route_max_calls budget is shared by a session's calls, while
 * max_calls stays per call. The daemon seeds a call's run with the per-route counts the earlier
 * calls left (before the run is handed to a transport) and reads them back after brk_run_end.
 * n is the profile's n_caps; extra entries are ignored. */
void brk_run_caps_seed(struct brk_run *r, const uint32_t *used, size_t n);
void brk_run_caps_read(struct brk_run *r, uint32_t *used, size_t n);

/* One guest call. method is any string (matched ignoring case); raw_target is the request
 * target exactly as the guest sent it (the docker transport must not decode it; a target holding
 * a NUL byte cannot be passed as a C string, so a transport answers it with 403 itself); body
 * may be NULL when body_len is 0. A transport reading a body stream should stop after
 * BRK_BODY_MAX + 1 bytes and pass what it read: anything over BRK_BODY_MAX is refused with 413.
 * out is always filled; release it with brk_reply_done(). */
void brk_call(struct brk_run *run, const char *method, const char *raw_target, const uint8_t *body, size_t body_len,
              struct brk_reply *out);

/* Ends the grant: later calls get 503 "host api grant has ended", in-flight upstream requests are
 * cancelled (within about a second, libcurl's progress tick), and it waits up to BRK_END_WAIT_MS
 * for calls in flight so the trace is complete. Idempotent; accepts NULL. Providers call it when
 * the run's code ends, before taking the trace. */
void brk_run_end(struct brk_run *run);
/* The owner's release: ends the run, then drops the owner's reference. The memory (and the
 * wiped credential) goes with the last reference. Accepts NULL. */
void brk_run_free(struct brk_run *run);
/* A transport thread that may reach brk_call after the owner freed the run holds a reference
 * (taken while the owner's is still alive) and releases it when it is done with the run. */
void brk_run_hold(struct brk_run *run);
void brk_run_release(struct brk_run *run);

/* The name of the run's profile (owned by the run), for audit lines and metrics. */
const char *brk_run_profile_name(const struct brk_run *run);

/* The metadata-only call trace (§5.6): never a path, body, header or token. */
struct brk_trace_row {
    uint32_t seq;        /* 1-based, over every recorded call (dropped ones included) */
    const char *method;  /* upper-case, from the matched route (static string) */
    char *route;         /* owned copy of the matched route template, e.g. "/v1/items/" "*" */
    int status;          /* upstream status; 0 when there was no answer */
    bool delivered;      /* the guest received the upstream's answer */
    uint64_t req_bytes;  /* request body bytes sent */
    uint64_t resp_bytes; /* response body bytes delivered (0 when not delivered) */
    uint64_t latency_us; /* the upstream round trip */
};
struct brk_trace {
    struct brk_trace_row *rows; /* at most BRK_TRACE_ROWS */
    size_t n_rows;
    uint64_t allowed; /* calls sent upstream (= rows + dropped) */
    uint64_t denied;  /* refusals: ended, capacity, budgets, route, body */
    uint64_t shed;    /* calls shed by the open circuit breaker */
    uint64_t dropped; /* recorded calls past BRK_TRACE_ROWS */
};
/* A snapshot, consistent under the run's lock; safe while calls continue. Returns 0 or -1 out of
 * memory (PLM_E_INTERNAL). The snapshot owns its strings and outlives the run. */
int brk_run_trace(struct brk_run *run, struct brk_trace *out, struct plm_err *err);
void brk_trace_done(struct brk_trace *t);
/* True when nothing at all was recorded: the result then carries no trace (nil, §5.6). */
bool brk_trace_empty(const struct brk_trace *t);

/* Tests only: shorter upstream and probe timeouts than the spec's 60 s and 2 s. Call before the
 * first brk_call. */
void brk_run_set_timeouts_for_test(struct brk_run *run, uint32_t call_ms, uint32_t probe_ms);
