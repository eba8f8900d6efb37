/* request.c: small helpers over the core request and result types. */
#include "request.h"

#include <stdlib.h>
#include <string.h>

#include "limits.h"

const char *plm_kind_name(enum plm_kind k)
{
    switch (k) {
    case PLM_KIND_JAVASCRIPT: return "javascript";
    case PLM_KIND_PROJECT: return "project";
    case PLM_KIND_MODULE: return "module";
    case PLM_KIND_CELL: return "cell";
    case PLM_KIND_NONE: break;
    }
    return "";
}

void plm_bytes_done(struct plm_bytes *b)
{
    free(b->data);
    b->data = NULL;
    b->len = 0;
}

static int replace(char **field, const char *value)
{
    free(*field);
    *field = strdup(value ? value : "");
    return *field ? 0 : -1;
}

int plm_result_stamp(struct plm_result *r, const char *sandbox, const char *environment, const char *software_identity)
{
    int rc = replace(&r->sandbox, sandbox);
    rc |= replace(&r->isolation, tier_name(r->tier));
    rc |= replace(&r->environment, environment);
    rc |= replace(&r->software_identity, software_identity);
    return rc;
}

void plm_result_done(struct plm_result *r)
{
    if (!r)
        return;
    free(r->sandbox);
    free(r->isolation);
    free(r->environment);
    free(r->software_identity);
    plm_bytes_done(&r->js.out);
    plm_bytes_done(&r->js.err);
    for (size_t i = 0; i < r->project.n_steps; i++) {
        free(r->project.steps[i].command);
        plm_bytes_done(&r->project.steps[i].out);
        plm_bytes_done(&r->project.steps[i].err);
    }
    free(r->project.steps);
    free(r->project.detail);
    for (size_t i = 0; i < r->project.n_artifacts; i++) {
        free(r->project.artifacts[i].path);
        plm_bytes_done(&r->project.artifacts[i].content);
    }
    free(r->project.artifacts);
    for (size_t i = 0; i < r->module.n_runs; i++)
        free(r->module.runs[i].outputs);
    free(r->module.runs);
    free(r->module.detail);
    plm_bytes_done(&r->module.out);
    plm_bytes_done(&r->module.err);
    plm_bytes_done(&r->cell.out);
    plm_bytes_done(&r->cell.err);
    memset(r, 0, sizeof *r);
}

bool plm_trace_id_ok(const char *s)
{
    if (!s || !*s)
        return false;
    size_t n = 0;
    for (const char *p = s; *p; p++, n++) {
        char c = *p;
        bool ok = (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
                  c == '.' || c == '_' || c == ':' || c == '-';
        if (!ok || n >= LIM_TRACE_ID_MAX)
            return false;
    }
    return true;
}

uint32_t plm_clamp_timeout(int32_t requested_ms, uint32_t def_ms, uint32_t ceiling_ms)
{
    if (ceiling_ms == 0 || ceiling_ms > LIM_TIMEOUT_MS_MAX)
        ceiling_ms = LIM_TIMEOUT_MS_MAX;
    if (def_ms == 0 || def_ms > ceiling_ms)
        def_ms = ceiling_ms;
    if (requested_ms <= 0)
        return def_ms;
    if ((uint32_t)requested_ms > ceiling_ms)
        return ceiling_ms;
    return (uint32_t)requested_ms;
}
