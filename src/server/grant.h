/* grant.h: one run's grant on the daemon side: the profile check of wire.md §11.2 step 13, the
 * per-run broker, and the host-API capability handed to the provider (core/provider.h). */
#pragma once
#include <jansson.h>

#include "../broker/broker.h"
#include "../broker/client_js.h"
#include "../core/provider.h"
#include "../core/request.h"

struct grant {
    const struct brk_profile *profile; /* NULL: no grant */
    struct brk_run *run;
    char *client_js, *node_preload;
    struct plm_host_api api;
    uint64_t allowed, denied, shed; /* host calls, filled by grant_end */
};

/* The grant profile the request names ("" for none). */
const char *grant_name(const struct plm_request *r);
/* Step 13: an unknown profile, one not available to this caller, or any profile without an
 * authenticated caller, is permission_denied / permission with the same words every time. */
int grant_select(const struct brk_profiles *ps, const struct plm_request *r, const char *caller, struct grant *g,
                 struct plm_err *err);
/* Mints the run's credential and builds the capability; a failure is a pre-dispatch refusal. */
int grant_begin(struct grant *g, const char *caller, uint32_t budget_ms, struct plm_err *err);
/* Ends the grant (later guest calls are refused), keeps its host-call counts in g and adds them
 * to the audit fields, frees. */
void grant_end(struct grant *g, json_t *audit);
