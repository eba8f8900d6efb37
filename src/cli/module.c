/* module.c: `plimsoll module MODEL --rows FILE --end T --step S`: a parameter sweep through one
 * compiled model, the answer checked exactly as `plimsoll run` checks a snippet, the results
 * printed as CSV or JSON with every double exact.
 * Owns: the command line, the rows read (module_rows.c), the ModuleRun we encode (the only thing
 * the record check trusts).
 * Trusts: nothing in the answer until check.c passed it; results are printed only for a checked
 * answer (verdict ran or evidence mismatch, as `run` prints a snippet's output).
 * Invariant: everything judged locally (flags, the rows file) is judged before anything is sent. */
#include <getopt.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "../core/cleanup.h"
#include "cli.h"

void cli_usage_module(FILE *f)
{
    fputs("usage: plimsoll module MODEL --rows FILE --end T --step S [--min-isolation TIER]\n"
          "                       [--timeout SECONDS] [--json | --csv] [--url URL] [--token-file FILE]\n"
          "                       [--backends FILE]\n"
          "\n"
          "Runs every row of parameters in FILE through the compiled model MODEL (see `plimsoll\n"
          "describe` for the models this daemon has), from time 0 to T in steps of S, and checks the\n"
          "answer like `plimsoll run`: request id, record digests, result kind, tier against the floor.\n"
          "\n"
          "  --rows FILE            CSV: one row per line, numbers separated by commas (blank lines and\n"
          "                         lines starting with # skipped); 1-100000 rows of 1-64 values, all\n"
          "                         rows the same width; `-` reads standard input\n"
          "  --end T, --step S      positive finite times, T/S <= 1000000\n"
          "  --min-isolation TIER   refuse unless the sandbox is at least TIER:\n"
          "                         process, container, kernel or vm\n"
          "  --timeout SECONDS      run time limit, 0 < SECONDS <= 300 (default: the daemon's)\n"
          "  --csv                  results as CSV on stdout (the default): one line per row,\n"
          "                         `status,v1,v2,...` with status x width values\n"
          "  --json                 one JSON object: the run card and `module` {outcome, width, runs}\n"
          "  --url URL              daemon base URL (default $PLIMSOLL_URL, else " CLI_DEFAULT_URL ")\n"
          "  --token-file FILE      bearer token file (default $PLIMSOLL_TOKEN, else no token)\n"
          "  --backends FILE        place the run on one of several daemons (docs/cli.md)\n"
          "  -h, --help             this text\n"
          "\n"
          "Every double is printed in the shortest form that reads back as the same bits (-0 and\n"
          "subnormals kept); NaN prints as nan, infinities as inf and -inf (JSON: the strings \"NaN\",\n"
          "\"Infinity\", \"-Infinity\"). Results are printed only after a checked answer; the run card\n"
          "goes to stderr. Exit status: 0 completed, 124 timed out, 1 setup failed (an unknown model,\n"
          "the worker refused) or protocol error; 200-205 as for `run`. See docs/cli.md.\n",
          f);
}

struct module_args {
    const char *model, *rows, *end, *step, *floor, *timeout;
    struct cli_where where;
    bool json, csv;
};

static int parse_args(int argc, char **argv, struct module_args *a)
{
    static const struct option opts[] = {
        {"rows", required_argument, NULL, 'r'},          {"end", required_argument, NULL, 'e'},
        {"step", required_argument, NULL, 's'},          {"min-isolation", required_argument, NULL, 'i'},
        {"timeout", required_argument, NULL, 't'},       CLI_WHERE_OPTIONS,
        {"json", no_argument, NULL, 'j'},
        {"csv", no_argument, NULL, 'c'},                 {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    opterr = 0;
    optind = 0;
    int c, r;
    while ((c = getopt_long(argc, argv, ":h", opts, NULL)) != -1) {
        const char **slot = NULL;
        switch (c) {
        case 'r': slot = &a->rows; break;
        case 'e': slot = &a->end; break;
        case 's': slot = &a->step; break;
        case 't': slot = &a->timeout; break;
        case 'i': slot = &a->floor; break;
        case 'j': a->json = true; break;
        case 'c': a->csv = true; break;
        case 'h': cli_usage_module(stdout); return -1;
        default:
            if ((r = cli_opt_where("module", c, argv, &a->where)))
                return r;
        }
        if (slot && (r = cli_opt_once("module", opts, c, slot)))
            return r;
    }
    if (!a->floor)
        a->floor = ""; /* no floor stated */
    if (optind < argc)
        a->model = argv[optind++];
    if (optind < argc)
        return cli_usage_error("module", "unexpected argument `%s`", argv[optind]);
    if (!a->model || !*a->model)
        return cli_usage_error("module", "%s", "no MODEL: give the model's name");
    if (!a->rows || !a->end || !a->step)
        return cli_usage_error("module", "%s", "--rows, --end and --step are all required");
    if (a->json && a->csv)
        return cli_usage_error("module", "%s", "--json and --csv exclude each other");
    return 0;
}

static int positive_time(const char *flag, const char *s, double *out)
{
    char *end = NULL;
    *out = strtod(s, &end);
    if (end == s || *end || !isfinite(*out) || *out <= 0)
        return cli_usage_error("module", "%s `%s`: must be a positive finite number", flag, s);
    return 0;
}

static void put_csv_row(FILE *f, const Plimsoll__V1__ModuleRowResult *row)
{
    char b[32];
    fprintf(f, "%d", row ? row->status : 0);
    for (size_t i = 0; row && i < row->n_outputs; i++) {
        cli_fmt_double(row->outputs[i], b);
        fputc(',', f);
        fputs(b, f);
    }
    fputc('\n', f);
}

static const char *outcome_name(int o)
{
    switch (o) {
    case PLIMSOLL__V1__PROJECT_OUTCOME__PROJECT_OUTCOME_COMPLETED: return "completed";
    case PLIMSOLL__V1__PROJECT_OUTCOME__PROJECT_OUTCOME_SETUP_FAILED: return "setup_failed";
    case PLIMSOLL__V1__PROJECT_OUTCOME__PROJECT_OUTCOME_TIMED_OUT: return "timed_out";
    case PLIMSOLL__V1__PROJECT_OUTCOME__PROJECT_OUTCOME_PROTOCOL_ERROR: return "protocol_error";
    default: return "unspecified";
    }
}

/* `"module":{...}`: written by hand because jansson prints reals with 17 digits, not the
 * shortest form; the detail string goes through jansson for its escaping. */
static int put_json_module(FILE *f, const Plimsoll__V1__ModuleResult *m)
{
    cli_cleanup_json json_t *detail = json_string(m->outcome_detail ? m->outcome_detail : "");
    cleanup_free char *d = detail ? json_dumps(detail, JSON_ENCODE_ANY) : NULL;
    if (!d)
        return -1;
    fprintf(f, "\"module\":{\"outcome\":\"%s\",\"outcome_detail\":%s,\"width\":%d,\"runs\":[",
            outcome_name(m->outcome), d, m->width);
    for (size_t r = 0; r < m->n_runs; r++) {
        const Plimsoll__V1__ModuleRowResult *row = m->runs[r];
        fprintf(f, "%s{\"status\":%d,\"outputs\":[", r ? "," : "", row ? row->status : 0);
        for (size_t i = 0; row && i < row->n_outputs; i++) {
            if (i)
                fputc(',', f);
            char b[32];
            cli_fmt_double_json(row->outputs[i], b);
            fputs(b, f);
        }
        fputs("]}", f);
    }
    fputs("]}", f);
    return 0;
}

/* The card as JSON with the module object spliced in before its closing brace. */
static int emit_json(struct cli_run_call *call)
{
    cli_cleanup_json json_t *j = cli_card_json(&call->rep);
    cleanup_free char *card = j ? json_dumps(j, JSON_COMPACT) : NULL;
    size_t n = card ? strlen(card) : 0;
    if (n < 2 || card[n - 1] != '}') {
        fprintf(stderr, "plimsoll module: cannot write the JSON report\n");
        return call->rep.exit_status == 0 ? CLI_EXIT_TRANSPORT : call->rep.exit_status;
    }
    card[n - 1] = '\0';
    fputs(card, stdout);
    if (call->module) {
        fputc(',', stdout);
        if (put_json_module(stdout, call->module) < 0)
            return CLI_EXIT_TRANSPORT;
    }
    fputs("}\n", stdout);
    fflush(stdout);
    return call->rep.exit_status;
}

static int emit(const struct module_args *a, struct cli_run_call *call)
{
    if (a->json)
        return emit_json(call);
    const Plimsoll__V1__ModuleResult *m = call->module;
    for (size_t r = 0; m && r < m->n_runs; r++)
        put_csv_row(stdout, m->runs[r]);
    fflush(stdout);
    cli_card_print(stderr, &call->rep);
    if (m) {
        fprintf(stderr, "%-16s %s, %zu rows, width %d", "module:", outcome_name(m->outcome), m->n_runs, m->width);
        if (m->outcome_detail && *m->outcome_detail) {
            fputs(": ", stderr);
            cli_put_safe(stderr, m->outcome_detail, "");
        }
        fputc('\n', stderr);
    }
    return call->rep.exit_status;
}

struct module_send {
    Plimsoll__V1__ModuleRun *run;
    int32_t timeout_ms;
};

static int send_module(const struct cli_conn *conn, const char *floor, void *ctx, struct cli_run_call *call)
{
    const struct module_send *m = ctx;
    return cli_run_module(conn, m->run, floor, m->timeout_ms, call);
}

static int run_module(const struct module_args *a)
{
    enum plm_tier floor_tier = PLM_TIER_UNKNOWN;
    struct plm_err err = {0};
    if (tier_parse_floor(a->floor, &floor_tier, &err) < 0)
        return cli_usage_error("module", "--min-isolation `%s`: must be process, container, kernel or vm", a->floor);
    double end_time, step;
    int r;
    if ((r = positive_time("--end", a->end, &end_time)) || (r = positive_time("--step", a->step, &step)))
        return r;
    int32_t timeout_ms = 0;
    if (a->timeout) {
        char *end = NULL;
        double s = strtod(a->timeout, &end);
        if (end == a->timeout || *end || cli_timeout_ms(s, &timeout_ms) < 0)
            return cli_usage_error("module", "--timeout `%s`: must be a number of seconds, 0 < S <= 300", a->timeout);
    }
    char why[512];
    struct cli_rows rows;
    if (cli_rows_read_file(a->rows, &rows, why, sizeof why) < 0)
        return cli_usage_error("module", "%s", why);
    cleanup_free Plimsoll__V1__ModuleRow *mr = calloc(rows.n_rows, sizeof *mr);
    cleanup_free Plimsoll__V1__ModuleRow **mrp = calloc(rows.n_rows, sizeof *mrp);
    struct cli_target target = {.where = a->where};
    r = !mr || !mrp ? (fprintf(stderr, "plimsoll module: out of memory\n"), CLI_EXIT_USAGE)
                    : cli_target_open(&target, "module");
    if (r) {
        cli_rows_done(&rows);
        return r;
    }
    for (size_t i = 0; i < rows.n_rows; i++) {
        plimsoll__v1__module_row__init(&mr[i]);
        mr[i].n_values = rows.width;
        mr[i].values = rows.values + i * rows.width;
        mrp[i] = &mr[i];
    }
    Plimsoll__V1__ModuleRun run = PLIMSOLL__V1__MODULE_RUN__INIT;
    run.model = (char *)a->model;
    run.n_rows = rows.n_rows;
    run.rows = mrp;
    run.end_time = end_time;
    run.step = step;

    struct module_send ms = {.run = &run, .timeout_ms = timeout_ms};
    struct cli_run_call call;
    r = cli_target_run(&target, PLC_MODULE, a->floor, false, send_module, &ms, &call);
    if (r < 0) {
        cli_rows_done(&rows);
        cli_target_done(&target);
        return cli_usage_error("module", "--min-isolation `%s`: must be process, container, kernel or vm", a->floor);
    }
    int status = emit(a, &call);
    cli_run_call_done(&call);
    cli_target_done(&target);
    cli_rows_done(&rows);
    return status;
}

int cli_cmd_module(int argc, char **argv)
{
    struct module_args a = {0};
    int r = parse_args(argc, argv, &a);
    if (r == 0)
        r = run_module(&a);
    else if (r < 0)
        r = 0; /* --help */
    return r;
}
