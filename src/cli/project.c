/* project.c: `plimsoll project DIR --step CMD… [--artifact PATH…] [--out DIR]`: the files of a
 * directory run as one project, the answer checked exactly as `plimsoll run` checks a snippet, and
 * the artifacts of a checked answer written into --out.
 * Owns: the command line, the files read (project_files.c), the ProjectRun we encode (the only
 * thing the record check trusts), the --out descriptor.
 * Trusts: nothing in the answer until check.c passed it; an artifact is written only after a
 * fully checked run (verdict ran), only when we asked for its path, and only inside --out.
 * Invariant: everything judged locally (flags, DIR, --out) is judged before anything is sent. */
#include <getopt.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../core/cleanup.h"
#include "../core/limits.h"
#include "cli.h"

void cli_usage_project(FILE *f)
{
    fputs("usage: plimsoll project DIR --step CMD [--step CMD]... [--artifact PATH]... [--out DIR]\n"
          "                        [--grant PROFILE] [--min-isolation TIER] [--timeout SECONDS]\n"
          "                        [--url URL] [--token-file FILE | --backends FILE] [--json]\n"
          "\n"
          "Sends the regular files under DIR (recursively; at most 200 files, 4 MiB of UTF-8 text in\n"
          "all) as one project, runs the shell steps in order in a fresh sandbox (stopping at the\n"
          "first failure), and checks the answer like `plimsoll run`: request id, record digests,\n"
          "result kind, tier against the floor. A symlink is sent as the file it points to when that\n"
          "file lies inside DIR; one that points outside DIR is refused, and so is a special file.\n"
          "\n"
          "  --step CMD             a shell command run with `sh -c` in the project directory (1-20)\n"
          "  --artifact PATH        a file, relative to the project directory, to bring back (0-100)\n"
          "  --out DIR              write the artifacts of a checked run into DIR (created when absent;\n"
          "                         it must be empty: no file is ever overwritten)\n"
          "  --grant PROFILE        the grant profile whose API the steps may call (docs/grants.md)\n"
          "  --min-isolation TIER   refuse unless the sandbox is at least TIER:\n"
          "                         process, container, kernel or vm\n"
          "  --timeout SECONDS      run time limit, 0 < SECONDS <= 300 (default: the daemon's)\n"
          "  --url URL              daemon base URL (default $PLIMSOLL_URL, else " CLI_DEFAULT_URL ")\n"
          "  --token-file FILE      bearer token file (default $PLIMSOLL_TOKEN, else no token)\n"
          "  --backends FILE        place the run on one of several daemons (docs/cli.md)\n"
          "  --json                 print one JSON object (steps' output and artifacts included)\n"
          "  -h, --help             this text\n"
          "\n"
          "Each step's stdout and stderr are copied to ours after a checked run; the run card follows\n"
          "on stderr. Exit status: 0 every step exited 0; else the first failing step's code (124\n"
          "timed out, 199 outside 0-198), 1 setup failed; 200-205 as for `run`; 206 the run checked\n"
          "but an artifact could not be written into --out. See docs/cli.md.\n",
          f);
}

struct project_args {
    const char *dir, *out, *grant, *floor, *timeout;
    struct cli_where where;
    char **steps, **artifacts;
    size_t n_steps, n_artifacts;
    bool json;
};

static int push(char ***v, size_t *n, size_t max, char *s, const char *what)
{
    if (*n >= max)
        return cli_usage_error("project", "more than %zu %s (the wire's limit)", max, what);
    char **nv = realloc(*v, (*n + 1) * sizeof *nv);
    if (!nv)
        return cli_usage_error("project", "%s", "out of memory");
    *v = nv;
    (*v)[(*n)++] = s;
    return 0;
}

static int parse_args(int argc, char **argv, struct project_args *a)
{
    static const struct option opts[] = {
        {"step", required_argument, NULL, 's'},          {"artifact", required_argument, NULL, 'a'},
        {"out", required_argument, NULL, 'o'},           {"grant", required_argument, NULL, 'g'},
        {"min-isolation", required_argument, NULL, 'i'}, {"timeout", required_argument, NULL, 't'},
        CLI_WHERE_OPTIONS,
        {"json", no_argument, NULL, 'j'},                {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    opterr = 0;
    optind = 0;
    int c, r;
    while ((c = getopt_long(argc, argv, ":h", opts, NULL)) != -1) {
        switch (c) {
        case 's':
            if (strlen(optarg) == 0 || strlen(optarg) > LIM_STEP_MAX)
                return cli_usage_error("project", "--step must be 1 to %u bytes", LIM_STEP_MAX);
            if ((r = push(&a->steps, &a->n_steps, LIM_STEPS_MAX, optarg, "steps")))
                return r;
            break;
        case 'a':
            if (!cli_artifact_path_safe(optarg))
                return cli_usage_error("project", "--artifact `%s`: a relative path without `.` or `..` "
                                                  "components, at most %d bytes", optarg, LIM_PATH_MAX);
            if ((r = push(&a->artifacts, &a->n_artifacts, LIM_ARTIFACTS_MAX, optarg, "artifacts")))
                return r;
            break;
        case 'o':
        case 'g':
        case 'i':
        case 't': {
            const char **slot = c == 'o' ? &a->out : c == 'g' ? &a->grant : c == 'i' ? &a->floor : &a->timeout;
            if ((r = cli_opt_once("project", opts, c, slot)))
                return r;
            break;
        }
        case 'j': a->json = true; break;
        case 'h': cli_usage_project(stdout); return -1;
        default:
            if ((r = cli_opt_where("project", c, argv, &a->where)))
                return r;
        }
    }
    if (!a->floor)
        a->floor = ""; /* no floor stated */
    if (optind < argc)
        a->dir = argv[optind++];
    if (optind < argc)
        return cli_usage_error("project", "unexpected argument `%s`", argv[optind]);
    if (!a->dir)
        return cli_usage_error("project", "%s", "no DIR: give the project directory");
    if (a->n_steps == 0)
        return cli_usage_error("project", "%s", "no --step: give at least one command to run");
    if (a->grant && !cli_grant_name_valid(a->grant))
        return cli_usage_error("project", "--grant `%s`: 1 to %d of A-Z a-z 0-9 . _ -", a->grant,
                               LIM_GRANT_PROFILE_MAX);
    if (a->out && a->n_artifacts == 0)
        return cli_usage_error("project", "%s", "--out without --artifact: nothing would be written");
    return 0;
}

static bool asked_for(const struct project_args *a, const char *path)
{
    for (size_t i = 0; i < a->n_artifacts; i++)
        if (strcmp(a->artifacts[i], path) == 0)
            return true;
    return false;
}

/* Writes each artifact of a checked run into out_fd. Returns 0, or CLI_EXIT_ARTIFACTS when one
 * could not be written (each failure is named on stderr; the others are still written). */
static int write_artifacts(const struct project_args *a, int out_fd, const Plimsoll__V1__ProjectResult *p)
{
    int status = 0;
    size_t written = 0;
    for (size_t i = 0; i < p->n_artifacts; i++) {
        const Plimsoll__V1__Artifact *art = p->artifacts[i];
        const char *path = art && art->path ? art->path : "";
        char why[256];
        if (!asked_for(a, path))
            snprintf(why, sizeof why, "not a path we asked for");
        else if (cli_artifact_write(out_fd, path, art->content.data, art->content.len, why, sizeof why) == 0) {
            written++;
            continue;
        }
        fputs("plimsoll project: artifact `", stderr);
        cli_put_safe(stderr, path, "");
        fprintf(stderr, "` not written into %s: %s\n", a->out, why);
        status = CLI_EXIT_ARTIFACTS;
    }
    fprintf(stderr, "plimsoll project: %zu of %zu artifacts written into %s\n", written, p->n_artifacts, a->out);
    return status;
}

static void write_step_output(const Plimsoll__V1__ProjectResult *p)
{
    for (size_t i = 0; i < p->n_steps; i++) {
        const Plimsoll__V1__StepResult *st = p->steps[i];
        if (st && st->stdout.len)
            fwrite(st->stdout.data, 1, st->stdout.len, stdout);
        fflush(stdout);
        if (st && st->stderr.len) {
            fwrite(st->stderr.data, 1, st->stderr.len, stderr);
            if (st->stderr.data[st->stderr.len - 1] != '\n')
                fputc('\n', stderr);
        }
    }
}

/* Output, artifacts, then the card (or the JSON object); returns the exit status. */
static int emit(const struct project_args *a, struct cli_run_call *call, int out_fd)
{
    struct cli_run_report *rep = &call->rep;
    const Plimsoll__V1__ProjectResult *p = call->project;
    if (out_fd >= 0 && p && call->o.verdict == CLI_V_RAN) {
        int w = write_artifacts(a, out_fd, p);
        if (w && rep->exit_status == 0)
            rep->exit_status = w;
    } else if (out_fd >= 0) {
        fprintf(stderr, "plimsoll project: no artifacts written into %s: the run was not fully checked\n", a->out);
    }
    if (a->json) {
        cli_cleanup_json json_t *j = cli_card_json(rep);
        if (!j || json_dumpf(j, stdout, JSON_COMPACT) < 0) {
            fprintf(stderr, "plimsoll project: cannot write the JSON report\n");
            return rep->exit_status == 0 ? CLI_EXIT_TRANSPORT : rep->exit_status;
        }
        fputc('\n', stdout);
        fflush(stdout);
        return rep->exit_status;
    }
    if (p)
        write_step_output(p);
    cli_card_print(stderr, rep);
    return rep->exit_status;
}

struct project_send {
    Plimsoll__V1__ProjectRun *pr;
    int32_t timeout_ms;
};

static int send_project(const struct cli_conn *conn, const char *floor, void *ctx, struct cli_run_call *call)
{
    const struct project_send *p = ctx;
    return cli_run_project(conn, p->pr, floor, p->timeout_ms, call);
}

static int run_project(struct project_args *a)
{
    enum plm_tier floor_tier = PLM_TIER_UNKNOWN;
    struct plm_err err = {0};
    if (tier_parse_floor(a->floor, &floor_tier, &err) < 0)
        return cli_usage_error("project", "--min-isolation `%s`: must be process, container, kernel or vm", a->floor);
    int32_t timeout_ms = 0;
    if (a->timeout) {
        char *end = NULL;
        double s = strtod(a->timeout, &end);
        if (end == a->timeout || *end || cli_timeout_ms(s, &timeout_ms) < 0)
            return cli_usage_error("project", "--timeout `%s`: must be a number of seconds, 0 < S <= 300", a->timeout);
    }
    char why[512];
    struct cli_project_files files;
    if (cli_project_read_dir(a->dir, &files, why, sizeof why) < 0)
        return cli_usage_error("project", "%s", why);
    cleanup_close int out_fd = -1;
    bool created = false;
    if (a->out && (out_fd = cli_out_prepare(a->out, &created, why, sizeof why)) < 0) {
        cli_project_files_done(&files);
        return cli_usage_error("project", "%s", why);
    }
    cleanup_free Plimsoll__V1__ProjectFile *pf = calloc(files.n ? files.n : 1, sizeof *pf);
    cleanup_free Plimsoll__V1__ProjectFile **pfp = calloc(files.n ? files.n : 1, sizeof *pfp);
    struct cli_target target = {.where = a->where};
    int r = !pf || !pfp ? (fprintf(stderr, "plimsoll project: out of memory\n"), CLI_EXIT_USAGE)
                        : cli_target_open(&target, "project");
    if (r) {
        cli_project_files_done(&files);
        return r;
    }
    for (size_t i = 0; i < files.n; i++) {
        plimsoll__v1__project_file__init(&pf[i]);
        pf[i].path = files.paths[i];
        pf[i].content = files.contents[i];
        pfp[i] = &pf[i];
    }
    Plimsoll__V1__ProjectRun pr = PLIMSOLL__V1__PROJECT_RUN__INIT;
    pr.n_files = files.n;
    pr.files = pfp;
    pr.n_steps = a->n_steps;
    pr.steps = a->steps;
    pr.n_artifacts = a->n_artifacts;
    pr.artifacts = a->artifacts;
    pr.grant_profile = (char *)(a->grant ? a->grant : "");

    struct project_send ps = {.pr = &pr, .timeout_ms = timeout_ms};
    struct cli_run_call call;
    r = cli_target_run(&target, PLC_PROJECT, a->floor, a->grant != NULL, send_project, &ps, &call);
    cli_project_files_done(&files);
    if (r < 0) {
        cli_target_done(&target);
        return cli_usage_error("project", "--min-isolation `%s`: must be process, container, kernel or vm", a->floor);
    }
    int status = emit(a, &call, out_fd);
    cli_run_call_done(&call);
    cli_target_done(&target);
    if (created && call.o.verdict != CLI_V_RAN)
        rmdir(a->out); /* ours and still empty: leave no trace of a run that wrote nothing */
    return status;
}

int cli_cmd_project(int argc, char **argv)
{
    struct project_args a = {0};
    int r = parse_args(argc, argv, &a);
    if (r == 0)
        r = run_project(&a);
    else if (r < 0)
        r = 0; /* --help */
    free(a.steps);
    free(a.artifacts);
    return r;
}
