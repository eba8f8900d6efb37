/* module_project.c: a module run as the project a provider's runner executes, and back
 * (docs/modules.md, providers.md §3.6). Shared by every provider that runs modules (docker's
 * containers, microvm's project VMs): the plan (params.txt, the worker step, results.bin), the
 * mapping of the worker's exit to the module outcome, and the results checksum the startup
 * proofs pin.
 * Trusts: the provider's report of what the step did; nothing in results.bin, which
 * plm_plsm_decode checks strictly against the request. */
#include <errno.h>
#include <openssl/evp.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "limits.h"
#include "module.h"

int plm_module_plan_make(struct plm_module_plan *pl, const struct plm_request *r, const char *worker,
                         const char *models_dir, const char *pre_step, struct plm_err *err)
{
    memset(pl, 0, sizeof *pl);
    char end[32], step[32];
    plm_module_fmt_double(r->module.end_time, end);
    plm_module_fmt_double(r->module.step, step);
    /* the model matched the id rule (no shell metacharacter, no '/', no leading '-') and the
     * numbers are %g forms: nothing here needs quoting */
    int n = snprintf(pl->cmd, sizeof pl->cmd, "exec %s --model %s/%s " PLM_MODULE_PARAMS_FILE " " PLM_MODULE_RESULTS_FILE
                     " %s %s %u",
                     worker, models_dir, r->module.model, end, step, PLM_MODULE_RESULT_MAX);
    if (n < 0 || (size_t)n >= sizeof pl->cmd)
        return plm_fail(err, 0, PLM_E_INTERNAL, "module: the worker command does not fit");
    if (plm_module_params_text(r, &pl->params, &pl->params_len) < 0)
        return plm_fail(err, ENOMEM, PLM_E_INTERNAL, "out of memory");
    pl->files[0] = (struct plm_file){PLM_MODULE_PARAMS_FILE, pl->params};
    size_t n_steps = 0;
    if (pre_step)
        pl->steps[n_steps++] = pre_step;
    pl->steps[n_steps++] = pl->cmd;
    pl->arts[0] = PLM_MODULE_RESULTS_FILE;
    pl->worker_step = n_steps - 1;
    pl->project = (struct plm_request){.protocol = r->protocol, .kind = PLM_KIND_PROJECT};
    pl->project.project.files = pl->files;
    pl->project.project.n_files = 1;
    pl->project.project.steps = pl->steps;
    pl->project.project.n_steps = n_steps;
    pl->project.project.artifacts = pl->arts;
    pl->project.project.n_artifacts = 1;
    return 0;
}

void plm_module_plan_done(struct plm_module_plan *pl)
{
    free(pl->params);
    pl->params = NULL;
}

void plm_module_checksum(const struct plm_module_result *m, char hex[65])
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
        for (int i = 0; i < 32; i++)
            snprintf(hex + 2 * i, 3, "%02x", md[i]);
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
        return plm_fail(err, ENOMEM, PLM_E_INTERNAL, "out of memory");
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

int plm_module_outcome(const struct plm_request *r, struct plm_project_result *pr, size_t step,
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
        return plm_fail(err, 0, PLM_E_INVALID, "the worker refused the request: %s", msg);
    if (s->exit_code >= 1 && s->exit_code <= 3)
        return set_detail(m, err, PLM_OUTCOME_SETUP_FAILED, "the worker refused the request: %s", msg);
    if (s->exit_code != 0)
        return set_detail(m, err, PLM_OUTCOME_PROTOCOL_ERROR, "the worker failed (exit %d)", (int)s->exit_code);
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

void plm_module_result_free(struct plm_module_result *m)
{
    free(m->detail);
    m->detail = NULL;
    plm_bytes_done(&m->out);
    plm_bytes_done(&m->err);
    plm_module_runs_free(m);
}

size_t plm_module_read_models(const struct plm_bytes *out, char (*models)[65], size_t cap, size_t *kept)
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
                if (n < cap)
                    memcpy(models[n++], name, len + 1);
            }
        }
        i = j + 1;
    }
    *kept = n;
    return total;
}
