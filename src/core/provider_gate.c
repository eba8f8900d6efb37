/* provider_gate.c: the entry gate of provider_gate.h. Trusts: the daemon's ctx (floor already
 * parsed); the request may be unvalidated. Allocates nothing. */
#include "provider_gate.h"

#include <stddef.h>

#include "validate.h"

static bool grant_named(const struct plm_request *req)
{
    if (!req)
        return false;
    const char *name = req->kind == PLM_KIND_JAVASCRIPT ? req->js.grant_profile
                       : req->kind == PLM_KIND_PROJECT  ? req->project.grant_profile
                                                        : NULL;
    return name && name[0];
}

int plm_provider_gate(const struct plm_gate *g, const struct plm_run_ctx *ctx, const struct plm_request *req,
                      struct plm_err *err)
{
    if (g->validate_payload && req && plm_validate_payload(req, err) < 0)
        return -1;
    if (tier_check_floor(g->proven ? g->tier : PLM_TIER_NONE, ctx->floor, err) < 0)
        return -1;
    const struct plm_host_api *api = ctx->host_api;
    if (grant_named(req) && !api)
        return plm_fail(err, 0, PLM_E_INTERNAL,
                        "grant_profile named but no host api capability was handed over; nothing ran");
    if (api && (!api->call || !api->client_js))
        return plm_fail(err, 0, PLM_E_INTERNAL, "incomplete host api capability; nothing ran");
    if (api && !g->grants_ready)
        return plm_refuse(err, PLM_E_UNSUPPORTED, PLM_REFUSAL_UNSUPPORTED, "%s",
                          g->no_grants ? g->no_grants : "this provider carries no grants; nothing ran");
    if (g->unavailable)
        return plm_fail(err, 0, PLM_E_UNAVAILABLE, "%s", g->unavailable);
    if (g->changed)
        return plm_refuse(err, PLM_E_ENVIRONMENT, PLM_REFUSAL_ENVIRONMENT, "%s", g->changed);
    if (!g->proven)
        return plm_fail(err, 0, PLM_E_UNAVAILABLE, "the provider has not been proven yet");
    return 0;
}
