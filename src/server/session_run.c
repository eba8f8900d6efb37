/* session_run.c: SessionRun (sessions.md §2.2) as a pipeline like Run's: decode -> check ->
 * turn -> admit -> dispatch -> answer, over one per-call state released by a cleanup attribute.
 * Trusts: the principal; nothing in the body.
 * Owns: per call, the decode arena, the request view, the session reference, its turn (held from
 * step 7 to the end), an admission slot taken to resume a suspended session, and the result.
 * Invariant: every check that can refuse runs before the turn is taken; a marked refusal leaves
 * the chain, the idle deadline and the session as they were; any unmarked error after dispatch
 * is chained as a version 3 record (UnansweredCall), so the chain counts every executed call. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "../core/arena.h"
#include "../core/cleanup.h"
#include "../core/clock.h"
#include "../core/limits.h"
#include "../core/validate.h"
#include "grant.h"
#include "log.h"
#include "session_int.h"

struct srun {
    const struct rpc_env *env;
    struct sess_svc *svc;
    const struct principal *who;
    const char *request_id;
    enum rpc_fmt fmt;
    const struct rpc_call *call; /* the caller's deadline and presence */
    int64_t received_unix_ms;
    uint64_t started_ms;

    struct plm_arena *arena;
    Plimsoll__V1__SessionRunRequest *msg;
    struct wire_request_view view;
    bool have_view;
    const struct plm_request *req;
    enum plm_tier floor;
    struct sreg_session *s;
    bool turn;
    bool resumed_slot; /* a slot taken by this call to resume a suspended session */
    struct plm_payload_env env_stated;
    const char *policy; /* the provider's stated policy digest, for the record */
    struct plm_run_ctx ctx;
    struct plm_result res;
    enum plm_session_end ended; /* what the provider reported during this call */
    struct grant g;             /* a granted snippet's broker, from admission to the call's end */
    json_t *grant_audit;        /* its host-call counts, for the audit line */
};

static void srun_done(struct srun *r)
{
    grant_end(&r->g, NULL); /* no-op once the call ended it */
    json_decref(r->grant_audit);
    if (r->resumed_slot)
        adm_release(r->svc->adm, r->who->id);
    if (r->turn)
        sreg_turn_give(r->svc->reg, r->s);
    if (r->s)
        sreg_put(r->svc->reg, r->s);
    plm_result_done(&r->res);
    if (r->have_view)
        wire_request_view_done(&r->view);
    plm_arena_free(r->arena);
}
#define cleanup_srun __attribute__((cleanup(srun_done)))

/* ---- check (§2.2 steps 1-6) ---------------------------------------------------------------- */

/* A cell (§2.2 "Cells"): a known language, code as a snippet's, files as a project's. */
static int check_cell(const struct plm_request *q, struct plm_err *err)
{
    const char *lang = q->cell.language ? q->cell.language : "";
    if (strcmp(lang, "javascript") && strcmp(lang, "python"))
        return plm_refuse(err, PLM_E_INVALID, PLM_REFUSAL_REQUEST, "cell language must be javascript or python");
    size_t n = strlen(q->cell.code);
    if (n == 0 || n > LIM_CODE_MAX || !plm_utf8_ok(q->cell.code, n))
        return plm_refuse(err, PLM_E_INVALID, PLM_REFUSAL_REQUEST, "cell code must be 1 to %u bytes of UTF-8",
                          (unsigned)LIM_CODE_MAX);
    if (q->cell.n_files > LIM_FILES_MAX)
        return plm_refuse(err, PLM_E_INVALID, PLM_REFUSAL_REQUEST, "at most %d files are allowed, got %zu",
                          LIM_FILES_MAX, q->cell.n_files);
    size_t total = 0;
    for (size_t i = 0; i < q->cell.n_files; i++) {
        const struct plm_file *f = &q->cell.files[i];
        size_t len = strlen(f->content);
        total += len;
        if (!plm_path_ok(f->path) || strlen(f->path) > LIM_PATH_MAX)
            return plm_refuse(err, PLM_E_INVALID, PLM_REFUSAL_REQUEST, "file %zu: path is not allowed", i + 1);
        if (!plm_utf8_ok(f->content, len))
            return plm_refuse(err, PLM_E_INVALID, PLM_REFUSAL_REQUEST, "file %zu: content is not UTF-8", i + 1);
    }
    if (total > LIM_FILES_TOTAL_MAX)
        return plm_refuse(err, PLM_E_INVALID, PLM_REFUSAL_REQUEST, "files total %zu bytes; the limit is %u", total,
                          (unsigned)LIM_FILES_TOTAL_MAX);
    return 0;
}

static char *rule_id_of(const char *mode, const char *const *ids, size_t n)
{
    return rec_rule_id(mode ? mode : "", ids, n);
}

/* Step 5: the open's rule merged with the call's must be the call's own, so a call can narrow
 * the open's rule but never omit or loosen it. A one-identity merge is `exact`. */
static int check_rule_binding(const struct sreg_session *s, const struct plm_request *q, struct plm_err *err)
{
    if (!s->rule_mode[0])
        return 0;
    const char *merged_ids[LIM_RULE_IDENTITIES_MAX];
    size_t n = 0;
    bool call_has = q->software_mode && *q->software_mode;
    for (size_t i = 0; i < s->n_rule_ids && n < LIM_RULE_IDENTITIES_MAX; i++) {
        bool keep = !call_has;
        for (size_t k = 0; call_has && k < q->n_software_identities; k++)
            keep |= !strcmp(s->rule_ids[i], q->software_identities[k]);
        if (keep)
            merged_ids[n++] = s->rule_ids[i];
    }
    if (n == 0)
        return plm_refuse(err, PLM_E_INVALID, PLM_REFUSAL_REQUEST,
                          "software_rule: the call's rule and the session's rule share no identity");
    cleanup_free char *merged = rule_id_of(n == 1 ? "exact" : "approved", merged_ids, n);
    cleanup_free char *own = rule_id_of(q->software_mode, q->software_identities, q->n_software_identities);
    if (!merged || !own)
        return plm_fail(err, ENOMEM, PLM_E_INTERNAL, "out of memory merging software rules");
    if (strcmp(merged, own) != 0)
        return plm_refuse(err, PLM_E_INVALID, PLM_REFUSAL_REQUEST,
                          "software_rule: a session call must state the session's rule (merged: %s)", merged);
    return 0;
}

static int check_kind(struct srun *r, struct plm_err *err)
{
    const struct plm_request *q = r->req;
    const struct plm_provider_ops *ops = r->svc->provider->ops;
    if (q->kind == PLM_KIND_CELL) {
        if (check_cell(q, err) < 0)
            return -1;
    } else if (plm_validate_payload(q, err) < 0) {
        return -1;
    }
    const char *g = grant_name(q);
    if (g && *g) { /* §2.2 step 6: resolved as for Run, then the profile must allow sessions */
        if (grant_select(r->env->grants, q, r->who->id, &r->g, err) < 0)
            return -1;
        if (!r->g.profile->allow_in_sessions)
            return plm_refuse(err, PLM_E_PERMISSION, PLM_REFUSAL_PERMISSION,
                              "grant profile \"%s\" is not allowed in sessions (allow_in_sessions)", g);
        struct plm_describe d;
        ops->describe(r->svc->provider, &d);
        if (!d.supports_session_grants)
            return plm_refuse(err, PLM_E_UNSUPPORTED, PLM_REFUSAL_UNSUPPORTED,
                              "sessions of provider %s carry no grant as configured (docs/sessions.md, "
                              "\"Grants in sessions\")",
                              ops->name);
    }
    if (tier_check_floor(r->s->tier, r->floor, err) < 0) /* against the session's tier at open */
        return -1;
    if (q->software_mode && *q->software_mode) {
        bool met = false;
        for (size_t i = 0; i < q->n_software_identities; i++)
            met |= r->s->software_identity[0] && !strcmp(q->software_identities[i], r->s->software_identity);
        if (!met)
            return plm_refuse(err, PLM_E_ENVIRONMENT, PLM_REFUSAL_ENVIRONMENT,
                              "the software rule cannot be met: this session runs \"%s\"", r->s->software_identity);
    }
    bool runs = (q->kind == PLM_KIND_CELL && ops->session_run_cell) ||
                ((q->kind == PLM_KIND_JAVASCRIPT || q->kind == PLM_KIND_PROJECT) && ops->session_run);
    if (!runs)
        return plm_refuse(err, PLM_E_UNSUPPORTED, PLM_REFUSAL_UNSUPPORTED, "sessions of provider %s do not run %s payloads",
                          ops->name, plm_kind_name(q->kind));
    return 0;
}

static int srun_check(struct srun *r, struct rpc_answer *ans, struct plm_err *err)
{
    if (wire_session_request_view(r->msg, &r->view, err) < 0)
        return -1;
    r->have_view = true;
    r->req = &r->view.req;
    const struct plm_request *q = r->req;
    if (sess_check_protocol(q->protocol, err) < 0 || tier_parse_floor(q->minimum_isolation, &r->floor, err) < 0 ||
        plm_validate_rule(q, err) < 0) /* 1 */
        return -1;
    r->s = r->svc ? sreg_lookup(r->svc->reg, r->msg->session_id, r->who->id, clock_mono_ms()) : NULL; /* 2, 3 */
    if (!r->s) {
        sess_not_found(ans, r->request_id);
        return 1;
    }
    if (q->kind == PLM_KIND_NONE) /* 4 */
        return plm_refuse(err, PLM_E_INVALID, PLM_REFUSAL_REQUEST,
                          "payload must be exactly one of javascript, project or cell");
    if (check_rule_binding(r->s, q, err) < 0) /* 5 */
        return -1;
    return check_kind(r, err); /* 6 */
}

/* ---- turn and admission (steps 7-10) -------------------------------------------------------- */

static int srun_turn(struct srun *r, struct rpc_answer *ans, struct plm_err *err)
{
    if (sess_turn_take(r->svc, r->s, r->call, err) < 0) /* 7 */
        return -1;
    r->turn = true;
    if (sreg_is_removed(r->svc->reg, r->s)) { /* closed while this call waited: now a miss */
        sess_not_found(ans, r->request_id);
        return 1;
    }
    char detail[160];
    enum plm_session_end end = sreg_end_of(r->svc->reg, r->s, detail, sizeof detail);
    if (end == PLM_END_NONE && clock_mono_ms() >= r->s->deadline_ms) {
        sess_end_now(r->svc, r->s, PLM_END_EXPIRED, "the session's lifetime passed");
        end = sreg_end_of(r->svc->reg, r->s, detail, sizeof detail);
    }
    if (end != PLM_END_NONE) { /* 8 */
        plm_refuse(err, PLM_E_ENDED, PLM_REFUSAL_REQUEST, "the session has ended (%s)%s%s", plm_session_end_name(end),
                   detail[0] ? ": " : "", detail);
        struct wire_session_details d = {.ended = end, .ended_detail = detail, .ended_before_mark = true};
        sess_error(ans, err, r->request_id, &d);
        return 1;
    }
    return 0;
}

/* The call's timeout: the request's, clamped to the session environment's default and ceiling
 * (never past the RPC ceiling) and to what is left of the lifetime. */
static void srun_context(struct srun *r)
{
    const struct plm_provider_ops *ops = r->svc->provider->ops;
    if (ops->session_env)
        ops->session_env(r->svc->provider, &r->env_stated);
    struct plm_describe d;
    ops->describe(r->svc->provider, &d);
    r->policy = d.policy ? d.policy : "";
    uint64_t now = clock_mono_ms();
    uint32_t left = r->s->deadline_ms > now ? (uint32_t)(r->s->deadline_ms - now) : 1;
    uint32_t ceiling = r->env_stated.max_timeout_ms ? r->env_stated.max_timeout_ms : SESS_CALL_CEILING_MS;
    if (ceiling > SESS_CALL_CEILING_MS)
        ceiling = SESS_CALL_CEILING_MS;
    uint32_t def = r->env_stated.default_timeout_ms ? r->env_stated.default_timeout_ms : 30000;
    r->ctx = (struct plm_run_ctx){.caller = r->who->id,
                                  .timeout_ms = plm_clamp_timeout(r->req->timeout_ms, def, ceiling),
                                  .floor = r->floor,
                                  .trace_id = plm_trace_id_ok(r->req->trace_id) ? r->req->trace_id : NULL};
    if (r->ctx.timeout_ms > left) /* the lifetime ends the session whatever it is doing */
        r->ctx.timeout_ms = left;
    uint64_t waits = rpc_call_left_ms(r->call, now); /* nor does a call outlive its caller's wait */
    if (r->ctx.timeout_ms > waits)
        r->ctx.timeout_ms = waits ? (uint32_t)waits : 1;
}

/* The session's route_max_calls counts for this call's profile, made on first use. */
static uint32_t *session_caps(struct srun *r)
{
    size_t idx = (size_t)(r->g.profile - r->env->grants->v), n = r->env->grants->n;
    struct sreg_session *s = r->s;
    if (!s->grant_caps) {
        if (!(s->grant_caps = calloc(n, sizeof *s->grant_caps)))
            return NULL;
        s->n_grant_caps = n;
    }
    if (idx >= s->n_grant_caps)
        return NULL;
    if (!s->grant_caps[idx])
        s->grant_caps[idx] = calloc(r->g.profile->n_caps ? r->g.profile->n_caps : 1, sizeof **s->grant_caps);
    return s->grant_caps[idx];
}

/* A granted call's broker: minted for the call's timeout (max_calls is per call), seeded with the
 * per-route counts the session's earlier calls spent (route_max_calls is per session). */
static int srun_grant_begin(struct srun *r, struct plm_err *err)
{
    if (!r->g.profile)
        return 0;
    uint32_t *caps = session_caps(r);
    if (!caps)
        return plm_fail(err, ENOMEM, PLM_E_INTERNAL, "out of memory keeping a session's grant budget");
    if (grant_begin(&r->g, r->who->id, r->ctx.timeout_ms, err) < 0)
        return -1;
    brk_run_caps_seed(r->g.run, caps, r->g.profile->n_caps);
    r->ctx.host_api = &r->g.api;
    return 0;
}

/* Ends the call's grant (a leftover process's later calls are refused) and keeps what it spent of
 * the session's route budget. */
static void srun_grant_end(struct srun *r)
{
    if (!r->g.run)
        return;
    brk_run_end(r->g.run);
    uint32_t *caps = session_caps(r);
    if (caps)
        brk_run_caps_read(r->g.run, caps, r->g.profile->n_caps);
    r->grant_audit = json_object();
    grant_end(&r->g, r->grant_audit);
}

static int srun_admit(struct srun *r, struct plm_err *err)
{
    bool holds;
    bool suspended = sreg_is_suspended(r->svc->reg, r->s, &holds);
    srun_context(r);
    if (suspended && !holds) { /* 10: resuming takes a slot, without a rate token */
        if (adm_acquire_parts(r->svc->adm, r->who->id, clock_mono_ms(), true, false, err) < 0)
            return -1;
        r->resumed_slot = true;
    }
    /* 10: on a provider billed by the second, paid time for the call, the idle time after it and
     * the teardown; a refusal keeps the session as it was (the slot just taken goes back) */
    bool was_billing = spend_meter_running(&r->s->meter);
    if (sess_cover_paid(r->svc, &r->s->meter, r->ctx.timeout_ms, r->s->idle_ms, err) < 0)
        return -1;
    if (adm_acquire_parts(r->svc->adm, r->who->id, clock_mono_ms(), false, true, err) < 0) {
        if (!was_billing) /* still suspended: it bills nothing */
            sess_stop_paid(&r->s->meter);
        return -1; /* the slot just taken goes back in srun_done */
    }
    if (suspended) {
        sreg_set_suspended(r->svc->reg, r->s, false, true);
        r->resumed_slot = false; /* the session holds it again */
    }
    if (srun_grant_begin(r, err) < 0)
        return -1;
    /* 9: the idle timer stops only now, so a refused call leaves its deadline where it was */
    sreg_arm(r->svc->reg, r->s, 0);
    return 0;
}

/* ---- dispatch and answer (steps 11-13) ------------------------------------------------------- */

static int srun_dispatch(struct srun *r, struct plm_err *err)
{
    const struct plm_provider_ops *ops = r->svc->provider->ops;
    struct plm_session *h = r->s->handle;
    if (!h)
        return plm_refuse(err, PLM_E_ENDED, PLM_REFUSAL_REQUEST, "the session has ended");
    atomic_fetch_add(&r->env->counters->dispatched, 1);
    int rc = r->req->kind == PLM_KIND_CELL ? ops->session_run_cell(r->svc->provider, h, &r->ctx, r->req, &r->res, &r->ended, err)
                                           : ops->session_run(r->svc->provider, h, &r->ctx, r->req, &r->res, &r->ended, err);
    srun_grant_end(r); /* the grant ends with the call's code */
    if (rc < 0 && plm_err_is_refusal(err))
        atomic_fetch_sub(&r->env->counters->dispatched, 1);
    return rc;
}

static void fill_record(const struct srun *r, struct plm_record *rec, const char *rule_id, uint64_t seq,
                        const char *prev)
{
    rec->provider = r->svc->provider->ops->name;
    rec->policy = r->policy ? r->policy : "";
    rec->software_rule_id = rule_id;
    rec->started_unix_ms = r->received_unix_ms;
    rec->ended_unix_ms = r->received_unix_ms + (int64_t)(clock_mono_ms() - r->started_ms);
    rec->session = r->s->fp;
    rec->sequence = seq;
    rec->previous_sha256 = prev;
    rec_request_digest(r->req, rec->request_sha256);
}

/* The one stamp on a session call's answer (§2.2 Response): the provider, the environment and
 * software identity the session opened with, and the isolation the provider measured for this call
 * (res->tier, not the tier at open: a tier that fell shows; an unset one is unknown). */
static int sess_stamp(struct srun *r)
{
    struct plm_result *res = &r->res;
    res->kind = r->req->kind;
    return plm_result_stamp(res, r->svc->provider->ops->name, r->s->environment, r->s->software_identity);
}

static void after_call(struct srun *r)
{
    uint64_t now = clock_mono_ms();
    if (r->ended != PLM_END_NONE)
        sess_end_now(r->svc, r->s, r->ended, "ended during the call");
    else if (now >= r->s->deadline_ms)
        sess_end_now(r->svc, r->s, PLM_END_EXPIRED, "the session's lifetime passed");
    else
        sess_arm_idle(r->svc, r->s, now); /* 13 */
    sreg_touch(r->svc->reg, r->s, now);
}

static void audit(const struct srun *r, const struct plm_err *err, uint64_t seq)
{
    json_t *x = json_object();
    json_object_set_new(x, "session_call", json_integer((json_int_t)seq));
    json_object_set_new(x, "kind", json_string(plm_kind_name(r->req->kind)));
    if (r->req->kind == PLM_KIND_CELL)
        json_object_set_new(x, "language", json_string(r->req->cell.language));
    if (err) {
        json_object_set_new(x, "outcome", json_string("error"));
        json_object_set_new(x, "code", json_string(wire_connect_code(err->kind)));
    } else {
        int32_t code = r->res.kind == PLM_KIND_CELL ? r->res.cell.exit_code : r->res.js.exit_code;
        json_object_set_new(x, "outcome", json_string("exited"));
        json_object_set_new(x, "exit_code", json_integer(code));
    }
    json_object_set_new(x, "duration_ms", json_integer((json_int_t)(clock_mono_ms() - r->started_ms)));
    if (r->grant_audit)
        json_object_update(x, r->grant_audit);
    sess_log("run", r->request_id, r->s, x);
}

/* An unmarked error after dispatch: version 3 record, chain advanced, UnansweredCall (§5.4). */
static void answer_unanswered(struct srun *r, const struct plm_err *err, struct rpc_answer *ans)
{
    uint64_t calls;
    char prev[PLM_HEX_SHA256];
    sreg_chain_get(r->svc->reg, r->s, &calls, prev);
    cleanup_free char *rule_id = rule_id_of(r->req->software_mode, r->req->software_identities,
                                            r->req->n_software_identities);
    const char *code = wire_connect_code(err->kind);
    struct plm_record rec = {.version = 3, .unanswered = code, .isolation = tier_name(r->s->tier),
                             .environment = r->s->environment, .software_identity = r->s->software_identity};
    fill_record(r, &rec, rule_id ? rule_id : "", calls + 1, prev);
    rec.result_sha256[0] = 0;
    rec_record_digest(&rec, rec.record_sha256);
    sreg_chain_advance(r->svc->reg, r->s, rec.record_sha256);
    after_call(r);
    char detail[160];
    enum plm_session_end end = sreg_end_of(r->svc->reg, r->s, detail, sizeof detail);
    struct wire_session_details d = {.unanswered = &rec, .ended = end, .ended_detail = detail};
    struct plm_err e = *err;
    e.refusal = PLM_REFUSAL_NONE;
    sess_error(ans, &e, r->request_id, &d);
    audit(r, err, calls + 1);
    if (end != PLM_END_NONE && e.kind != PLM_E_INTERNAL) /* internal is logged at error already */
        log_event("warning", "session_call_ended_session",
                  json_pack("{s:s, s:s, s:s, s:s, s:s}", "request_id", r->request_id ? r->request_id : "",
                            "session", r->s->fp, "reason", plm_session_end_name(end), "code",
                            wire_connect_code(e.kind), "detail", e.msg));
}

static int srun_answer(struct srun *r, struct rpc_answer *ans, struct plm_err *err)
{
    if (sess_stamp(r) < 0)
        return plm_fail(err, ENOMEM, PLM_E_INTERNAL, "out of memory completing a result");
    uint64_t calls;
    char prev[PLM_HEX_SHA256];
    sreg_chain_get(r->svc->reg, r->s, &calls, prev);
    cleanup_free char *rule_id = rule_id_of(r->req->software_mode, r->req->software_identities,
                                            r->req->n_software_identities);
    if (!rule_id)
        return plm_fail(err, ENOMEM, PLM_E_INTERNAL, "out of memory completing a result");
    struct plm_record rec = {.version = 2, .isolation = r->res.isolation, .environment = r->res.environment,
                             .software_identity = r->res.software_identity};
    fill_record(r, &rec, rule_id, calls + 1, prev);
    rec.provider = r->res.sandbox;
    rec_result_digest(&r->res, rec.result_sha256);
    rec_record_digest(&rec, rec.record_sha256);
    Plimsoll__V1__RunResponse *run = wire_response_to_pb(&r->res, &rec);
    if (!run)
        return plm_fail(err, ENOMEM, PLM_E_INTERNAL, "out of memory building RunResponse");
    sreg_chain_advance(r->svc->reg, r->s, rec.record_sha256);
    after_call(r);
    char detail[160];
    enum plm_session_end end = sreg_end_of(r->svc->reg, r->s, detail, sizeof detail);
    Plimsoll__V1__SessionRunResponse out = PLIMSOLL__V1__SESSION_RUN_RESPONSE__INIT;
    out.run = run;
    out.ended = (Plimsoll__V1__SessionEnd)end;
    out.end_detail = end != PLM_END_NONE ? detail : "";
    rpc_encode(ans, &out.base, r->fmt, r->request_id);
    protobuf_c_message_free_unpacked(&run->base, NULL);
    audit(r, NULL, calls + 1);
    return 0;
}

void rpc_session_run(const struct rpc_env *env, const struct rpc_call *call, struct rpc_answer *ans)
{
    const char *request_id = call->request_id;
    cleanup_srun struct srun r = {.env = env, .svc = env->sessions, .who = call->who, .request_id = request_id,
                                  .fmt = call->fmt, .call = call, .received_unix_ms = clock_unix_ms(),
                                  .started_ms = clock_mono_ms(), .floor = PLM_TIER_UNKNOWN};
    struct plm_err err = {0};
    r.arena = plm_arena_new(LIM_DECODE_ARENA_MAX);
    if (!r.arena) {
        plm_fail(&err, ENOMEM, PLM_E_INTERNAL, "out of memory starting a decode");
        sess_error(ans, &err, request_id, NULL);
        return;
    }
    r.msg = (void *)rpc_decode(&plimsoll__v1__session_run_request__descriptor, call->fmt, call->body, call->len,
                               r.arena, &err);
    if (!r.msg) {
        rpc_decode_failed(ans, &err, request_id);
        return;
    }
    int rc = srun_check(&r, ans, &err);
    if (rc == 0)
        rc = srun_turn(&r, ans, &err);
    if (rc == 0)
        rc = srun_admit(&r, &err);
    if (rc > 0)
        return; /* answered (a miss or an ended session) */
    if (rc < 0) {
        if (plm_err_is_refusal(&err))
            atomic_fetch_add(&env->counters->refused, 1);
        sess_error(ans, &err, request_id, NULL);
        return;
    }
    if (srun_dispatch(&r, &err) < 0) {
        if (plm_err_is_refusal(&err)) { /* nothing ran: no record, the idle deadline stays */
            if (r.ended != PLM_END_NONE) { /* the provider found its sandbox gone before the call */
                sess_end_now(r.svc, r.s, r.ended, "the sandbox ended before the call");
                char detail[160];
                enum plm_session_end end = sreg_end_of(r.svc->reg, r.s, detail, sizeof detail);
                struct wire_session_details d = {.ended = end, .ended_detail = detail, .ended_before_mark = true};
                sess_error(ans, &err, request_id, &d);
                return;
            }
            if (sreg_end_of(r.svc->reg, r.s, NULL, 0) == PLM_END_NONE)
                sess_arm_idle(r.svc, r.s, clock_mono_ms());
            sess_error(ans, &err, request_id, NULL);
            return;
        }
        atomic_fetch_add(&env->counters->failed, 1);
        answer_unanswered(&r, &err, ans);
        return;
    }
    if (srun_answer(&r, ans, &err) < 0) {
        atomic_fetch_add(&env->counters->failed, 1);
        answer_unanswered(&r, &err, ans);
    }
}
