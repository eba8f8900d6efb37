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
#include <openssl/evp.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../core/limits.h"
#include "../../core/module.h"
#include "internal.h"

#define WORKER_PATH "/opt/plimsoll/sim-worker"
#define PROOF_MODEL "Lorenz"
/* The proof's row: Lorenz from (1, 1, 1), end 1, step 0.01 (102 points of 4 doubles). Its checksum
 * (module_checksum) as this tree's worker computes it: a different image, compiler or machine
 * that changes one bit of one double changes it, and startup stops. */
#define PROOF_END 1.0
#define PROOF_STEP 0.01
#define PROOF_SHA256 "fa23bb729ed6cd4957806871701f33385f85cba93b050cfc111779f865ecb572"

/* "exec WORKER --model /models/M params.txt results.bin END STEP 8388608"; the model matched the
 * id rule (no shell metacharacter, no leading '-') and the numbers are %g forms. */
static int worker_step(const struct plm_request *r, char *buf, size_t cap)
{
    char end[32], step[32];
    plm_module_fmt_double(r->module.end_time, end);
    plm_module_fmt_double(r->module.step, step);
    int n = snprintf(buf, cap, "exec " WORKER_PATH " --model /models/%s " PLM_MODULE_PARAMS_FILE " " PLM_MODULE_RESULTS_FILE
                     " %s %s %u",
                     r->module.model, end, step, PLM_MODULE_RESULT_MAX);
    return n > 0 && (size_t)n < cap ? 0 : -1;
}

/* SHA-256 over every row's status (i32 LE) and outputs (f64 LE), in order: the checksum the proof
 * and the black-box tests pin (docs/modules.md). */
static void module_checksum(const struct plm_module_result *m, char hex[65])
{
    EVP_MD_CTX *c = EVP_MD_CTX_new();
    unsigned char md[32];
    unsigned int len = 0;
    hex[0] = 0;
    if (!c)
        return;
    EVP_DigestInit_ex(c, EVP_sha256(), NULL);
    for (size_t i = 0; i < m->n_runs; i++) {
        uint8_t b[8];
        uint32_t st = (uint32_t)m->runs[i].status;
        for (int k = 0; k < 4; k++)
            b[k] = (uint8_t)(st >> (8 * k));
        EVP_DigestUpdate(c, b, 4);
        for (size_t j = 0; j < m->runs[i].n_outputs; j++) {
            uint64_t u;
            memcpy(&u, &m->runs[i].outputs[j], 8);
            for (int k = 0; k < 8; k++)
                b[k] = (uint8_t)(u >> (8 * k));
            EVP_DigestUpdate(c, b, 8);
        }
    }
    if (EVP_DigestFinal_ex(c, md, &len) == 1 && len == 32)
        dock_hex(md, 32, hex);
    EVP_MD_CTX_free(c);
}

__attribute__((format(printf, 4, 5))) static int set_detail(struct plm_module_result *m, struct plm_err *err,
                                                             enum plm_outcome o, const char *fmt, ...)
{
    va_list ap;
    m->outcome = o;
    free(m->detail);
    m->detail = NULL;
    va_start(ap, fmt);
    int n = vasprintf(&m->detail, fmt, ap);
    va_end(ap);
    if (n < 0) {
        m->detail = NULL;
        return plm_err_set(err, ENOMEM, PLM_E_INTERNAL, PLM_REFUSAL_NONE, "out of memory");
    }
    return 0;
}

/* The worker's first stderr line, printable ASCII, without its "plimsoll-sim-worker: " prefix. */
static void worker_message(const struct plm_bytes *err, char *out, size_t cap)
{
    static const char pre[] = "plimsoll-sim-worker: ";
    size_t i = 0, k = 0;
    if (err->len >= sizeof pre - 1 && !memcmp(err->data, pre, sizeof pre - 1))
        i = sizeof pre - 1;
    for (; i < err->len && err->data[i] != '\n' && k + 1 < cap; i++)
        out[k++] = err->data[i] >= 0x20 && err->data[i] < 0x7f ? (char)err->data[i] : '?';
    out[k] = 0;
    if (!k)
        snprintf(out, cap, "no message");
}

static void take_bytes(struct plm_bytes *dst, struct plm_bytes *src)
{
    *dst = *src;
    if (dst->len > LIM_OUTPUT_MAX)
        dst->len = LIM_OUTPUT_MAX;
    src->data = NULL;
    src->len = 0;
}

/* The outcome table of providers.md §3.6 over the project the run became; step is the worker's
 * step. -1 with err for the exit that is an error answer (4, invalid_argument) and out of memory. */
static int module_outcome(const struct plm_request *r, struct plm_project_result *pr, size_t step,
                          struct plm_module_result *m, struct plm_err *err)
{
    if (pr->outcome != PLM_OUTCOME_COMPLETED) {
        m->outcome = pr->outcome; /* the runner's timed_out, protocol_error or setup_failed */
        m->detail = pr->detail;
        pr->detail = NULL;
        return m->detail ? 0 : set_detail(m, err, pr->outcome, "%s", "");
    }
    if (pr->n_steps <= step)
        return set_detail(m, err, PLM_OUTCOME_PROTOCOL_ERROR, "the runner reported no worker step");
    struct plm_step_result *s = &pr->steps[step];
    take_bytes(&m->out, &s->out);
    take_bytes(&m->err, &s->err);
    char msg[200];
    worker_message(&m->err, msg, sizeof msg);
    if (s->exit_code == 4)
        return plm_err_set(err, 0, PLM_E_INVALID, PLM_REFUSAL_NONE, "the worker refused the request: %s", msg);
    if (s->exit_code >= 1 && s->exit_code <= 3)
        return set_detail(m, err, PLM_OUTCOME_SETUP_FAILED, "the worker refused the request: %s", msg);
    if (s->exit_code != 0) {
        char code[24];
        snprintf(code, sizeof code, "%d", s->exit_code);
        return set_detail(m, err, PLM_OUTCOME_PROTOCOL_ERROR, "the worker failed (exit %s)", code);
    }
    const struct plm_artifact *a = NULL;
    for (size_t i = 0; i < pr->n_artifacts; i++)
        if (pr->artifacts[i].path && !strcmp(pr->artifacts[i].path, PLM_MODULE_RESULTS_FILE))
            a = &pr->artifacts[i];
    if (pr->artifacts_truncated)
        return set_detail(m, err, PLM_OUTCOME_PROTOCOL_ERROR, "results.bin was truncated");
    if (!a)
        return set_detail(m, err, PLM_OUTCOME_PROTOCOL_ERROR, "the worker wrote no results.bin");
    const char *why = NULL;
    if (plm_plsm_decode(a->content.data, a->content.len, r, m, &why) < 0)
        return set_detail(m, err, PLM_OUTCOME_PROTOCOL_ERROR, "results.bin is not a valid PLSM record: %s", why);
    return set_detail(m, err, PLM_OUTCOME_COMPLETED, "%s", "");
}

/* Runs r (already validated) as a project in a module container: params.txt, optionally
 * pre_step first, then the worker. */
static int module_exec(struct dock_state *s, uint32_t timeout, const struct plm_request *r, const char *pre_step,
                       struct plm_result *proj, struct plm_err *err)
{
    char *params = NULL, cmd[256];
    size_t plen = 0;
    if (worker_step(r, cmd, sizeof cmd) < 0)
        return plm_err_set(err, 0, PLM_E_INTERNAL, PLM_REFUSAL_NONE, "module: the worker command does not fit");
    if (plm_module_params_text(r, &params, &plen) < 0)
        return plm_err_set(err, ENOMEM, PLM_E_INTERNAL, PLM_REFUSAL_NONE, "out of memory");
    struct plm_file files[] = {{PLM_MODULE_PARAMS_FILE, params}};
    const char *steps[2], *arts[] = {PLM_MODULE_RESULTS_FILE};
    size_t n_steps = 0;
    if (pre_step)
        steps[n_steps++] = pre_step;
    steps[n_steps++] = cmd;
    struct plm_request pq = {.protocol = r->protocol, .kind = PLM_KIND_PROJECT};
    pq.project.files = files;
    pq.project.n_files = 1;
    pq.project.steps = steps;
    pq.project.n_steps = n_steps;
    pq.project.artifacts = arts;
    pq.project.n_artifacts = 1;
    int rc = dock_project_exec_in(s, DOCK_MODULE, timeout, &pq, proj, err);
    free(params);
    return rc;
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
    int64_t t0 = dock_mono_ms();
    if (module_exec(s, timeout, req, NULL, &proj, err) < 0)
        return plm_err_wrap(err, "module");
    /* wire.md §12: a module result states the provider's measured run time (the project it
     * became leaves duration to the handler, which fills it only for project requests) */
    out->duration_ms = dock_mono_ms() - t0;
    struct plm_module_result m = {0};
    int rc = module_outcome(req, &proj.project, 0, &m, err);
    /* the identity the project stamped is the module image's: keep it */
    out->sandbox = proj.sandbox, proj.sandbox = NULL;
    out->isolation = proj.isolation, proj.isolation = NULL;
    out->environment = proj.environment, proj.environment = NULL;
    out->software_identity = proj.software_identity, proj.software_identity = NULL;
    plm_result_done(&proj);
    out->kind = PLM_KIND_MODULE;
    out->module = m;
    return rc;
}

/* The names `ls -1 /models` printed: each must match the model id rule; at most
 * DOCK_MODULE_MODELS_MAX are kept (the card says how many there were). */
static size_t read_models(struct dock_state *s, const struct plm_bytes *out)
{
    size_t n = 0, total = 0, i = 0;
    while (i < out->len) {
        size_t j = i;
        while (j < out->len && out->data[j] != '\n')
            j++;
        char name[65];
        size_t len = j - i;
        if (len > 0 && len < sizeof name) {
            memcpy(name, out->data + i, len);
            name[len] = 0;
            double one = 1;
            struct plm_row row = {&one, 1};
            struct plm_request q = {.kind = PLM_KIND_MODULE,
                                    .module = {.model = name, .rows = &row, .n_rows = 1, .end_time = 1, .step = 1}};
            struct plm_err e = {0};
            if (plm_module_check(&q, &e) == 0) {
                total++;
                if (n < DOCK_MODULE_MODELS_MAX)
                    memcpy(s->models[n++], name, len + 1);
            }
        }
        i = j + 1;
    }
    s->n_models = n;
    return total;
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
    int rc = module_outcome(&q, &proj.project, 1, &m, &e);
    plm_result_done(&proj);
    char sum[65] = "", list[DOCK_MODULE_MODELS_MAX * 66] = "";
    if (rc == 0 && m.outcome == PLM_OUTCOME_COMPLETED)
        module_checksum(&m, sum);
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
    free(m.detail);
    plm_bytes_done(&m.out);
    plm_bytes_done(&m.err);
    plm_module_runs_free(&m);
    if (r < 0)
        return plm_err_set(err, 0, PLM_E_INTERNAL, PLM_REFUSAL_NONE, "evidence card full");
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
