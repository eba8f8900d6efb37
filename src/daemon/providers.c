/* providers.c: the provider factory. A provider this build lacks stops startup by name: a typo or
 * a missing backend never silently degrades to something weaker. */
#include "providers.h"

#include "../providers/disabled/disabled.h"
#include "../providers/quickjs/quickjs.h"

struct plm_provider *providers_build(const struct plm_config *cfg, struct plm_err *err)
{
    struct plm_provider *p = NULL;
    switch (cfg->provider) {
    case CFG_DISABLED:
        p = disabled_provider_new();
        break;
    case CFG_QUICKJS: {
        struct qjs_config qc = {.memory_mb = cfg->memory_mb, .pool_size = cfg->max_concurrent};
        return qjs_provider_new(&qc, err);
    }
    case CFG_DOCKER:
    case CFG_E2B:
        plm_err_set(err, 0, PLM_E_INVALID, PLM_REFUSAL_NONE,
                    "SANDBOX_PROVIDER=%s is not available in this build yet; use quickjs or leave it unset",
                    cfg->provider_name);
        return NULL;
    }
    if (!p)
        plm_err_set(err, 12, PLM_E_INTERNAL, PLM_REFUSAL_NONE, "out of memory");
    return p;
}
