/* broker.c: the per-run grant broker (providers.md §5.3, §5.6): the run's lifecycle and its
 * trace. The call itself is broker_call.c; libcurl is broker_http.c (broker_run.h lays out the
 * three files and the state they share).
 * Owns: a frozen copy of the run's profile, the run's credential, a small pool of libcurl easy
 * handles (one per call slot, so connections are reused), the breaker state and the trace.
 * Invariants:
 *  - The checks run in the order of broker.h, all before any byte goes upstream; the target that
 *    was matched is the exact byte string sent (route.h), so there is no decode-after-check gap.
 *  - Only Accept, Content-Type and Authorization are chosen by us; curl adds Host and
 *    Content-Length; nothing from the guest becomes a header, and nothing from the upstream but
 *    status, body and a sanitised Content-Type reaches the guest.
 *  - The credential lives in `cred` and the two prepared header lists; both are wiped on free.
 *    It never enters a reply, a trace row, an error message or a log line.
 * Locking: `mu` guards every mutable field (inflight, budgets, caps, breaker, trace, pool);
 * it is never held across network I/O. `ended` is also an atomic so that libcurl's progress
 * callback can cancel a transfer without the lock. */
#include "../core/clock.h"
#include "broker_run.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../core/cleanup.h"
#include "jwt.h"

static pthread_once_t curl_once = PTHREAD_ONCE_INIT;
static CURLcode curl_init_rc = CURLE_FAILED_INIT;
static void curl_init(void)
{
    curl_init_rc = curl_global_init(CURL_GLOBAL_DEFAULT);
}

/* ---- run lifecycle ------------------------------------------------------------------- */

/* The checks before anything is allocated: the profile, the budget, the caller. */
static int entry_checks(const struct brk_profile *p, const char *caller, uint32_t budget_ms, struct plm_err *err)
{
    if (!p)
        return plm_fail(err, 0, PLM_E_INTERNAL, "grant: no profile");
    if (budget_ms == 0 || budget_ms > BRK_BUDGET_MS_MAX)
        return plm_refuse(err, PLM_E_INVALID, PLM_REFUSAL_REQUEST, "grant: run budget %u ms is outside 1..%u ms",
                          budget_ms, BRK_BUDGET_MS_MAX);
    /* A subject-bound minter checks the subject before anything else (§5.2). */
    if (p->token_type == BRK_TOKEN_JWT && !brk_subject_ok(caller))
        return plm_refuse(err, PLM_E_PERMISSION, PLM_REFUSAL_PERMISSION,
                          "grant token: minting a per-caller credential requires a stable "
                          "authenticated subject");
    /* Defence in depth: the RPC layer selected the profile for this caller already. */
    if (!brk_profile_caller_allowed(p, caller))
        return plm_refuse(err, PLM_E_PERMISSION, PLM_REFUSAL_PERMISSION,
                          "grant_profile \"%s\" is not available to this caller", p->name);
    pthread_once(&curl_once, curl_init);
    if (curl_init_rc != CURLE_OK)
        return plm_fail(err, 0, PLM_E_INTERNAL, "grant: libcurl did not initialise");
    return 0;
}

/* The bare run: locks, defaults, the frozen profile and the cap counters; NULL when out of
 * memory (nothing is left allocated). */
static struct brk_run *run_alloc(const struct brk_profile *p)
{
    struct brk_run *r = calloc(1, sizeof *r);
    if (!r)
        return NULL;
    pthread_mutex_init(&r->mu, NULL);
    clock_cond_init(&r->idle);
    atomic_init(&r->ended, false);
    atomic_init(&r->refs, 1u);
    r->call_timeout_ms = BRK_CALL_TIMEOUT_MS;
    r->connect_timeout_ms = BRK_CONNECT_TIMEOUT_MS;
    r->probe_timeout_ms = BRK_PROBE_TIMEOUT_MS;
    r->g = brk_profile_clone(p, false);
    r->cap_used = calloc(p->n_caps ? p->n_caps : 1, sizeof *r->cap_used);
    if (!r->g || !r->cap_used) {
        brk_run_free(r);
        return NULL;
    }
    return r;
}

/* Mint once per run, before dispatch (§5.2): the static token copied, or a JWT for this caller. */
static int mint(struct brk_run *r, const struct brk_profile *p, const char *caller, uint32_t budget_ms,
                struct plm_err *err)
{
    if (p->token_type == BRK_TOKEN_STATIC) {
        if (!brk_token_ok(p->secret.data, p->secret.len) || brk_secret_set(&r->cred, p->secret.data, p->secret.len) < 0)
            return plm_refuse(err, PLM_E_PERMISSION, PLM_REFUSAL_PERMISSION,
                              "grant token: the static token is not usable");
    } else if (p->token_type == BRK_TOKEN_JWT) {
        struct brk_jwt_params jp = {
            .key = &p->secret,
            .issuer = p->jwt_issuer,
            .audience = p->jwt_audience,
            .subject = caller,
            .scopes = (const char *const *)p->scopes,
            .n_scopes = p->n_scopes,
            .now_unix = (int64_t)time(NULL),
            /* token.ttl_sec when the profile sets it, else the run's time budget (§5.2) */
            .ttl_s = p->jwt_ttl_s ? p->jwt_ttl_s : (budget_ms + 999) / 1000,
            .key_id = p->jwt_key_id,
        };
        return brk_jwt_mint(&jp, &r->cred, err);
    }
    return 0;
}

DEFINE_CLEANUP(struct brk_run, brk_run_free)

struct brk_run *brk_run_new(const struct brk_profile *p, const char *caller, uint32_t budget_ms, struct plm_err *err)
{
    if (entry_checks(p, caller, budget_ms, err) < 0)
        return NULL;
    struct brk_run *r cleanup_(brk_run_free) = run_alloc(p);
    if (!r)
        return plm_fail(err, ENOMEM, PLM_E_INTERNAL, "grant: out of memory"), NULL;
    if (mint(r, p, caller, budget_ms, err) < 0)
        return NULL;
    r->hdr_body = brk_headers_build(&r->cred, true);
    r->hdr_empty = brk_headers_build(&r->cred, false);
    if (!r->hdr_body || !r->hdr_empty)
        return plm_fail(err, ENOMEM, PLM_E_INTERNAL, "grant: out of memory"), NULL;
    return take_ptr(&r);
}

void brk_run_set_timeouts_for_test(struct brk_run *run, uint32_t call_ms, uint32_t probe_ms)
{
    pthread_mutex_lock(&run->mu);
    run->call_timeout_ms = call_ms;
    run->connect_timeout_ms = call_ms < BRK_CONNECT_TIMEOUT_MS ? call_ms : BRK_CONNECT_TIMEOUT_MS;
    run->probe_timeout_ms = probe_ms;
    pthread_mutex_unlock(&run->mu);
}

void brk_run_caps_seed(struct brk_run *r, const uint32_t *used, size_t n)
{
    pthread_mutex_lock(&r->mu);
    for (size_t i = 0; i < n && i < r->g->n_caps; i++)
        r->cap_used[i] = used[i];
    pthread_mutex_unlock(&r->mu);
}

void brk_run_caps_read(struct brk_run *r, uint32_t *used, size_t n)
{
    pthread_mutex_lock(&r->mu);
    for (size_t i = 0; i < n && i < r->g->n_caps; i++)
        used[i] = r->cap_used[i];
    pthread_mutex_unlock(&r->mu);
}

const char *brk_run_profile_name(const struct brk_run *run)
{
    return run ? run->g->name : "";
}

void brk_run_end(struct brk_run *run)
{
    if (!run)
        return;
    pthread_mutex_lock(&run->mu);
    atomic_store(&run->ended, true);
    /* idle waits on CLOCK_MONOTONIC (run_alloc), the clock of clock_mono_ms */
    uint64_t until_ms = clock_mono_ms() + BRK_END_WAIT_MS;
    struct timespec deadline = {.tv_sec = (time_t)(until_ms / 1000), .tv_nsec = (long)(until_ms % 1000) * 1000000L};
    while (run->inflight > 0)
        if (pthread_cond_timedwait(&run->idle, &run->mu, &deadline) == ETIMEDOUT)
            break;
    pthread_mutex_unlock(&run->mu);
}

void brk_run_free(struct brk_run *run)
{
    if (!run)
        return;
    brk_run_end(run);
    brk_run_release(run);
}

void brk_run_hold(struct brk_run *run)
{
    atomic_fetch_add(&run->refs, 1u);
}

void brk_run_release(struct brk_run *run)
{
    if (!run || atomic_fetch_sub(&run->refs, 1u) != 1u)
        return;
    /* Holders never keep a call open past their release, but a caller without a hold could
     * still be inside brk_call; it was cancelled by End, so this wait is bounded. */
    pthread_mutex_lock(&run->mu);
    while (run->inflight > 0)
        pthread_cond_wait(&run->idle, &run->mu);
    pthread_mutex_unlock(&run->mu);
    for (size_t i = 0; i < run->n_pool; i++)
        curl_easy_cleanup(run->pool[i]);
    brk_headers_free(run->hdr_body);
    brk_headers_free(run->hdr_empty);
    brk_secret_done(&run->cred);
    brk_profile_free(run->g);
    free(run->cap_used);
    free(run->rows);
    pthread_cond_destroy(&run->idle);
    pthread_mutex_destroy(&run->mu);
    free(run);
}

/* ---- trace --------------------------------------------------------------------------- */

void brk_trace_done(struct brk_trace *t)
{
    if (!t)
        return;
    for (size_t i = 0; t->rows && i < t->n_rows; i++)
        free(t->rows[i].route);
    free(t->rows);
    *t = (struct brk_trace){0};
}

bool brk_trace_empty(const struct brk_trace *t)
{
    return !t || (t->n_rows == 0 && t->allowed == 0 && t->denied == 0 && t->shed == 0 && t->dropped == 0);
}

int brk_run_trace(struct brk_run *r, struct brk_trace *out, struct plm_err *err)
{
    *out = (struct brk_trace){0};
    if (!r)
        return 0;
    pthread_mutex_lock(&r->mu);
    int rc = 0;
    out->allowed = r->allowed;
    out->denied = r->denied;
    out->shed = r->shed;
    out->dropped = r->dropped;
    if (r->n_rows > 0) {
        out->rows = calloc(r->n_rows, sizeof *out->rows);
        if (!out->rows)
            rc = -1;
        for (size_t i = 0; rc == 0 && i < r->n_rows; i++) {
            const struct row *w = &r->rows[i];
            const struct brk_route *rt = &r->g->routes[w->route];
            struct brk_trace_row *o = &out->rows[i];
            o->route = strdup(rt->path);
            if (!o->route) {
                rc = -1;
                break;
            }
            out->n_rows++;
            o->seq = w->seq;
            o->method = brk_method_name(rt->method);
            o->status = w->status;
            o->delivered = w->delivered;
            o->req_bytes = w->req_bytes;
            o->resp_bytes = w->resp_bytes;
            o->latency_us = w->latency_us;
        }
    }
    pthread_mutex_unlock(&r->mu);
    if (rc < 0) {
        brk_trace_done(out);
        return plm_fail(err, ENOMEM, PLM_E_INTERNAL, "grant trace: out of memory");
    }
    return 0;
}
