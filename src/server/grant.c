/* grant.c: the daemon's side of a run's grant.
 * Owns: the per-run broker and the generated client texts, from grant_begin to grant_end.
 * Invariant: the credential lives only inside the broker; the provider receives a callback and
 * two texts that never contain it. A grant ends when the run's code ends (grant_end is called
 * right after the provider returns), so a leftover process's later calls are refused. */
#include "grant.h"
#include "metrics_series.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

const char *grant_name(const struct plm_request *r)
{
    const char *g = r->kind == PLM_KIND_JAVASCRIPT ? r->js.grant_profile
                    : r->kind == PLM_KIND_PROJECT  ? r->project.grant_profile
                                                   : NULL;
    return g ? g : "";
}

int grant_select(const struct brk_profiles *ps, const struct plm_request *r, const char *caller, struct grant *g,
                 struct plm_err *err)
{
    memset(g, 0, sizeof *g);
    const char *name = grant_name(r);
    if (!*name)
        return 0;
    /* No profiles loaded, no authenticated caller, unknown, not listed: one refusal for all. */
    if (!ps || !caller || !*caller)
        return plm_refuse(err, PLM_E_PERMISSION, PLM_REFUSAL_PERMISSION, "grant_profile \"%s\" is not available to this caller", name);
    return brk_profile_select(ps, name, caller, &g->profile, err);
}

static void host_call(void *cb_ctx, const char *method, const char *raw_target, const uint8_t *body, size_t len,
                      struct plm_host_reply *out)
{
    struct brk_reply r = {0};
    brk_call(cb_ctx, method, raw_target, body, len, &r);
    out->status = r.status;
    out->body = r.body; /* handed over: brk_reply_done must not free it */
    out->len = r.len;
    out->content_type = r.content_type ? strdup(r.content_type) : NULL; /* NULL reads as octet-stream */
    r.body = NULL;
    r.len = 0;
    brk_reply_done(&r);
}

static void host_hold(void *cb_ctx)
{
    brk_run_hold(cb_ctx);
}

static void host_release(void *cb_ctx)
{
    brk_run_release(cb_ctx);
}

int grant_begin(struct grant *g, const char *caller, uint32_t budget_ms, struct plm_err *err)
{
    if (!g->profile)
        return 0;
    g->run = brk_run_new(g->profile, caller, budget_ms, err);
    if (!g->run)
        return -1;
    g->client_js = brk_client_js(g->profile);
    g->node_preload = brk_node_preload(g->profile);
    if (!g->client_js || !g->node_preload) {
        grant_end(g, NULL);
        return plm_fail(err, ENOMEM, PLM_E_INTERNAL, "out of memory building the host api client");
    }
    g->api = (struct plm_host_api){.profile = brk_run_profile_name(g->run), .client_js = g->client_js,
                                   .node_preload = g->node_preload, .call = host_call, .hold = host_hold,
                                   .release = host_release, .cb_ctx = g->run};
    return 0;
}

void grant_end(struct grant *g, json_t *audit)
{
    if (!g->run)
        return;
    brk_run_end(g->run);
    struct brk_trace t = {0};
    if (brk_run_trace(g->run, &t, NULL) == 0) {
        g->allowed = t.allowed;
        g->denied = t.denied;
        g->shed = t.shed;
        metrics_note_host_calls(g->profile, &t); /* per-route series of /metrics */
        brk_trace_done(&t);
    }
    if (audit) {
        json_object_set_new(audit, "grant_profile", json_string(brk_run_profile_name(g->run)));
        json_object_set_new(audit, "host_calls_allowed", json_integer((json_int_t)g->allowed));
        json_object_set_new(audit, "host_calls_denied", json_integer((json_int_t)g->denied));
        json_object_set_new(audit, "host_calls_shed", json_integer((json_int_t)g->shed));
    }
    brk_run_free(g->run);
    g->run = NULL;
    free(g->client_js);
    free(g->node_preload);
    g->client_js = g->node_preload = NULL;
}
