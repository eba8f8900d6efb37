/* mcp_module.c: the run_module tool of `plimsoll mcp`: rows of parameters through one compiled
 * model, listed only when Describe says the daemon supports modules, its description naming the
 * models Describe lists.
 * Owns: the ModuleRun built from the arguments (the values copied into one array), the token bytes
 * of one call.
 * Trusts: no argument: the model's type, the rows' shape and counts and every value's type are
 * checked before anything is sent; the model name and the time bounds are judged by the daemon (a
 * bad one is refused before dispatch, no code ran).
 * Invariant: the checks and the card are call.c's and card.c's, as for run_javascript; every
 * result double in the text reads back as the same bits (module_rows.c). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "../core/cleanup.h"
#include "../core/module.h"
#include "mcp.h"

json_t *mcp_module_tool(const Plimsoll__V1__DescribeResponse *d)
{
    cleanup_free char *desc = NULL;
    size_t n = 0;
    FILE *m = open_memstream(&desc, &n);
    if (!m)
        return NULL;
    fputs("Runs rows of parameters through one compiled model (a parameter sweep) from time 0 to end_time in "
          "steps of step, each row in its own confined instance, and returns per row a status (the steps "
          "completed, negative when the row failed) and status x width output doubles, printed exactly (the "
          "shortest decimal that reads back as the same bits). A run card names the isolation tier that ran. "
          "Models on this daemon:", m);
    const Plimsoll__V1__PayloadEnvironment *e = d->module_environment;
    for (size_t i = 0; e && i < e->n_languages; i++)
        fprintf(m, "%s %s", i ? "," : "", e->languages[i]);
    if (!e || e->n_languages == 0)
        fputs(" (none listed)", m);
    fputs(".", m);
    if (fclose(m) != 0)
        return NULL;
    json_t *models = json_array();
    for (size_t i = 0; models && e && i < e->n_languages; i++)
        json_array_append_new(models, json_string(e->languages[i]));
    json_t *t = json_pack(
        "{s:s, s:s, s:s, s:{s:s, s:{s:{s:s, s:o}, s:{s:s, s:i, s:i, s:{s:s, s:i, s:i, s:{s:s}}},"
        " s:{s:s, s:i}, s:{s:s, s:i}, s:{s:s, s:i, s:i}, s:{s:s, s:[s,s,s,s]}},"
        " s:[s,s,s,s], s:b}, s:{s:b, s:b, s:b}}",
        "name", "run_module", "title", "Run a model over rows of parameters in the plimsoll sandbox",
        "description", desc,
        "inputSchema", "type", "object", "properties",
        "model", "type", "string", "enum", models ? models : json_array(),
        "rows", "type", "array", "minItems", 1, "maxItems", PLM_MODULE_ROWS_MAX, "items", "type", "array",
        "minItems", 1, "maxItems", PLM_MODULE_WIDTH_MAX, "items", "type", "number",
        "end_time", "type", "number", "exclusiveMinimum", 0, "step", "type", "number", "exclusiveMinimum", 0,
        "timeout", "type", "number", "exclusiveMinimum", 0, "maximum", 300,
        "min_isolation", "type", "string", "enum", "process", "container", "kernel", "vm",
        "required", "model", "rows", "end_time", "step", "additionalProperties", 0,
        "annotations", "readOnlyHint", 0, "destructiveHint", 0, "openWorldHint", 0);
    return t;
}

/* The text of a module run: the outcome, then one CSV line per row (status, then the outputs). */
static char *module_text(const struct cli_run_call *call, const json_t *j, const char *url)
{
    (void)j;
    cleanup_free char *buf = NULL;
    size_t n = 0;
    FILE *m = open_memstream(&buf, &n);
    if (!m)
        return NULL;
    const Plimsoll__V1__ModuleResult *r = call->module;
    if (call->checked && r) {
        if (call->o.verdict == CLI_V_EVIDENCE_MISMATCH)
            fprintf(m, "EVIDENCE MISMATCH: %s. Do not trust these results as isolated.\n", call->o.message);
        fprintf(m, "outcome: %s%s%s\nwidth: %d\nrows (status,outputs...):\n",
                r->outcome == PLIMSOLL__V1__PROJECT_OUTCOME__PROJECT_OUTCOME_COMPLETED ? "completed" : "not completed",
                r->outcome_detail && *r->outcome_detail ? ": " : "", r->outcome_detail ? r->outcome_detail : "",
                r->width);
        char b[32];
        for (size_t i = 0; i < r->n_runs; i++) {
            const Plimsoll__V1__ModuleRowResult *row = r->runs[i];
            fprintf(m, "%d", row ? row->status : 0);
            for (size_t k = 0; row && k < row->n_outputs; k++) {
                cli_fmt_double(row->outputs[k], b);
                fprintf(m, ",%s", b);
            }
            fputc('\n', m);
        }
    } else {
        mcp_failure_text(m, &call->o, url);
    }
    return fclose(m) == 0 ? take_ptr(&buf) : NULL;
}

static bool positive_number(json_t *v) { return json_is_number(v) && json_number_value(v) > 0; }

struct module_send {
    Plimsoll__V1__ModuleRun *run;
    int32_t timeout_ms;
};

static int send_module(const struct cli_conn *conn, const char *floor, void *ctx, struct cli_run_call *call)
{
    const struct module_send *m = ctx;
    return cli_run_module(conn, m->run, floor, m->timeout_ms, call);
}

json_t *mcp_run_module(struct mcp_server *s, json_t *args)
{
    static const char *const known[] = {"model", "rows", "end_time", "step", "timeout", "min_isolation", NULL};
    json_t *stray = mcp_only_arguments(args, known);
    if (stray)
        return stray;
    json_t *model = json_object_get(args, "model"), *rows = json_object_get(args, "rows");
    json_t *end = json_object_get(args, "end_time"), *step = json_object_get(args, "step");
    if (!json_is_string(model) || strlen(json_string_value(model)) != json_string_length(model))
        return mcp_bad_arguments("model must be a string");
    if (!positive_number(end) || !positive_number(step))
        return mcp_bad_arguments("end_time and step must be positive numbers");
    size_t n_rows = json_array_size(rows);
    if (!json_is_array(rows) || n_rows == 0 || n_rows > PLM_MODULE_ROWS_MAX)
        return mcp_bad_arguments("rows must be an array of 1 to 100000 rows");
    size_t width = json_array_size(json_array_get(rows, 0));
    if (width == 0 || width > PLM_MODULE_WIDTH_MAX)
        return mcp_bad_arguments("each row must be an array of 1 to 64 numbers");
    for (size_t i = 0; i < n_rows; i++) {
        json_t *row = json_array_get(rows, i);
        if (!json_is_array(row) || json_array_size(row) != width)
            return mcp_bad_arguments("every row must be an array of numbers of the first row's width");
        for (size_t k = 0; k < width; k++)
            if (!json_is_number(json_array_get(row, k)))
                return mcp_bad_arguments("every value must be a number");
    }
    int32_t timeout_ms = 0;
    const char *floor = "";
    json_t *bad = mcp_run_limits(args, &timeout_ms, &floor);
    if (bad)
        return bad;

    cleanup_free double *vals = calloc(n_rows * width, sizeof *vals);
    cleanup_free Plimsoll__V1__ModuleRow *mr = calloc(n_rows, sizeof *mr);
    cleanup_free Plimsoll__V1__ModuleRow **mrp = calloc(n_rows, sizeof *mrp);
    if (!vals || !mr || !mrp)
        return NULL;
    for (size_t i = 0; i < n_rows; i++) {
        for (size_t k = 0; k < width; k++)
            vals[i * width + k] = json_number_value(json_array_get(json_array_get(rows, i), k));
        plimsoll__v1__module_row__init(&mr[i]);
        mr[i].n_values = width;
        mr[i].values = vals + i * width;
        mrp[i] = &mr[i];
    }
    Plimsoll__V1__ModuleRun run = PLIMSOLL__V1__MODULE_RUN__INIT;
    run.model = (char *)json_string_value(model);
    run.n_rows = n_rows;
    run.rows = mrp;
    run.end_time = json_number_value(end);
    run.step = json_number_value(step);

    char *token = NULL;
    if ((bad = mcp_load_token(s, &token)))
        return bad;
    struct module_send ms = {.run = &run, .timeout_ms = timeout_ms};
    struct cli_run_call call;
    struct plc_choice choice;
    int r = mcp_send(s, token, PLC_MODULE, floor, false, send_module, &ms, &call, &choice);
    cli_token_free(token);
    return mcp_call_result(&call, r, module_text, s->url);
}
