/* state.c: what every run path reads off the provider's state: the tier, the entry gate and the
 * result's stamp. A leaf: it calls only core, never back into the files that run things, so the
 * ops table (docker.c) and the run files (snippet.c, project.c, module.c, session.c) all point
 * down to it and none of them forms a cycle with another.
 * Owns: nothing (struct dock_state belongs to docker.c).
 * Invariant: the tier is kernel only under runsc, after smoke_test proved it and while the last
 * preflight still verified the runtime; a run is refused (reason environment) once an image tag
 * was re-pointed, and a granted run only runs once the startup proof reached a mounted socket. */
#include <stdio.h>

#include "../../core/provider_gate.h"
#include "internal.h"

enum plm_tier dock_tier(struct dock_state *s)
{
    if (s->runsc && atomic_load(&s->proven) && atomic_load(&s->runtime_verified))
        return PLM_TIER_KERNEL;
    return PLM_TIER_CONTAINER;
}

/* The provider's side of core's one entry gate. Grants reach a container only through the
 * per-run socket (hostsock.h), and only once the startup proof saw a container reach a mounted
 * socket; otherwise a granted run must not start as if it were isolated. */
static void gate_fill(struct dock_state *s, struct plm_gate *g)
{
    g->tier = dock_tier(s);
    g->proven = atomic_load(&s->proven);
    g->grants_ready = atomic_load(&s->grants_proven);
    g->no_grants = "the docker provider did not prove its host-API socket at startup; nothing ran";
    g->changed = atomic_load(&s->repointed)
                     ? "an image tag now points at an image this daemon did not prove at startup; nothing ran"
                     : NULL;
}

int dock_run_gate(struct dock_state *s, const struct plm_run_ctx *ctx, const struct plm_request *req,
                  struct plm_err *err)
{
    struct plm_gate g = {.validate_payload = true}; /* module and project requests arrive as sent */
    gate_fill(s, &g);
    if (plm_provider_gate(&g, ctx, req, err) < 0)
        return plm_err_wrap(err, "docker");
    return 0;
}

int dock_session_gate(struct dock_state *s, enum plm_tier floor, struct plm_err *err)
{
    /* A session call's grants travel through its session directory (session_grant.c), not
     * ctx->host_api: the gate sees the floor only. */
    struct plm_run_ctx ctx = {.floor = floor};
    struct plm_gate g = {0};
    gate_fill(s, &g);
    g.proven = g.proven && s->id[DOCK_SESSION][0];
    if (plm_provider_gate(&g, &ctx, NULL, err) < 0)
        return plm_err_wrap(err, "docker");
    return 0;
}
