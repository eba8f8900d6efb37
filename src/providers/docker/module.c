/* module.c: module runs on docker (issue 21, providers.md §3.6, docs/modules.md).
 * Owns: the project a module run becomes (params.txt in, one worker step, results.bin out) in a
 * container of the module image, the mapping of the worker's exit to the module outcome, and the
 * startup proof (the model list and one known row's checksum) that Describe's supports_module
 * rests on.
 * Trusts: the runner's authenticated report (project.c) for what the step did; nothing in
 * results.bin, which core/module.c decodes strictly against the request (see docs/modules.md,
 * "Where the record is decoded").
 * Invariant: a module run never reaches a container unless the startup proof passed. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../core/limits.h"
#include "../../core/module.h"
#include "internal.h"

#define cleanup_module_plan __attribute__((cleanup(plm_module_plan_done)))

#define WORKER_PATH "/opt/plimsoll/sim-worker"
#define MODELS_DIR "/models"
#define PROOF_MODEL "Lorenz"
/* The proof's row: Lorenz from (1, 1, 1), end 1, step 0.01 (102 points of 4 doubles). Its checksum
 * (plm_module_checksum) as this tree's worker computes it: a different image, compiler or machine
 * that changes one bit of one double changes it, and startup stops. */
#define PROOF_END 1.0
#define PROOF_STEP 0.01
#define PROOF_SHA256 "fa23bb729ed6cd4957806871701f33385f85cba93b050cfc111779f865ecb572"

/* Runs r (already validated) as a project in a module container: params.txt, optionally
 * pre_step first, then the worker (core/module_project.c builds the plan). */
static int module_exec(struct dock_state *s, uint32_t timeout, const struct plm_request *r, const char *pre_step,
                       struct plm_result *proj, struct plm_err *err)
{
    struct plm_module_plan pl cleanup_module_plan; /* plan_make leaves it releasable on every path */
    if (plm_module_plan_make(&pl, r, WORKER_PATH, MODELS_DIR, pre_step, err) < 0)
        return -1;
    return dock_project_exec_in(s, DOCK_MODULE, timeout, &pl.project, proj, err);
}

int dock_run_module(struct dock_state *s, const struct plm_run_ctx *ctx, const struct plm_request *req,
                    struct plm_result *out, struct plm_err *err)
{
    if (!s->ref[DOCK_MODULE][0] || !s->module_proven)
        return plm_refuse(err, PLM_E_UNSUPPORTED, PLM_REFUSAL_UNSUPPORTED,
                          "docker runs no module payloads: SANDBOX_DOCKER_MODULE_IMAGE is not set");
    if (dock_run_gate(s, ctx, req, err) < 0)
        return -1;
    uint32_t timeout = plm_clamp_timeout((int32_t)ctx->timeout_ms, DOCK_PROJECT_DEFAULT_MS, DOCK_PROJECT_MAX_MS);
    struct plm_result proj = {0};
    int64_t t0 = (int64_t)clock_mono_ms();
    if (module_exec(s, timeout, req, NULL, &proj, err) < 0)
        return plm_err_wrap(err, "module");
    /* wire.md §12: a module result states the provider's measured run time (the project it
     * became leaves duration to the handler, which fills it only for project requests) */
    out->duration_ms = (int64_t)clock_mono_ms() - t0;
    struct plm_module_result m = {0};
    int rc = plm_module_outcome(req, &proj.project, 0, &m, err);
    out->tier = proj.tier; /* measured by the project run it became */
    plm_result_done(&proj);
    out->kind = PLM_KIND_MODULE;
    out->module = m;
    return rc;
}

/* The names `ls -1` printed that match the model id rule (guest bytes); the card says how many. */
static size_t read_models(struct dock_state *s, const struct plm_bytes *out)
{
    return plm_module_read_models(out, s->models, DOCK_MODULE_MODELS_MAX, &s->n_models);
}

int dock_module_proof(struct dock_state *s, struct plm_evidence *ev, struct plm_err *err)
{
    double v[] = {1, 1, 1};
    struct plm_row row = {v, 3};
    struct plm_request q = {.protocol = 3, .kind = PLM_KIND_MODULE,
                            .module = {.model = PROOF_MODEL, .rows = &row, .n_rows = 1, .end_time = PROOF_END,
                                       .step = PROOF_STEP}};
    struct plm_result proj = {0};
    if (module_exec(s, DOCK_PROJECT_MAX_MS, &q, "ls -1 /models", &proj, err) < 0)
        return plm_err_wrap(err, "module proof (SANDBOX_DOCKER_MODULE_IMAGE=%s)", s->ref[DOCK_MODULE]);
    size_t total = proj.project.n_steps ? read_models(s, &proj.project.steps[0].out) : 0;
    struct plm_module_result m = {0};
    struct plm_err e = {0};
    int rc = plm_module_outcome(&q, &proj.project, 1, &m, &e);
    plm_result_done(&proj);
    char sum[65] = "", list[DOCK_MODULE_MODELS_MAX * 66] = "";
    if (rc == 0 && m.outcome == PLM_OUTCOME_COMPLETED)
        plm_module_checksum(&m, sum);
    for (size_t i = 0; i < s->n_models; i++)
        snprintf(list + strlen(list), sizeof list - strlen(list), "%s%s", i ? " " : "", s->models[i]);
    bool has_proof_model = false;
    for (size_t i = 0; i < s->n_models; i++)
        has_proof_model |= !strcmp(s->models[i], PROOF_MODEL);
    bool ok = !strcmp(sum, PROOF_SHA256);
    int r = ev_add_check(ev, "module.models", "the module image lists its models in /models, " PROOF_MODEL " among them",
                         has_proof_model, "%zu: %.200s", total, list);
    r |= ev_add_check(ev, "module.row",
                      "Lorenz (1, 1, 1), end 1, step 0.01: results SHA-256 " PROOF_SHA256, ok, "%s",
                      sum[0] ? sum : (m.detail ? m.detail : e.msg));
    r |= ev_add_confinement(ev, "image module %s", s->id[DOCK_MODULE]);
    plm_module_result_free(&m);
    if (r < 0)
        return plm_fail(err, 0, PLM_E_INTERNAL, "evidence card full");
    s->module_proven = ok && has_proof_model; /* before anything is served: read-only from here */
    return 0;
}

void dock_module_env(struct dock_state *s, struct plm_describe *d)
{
    if (!atomic_load(&s->proven) || !s->module_proven)
        return;
    d->supports_module = true;
    snprintf(d->module.identity, sizeof d->module.identity, "docker-image:%s", s->id[DOCK_MODULE]);
    snprintf(d->module.software_identity, sizeof d->module.software_identity, "%s",
             s->software_identity[DOCK_MODULE]);
    d->module.default_timeout_ms = DOCK_PROJECT_DEFAULT_MS;
    d->module.max_timeout_ms = DOCK_PROJECT_MAX_MS;
    size_t cap = sizeof d->module.languages / sizeof *d->module.languages - 1;
    for (size_t i = 0; i < s->n_models && i < cap; i++)
        d->module.languages[i] = s->models[i];
}
