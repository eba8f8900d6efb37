/* provider_gate_test.c: the order of the one entry gate, and every refusal's mark. */
#include <string.h>

#include "provider_gate.h"
#include "unit.h"

static void noop_call(void *c, const char *m, const char *t, const uint8_t *b, size_t n, struct plm_host_reply *o)
{
    (void)c, (void)m, (void)t, (void)b, (void)n;
    memset(o, 0, sizeof *o);
}

int main(void)
{
    struct plm_request js = {.kind = PLM_KIND_JAVASCRIPT, .js = {.code = "1"}};
    struct plm_gate ok = {.tier = PLM_TIER_CONTAINER, .proven = true, .grants_ready = true};
    struct plm_run_ctx ctx = {.floor = PLM_TIER_UNKNOWN};
    struct plm_err err = {0};

    CHECK(plm_provider_gate(&ok, &ctx, &js, &err) == 0);

    /* the floor wins over every other answer, even an unproven provider's */
    ctx.floor = PLM_TIER_VM;
    struct plm_gate unproven = ok;
    unproven.proven = false;
    CHECK(plm_provider_gate(&unproven, &ctx, &js, &err) < 0);
    CHECK(err.kind == PLM_E_ISOLATION && err.refusal == PLM_REFUSAL_ISOLATION);
    CHECK(strstr(err.msg, "none") != NULL);
    CHECK(plm_provider_gate(&ok, &ctx, &js, &err) < 0 && err.refusal == PLM_REFUSAL_ISOLATION);
    ctx.floor = PLM_TIER_CONTAINER;
    CHECK(plm_provider_gate(&ok, &ctx, &js, &err) == 0);
    ctx.floor = PLM_TIER_UNKNOWN;

    /* a named grant without a capability, or an incomplete one: internal, never a refusal */
    struct plm_request granted = js;
    granted.js.grant_profile = "gh";
    CHECK(plm_provider_gate(&ok, &ctx, &granted, &err) < 0);
    CHECK(err.kind == PLM_E_INTERNAL && !plm_err_is_refusal(&err));
    struct plm_host_api half = {.client_js = "x"};
    ctx.host_api = &half;
    CHECK(plm_provider_gate(&ok, &ctx, &granted, &err) < 0 && err.kind == PLM_E_INTERNAL);
    struct plm_host_api whole = {.client_js = "x", .node_preload = "y", .call = noop_call};
    ctx.host_api = &whole;
    CHECK(plm_provider_gate(&ok, &ctx, &granted, &err) == 0);

    /* a provider without a proven grant transport refuses the grant, marked unsupported */
    struct plm_gate no_grants = ok;
    no_grants.grants_ready = false;
    no_grants.no_grants = "no socket was proven; nothing ran";
    CHECK(plm_provider_gate(&no_grants, &ctx, &granted, &err) < 0);
    CHECK(err.kind == PLM_E_UNSUPPORTED && err.refusal == PLM_REFUSAL_UNSUPPORTED);
    CHECK(strcmp(err.msg, "no socket was proven; nothing ran") == 0);
    ctx.host_api = NULL;

    struct plm_gate changed = ok;
    changed.changed = "an image tag moved; nothing ran";
    CHECK(plm_provider_gate(&changed, &ctx, &js, &err) < 0);
    CHECK(err.kind == PLM_E_ENVIRONMENT && err.refusal == PLM_REFUSAL_ENVIRONMENT);

    struct plm_gate away = ok;
    away.unavailable = "E2B_API_KEY is not set";
    CHECK(plm_provider_gate(&away, &ctx, &js, &err) < 0 && err.kind == PLM_E_UNAVAILABLE);

    CHECK(plm_provider_gate(&unproven, &ctx, &js, &err) < 0);
    CHECK(err.kind == PLM_E_UNAVAILABLE && !plm_err_is_refusal(&err));

    /* asked to, the gate validates the payload first: an empty snippet is a request refusal */
    struct plm_request empty = {.kind = PLM_KIND_JAVASCRIPT, .js = {.code = ""}};
    struct plm_gate strict = ok;
    strict.validate_payload = true;
    ctx.floor = PLM_TIER_VM;
    CHECK(plm_provider_gate(&strict, &ctx, &empty, &err) < 0 && err.refusal == PLM_REFUSAL_REQUEST);
    return unit_done();
}
