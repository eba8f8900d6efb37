/* run_test.c: Run's pipeline against a fake provider. Each request breaks two adjacent steps of
 * wire.md §11.2 at once, so the answer names which one the daemon checked first; every refusal
 * leaves the provider untouched and takes no admission slot or rate token; the counters follow
 * the error's own mark (a provider's refusal is a refusal, its internal fault a failure). */
#include <jansson.h>
#include <stdio.h>
#include <string.h>

#include "../core/admission.h"
#include "rpc.h"
#include "unit.h"

struct fake {
    enum plm_tier tier;
    enum plm_tier run_tier; /* what a run measures; PLM_TIER_UNKNOWN = a provider that forgot */
    int calls;
    enum plm_tier seen_floor;
    int mode; /* 0 succeed, 1 refuse (isolation), 2 internal fault after launch */
};

static enum plm_tier fake_tier(struct plm_provider *p) { return ((struct fake *)p->state)->tier; }

static void fake_describe(struct plm_provider *p, struct plm_describe *d)
{
    memset(d, 0, sizeof *d);
    d->sandbox = "fake";
    d->tier = fake_tier(p);
    d->policy = "";
    snprintf(d->javascript.identity, sizeof d->javascript.identity, "fake-js");
    snprintf(d->javascript.software_identity, sizeof d->javascript.software_identity, "sw-1");
    d->javascript.max_timeout_ms = 1000;
    d->javascript.default_timeout_ms = 500;
}

static int fake_run_js(struct plm_provider *p, const struct plm_run_ctx *ctx, const struct plm_request *req,
                       struct plm_result *out, struct plm_err *err)
{
    (void)req;
    struct fake *f = p->state;
    f->calls++;
    f->seen_floor = ctx->floor;
    if (f->mode == 1)
        return plm_refuse(err, PLM_E_ISOLATION, PLM_REFUSAL_ISOLATION, "fake: tier fell before launch");
    if (f->mode == 2)
        return plm_fail(err, 0, PLM_E_INTERNAL, "fake: worker vanished");
    out->kind = PLM_KIND_JAVASCRIPT;
    out->js.exit_code = 0;
    out->tier = f->run_tier; /* what it measured for this run; the daemon stamps the rest */
    return 0;
}

static const struct plm_provider_ops fake_ops = {
    .name = "fake", .tier = fake_tier, .describe = fake_describe, .run_javascript = fake_run_js};

struct answer {
    unsigned status;
    char code[64];
    char msg[512];
    char detail[8]; /* the NotDispatched value, "" when none */
    char sandbox[16], isolation[16], environment[32], software[32]; /* the stamp on an ok answer */
};

static void take(char *dst, size_t cap, json_t *root, const char *key)
{
    const char *v = json_string_value(json_object_get(root, key));
    snprintf(dst, cap, "%s", v ? v : "");
}

static struct answer call(const struct rpc_env *env, const char *caller, const char *json)
{
    struct principal who = {.may_run = true};
    snprintf(who.id, sizeof who.id, "%s", caller);
    struct rpc_answer a = {0};
    struct rpc_call c = rpc_call_plain(&who, "", RPC_JSON, json, strlen(json));
    rpc_run(env, &c, &a);
    struct answer out = {.status = a.status};
    json_t *root = json_loadb(a.body, a.len, 0, NULL);
    if (root && a.status != 200) {
        snprintf(out.code, sizeof out.code, "%s", json_string_value(json_object_get(root, "code")));
        snprintf(out.msg, sizeof out.msg, "%s", json_string_value(json_object_get(root, "message")));
        json_t *d = json_array_get(json_object_get(root, "details"), 0);
        if (d)
            snprintf(out.detail, sizeof out.detail, "%s", json_string_value(json_object_get(d, "value")));
    } else if (a.status == 200) {
        snprintf(out.code, sizeof out.code, "ok");
        take(out.sandbox, sizeof out.sandbox, root, "sandbox");
        take(out.isolation, sizeof out.isolation, root, "isolation");
        take(out.environment, sizeof out.environment, root, "environment");
        take(out.software, sizeof out.software, root, "softwareIdentity");
    }
    json_decref(root);
    free(a.body);
    return out;
}

#define JS(extra) "{\"protocol\":3" extra ",\"javascript\":{\"code\":\"1\"}}"

static bool gone_always(void *cls)
{
    (void)cls;
    return true;
}

int main(void)
{
    struct fake f = {.tier = PLM_TIER_PROCESS, .run_tier = PLM_TIER_PROCESS};
    struct plm_provider prov = {.ops = &fake_ops, .state = &f};
    struct adm *adm = adm_new(&(struct adm_config){.max_concurrent = 1, .per_key_concurrent = 1,
                                                   .rate_per_min = 1, .rate_burst = 1});
    struct rpc_counters counters = {0};
    struct rpc_env env = {.provider = &prov, .grants = NULL, .adm = adm, .counters = &counters};
    struct answer a;

    /* 7 before 8: a wrong protocol and an invalid floor -> protocol. */
    a = call(&env, "alice", "{\"protocol\":2,\"minimumIsolation\":\"bogus\",\"javascript\":{\"code\":\"1\"}}");
    CHECK_STR(a.code, "unimplemented");
    CHECK_STR(a.detail, "CAM");
    /* 8 before 9: an invalid floor and a malformed rule -> the floor. */
    a = call(&env, "alice", JS(",\"minimumIsolation\":\"bogus\",\"softwareRule\":{\"mode\":\"nope\"}"));
    CHECK_STR(a.code, "invalid_argument");
    CHECK_STR(a.detail, "CAE");
    CHECK(strstr(a.msg, "software_rule") == NULL);
    /* 9 before 11: a malformed rule and no payload -> the rule. */
    a = call(&env, "alice", "{\"protocol\":3,\"softwareRule\":{\"mode\":\"nope\"}}");
    CHECK(strstr(a.msg, "software_rule") != NULL);
    /* 12 before 13: an invalid payload naming a grant -> the payload (request, not permission). */
    a = call(&env, "alice", "{\"protocol\":3,\"javascript\":{\"code\":\"\",\"grantProfile\":\"gh\"}}");
    CHECK_STR(a.code, "invalid_argument");
    CHECK_STR(a.detail, "CAE");
    /* 13 before 14: a grant nobody may use and a floor above the tier -> permission. */
    a = call(&env, "alice",
             "{\"protocol\":3,\"minimumIsolation\":\"vm\",\"javascript\":{\"code\":\"1\",\"grantProfile\":\"gh\"}}");
    CHECK_STR(a.code, "permission_denied");
    CHECK_STR(a.detail, "CAI");
    /* 14 before 15: a floor above the tier and an unmet software rule -> isolation. */
    a = call(&env, "alice", JS(",\"minimumIsolation\":\"vm\",\"softwareRule\":{\"mode\":\"exact\",\"identities\":[\"sw-2\"]}"));
    CHECK_STR(a.code, "failed_precondition");
    CHECK_STR(a.detail, "CAU");
    /* 15 before 17: an unmet rule while admission is full -> environment. */
    CHECK(adm_acquire(adm, "mallory", 0, NULL) == 0);
    a = call(&env, "alice", JS(",\"softwareRule\":{\"mode\":\"exact\",\"identities\":[\"sw-2\"]}"));
    CHECK_STR(a.detail, "CAc");
    /* 17: everything else in order, admission full -> capacity, and the provider is not called. */
    a = call(&env, "alice", JS(",\"minimumIsolation\":\"process\""));
    CHECK_STR(a.code, "resource_exhausted");
    CHECK_STR(a.detail, "CAY");
    adm_release(adm, "mallory");
    CHECK(f.calls == 0);
    CHECK(adm_inflight(adm) == 0);
    /* No refusal above spent alice's one rate token: this run is admitted and dispatched. */
    CHECK(atomic_load(&counters.refused) == 8 && atomic_load(&counters.dispatched) == 0);
    a = call(&env, "alice", JS(",\"minimumIsolation\":\"process\""));
    CHECK_STR(a.code, "ok");
    CHECK(f.calls == 1 && f.seen_floor == PLM_TIER_PROCESS);
    CHECK(adm_inflight(adm) == 0);
    CHECK(atomic_load(&counters.dispatched) == 1);
    /* ... and the token is spent now. */
    a = call(&env, "alice", JS(""));
    CHECK_STR(a.detail, "CAY");
    CHECK(f.calls == 1);

    /* The provider's own refusal counts as a refusal and nothing as dispatched. */
    f.mode = 1;
    a = call(&env, "bob", JS(""));
    CHECK_STR(a.detail, "CAU");
    CHECK(atomic_load(&counters.refused) == 10 && atomic_load(&counters.dispatched) == 1);
    CHECK(adm_inflight(adm) == 0);
    /* An internal fault is a failure, with no not-dispatched mark, never a refusal. */
    f.mode = 2;
    a = call(&env, "carol", JS(""));
    CHECK_STR(a.code, "internal");
    CHECK_STR(a.detail, "");
    CHECK(atomic_load(&counters.refused) == 10);
    CHECK(atomic_load(&counters.failed) == 1 && atomic_load(&counters.dispatched) == 2);

    /* The one stamp (run.c): sandbox, environment and software identity from Describe, the
     * isolation the provider measured for the run, never Describe's tier. */
    f.mode = 0;
    a = call(&env, "dave", JS(""));
    CHECK_STR(a.code, "ok");
    CHECK_STR(a.sandbox, "fake");
    CHECK_STR(a.isolation, "process");
    CHECK_STR(a.environment, "fake-js");
    CHECK_STR(a.software, "sw-1");
    f.run_tier = PLM_TIER_NONE; /* the tier fell during the run: the answer says so */
    a = call(&env, "erin", JS(""));
    CHECK_STR(a.code, "ok");
    CHECK_STR(a.isolation, "none");
    f.run_tier = PLM_TIER_UNKNOWN; /* a provider that states no tier fails closed */
    a = call(&env, "frank", JS(""));
    CHECK_STR(a.code, "ok");
    CHECK_STR(a.isolation, "unknown");
    CHECK_STR(a.environment, "fake-js");

    /* The constructors themselves: an internal kind never carries a refusal. */
    struct plm_err e;
    plm_refuse(&e, PLM_E_INTERNAL, PLM_REFUSAL_CAPACITY, "x");
    CHECK(!plm_err_is_refusal(&e) && e.refusal == PLM_REFUSAL_NONE);
    plm_refuse(&e, PLM_E_CAPACITY, PLM_REFUSAL_CAPACITY, "x");
    CHECK(plm_err_is_refusal(&e));
    plm_fail(&e, 5, PLM_E_DEADLINE, "x");
    CHECK(!plm_err_is_refusal(&e) && e.errnum == 5);

    /* The caller's context (rpc.h): the timeout header's syntax, and a context already ended. */
    uint64_t ms = 0;
    CHECK(rpc_parse_timeout_ms("1500", 4, &ms) == 0 && ms == 1500);
    CHECK(rpc_parse_timeout_ms("0", 1, &ms) == 0 && ms == 0);
    CHECK(rpc_parse_timeout_ms("9999999999", 10, &ms) == 0 && ms == 9999999999ull);
    const char *bad[] = {"", "12345678901", "-5", "+5", " 5", "5 ", "1.5", "5ms", "0x10"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++)
        CHECK(rpc_parse_timeout_ms(bad[i], strlen(bad[i]), &ms) < 0);
    struct rpc_call c = rpc_call_plain(NULL, "", RPC_JSON, "", 0);
    CHECK(rpc_call_ended(&c, &e) == 0 && rpc_call_left_ms(&c, 5) == UINT64_MAX);
    c.deadline_ms = 100;
    CHECK(rpc_call_left_ms(&c, 40) == 60 && rpc_call_left_ms(&c, 100) == 0);
    CHECK(rpc_call_ended(&c, &e) < 0 && e.kind == PLM_E_DEADLINE && e.refusal == PLM_REFUSAL_CAPACITY);
    c.deadline_ms = RPC_NO_DEADLINE;
    c.caller_gone = gone_always;
    CHECK(rpc_call_ended(&c, &e) < 0 && e.kind == PLM_E_CANCELED && e.refusal == PLM_REFUSAL_CAPACITY);

    adm_free(adm);
    return unit_done();
}
