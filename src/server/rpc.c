/* rpc.c: Run and Describe.
 * Trusts: the principal (authenticated by the HTTP layer); nothing in the body.
 * Invariant: the checks run in the order of wire.md §11.2; every refusal before dispatch carries
 * a NotDispatched reason and never touches the provider's run path or an admission slot beyond
 * its own step; a dispatched run that fails is never marked not dispatched. */
#include "rpc.h"

#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../core/validate.h"
#include "../wire/connect_error.h"
#include "../wire/convert.h"
#include "../wire/json_codec.h"
#include "grant.h"
#include "log.h"
#include "ui_ring.h"

static uint64_t mono_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

static uint64_t mono_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000 + (uint64_t)ts.tv_nsec / 1000;
}

static int64_t unix_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

void rpc_error(struct rpc_answer *ans, const struct plm_err *err, const char *request_id)
{
    const char *code = wire_connect_code(err->kind);
    char msg[600];
    enum plm_refusal refusal = err->refusal;
    if (strcmp(code, "internal") == 0) {
        char id[17];
        log_internal_error(request_id, err->msg, id);
        snprintf(msg, sizeof msg, "internal error %s; the daemon's log holds its detail", id);
        refusal = PLM_REFUSAL_NONE; /* an infrastructure fault never claims that nothing ran */
    } else {
        snprintf(msg, sizeof msg, "%s", err->msg);
    }
    free(ans->body);
    ans->body = wire_connect_error_json(code, msg, refusal, &ans->len);
    ans->status = wire_connect_status(code);
    ans->fmt = RPC_JSON;
    if (!ans->body) {
        ans->status = 500;
        ans->len = 0;
    }
}

/* Decodes either content type. Binary input is re-measured after unpacking: protobuf-c stores
 * strings NUL-terminated, so a string with an embedded NUL would otherwise shrink silently and
 * change what is digested; such input (and any non-canonical encoding) is refused as malformed. */
static ProtobufCMessage *decode(const ProtobufCMessageDescriptor *d, enum rpc_fmt fmt, const char *body,
                                size_t len, struct plm_err *err)
{
    if (fmt == RPC_JSON)
        return wire_json_decode(d, body, len, err);
    ProtobufCMessage *m = protobuf_c_message_unpack(d, NULL, len, (const uint8_t *)body);
    if (!m) {
        plm_err_set(err, 0, PLM_E_INVALID, PLM_REFUSAL_NONE, "malformed binary %s", d->name);
        return NULL;
    }
    if (protobuf_c_message_get_packed_size(m) != len) {
        protobuf_c_message_free_unpacked(m, NULL);
        plm_err_set(err, 0, PLM_E_INVALID, PLM_REFUSAL_NONE,
                    "binary %s is not in canonical form (or holds a string with a NUL byte)", d->name);
        return NULL;
    }
    return m;
}

static void encode(struct rpc_answer *ans, const ProtobufCMessage *m, enum rpc_fmt fmt, const char *request_id)
{
    if (fmt == RPC_JSON) {
        ans->body = wire_json_encode(m, &ans->len);
    } else {
        ans->len = protobuf_c_message_get_packed_size(m);
        ans->body = malloc(ans->len ? ans->len : 1);
        if (ans->body)
            protobuf_c_message_pack(m, (uint8_t *)ans->body);
    }
    if (!ans->body) {
        struct plm_err e;
        plm_err_set(&e, 12, PLM_E_INTERNAL, PLM_REFUSAL_NONE, "out of memory encoding %s", m->descriptor->name);
        rpc_error(ans, &e, request_id);
        return;
    }
    ans->status = 200;
    ans->fmt = fmt;
}

static void decode_failed(struct rpc_answer *ans, const struct plm_err *err, const char *request_id)
{
    rpc_error(ans, err, request_id);
    ans->pre_handler = true; /* Connect's own decoding precedes the handler (§11.1 step 5) */
    ans->header_reason = PLM_REFUSAL_REQUEST;
}

void rpc_session_unsupported(struct rpc_answer *ans, const char *request_id)
{
    struct plm_err e;
    plm_err_set(&e, 0, PLM_E_UNSUPPORTED, PLM_REFUSAL_UNSUPPORTED, "sessions are not supported by this daemon");
    rpc_error(ans, &e, request_id);
}

void rpc_describe(const struct rpc_env *env, enum rpc_fmt fmt, const char *body, size_t len,
                  const char *request_id, struct rpc_answer *ans)
{
    struct plm_err err = {0};
    ProtobufCMessage *req = decode(&plimsoll__v1__describe_request__descriptor, fmt, body, len, &err);
    if (!req) {
        decode_failed(ans, &err, request_id);
        return;
    }
    protobuf_c_message_free_unpacked(req, NULL);
    struct plm_describe d = {0};
    env->provider->ops->describe(env->provider, &d);
    Plimsoll__V1__DescribeResponse *m = wire_describe_to_pb(&d, PLM_PROTOCOL);
    if (!m) {
        plm_err_set(&err, 12, PLM_E_INTERNAL, PLM_REFUSAL_NONE, "out of memory building Describe");
        rpc_error(ans, &err, request_id);
        return;
    }
    encode(ans, &m->base, fmt, request_id);
    protobuf_c_message_free_unpacked(&m->base, NULL);
}

/* What one Run did, for the audit line. */
struct run_audit {
    const char *caller;
    const char *trace_id;
    size_t payload_bytes;
    const char *floor;
    enum plm_kind kind;
    const struct plm_err *err; /* NULL when answered */
    const struct plm_result *res;
    uint64_t started_us;
    json_t *extra; /* grant counters; merged, not owned */
};

static void audit(const struct rpc_env *env, const char *request_id, const struct run_audit *a)
{
    json_t *f = json_object();
    if (request_id && *request_id)
        json_object_set_new(f, "request_id", json_string(request_id));
    json_object_set_new(f, "caller", json_string(a->caller));
    if (a->trace_id)
        json_object_set_new(f, "trace_id", json_string(a->trace_id));
    json_object_set_new(f, "provider", json_string(env->provider->ops->name));
    json_object_set_new(f, "tier", json_string(tier_name(env->provider->ops->tier(env->provider))));
    json_object_set_new(f, "floor", json_string(a->floor ? a->floor : ""));
    json_object_set_new(f, "kind", json_string(plm_kind_name(a->kind)));
    json_object_set_new(f, "payload_bytes", json_integer((json_int_t)a->payload_bytes));
    if (a->err && a->err->refusal != PLM_REFUSAL_NONE) {
        json_object_set_new(f, "outcome", json_string("refused"));
        json_object_set_new(f, "reason", json_string(plm_refusal_name(a->err->refusal)));
    } else if (a->err) {
        json_object_set_new(f, "outcome", json_string("error"));
        json_object_set_new(f, "code", json_string(wire_connect_code(a->err->kind)));
    } else if (a->res && a->res->kind == PLM_KIND_JAVASCRIPT) {
        json_object_set_new(f, "outcome", json_string(a->res->js.timed_out ? "timed_out" : "exited"));
        json_object_set_new(f, "exit_code", json_integer(a->res->js.exit_code));
        json_object_set_new(f, "stdout_bytes", json_integer((json_int_t)a->res->js.out.len));
        json_object_set_new(f, "stderr_bytes", json_integer((json_int_t)a->res->js.err.len));
    } else if (a->res && a->res->kind == PLM_KIND_PROJECT) {
        json_object_set_new(f, "outcome", json_string("project"));
        json_object_set_new(f, "project_outcome", json_integer(a->res->project.outcome));
    }
    json_object_set_new(f, "duration_us", json_integer((json_int_t)(mono_us() - a->started_us)));
    if (a->extra)
        json_object_update(f, a->extra);
    log_event("info", "run", f);
}

static size_t payload_bytes(const struct plm_request *r)
{
    size_t n = 0;
    switch (r->kind) {
    case PLM_KIND_JAVASCRIPT: return strlen(r->js.code);
    case PLM_KIND_PROJECT:
        for (size_t i = 0; i < r->project.n_files; i++)
            n += strlen(r->project.files[i].content);
        for (size_t i = 0; i < r->project.n_steps; i++)
            n += strlen(r->project.steps[i]);
        return n;
    case PLM_KIND_CELL: return strlen(r->cell.code);
    default: return 0;
    }
}

static int check_protocol(uint32_t p, struct plm_err *err)
{
    if (p == 0)
        return plm_err_set(err, 0, PLM_E_PROTOCOL_UNSET, PLM_REFUSAL_PROTOCOL,
                           "protocol must be stated; this daemon serves protocol %d", PLM_PROTOCOL);
    if (p != PLM_PROTOCOL)
        return plm_err_set(err, 0, PLM_E_PROTOCOL, PLM_REFUSAL_PROTOCOL,
                           "this daemon serves protocol %d and the request states %u; nothing ran", PLM_PROTOCOL, p);
    return 0;
}

static const struct plm_payload_env *payload_env(const struct plm_describe *d, enum plm_kind k)
{
    return k == PLM_KIND_PROJECT ? &d->project : k == PLM_KIND_MODULE ? &d->module : &d->javascript;
}

/* §11.2 step 15: a stated rule must be satisfied by the identity the payload would run on. */
static int check_rule(const struct plm_request *r, const struct plm_payload_env *e, struct plm_err *err)
{
    if (!r->software_mode || !*r->software_mode)
        return 0;
    for (size_t i = 0; i < r->n_software_identities; i++)
        if (e->software_identity[0] && strcmp(r->software_identities[i], e->software_identity) == 0)
            return 0;
    return plm_err_set(err, 0, PLM_E_ENVIRONMENT, PLM_REFUSAL_ENVIRONMENT,
                       "the software rule cannot be met: this provider runs \"%s\"",
                       e->software_identity[0] ? e->software_identity : "no stated software identity");
}

static int check_supported(const struct rpc_env *env, const struct plm_describe *d, enum plm_kind k, bool grant,
                           struct plm_err *err)
{
    const struct plm_provider_ops *ops = env->provider->ops;
    bool runs = (k == PLM_KIND_JAVASCRIPT && ops->run_javascript) || (k == PLM_KIND_PROJECT && ops->run_project);
    if (!runs)
        return plm_err_set(err, 0, PLM_E_UNSUPPORTED, PLM_REFUSAL_UNSUPPORTED, "provider %s does not run %s payloads",
                           ops->name, plm_kind_name(k));
    bool grants = k == PLM_KIND_JAVASCRIPT ? d->supports_javascript_grants : d->supports_project_grants;
    if (grant && !grants)
        return plm_err_set(err, 0, PLM_E_UNSUPPORTED, PLM_REFUSAL_UNSUPPORTED,
                           "provider %s does not support grants for %s payloads", ops->name, plm_kind_name(k));
    return 0;
}

/* The pre-dispatch part of §11.2 (steps 7-15) plus the capability check. */
static int precheck(const struct rpc_env *env, const struct plm_request *r, const struct plm_describe *d,
                    const char *caller, enum plm_tier *floor, struct grant *g, struct plm_err *err)
{
    if (check_protocol(r->protocol, err) < 0 || tier_parse_floor(r->minimum_isolation, floor, err) < 0 ||
        plm_validate_rule(r, err) < 0 || plm_validate_payload(r, err) < 0 ||
        grant_select(env->grants, r, caller, g, err) < 0)
        return -1;
    /* The floor is compared with the provider's *current* tier before any admission work. */
    if (tier_check_floor(env->provider->ops->tier(env->provider), *floor, err) < 0)
        return -1;
    if (check_rule(r, payload_env(d, r->kind), err) < 0)
        return -1;
    return check_supported(env, d, r->kind, g->profile != NULL, err);
}

static void stamp(const struct plm_request *req, const struct plm_result *res, const struct plm_describe *d,
                  int64_t received_ms, uint64_t started_mono, char *rule_id, struct plm_record *rec)
{
    memset(rec, 0, sizeof *rec);
    rec->version = 2;
    rec_request_digest(req, rec->request_sha256);
    rec_result_digest(res, rec->result_sha256);
    rec->provider = res->sandbox;
    rec->isolation = res->isolation;
    rec->environment = res->environment;
    rec->policy = d->policy ? d->policy : "";
    rec->software_identity = res->software_identity;
    rec->software_rule_id = rule_id;
    rec->started_unix_ms = received_ms;
    uint64_t elapsed = mono_ms() - started_mono;
    rec->ended_unix_ms = received_ms + (int64_t)elapsed;
    rec_record_digest(rec, rec->record_sha256);
}

/* Fills the evidence fields the provider left empty from what Describe states. */
static int complete_result(struct plm_result *res, const struct plm_describe *d, enum plm_kind kind)
{
    const struct plm_payload_env *e = payload_env(d, kind);
    if (!res->sandbox)
        res->sandbox = strdup(d->sandbox);
    if (!res->isolation)
        res->isolation = strdup(tier_name(d->tier));
    if (!res->environment || !*res->environment) {
        free(res->environment);
        res->environment = strdup(e->identity);
    }
    if (!res->software_identity)
        res->software_identity = strdup("");
    return res->sandbox && res->isolation && res->environment && res->software_identity ? 0 : -1;
}

void rpc_run(const struct rpc_env *env, const struct principal *who, const char *request_id, enum rpc_fmt fmt,
             const char *body, size_t len, struct rpc_answer *ans)
{
    int64_t received_ms = unix_ms();
    uint64_t started_mono = mono_ms(), started_us = mono_us();
    struct plm_err err = {0};
    Plimsoll__V1__RunRequest *m = (void *)decode(&plimsoll__v1__run_request__descriptor, fmt, body, len, &err);
    if (!m) {
        decode_failed(ans, &err, request_id);
        return;
    }
    struct wire_request_view view;
    if (wire_request_view(m, &view, &err) < 0) {
        rpc_error(ans, &err, request_id);
        protobuf_c_message_free_unpacked(&m->base, NULL);
        return;
    }
    const struct plm_request *req = &view.req;
    struct run_audit au = {.caller = who->id, .floor = req->minimum_isolation, .kind = req->kind,
                           .payload_bytes = payload_bytes(req), .started_us = started_us,
                           .trace_id = plm_trace_id_ok(req->trace_id) ? req->trace_id : NULL};
    struct plm_describe d = {0};
    env->provider->ops->describe(env->provider, &d);
    enum plm_tier floor = PLM_TIER_UNKNOWN;
    struct plm_result res = {0};
    char *rule_id = NULL;
    bool admitted = false;
    struct grant g = {0};
    au.extra = json_object();

    if (precheck(env, req, &d, who->id, &floor, &g, &err) < 0)
        goto refused;
    if (adm_acquire(env->adm, who->id, mono_ms(), &err) < 0)
        goto refused;
    admitted = true;
    const struct plm_payload_env *pe = payload_env(&d, req->kind);
    struct plm_run_ctx ctx = {.caller = who->id,
                              .timeout_ms = plm_clamp_timeout(req->timeout_ms, pe->default_timeout_ms, pe->max_timeout_ms),
                              .floor = floor,
                              .trace_id = au.trace_id};
    /* The credential is minted for this run's budget; a mint failure is a refusal (nothing ran). */
    if (grant_begin(&g, who->id, ctx.timeout_ms, &err) < 0)
        goto refused;
    ctx.host_api = g.profile ? &g.api : NULL;
    uint64_t t0 = mono_ms();
    int rc = req->kind == PLM_KIND_PROJECT
                 ? env->provider->ops->run_project(env->provider, &ctx, req, &res, &err)
                 : env->provider->ops->run_javascript(env->provider, &ctx, req, &res, &err);
    grant_end(&g, au.extra); /* the grant ends with the run's code */
    if (g.profile && env->counters->host_calls) {
        struct rpc_host_calls *hc = &env->counters->host_calls[g.profile - env->grants->v];
        atomic_fetch_add(&hc->allowed, g.allowed);
        atomic_fetch_add(&hc->denied, g.denied);
        atomic_fetch_add(&hc->shed, g.shed);
    }
    adm_release(env->adm, who->id);
    admitted = false;
    /* A provider refusal (disabled, or its own re-check of the floor) launched nothing. */
    if (rc < 0 && err.refusal != PLM_REFUSAL_NONE)
        goto refused;
    atomic_fetch_add(&env->counters->dispatched, 1);
    if (rc < 0) {
        atomic_fetch_add(&env->counters->failed, 1);
        goto answered_error;
    }
    if (req->kind == PLM_KIND_PROJECT)
        res.duration_ms = (int64_t)(mono_ms() - t0); /* §12: the handler's wall clock for projects */
    res.kind = req->kind;
    rule_id = rec_rule_id(req->software_mode, req->software_identities, req->n_software_identities);
    if (!rule_id || complete_result(&res, &d, req->kind) < 0) {
        plm_err_set(&err, 12, PLM_E_INTERNAL, PLM_REFUSAL_NONE, "out of memory completing a result");
        goto answered_error;
    }
    struct plm_record rec;
    stamp(req, &res, &d, received_ms, started_mono, rule_id, &rec);
    Plimsoll__V1__RunResponse *out = wire_response_to_pb(&res, &rec);
    if (!out) {
        plm_err_set(&err, 12, PLM_E_INTERNAL, PLM_REFUSAL_NONE, "out of memory building RunResponse");
        goto answered_error;
    }
    encode(ans, &out->base, fmt, request_id);
    protobuf_c_message_free_unpacked(&out->base, NULL);
    au.res = &res;
    audit(env, request_id, &au);
    goto done;

refused:
    atomic_fetch_add(&env->counters->refused, 1);
answered_error:
    if (admitted)
        adm_release(env->adm, who->id);
    rpc_error(ans, &err, request_id);
    au.err = &err;
    audit(env, request_id, &au);
done:
    ui_ring_note(env->ring, request_id, who->id, m, ans); /* PLIMSOLL_UI's run cards; no-op when off */
    grant_end(&g, NULL);
    json_decref(au.extra);
    free(rule_id);
    plm_result_done(&res);
    wire_request_view_done(&view);
    protobuf_c_message_free_unpacked(&m->base, NULL);
}
