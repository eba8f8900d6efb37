/* module.c: module runs at the vm tier (issue 21, docs/modules.md "microvm").
 * Owns: the project a module run becomes in a project VM (params.txt in, the worker step from the
 *   project disk, results.bin out), the startup proof (the model list and one known row's
 *   checksum) that Describe's supports_module rests on, and the module environment Describe states.
 * Trusts: nothing from the guest: the PROJECT_RESULT frame is decoded by guestio/vmchan.c like any project's
 *   and results.bin by core's strict PLSM decoder (plm_module_outcome), on the host side.
 * Invariant: a module run reaches a VM only after the floor check and the startup proof passed and
 *   its plan fits the guest's plan limit; the VM it takes is killed before the run returns. */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "../../core/module.h"
#include "mv_int.h"

/* Where the project disk (mounted read-only on /usr) carries them: scripts/microvm-setup.sh. */
#define MV_WORKER_PATH "/usr/lib/plimsoll/sim-worker"
#define MV_MODELS_DIR "/usr/lib/plimsoll/models"
/* The text of params.txt a module run may send: the file content share of the guest's plan limit
 * (vmchan.h MVC_PROJECT_MAX), so the whole plan always fits. */
#define MV_MODULE_PARAMS_MAX (4u * 1024 * 1024)
/* The proof row and its checksum: docker's (src/providers/docker/module.c). The same sources, the
 * same bits under TCG or KVM: a one-ulp difference anywhere in Lorenz changes it. */
#define PROOF_MODEL "Lorenz"
#define PROOF_END 1.0
#define PROOF_STEP 0.01
#define PROOF_SHA256 "fa23bb729ed6cd4957806871701f33385f85cba93b050cfc111779f865ecb572"

/* Runs r's plan in a seeded project VM: the pool's, or (proof: no pool yet) one started for it.
 * -1 with err: nothing ran (no VM came up) or out of memory. */
static int module_exec(struct mv_state *ps, const struct plm_module_plan *pl, uint32_t timeout_ms,
                       struct plm_project_result *pr, int64_t *ms, struct plm_err *err)
{
    struct mv_vm vm;
    if ((ps->pool ? mv_pool_take(ps->pool, &vm, err) : mv_proof_vm(ps, &vm, err)) < 0)
        return plm_err_wrap(err, "start a VM (nothing ran)");
    int r = mv_run_project(ps, &vm, &pl->project, timeout_ms, pr, ms, err);
    mv_vm_kill(&vm);
    return r;
}

int mv_run_module(struct mv_state *s, const struct plm_run_ctx *ctx, const struct plm_request *req,
                  struct plm_result *out, struct plm_err *err)
{
    struct mv_state *ps = s->proj;
    if (!__atomic_load_n(&ps->module_proven, __ATOMIC_ACQUIRE))
        return plm_refuse(err, PLM_E_UNSUPPORTED, PLM_REFUSAL_UNSUPPORTED,
                           "microvm runs no module payloads: the startup proof found no module worker on the "
                           "project disk (see the evidence card); nothing ran");
    if (!ps->pool)
        return plm_fail(err, 0, PLM_E_UNAVAILABLE, "microvm: not proven; nothing ran");
    struct plm_module_plan pl;
    if (plm_module_plan_make(&pl, req, MV_WORKER_PATH, MV_MODELS_DIR, NULL, err) < 0) {
        plm_module_plan_done(&pl);
        return -1;
    }
    if (pl.params_len > MV_MODULE_PARAMS_MAX) {
        size_t n = pl.params_len;
        plm_module_plan_done(&pl);
        return plm_refuse(err, PLM_E_INVALID, PLM_REFUSAL_REQUEST,
                           "the parameter table is %zu bytes as params.txt; a microvm module run takes at most %u",
                           n, MV_MODULE_PARAMS_MAX);
    }
    uint32_t timeout = ctx->timeout_ms ? ctx->timeout_ms : MV_PROJECT_DEFAULT_MS;
    if (timeout > MV_PROJECT_MAX_MS)
        timeout = MV_PROJECT_MAX_MS;
    memset(out, 0, sizeof *out);
    struct plm_result proj = {.kind = PLM_KIND_PROJECT};
    int64_t ms = 0;
    int r = module_exec(ps, &pl, timeout, &proj.project, &ms, err);
    plm_module_plan_done(&pl);
    if (r < 0) {
        plm_result_done(&proj);
        return -1;
    }
    struct plm_module_result m = {0};
    int rc = plm_module_outcome(req, &proj.project, 0, &m, err);
    plm_result_done(&proj);
    out->kind = PLM_KIND_MODULE;
    out->module = m;
    out->duration_ms = ms;
    out->tier = PLM_TIER_VM; /* the daemon stamps the environment Describe states (ps->identity) */
    return rc;
}

/* The names `ls -1` printed that match the model id rule (guest bytes); the card says how many. */
static size_t read_models(struct mv_state *ps, const struct plm_bytes *out)
{
    return plm_module_read_models(out, ps->models, MV_MODELS_MAX, &ps->n_models);
}

int mv_module_proof(struct mv_state *s, struct plm_err *err)
{
    struct mv_state *ps = s->proj;
    __atomic_store_n(&ps->module_proven, 0, __ATOMIC_RELEASE);
    ps->n_models = 0;
    double v[] = {1, 1, 1};
    struct plm_row row = {v, 3};
    struct plm_request q = {.protocol = 3, .kind = PLM_KIND_MODULE,
                            .module = {.model = PROOF_MODEL, .rows = &row, .n_rows = 1, .end_time = PROOF_END,
                                       .step = PROOF_STEP}};
    struct plm_module_plan pl;
    if (plm_module_plan_make(&pl, &q, MV_WORKER_PATH, MV_MODELS_DIR, "ls -1 " MV_MODELS_DIR, err) < 0) {
        plm_module_plan_done(&pl);
        return plm_err_wrap(err, "module proof");
    }
    struct plm_result proj = {.kind = PLM_KIND_PROJECT};
    int64_t ms = 0;
    int r = module_exec(ps, &pl, MV_PROJECT_MAX_MS, &proj.project, &ms, err);
    plm_module_plan_done(&pl);
    if (r < 0) {
        plm_result_done(&proj);
        return plm_err_wrap(err, "module proof");
    }
    const struct plm_project_result *pr = &proj.project;
    if (pr->outcome == PLM_OUTCOME_COMPLETED && pr->n_steps == 1 && pr->steps[0].exit_code != 0) {
        /* No models directory: a disk built without the module files. Modules are then refused
         * (unsupported); everything else still runs. */
        plm_result_done(&proj);
        if (ev_add_confinement(&s->ev, "modules: absent (no %s on the project disk)", MV_MODELS_DIR) < 0)
            return plm_fail(err, 0, PLM_E_INTERNAL, "microvm: evidence card is full");
        return 0;
    }
    size_t total = pr->n_steps ? read_models(ps, &pr->steps[0].out) : 0;
    struct plm_module_result m = {0};
    struct plm_err e = {0};
    int rc = plm_module_outcome(&q, &proj.project, pl.worker_step, &m, &e);
    plm_result_done(&proj);
    char sum[65] = "", list[MV_MODELS_MAX * 66] = "";
    if (rc == 0 && m.outcome == PLM_OUTCOME_COMPLETED)
        plm_module_checksum(&m, sum);
    bool has_proof_model = false;
    for (size_t i = 0; i < ps->n_models; i++) {
        snprintf(list + strlen(list), sizeof list - strlen(list), "%s%s", i ? " " : "", ps->models[i]);
        has_proof_model |= !strcmp(ps->models[i], PROOF_MODEL);
    }
    bool ok = !strcmp(sum, PROOF_SHA256);
    int c = ev_add_check(&s->ev, "module.models", "the project disk lists its models in " MV_MODELS_DIR ", " PROOF_MODEL
                         " among them", has_proof_model, "%zu: %.200s", total, list);
    c |= ev_add_check(&s->ev, "module.row",
                      "Lorenz (1, 1, 1), end 1, step 0.01: results SHA-256 " PROOF_SHA256, ok,
                      "%s (%lld ms)", sum[0] ? sum : (m.detail && m.detail[0] ? m.detail : e.msg), (long long)ms);
    plm_module_result_free(&m);
    if (c < 0)
        return plm_fail(err, 0, PLM_E_INTERNAL, "microvm: evidence card is full");
    /* A failed check fails startup (mv_prove); set before anything is served: read-only after. */
    __atomic_store_n(&ps->module_proven, ok && has_proof_model, __ATOMIC_RELEASE);
    return 0;
}

void mv_module_env(struct mv_state *s, struct plm_describe *d)
{
    struct mv_state *ps = s->proj;
    if (!__atomic_load_n(&s->proven, __ATOMIC_ACQUIRE) || !__atomic_load_n(&ps->module_proven, __ATOMIC_ACQUIRE))
        return;
    d->supports_module = true;
    snprintf(d->module.identity, sizeof d->module.identity, "%s", ps->identity);
    d->module.default_timeout_ms = MV_PROJECT_DEFAULT_MS;
    d->module.max_timeout_ms = MV_PROJECT_MAX_MS;
    size_t cap = sizeof d->module.languages / sizeof *d->module.languages - 1;
    for (size_t i = 0; i < ps->n_models && i < cap; i++)
        d->module.languages[i] = ps->models[i];
}
