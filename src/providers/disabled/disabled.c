/* disabled.c: the provider used when SANDBOX_PROVIDER is unset. Nothing ever runs: every run is
 * refused with failed_precondition / unsupported, marked not dispatched. It proves nothing, so it
 * claims tier `none` and carries no evidence card. */
#include "disabled.h"

#include <stdlib.h>
#include <string.h>

static enum plm_tier dis_tier(struct plm_provider *p)
{
    (void)p;
    return PLM_TIER_NONE;
}

static void dis_describe(struct plm_provider *p, struct plm_describe *d)
{
    (void)p;
    memset(d, 0, sizeof *d);
    d->sandbox = "disabled";
    d->tier = PLM_TIER_NONE;
    d->policy = "";
}

static int dis_ok(struct plm_provider *p, struct plm_err *err)
{
    (void)p;
    (void)err;
    return 0;
}

static int dis_run(struct plm_provider *p, const struct plm_run_ctx *ctx, const struct plm_request *req,
                   struct plm_result *out, struct plm_err *err)
{
    (void)p, (void)ctx, (void)req, (void)out;
    return plm_refuse(err, PLM_E_DISABLED, PLM_REFUSAL_UNSUPPORTED,
                       "no sandbox provider is configured (SANDBOX_PROVIDER is unset); nothing ran");
}

static void dis_destroy(struct plm_provider *p) { (void)p; }

static const struct plm_provider_ops disabled_ops = {
    .name = "disabled",
    .tier = dis_tier,
    .describe = dis_describe,
    .preflight = dis_ok,
    .smoke_test = dis_ok,
    .run_javascript = dis_run,
    .run_project = dis_run,
    .destroy = dis_destroy,
};

struct plm_provider *disabled_provider_new(void)
{
    struct plm_provider *p = calloc(1, sizeof *p);
    if (p)
        p->ops = &disabled_ops;
    return p;
}
