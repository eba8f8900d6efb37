/* provider_gate.h: the one entry gate every provider's run_* and session call passes before it
 * launches anything (providers.md §1.4: the provider re-checks the floor against what it proved).
 * Each provider states what it proved; the order of the checks, and so which refusal a caller
 * sees first, is the same for every provider. */
#pragma once
#include <stdbool.h>

#include "err.h"
#include "provider.h"
#include "request.h"
#include "tier.h"

struct plm_gate {
    enum plm_tier tier;       /* the tier the startup proof measured (PLM_TIER_NONE before it) */
    bool proven;              /* the startup proof has passed and nothing since undid it */
    bool grants_ready;        /* the provider proved a grant transport at startup */
    const char *no_grants;    /* why grants are refused when !grants_ready (ends "; nothing ran") */
    const char *unavailable;  /* non-NULL: the provider cannot run now (e.g. a key is missing) */
    const char *changed;      /* non-NULL: what was proven has changed since (refused `environment`) */
    bool validate_payload;    /* run plm_validate_payload first (providers the server does not
                               * hand a validated request, e.g. module or project paths) */
};

/* 0 when the call may launch; otherwise -1 with err set. The order: payload (when asked), the
 * floor (a floor above what was proven wins over every other answer), the grant transport, the
 * changed environment, then the proof itself. A grant that arrives incomplete is a daemon bug
 * and fails closed as internal, nothing ran. */
int plm_provider_gate(const struct plm_gate *g, const struct plm_run_ctx *ctx, const struct plm_request *req,
                      struct plm_err *err);
