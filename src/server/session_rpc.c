/* session_rpc.c: OpenSession (sessions.md §2.1) and CloseSession (§2.3).
 * Trusts: the principal (authenticated by the HTTP layer); nothing in the body.
 * Owns: per call, the decode arena, the registry reservation and the admission slot until the
 * session is registered (then the session owns the slot). One cleanup path gives back whatever is
 * still held, so a refusal or a failed provider open leaves no place, slot or sandbox behind.
 * Invariant: the checks run in §2.1's order, and nothing reaches the provider below the floor or
 * past a cap. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "../core/arena.h"
#include "../core/clock.h"
#include "../core/limits.h"
#include "../core/validate.h"
#include "log.h"
#include "session_int.h"

struct open_call {
    const struct rpc_env *env;
    struct sess_svc *svc;
    const struct principal *who;
    const struct rpc_call *call; /* the caller's deadline and presence (steps 10 and 12) */
    const char *request_id;
    struct plm_arena *arena;
    Plimsoll__V1__OpenSessionRequest *msg;
    struct plm_request rule; /* only protocol, floor and the rule are filled */
    enum plm_tier floor;
    struct plm_payload_env env_stated;
    const char *languages[3];
    const char *owner;
    struct sreg_reservation res;
    bool reserved, admitted;
    struct plm_session *opened;
    struct plm_session_opened info;
    uint64_t lifetime_ms, idle_ms;
    struct spend_meter meter; /* step 9: the open's paid time, handed to the session at commit */
};

static void open_done(struct open_call *c)
{
    if (c->opened) { /* opened but not registered: the sandbox goes at once */
        struct plm_err e = {0};
        c->svc->provider->ops->session_close(c->svc->provider, c->opened, &e);
    }
    sess_stop_paid(&c->meter); /* an open that failed is charged the time it took */
    if (c->reserved)
        sreg_unreserve(c->svc->reg, &c->res);
    if (c->admitted)
        adm_release(c->svc->adm, c->who->id);
    plm_arena_free(c->arena);
}
#define cleanup_open __attribute__((cleanup(open_done)))

/* Steps 10 and 12: the caller went away or its deadline passed. The refusal is marked capacity
 * (nothing stays open); the audit line says when it was found, so an abandoned open is visible. */
static bool caller_gave_up(struct open_call *c, const char *when, struct plm_err *err)
{
    if (rpc_call_ended(c->call, err) == 0)
        return false;
    json_t *f = json_pack("{s:s, s:s, s:s}", "caller", c->who->id, "found_at", when, "code",
                          err->kind == PLM_E_CANCELED ? "canceled" : "deadline_exceeded");
    if (f && c->request_id && *c->request_id)
        json_object_set_new(f, "request_id", json_string(c->request_id));
    log_event("info", "session_open_abandoned", f);
    return true;
}

/* A stated rule must be met by the identity the session would run (§2.1 step 4, step 13). */
static int rule_met(const struct plm_request *r, const char *identity, struct plm_err *err)
{
    if (!r->software_mode || !*r->software_mode)
        return 0;
    for (size_t i = 0; i < r->n_software_identities; i++)
        if (identity && *identity && strcmp(r->software_identities[i], identity) == 0)
            return 0;
    return plm_refuse(err, PLM_E_ENVIRONMENT, PLM_REFUSAL_ENVIRONMENT,
                      "the software rule cannot be met: sessions here run \"%s\"",
                      identity && *identity ? identity : "no stated software identity");
}

/* Step 5: known names only; kept in the environment's stated order, deduplicated; with no
 * stated languages, the hint's own order. */
static int pick_languages(struct open_call *c, struct plm_err *err)
{
    const Plimsoll__V1__OpenSessionRequest *m = c->msg;
    for (size_t i = 0; i < m->n_languages; i++)
        if (strcmp(m->languages[i], "javascript") && strcmp(m->languages[i], "python"))
            return plm_refuse(err, PLM_E_INVALID, PLM_REFUSAL_REQUEST,
                              "languages: %zu is not javascript or python", i + 1);
    size_t n = 0;
    bool stated = c->env_stated.languages[0] != NULL;
    if (stated) {
        for (size_t k = 0; k < 4 && c->env_stated.languages[k] && n < 2; k++)
            for (size_t i = 0; i < m->n_languages; i++)
                if (!strcmp(m->languages[i], c->env_stated.languages[k])) {
                    c->languages[n++] = c->env_stated.languages[k];
                    break;
                }
    } else {
        for (size_t i = 0; i < m->n_languages && n < 2; i++) {
            bool dup = false;
            for (size_t k = 0; k < n; k++)
                dup |= !strcmp(c->languages[k], m->languages[i]);
            if (!dup)
                c->languages[n++] = !strcmp(m->languages[i], "python") ? "python" : "javascript";
        }
    }
    c->languages[n] = NULL;
    return 0;
}

/* Step 6: never silently dropped, since that would lift the per-owner cap. */
static int check_owner(const char *o, struct plm_err *err)
{
    size_t n = strlen(o);
    if (n == 0)
        return 0;
    bool ok = n <= SREG_OWNER_MAX;
    for (size_t i = 0; ok && i < n; i++) {
        char ch = o[i];
        ok = (ch >= 'A' && ch <= 'Z') || (ch >= 'a' && ch <= 'z') || (ch >= '0' && ch <= '9') || ch == '.' ||
             ch == '_' || ch == ':' || ch == '-';
    }
    if (!ok)
        return plm_refuse(err, PLM_E_INVALID, PLM_REFUSAL_REQUEST,
                          "owner must be 1 to 64 characters of [A-Za-z0-9._:-]");
    return 0;
}

static int open_check(struct open_call *c, struct plm_err *err)
{
    const Plimsoll__V1__OpenSessionRequest *m = c->msg;
    c->rule = (struct plm_request){.protocol = m->protocol,
                                   .minimum_isolation = m->minimum_isolation ? m->minimum_isolation : "",
                                   .software_mode = m->software_rule && m->software_rule->mode ? m->software_rule->mode : "",
                                   .software_identities = m->software_rule ? (const char *const *)m->software_rule->identities : NULL,
                                   .n_software_identities = m->software_rule ? m->software_rule->n_identities : 0};
    if (sess_check_protocol(m->protocol, err) < 0 ||                          /* 1 */
        tier_parse_floor(c->rule.minimum_isolation, &c->floor, err) < 0 ||
        plm_validate_rule(&c->rule, err) < 0)
        return -1;
    struct plm_provider *p = c->env->provider;
    if (!c->svc) /* 2 */
        return plm_refuse(err, PLM_E_UNSUPPORTED, PLM_REFUSAL_UNSUPPORTED,
                          "sessions are not enabled on this daemon (SANDBOX_MAX_SESSIONS)");
    if (__atomic_load_n(&c->svc->shut, __ATOMIC_ACQUIRE))
        return plm_refuse(err, PLM_E_UNAVAILABLE, PLM_REFUSAL_CAPACITY, "the daemon is shutting down; no session opened");
    if (tier_check_floor(p->ops->tier(p), c->floor, err) < 0) /* 3 */
        return -1;
    if (p->ops->session_env)
        p->ops->session_env(p, &c->env_stated);
    if (rule_met(&c->rule, c->env_stated.software_identity, err) < 0) /* 4 */
        return -1;
    c->owner = m->owner ? m->owner : "";
    return pick_languages(c, err) < 0 || check_owner(c->owner, err) < 0 ? -1 : 0; /* 5, 6 */
}

/* Steps 7 and 10: the place, then the slot (taken over from a victim) and the rate token, and
 * only then the victims are closed, so a refused open closes nothing. */
static int open_admit(struct open_call *c, struct plm_err *err)
{
    struct sess_svc *svc = c->svc;
    if (sreg_reserve(svc->reg, &c->res, c->who->id, c->owner, err) < 0)
        return -1;
    c->reserved = true;
    if (svc->spend) { /* 9: a provider billed by the second */
        if (c->idle_ms == 0)
            return plm_refuse(err, PLM_E_ENVIRONMENT, PLM_REFUSAL_ENVIRONMENT,
                              "a session on %s bills every second it runs, so it must suspend when idle; "
                              "this daemon's idle time is 0", svc->provider->ops->name);
        spend_meter_init(&c->meter, svc->spend, c->who->id, c->who->paid_seconds_per_day);
        if (sess_cover_paid(svc, &c->meter, SESS_OPEN_PAID_MS, c->idle_ms, err) < 0)
            return -1;
    }
    struct sreg_session *donor = NULL;
    for (size_t i = 0; i < c->res.n_victims && !donor; i++) {
        bool holds;
        sreg_is_suspended(svc->reg, c->res.victims[i], &holds);
        if (holds)
            donor = c->res.victims[i];
    }
    if (caller_gave_up(c, "admission", err)) /* 10: nothing is closed or opened for nobody */
        return -1;
    if (adm_acquire_parts(svc->adm, c->who->id, clock_mono_ms(), donor == NULL, true, err) < 0)
        return -1;
    if (donor) { /* the donor's slot becomes this open's, once the donor is closed below */
        sreg_set_suspended(svc->reg, donor, false, false);
    }
    c->admitted = true;
    for (size_t i = 0; i < c->res.n_victims; i++) {
        struct sreg_session *v = c->res.victims[i];
        struct plm_session *h = sreg_take_handle(svc->reg, v);
        struct plm_err e = {0};
        bool closed = !h || svc->provider->ops->session_close(svc->provider, h, &e) == 0;
        if (closed) {
            sess_stop_paid(&v->meter);
            bool holds;
            sreg_is_suspended(svc->reg, v, &holds);
            if (holds) { /* a second victim's slot is simply given back */
                adm_release(svc->adm, v->caller);
                sreg_set_suspended(svc->reg, v, false, false);
            }
            sess_log("session_replaced", c->request_id, v, NULL);
        } else {
            if (v == donor) /* the victim stays open with its slot */
                sreg_set_suspended(svc->reg, donor, false, true), c->admitted = false;
            sreg_victim_done(svc->reg, &c->res, i, false);
            return plm_refuse(err, PLM_E_CAPACITY, PLM_REFUSAL_CAPACITY,
                              "this owner's least recently used session could not be closed to make room");
        }
        sreg_victim_done(svc->reg, &c->res, i, true);
    }
    return 0;
}

static void effective_durations(struct open_call *c)
{
    const struct plm_session_config *cfg = &c->svc->cfg;
    const Plimsoll__V1__OpenSessionRequest *m = c->msg;
    c->lifetime_ms = m->lifetime_ms > 0 && m->lifetime_ms < cfg->lifetime_ms ? m->lifetime_ms : cfg->lifetime_ms;
    c->idle_ms = m->idle_timeout_ms > 0 && m->idle_timeout_ms < cfg->idle_ms ? m->idle_timeout_ms : cfg->idle_ms;
    if (c->idle_ms > 0 && c->idle_ms < SESS_MIN_IDLE_MS)
        c->idle_ms = SESS_MIN_IDLE_MS;
}

/* Step 11: the provider re-checks the floor against the tier it measures. */
static int open_dispatch(struct open_call *c, struct plm_err *err)
{
    struct plm_session_spec spec = {.caller = c->who->id, .floor = c->floor, .lifetime_ms = c->lifetime_ms,
                                    .disk_bytes = c->svc->cfg.disk_bytes};
    memcpy(spec.languages, c->languages, sizeof spec.languages);
    struct plm_provider *p = c->svc->provider;
    if (p->ops->session_open(p, &spec, &c->opened, &c->info, err) < 0) {
        c->opened = NULL;
        return -1;
    }
    if (caller_gave_up(c, "opened", err)) /* 12: nobody takes it: open_done closes it at once */
        return -1;
    if (tier_check_floor(c->info.tier, c->floor, err) < 0) /* what it measured, not what it said */
        return -1;
    return rule_met(&c->rule, c->info.software_identity, err); /* 13 */
}

static int copy_rule(struct sreg_session *s, const struct plm_request *r)
{
    snprintf(s->rule_mode, sizeof s->rule_mode, "%s", r->software_mode ? r->software_mode : "");
    if (!r->n_software_identities)
        return 0;
    s->rule_ids = calloc(r->n_software_identities, sizeof *s->rule_ids);
    if (!s->rule_ids)
        return -1;
    for (size_t i = 0; i < r->n_software_identities; i++) {
        if (!(s->rule_ids[i] = strdup(r->software_identities[i])))
            return -1;
        s->n_rule_ids = i + 1;
    }
    return 0;
}

static int open_answer(struct open_call *c, enum rpc_fmt fmt, struct rpc_answer *ans, struct plm_err *err)
{
    struct sess_svc *svc = c->svc;
    uint64_t now = clock_mono_ms();
    struct sreg_session *s = sreg_commit(svc->reg, &c->res, c->opened, now); /* 14 */
    if (!s)
        return plm_fail(err, ENOMEM, PLM_E_INTERNAL, "out of memory or randomness registering a session");
    c->reserved = false;
    c->opened = NULL;
    /* The id is not handed out yet, so nobody else can reach these fields before they are set. */
    s->tier = c->info.tier;
    snprintf(s->software_identity, sizeof s->software_identity, "%s", c->info.software_identity);
    snprintf(s->environment, sizeof s->environment, "%s",
             c->info.environment[0] ? c->info.environment : c->env_stated.identity);
    s->idle_ms = c->idle_ms;
    s->meter = c->meter; /* the open's reservation is the session's now */
    memset(&c->meter, 0, sizeof c->meter);
    s->deadline_ms = now + c->lifetime_ms;
    s->expires_unix_ms = clock_unix_ms() + (int64_t)c->lifetime_ms;
    sreg_set_suspended(svc->reg, s, false, true);
    c->admitted = false; /* the session holds the slot now */
    int rc = copy_rule(s, &c->rule);
    if (rc == 0)
        sess_arm_idle(svc, s, now);
    Plimsoll__V1__OpenSessionResponse out = PLIMSOLL__V1__OPEN_SESSION_RESPONSE__INIT;
    out.session_id = s->id;
    out.session = s->fp;
    out.sandbox = (char *)svc->provider->ops->name;
    out.isolation = (char *)tier_name(s->tier);
    out.expires_unix_ms = s->expires_unix_ms;
    out.idle_timeout_ms = (uint32_t)s->idle_ms;
    out.software_identity = s->software_identity;
    if (rc == 0) {
        json_t *x = json_object();
        json_object_set_new(x, "lifetime_ms", json_integer((json_int_t)c->lifetime_ms));
        json_object_set_new(x, "idle_ms", json_integer((json_int_t)c->idle_ms));
        json_object_set_new(x, "tier", json_string(tier_name(s->tier)));
        sess_log("session_opened", c->request_id, s, x);
        rpc_encode(ans, &out.base, fmt, c->request_id);
    } else {
        sreg_turn_try(svc->reg, s);
        sess_end_now(svc, s, PLM_END_BOUNDARY_FAILED, "out of memory");
        sreg_remove(svc->reg, s);
        sreg_turn_give(svc->reg, s);
    }
    sreg_put(svc->reg, s);
    return rc < 0 ? plm_fail(err, ENOMEM, PLM_E_INTERNAL, "out of memory registering a session") : 0;
}

void rpc_open_session(const struct rpc_env *env, const struct rpc_call *call, struct rpc_answer *ans)
{
    const char *request_id = call->request_id;
    cleanup_open struct open_call c = {.env = env, .svc = env->sessions, .who = call->who, .call = call,
                                       .request_id = request_id, .floor = PLM_TIER_UNKNOWN};
    struct plm_err err = {0};
    c.arena = plm_arena_new(LIM_DECODE_ARENA_MAX);
    if (!c.arena) {
        plm_fail(&err, ENOMEM, PLM_E_INTERNAL, "out of memory starting a decode");
        sess_error(ans, &err, request_id, NULL);
        return;
    }
    c.msg = (void *)rpc_decode(&plimsoll__v1__open_session_request__descriptor, call->fmt, call->body, call->len,
                               c.arena, &err);
    if (!c.msg) {
        rpc_decode_failed(ans, &err, request_id);
        return;
    }
    if (open_check(&c, &err) < 0) {
        sess_error(ans, &err, request_id, NULL);
        return;
    }
    effective_durations(&c); /* 8, before the paid time (9) that depends on the idle time */
    if (open_admit(&c, &err) < 0) {
        sess_error(ans, &err, request_id, NULL);
        return;
    }
    if (open_dispatch(&c, &err) < 0 || open_answer(&c, call->fmt, ans, &err) < 0) {
        sess_error(ans, &err, request_id, NULL);
        return;
    }
}
