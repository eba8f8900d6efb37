/* run.c: the Run procedure as one pipeline, decode -> check -> admit -> dispatch -> answer.
 * Trusts: the principal (authenticated by the HTTP layer); nothing in the body.
 * Owns: one struct run per call: the decode arena (the message and everything it points at), the
 * request view, the grant, the admission slot and the provider's result. run_done releases all
 * of them on every path (a cleanup attribute), so no stage frees or unwinds anything itself.
 * Invariant: the checks run in the order of wire.md §11.2 and nothing reaches the provider below
 * the floor. Every stage either succeeds or fills err through plm_refuse (provably nothing ran)
 * or plm_fail (code may have run, or the infrastructure broke); the counters and the audit line
 * read that mark from the error itself (plm_err_is_refusal), never from where it was raised. */
#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../core/arena.h"
#include "../core/cleanup.h"
#include "../core/clock.h"
#include "../core/limits.h"
#include "../core/module.h"
#include "../core/spend.h"
#include "../core/validate.h"
#include "../wire/connect_error.h"
#include "../wire/convert.h"
#include "grant.h"
#include "log.h"
#include "metrics_series.h"
#include "rpc.h"
#include "rpc_int.h"
#include "ui_ring.h"

struct run {
    const struct rpc_env *env;
    struct rpc_call call; /* the caller's deadline and presence (rpc.h) */
    const struct principal *who;
    const char *request_id;
    enum rpc_fmt fmt;
    int64_t received_unix_ms;
    uint64_t started_ms, started_us;

    struct plm_arena *arena; /* decode: the message lives here */
    Plimsoll__V1__RunRequest *msg;
    struct wire_request_view view;
    bool have_view;
    const struct plm_request *req;

    struct plm_describe d; /* check: what the provider states now */
    enum plm_tier floor;
    struct grant g;

    struct spend_hold *paid; /* step 16: the paid reservation, settled after dispatch */
    uint64_t paid_ms;        /* what the run was charged */
    bool admitted; /* admit: holds an admission slot */
    struct plm_run_ctx ctx;

    struct plm_result res; /* dispatch */
    bool dispatched;
    uint64_t provider_ms;

    json_t *audit_extra; /* grant counters for the audit line */
};

static void run_done(struct run *r)
{
    grant_end(&r->g, NULL); /* no-op once dispatch ended it */
    spend_settle(r->env->spend, r->paid, 0); /* refused before dispatch: nothing ran, nothing billed */
    if (r->admitted)
        adm_release(r->env->adm, r->who->id);
    json_decref(r->audit_extra);
    plm_result_done(&r->res);
    if (r->have_view)
        wire_request_view_done(&r->view);
    plm_arena_free(r->arena); /* the message and all it points at, at once */
}
#define cleanup_run __attribute__((cleanup(run_done)))

/* ---- stage 1: decode (§11.1 step 5) ------------------------------------------------------- */

/* The body was bounded by the HTTP layer; the arena bounds what decoding may build from it. */
static int run_decode(struct run *r, const char *body, size_t len, struct plm_err *err)
{
    r->arena = plm_arena_new(LIM_DECODE_ARENA_MAX);
    if (!r->arena)
        return plm_fail(err, ENOMEM, PLM_E_INTERNAL, "out of memory starting a decode");
    r->msg = (void *)rpc_decode(&plimsoll__v1__run_request__descriptor, r->fmt, body, len, r->arena, err);
    return r->msg ? 0 : -1;
}

/* ---- stage 2: check (§11.2 steps 7-15, then what the provider can do) --------------------- */

static const struct plm_payload_env *payload_env(const struct plm_describe *d, enum plm_kind k)
{
    return k == PLM_KIND_PROJECT ? &d->project : k == PLM_KIND_MODULE ? &d->module : &d->javascript;
}

/* Step 7 (§10). */
static int check_protocol(uint32_t p, struct plm_err *err)
{
    if (p == 0)
        return plm_refuse(err, PLM_E_PROTOCOL_UNSET, PLM_REFUSAL_PROTOCOL,
                          "protocol must be stated; this daemon serves protocol %d", PLM_PROTOCOL);
    if (p != PLM_PROTOCOL)
        return plm_refuse(err, PLM_E_PROTOCOL, PLM_REFUSAL_PROTOCOL,
                          "this daemon serves protocol %d and the request states %u; nothing ran", PLM_PROTOCOL, p);
    return 0;
}

/* Step 15: a stated rule must be satisfied by the identity the payload would run on. */
static int check_rule(const struct plm_request *r, const struct plm_payload_env *e, struct plm_err *err)
{
    if (!r->software_mode || !*r->software_mode)
        return 0;
    for (size_t i = 0; i < r->n_software_identities; i++)
        if (e->software_identity[0] && strcmp(r->software_identities[i], e->software_identity) == 0)
            return 0;
    return plm_refuse(err, PLM_E_ENVIRONMENT, PLM_REFUSAL_ENVIRONMENT,
                      "the software rule cannot be met: this provider runs \"%s\"",
                      e->software_identity[0] ? e->software_identity : "no stated software identity");
}

static int check_supported(const struct run *r, struct plm_err *err)
{
    const struct plm_provider_ops *ops = r->env->provider->ops;
    enum plm_kind k = r->req->kind;
    bool runs = (k == PLM_KIND_JAVASCRIPT && ops->run_javascript) || (k == PLM_KIND_PROJECT && ops->run_project) ||
                (k == PLM_KIND_MODULE && ops->run_module && r->d.supports_module);
    if (!runs)
        return plm_refuse(err, PLM_E_UNSUPPORTED, PLM_REFUSAL_UNSUPPORTED, "provider %s does not run %s payloads",
                          ops->name, plm_kind_name(k));
    bool grants = k == PLM_KIND_JAVASCRIPT ? r->d.supports_javascript_grants : r->d.supports_project_grants;
    if (r->g.profile && !grants)
        return plm_refuse(err, PLM_E_UNSUPPORTED, PLM_REFUSAL_UNSUPPORTED,
                          "provider %s does not support grants for %s payloads", ops->name, plm_kind_name(k));
    return 0;
}

static int run_check(struct run *r, struct plm_err *err)
{
    if (wire_request_view(r->msg, &r->view, err) < 0)
        return -1;
    r->have_view = true;
    r->req = &r->view.req;
    r->env->provider->ops->describe(r->env->provider, &r->d);
    const struct plm_request *q = r->req;
    if (check_protocol(q->protocol, err) < 0 ||                      /* 7 */
        tier_parse_floor(q->minimum_isolation, &r->floor, err) < 0 || /* 8 */
        plm_validate_rule(q, err) < 0 ||                             /* 9 */
        plm_validate_payload(q, err) < 0 ||                          /* 11, 12 (10 is clamping, below) */
        grant_select(r->env->grants, q, r->who->id, &r->g, err) < 0)  /* 13 */
        return -1;
    /* 14: the provider's *current* tier, before any admission, rate token or slot. */
    if (tier_check_floor(r->env->provider->ops->tier(r->env->provider), r->floor, err) < 0)
        return -1;
    if (check_rule(q, payload_env(&r->d, q->kind), err) < 0) /* 15 */
        return -1;
    return check_supported(r, err);
}

/* ---- stage 3: admit (§11.2 steps 16, 17) --------------------------------------------------- */

/* Step 16: on a provider billed by the second, the most this run can cost (its clamped timeout
 * plus the provider's teardown bound) is reserved against the caller's and the daemon's paid
 * allowances before any rate token or slot is spent. */
static int run_reserve(struct run *r, uint32_t timeout_ms, struct plm_err *err)
{
    if (!r->env->spend || !r->d.billing_teardown_ms)
        return 0;
    return spend_reserve(r->env->spend, r->who->id, r->who->paid_seconds_per_day,
                         (uint64_t)timeout_ms + r->d.billing_teardown_ms, SPEND_RUN, &r->paid, err);
}

static int run_admit(struct run *r, struct plm_err *err)
{
    const struct plm_payload_env *pe0 = payload_env(&r->d, r->req->kind);
    if (run_reserve(r, plm_clamp_timeout(r->req->timeout_ms, pe0->default_timeout_ms, pe0->max_timeout_ms), err) < 0)
        return -1;
    if (rpc_call_ended(&r->call, err) < 0) /* the caller gave up before a slot was spent on it */
        return -1;
    if (adm_acquire(r->env->adm, r->who->id, clock_mono_ms(), err) < 0)
        return -1;
    r->admitted = true;
    const struct plm_payload_env *pe = payload_env(&r->d, r->req->kind);
    r->ctx = (struct plm_run_ctx){
        .caller = r->who->id,
        .timeout_ms = plm_clamp_timeout(r->req->timeout_ms, pe->default_timeout_ms, pe->max_timeout_ms), /* 10 */
        .floor = r->floor,
        .trace_id = plm_trace_id_ok(r->req->trace_id) ? r->req->trace_id : NULL};
    return 0;
}

/* The grant's broker starts here, on the dispatching thread (rpc_run_finish). */
static int run_grant(struct run *r, struct plm_err *err)
{
    /* A worker may take it after the caller gave up: nothing runs for nobody. Otherwise the run
     * never outlives the caller's wait: its timeout is cut to the time left, so it ends as a
     * timed-out result by the deadline (docs/protocol.md, "Deadlines and a caller gone"). */
    if (rpc_call_ended(&r->call, err) < 0)
        return -1;
    uint64_t left = rpc_call_left_ms(&r->call, clock_mono_ms());
    if (left < r->ctx.timeout_ms)
        r->ctx.timeout_ms = left ? (uint32_t)left : 1;
    /* The credential is minted for this run's budget. A denial by the broker is a refusal; its
     * own faults are failures: grant_begin says which through the error it fills. */
    if (grant_begin(&r->g, r->who->id, r->ctx.timeout_ms, err) < 0)
        return -1;
    r->ctx.host_api = r->g.profile ? &r->g.api : NULL;
    return 0;
}

/* ---- stage 4: dispatch (§11.2 step 18) ---------------------------------------------------- */

static void add_host_calls(struct run *r)
{
    if (!r->g.profile || !r->env->counters->host_calls)
        return;
    struct rpc_host_calls *hc = &r->env->counters->host_calls[r->g.profile - r->env->grants->v];
    atomic_fetch_add(&hc->allowed, r->g.allowed);
    atomic_fetch_add(&hc->denied, r->g.denied);
    atomic_fetch_add(&hc->shed, r->g.shed);
}

static int run_dispatch(struct run *r, struct plm_err *err)
{
    const struct plm_provider_ops *ops = r->env->provider->ops;
    uint64_t t0 = clock_mono_ms();
    int rc = r->req->kind == PLM_KIND_PROJECT  ? ops->run_project(r->env->provider, &r->ctx, r->req, &r->res, err)
             : r->req->kind == PLM_KIND_MODULE ? ops->run_module(r->env->provider, &r->ctx, r->req, &r->res, err)
                                               : ops->run_javascript(r->env->provider, &r->ctx, r->req, &r->res, err);
    r->provider_ms = clock_mono_ms() - t0;
    if (r->paid) { /* charged the wall time of the provider call: create, run and delete */
        r->paid_ms = spend_settle(r->env->spend, r->paid, r->provider_ms);
        r->paid = NULL;
        json_object_set_new(r->audit_extra, "paid_seconds", json_real((double)r->paid_ms / 1000.0));
    }
    grant_end(&r->g, r->audit_extra); /* the grant ends with the run's code */
    add_host_calls(r);
    adm_release(r->env->adm, r->who->id);
    r->admitted = false;
    /* A provider's own refusal (disabled, its re-check of the floor) launched nothing. */
    r->dispatched = !(rc < 0 && plm_err_is_refusal(err));
    if (r->dispatched)
        atomic_fetch_add(&r->env->counters->dispatched, 1);
    return rc < 0 ? -1 : 0;
}

/* ---- stage 5: answer (§11.2 step 19, §13.7) ----------------------------------------------- */

/* The one stamp on a run's answer: the sandbox, environment and software identity this run's
 * Describe states for its kind (the same Describe the floor, the software rule and the timeout
 * were checked against), and the isolation the provider measured for the run (res->tier, never
 * Describe's: a tier that fell during the run shows on the answer, and an unset one is unknown). */
static int run_stamp(struct plm_result *res, const struct plm_describe *d, enum plm_kind kind)
{
    const struct plm_payload_env *e = payload_env(d, kind);
    return plm_result_stamp(res, d->sandbox, e->identity, e->software_identity);
}

static void stamp(const struct run *r, char *rule_id, struct plm_record *rec)
{
    memset(rec, 0, sizeof *rec);
    rec->version = 2;
    rec_request_digest(r->req, rec->request_sha256);
    rec_result_digest(&r->res, rec->result_sha256);
    rec->provider = r->res.sandbox;
    rec->isolation = r->res.isolation;
    rec->environment = r->res.environment;
    rec->policy = r->d.policy ? r->d.policy : "";
    rec->software_identity = r->res.software_identity;
    rec->software_rule_id = rule_id;
    rec->started_unix_ms = r->received_unix_ms;
    rec->ended_unix_ms = r->received_unix_ms + (int64_t)(clock_mono_ms() - r->started_ms);
    rec_record_digest(rec, rec->record_sha256);
}

static int run_answer(struct run *r, struct rpc_answer *ans, struct plm_err *err)
{
    if (r->req->kind == PLM_KIND_PROJECT)
        r->res.duration_ms = (int64_t)r->provider_ms; /* §12: the handler's wall clock for projects */
    r->res.kind = r->req->kind;
    cleanup_free char *rule_id =
        rec_rule_id(r->req->software_mode, r->req->software_identities, r->req->n_software_identities);
    if (!rule_id || run_stamp(&r->res, &r->d, r->req->kind) < 0)
        return plm_fail(err, ENOMEM, PLM_E_INTERNAL, "out of memory completing a result");
    struct plm_record rec;
    stamp(r, rule_id, &rec);
    Plimsoll__V1__RunResponse *out = wire_response_to_pb(&r->res, &rec);
    if (!out)
        return plm_fail(err, ENOMEM, PLM_E_INTERNAL, "out of memory building RunResponse");
    rpc_encode(ans, &out->base, r->fmt, r->request_id);
    protobuf_c_message_free_unpacked(&out->base, NULL);
    return 0;
}

/* ---- the audit line and the error answer -------------------------------------------------- */

static size_t payload_bytes(const struct plm_request *q)
{
    size_t n = 0;
    switch (q->kind) {
    case PLM_KIND_JAVASCRIPT: return strlen(q->js.code);
    case PLM_KIND_PROJECT:
        for (size_t i = 0; i < q->project.n_files; i++)
            n += strlen(q->project.files[i].content);
        for (size_t i = 0; i < q->project.n_steps; i++)
            n += strlen(q->project.steps[i]);
        return n;
    case PLM_KIND_CELL: return strlen(q->cell.code);
    default: return 0;
    }
}

/* The model, the table's shape and the step count of a module run (issue 21). */
static void audit_module(json_t *f, const struct plm_request *q)
{
    const char *model = q->module.model ? q->module.model : "";
    json_object_set_new(f, "model", json_stringn(model, strnlen(model, 64)));
    json_object_set_new(f, "rows", json_integer((json_int_t)q->module.n_rows));
    json_object_set_new(f, "row_width", json_integer(q->module.n_rows ? (json_int_t)q->module.rows[0].n_values : 0));
    double ratio = q->module.step > 0 ? q->module.end_time / q->module.step : 0;
    if (ratio > 0 && ratio <= PLM_MODULE_RATIO_MAX)
        json_object_set_new(f, "max_steps",
                            json_integer((json_int_t)plm_module_max_steps(q->module.end_time, q->module.step)));
}

static void audit(const struct run *r, const struct plm_err *err)
{
    const struct plm_request *q = r->req;
    json_t *f = json_object();
    if (r->request_id && *r->request_id)
        json_object_set_new(f, "request_id", json_string(r->request_id));
    json_object_set_new(f, "caller", json_string(r->who->id));
    if (plm_trace_id_ok(q->trace_id))
        json_object_set_new(f, "trace_id", json_string(q->trace_id));
    json_object_set_new(f, "provider", json_string(r->env->provider->ops->name));
    json_object_set_new(f, "tier", json_string(tier_name(r->env->provider->ops->tier(r->env->provider))));
    json_object_set_new(f, "floor", json_string(q->minimum_isolation ? q->minimum_isolation : ""));
    json_object_set_new(f, "kind", json_string(plm_kind_name(q->kind)));
    json_object_set_new(f, "payload_bytes", json_integer((json_int_t)payload_bytes(q)));
    const struct plm_result *res = &r->res;
    if (err && plm_err_is_refusal(err)) {
        json_object_set_new(f, "outcome", json_string("refused"));
        json_object_set_new(f, "reason", json_string(plm_refusal_name(err->refusal)));
    } else if (err) {
        json_object_set_new(f, "outcome", json_string("error"));
        json_object_set_new(f, "code", json_string(wire_connect_code(err->kind)));
    } else if (res->kind == PLM_KIND_JAVASCRIPT) {
        json_object_set_new(f, "outcome", json_string(res->js.timed_out ? "timed_out" : "exited"));
        json_object_set_new(f, "exit_code", json_integer(res->js.exit_code));
        json_object_set_new(f, "stdout_bytes", json_integer((json_int_t)res->js.out.len));
        json_object_set_new(f, "stderr_bytes", json_integer((json_int_t)res->js.err.len));
    } else if (res->kind == PLM_KIND_PROJECT) {
        json_object_set_new(f, "outcome", json_string("project"));
        json_object_set_new(f, "project_outcome", json_integer(res->project.outcome));
    } else if (res->kind == PLM_KIND_MODULE) {
        json_object_set_new(f, "outcome", json_string("module"));
        json_object_set_new(f, "module_outcome", json_integer(res->module.outcome));
        json_object_set_new(f, "module_runs", json_integer((json_int_t)res->module.n_runs));
        json_object_set_new(f, "module_width", json_integer(res->module.width));
    }
    if (q->kind == PLM_KIND_MODULE) /* sizes only: never a parameter value */
        audit_module(f, q);
    uint64_t us = clock_mono_us() - r->started_us;
    json_object_set_new(f, "duration_us", json_integer((json_int_t)us));
    metrics_note_run(err && plm_err_is_refusal(err)          ? MS_REFUSED
                     : err                                   ? MS_ERROR
                     : res->kind == PLM_KIND_PROJECT         ? MS_PROJECT
                     : res->kind == PLM_KIND_MODULE          ? MS_PROJECT
                     : res->js.timed_out                     ? MS_TIMED_OUT
                                                             : MS_EXITED,
                     us);
    if (r->audit_extra)
        json_object_update(f, r->audit_extra);
    log_event("info", "run", f);
}

/* The audit line of a request refused while decoding (an unknown JSON field, a count over its
 * limit): nothing of the payload is known yet, so it says who, where and why, and that nothing ran. */
static void audit_decode_refusal(const struct run *r, const struct plm_err *err)
{
    json_t *f = json_object();
    if (r->request_id && *r->request_id)
        json_object_set_new(f, "request_id", json_string(r->request_id));
    json_object_set_new(f, "caller", json_string(r->who->id));
    json_object_set_new(f, "provider", json_string(r->env->provider->ops->name));
    json_object_set_new(f, "tier", json_string(tier_name(r->env->provider->ops->tier(r->env->provider))));
    json_object_set_new(f, "outcome", json_string("refused"));
    json_object_set_new(f, "reason", json_string(plm_refusal_name(err->refusal)));
    json_object_set_new(f, "stage", json_string("decode"));
    uint64_t us = clock_mono_us() - r->started_us;
    json_object_set_new(f, "duration_us", json_integer((json_int_t)us));
    metrics_note_run(MS_REFUSED, us);
    log_event("info", "run", f);
}

/* Counts the error by its own mark: a refusal launched nothing; anything else (an internal
 * fault before dispatch included) is a failure. */
static void run_failed(struct run *r, const struct plm_err *err, struct rpc_answer *ans)
{
    if (plm_err_is_refusal(err))
        atomic_fetch_add(&r->env->counters->refused, 1);
    else
        atomic_fetch_add(&r->env->counters->failed, 1);
    rpc_error(ans, err, r->request_id);
    if (r->req)
        audit(r, err);
}

/* Decode, check and admit: no provider work, nothing that waits. 1: answered in ans (a refusal,
 * a decode error, shed); 0: admitted, to be dispatched by run_back. */
static int run_front(struct run *r, const char *body, size_t len, struct rpc_answer *ans)
{
    struct plm_err err = {0};
    if (run_decode(r, body, len, &err) < 0) {
        /* A count limit or an unknown JSON field refused while decoding is payload validation
         * (§11.2 step 12) done early: answered, counted and audited as the handler's refusal.
         * Anything else is Connect's own decode error. */
        if (plm_err_is_refusal(&err)) {
            atomic_fetch_add(&r->env->counters->refused, 1);
            rpc_error(ans, &err, r->request_id);
            audit_decode_refusal(r, &err);
        } else {
            rpc_decode_failed(ans, &err, r->request_id);
        }
        return 1;
    }
    r->audit_extra = json_object();
    if (run_check(r, &err) < 0 || run_admit(r, &err) < 0) {
        run_failed(r, &err, ans);
        ui_ring_note(r->env->ring, r->request_id, r->who->id, r->msg, ans); /* no-op when off */
        return 1;
    }
    return 0;
}

static void run_back(struct run *r, struct rpc_answer *ans)
{
    struct plm_err err = {0};
    if (run_grant(r, &err) < 0 || run_dispatch(r, &err) < 0 || run_answer(r, ans, &err) < 0)
        run_failed(r, &err, ans);
    else
        audit(r, NULL);
    ui_ring_note(r->env->ring, r->request_id, r->who->id, r->msg, ans); /* PLIMSOLL_UI's run cards */
}

static void run_init(struct run *r, const struct rpc_env *env, const struct rpc_call *call)
{
    *r = (struct run){.env = env, .call = *call, .who = call->who, .request_id = call->request_id,
                      .fmt = call->fmt, .received_unix_ms = clock_unix_ms(), .started_ms = clock_mono_ms(),
                      .started_us = clock_mono_us(), .floor = PLM_TIER_UNKNOWN};
}

void rpc_run(const struct rpc_env *env, const struct rpc_call *call, struct rpc_answer *ans)
{
    cleanup_run struct run r;
    run_init(&r, env, call);
    if (run_front(&r, call->body, call->len, ans) == 0)
        run_back(&r, ans);
}

struct rpc_run *rpc_run_begin(const struct rpc_env *env, const struct rpc_call *call, struct rpc_answer *ans)
{
    struct run *r = malloc(sizeof *r);
    if (!r) {
        struct plm_err err;
        plm_fail(&err, ENOMEM, PLM_E_INTERNAL, "out of memory starting a run");
        rpc_error(ans, &err, call->request_id);
        return NULL;
    }
    run_init(r, env, call);
    if (run_front(r, call->body, call->len, ans) == 0)
        return (struct rpc_run *)r;
    run_done(r);
    free(r);
    return NULL;
}

void rpc_run_finish(struct rpc_run *run, struct rpc_answer *ans)
{
    struct run *r = (struct run *)run;
    run_back(r, ans);
    run_done(r);
    free(r);
}

void rpc_run_abandon(struct rpc_run *run)
{
    if (!run)
        return;
    run_done((struct run *)run); /* gives the admission slot back: nothing ran */
    free(run);
}
