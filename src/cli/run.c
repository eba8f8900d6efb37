/* run.c: `plimsoll run`: send one JavaScript snippet at protocol 3 and check the answer.
 * Owns: the command line of `run`, the snippet bytes, the request message we encode (the only
 * thing the record check trusts), the decoded answer.
 * Trusts: nothing in the answer until check.c has passed it; guest output reaches our stdout and
 * stderr only for a checked answer (ran, or evidence mismatch whose record did check).
 * Invariant: the request digest is recomputed from the very message we encoded and sent. */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../core/io.h"
#include "../core/cleanup.h"
#include "../core/limits.h"
#include "cli.h"

void cli_usage_run(FILE *f)
{
    fputs("usage: plimsoll run [-e CODE | FILE | -] [--grant PROFILE] [--min-isolation TIER]\n"
          "                    [--timeout SECONDS] [--url URL] [--token-file FILE | --backends FILE]\n"
          "                    [--json]\n"
          "\n"
          "Runs one JavaScript snippet in the daemon's sandbox and checks the answer: the request id\n"
          "echo, the run record's digests, and the actual tier against the floor.\n"
          "\n"
          "  -e, --eval CODE        the snippet as an argument\n"
          "  FILE                   read the snippet from FILE ('-' or no source: standard input,\n"
          "                         unless it is a terminal)\n"
          "  --grant PROFILE        the grant profile whose API the snippet may call through its\n"
          "                         `host` object (docs/grants.md)\n"
          "  --min-isolation TIER   refuse unless the sandbox is at least TIER:\n"
          "                         process, container, kernel or vm\n"
          "  --timeout SECONDS      run time limit, 0 < SECONDS <= 300 (default: the daemon's)\n"
          "  --url URL              daemon base URL (default $PLIMSOLL_URL, else " CLI_DEFAULT_URL ")\n"
          "  --token-file FILE      bearer token file (default $PLIMSOLL_TOKEN, else no token)\n"
          "  --backends FILE        place the run on one of several daemons (a JSON list of name,\n"
          "                         url, token_file, ca; docs/cli.md); the card names the backend\n"
          "  --json                 print one JSON object on stdout instead of the guest output\n"
          "                         and the run card\n"
          "  -h, --help             this text\n"
          "\n"
          "The guest's stdout and stderr are copied to ours, byte for byte; the run card follows on\n"
          "stderr. Exit status: the guest's exit code (0-198) after a checked run; 199 guest code\n"
          "outside 0-198; 200 refused before dispatch (no code ran); 201 evidence mismatch; 202\n"
          "record mismatch; 203 transport or protocol error; 204 usage error; 205 server error that\n"
          "may have run. See docs/cli.md.\n",
          f);
}

static int load_code(const char *code_arg, const char *path, char **out, size_t *len)
{
    if (code_arg) {
        *out = strdup(code_arg);
        if (!*out)
            return cli_usage_error("run", "%s", "out of memory");
        *len = strlen(code_arg);
        return 0;
    }
    bool from_stdin = !path || strcmp(path, "-") == 0;
    if (from_stdin && !path && isatty(STDIN_FILENO))
        return cli_usage_error("run", "%s", "no snippet: give -e CODE, FILE, or - for standard input");
    cleanup_close int fd = -1;
    if (!from_stdin) {
        fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY);
        if (fd < 0) {
            fprintf(stderr, "plimsoll run: `%s`: %s\n", path, strerror(errno));
            return CLI_EXIT_USAGE;
        }
    }
    int r = plm_read_all(from_stdin ? STDIN_FILENO : fd, LIM_BODY_MAX, out, len);
    if (r < 0) {
        fprintf(stderr, "plimsoll run: `%s`: %s\n", from_stdin ? "standard input" : path,
                r == -EFBIG ? "larger than the daemon's 8 MiB body limit" : strerror(-r));
        return CLI_EXIT_USAGE;
    }
    return 0;
}

static int parse_timeout(const char *s, int32_t *ms)
{
    char *end = NULL;
    errno = 0;
    double v = strtod(s, &end);
    if (errno || end == s || *end)
        return -1;
    return cli_timeout_ms(v, ms);
}

static void write_bytes(FILE *f, const ProtobufCBinaryData *b)
{
    if (b->len)
        fwrite(b->data, 1, b->len, f);
    fflush(f);
}

/* The printing of `plimsoll run`: the guest's output (a checked answer's only) and the card,
 * or the --json object. Returns the exit status. */
static int emit(const struct cli_run_report *r, const Plimsoll__V1__JavaScriptResult *jr, bool json_out)
{
    const struct cli_run_report rep = *r;
    if (json_out) {
        cli_cleanup_json json_t *j = cli_card_json(&rep);
        if (!j || json_dumpf(j, stdout, JSON_COMPACT) < 0) {
            fprintf(stderr, "plimsoll run: cannot write the JSON report\n");
            return rep.exit_status == 0 ? CLI_EXIT_TRANSPORT : rep.exit_status;
        }
        fputc('\n', stdout);
        fflush(stdout);
        return rep.exit_status;
    }
    bool nl = false;
    if (jr) {
        write_bytes(stdout, &jr->stdout);
        write_bytes(stderr, &jr->stderr);
        /* Keep the card on its own lines after output that did not end one. */
        nl = jr->stderr.len && jr->stderr.data[jr->stderr.len - 1] != '\n';
    }
    if (nl)
        fputc('\n', stderr);
    cli_card_print(stderr, &rep);
    return rep.exit_status;
}

struct snippet {
    const char *code, *grant;
    int32_t timeout_ms;
};

static int send_snippet(const struct cli_conn *conn, const char *floor, void *ctx, struct cli_run_call *call)
{
    const struct snippet *s = ctx;
    return cli_run_javascript(conn, s->code, s->grant, floor, s->timeout_ms, call);
}

/* What the command line asked for. */
struct run_args {
    const char *code_arg, *floor, *timeout_arg, *grant, *path;
    bool json_out, help;
    int32_t timeout_ms;
};

/* Stage 1: the options and the one FILE. 0, or the exit status after a message; -h prints the
 * usage and sets a->help. */
static int run_parse(int argc, char **argv, struct run_args *a, struct cli_target *target)
{
    static const struct option opts[] = {
        {"eval", required_argument, NULL, 'e'},
        {"min-isolation", required_argument, NULL, 'i'},
        {"timeout", required_argument, NULL, 't'},
        {"grant", required_argument, NULL, 'g'},
        CLI_WHERE_OPTIONS,
        {"json", no_argument, NULL, 'j'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    opterr = 0;
    optind = 0; /* full re-initialisation for GNU getopt */
    int c, r;
    while ((c = getopt_long(argc, argv, ":e:h", opts, NULL)) != -1) {
        const char **slot = c == 'e' ? &a->code_arg : c == 'i' ? &a->floor : c == 't' ? &a->timeout_arg
                            : c == 'g' ? &a->grant : NULL;
        if (slot) {
            if ((r = cli_opt_once("run", opts, c, slot)))
                return r;
            continue;
        }
        switch (c) {
        case 'j': a->json_out = true; break;
        case 'h': cli_usage_run(stdout); a->help = true; return 0;
        default:
            if ((r = cli_opt_where("run", c, argv, &target->where)))
                return r;
        }
    }
    if (!a->floor)
        a->floor = ""; /* no floor stated */
    if (optind < argc)
        a->path = argv[optind++];
    if (optind < argc)
        return cli_usage_error("run", "unexpected argument `%s`", argv[optind]);
    if (a->code_arg && a->path)
        return cli_usage_error("run", "give either -e CODE or a FILE, not both (got `%s`)", a->path);
    return 0;
}

/* Stage 2: everything that can be judged locally is judged before anything is sent. */
static int run_judge(struct run_args *a)
{
    enum plm_tier floor_tier = PLM_TIER_UNKNOWN;
    struct plm_err err = {0};
    if (tier_parse_floor(a->floor, &floor_tier, &err) < 0)
        return cli_usage_error("run", "--min-isolation `%s`: must be process, container, kernel or vm", a->floor);
    if (a->grant && !cli_grant_name_valid(a->grant))
        return cli_usage_error("run", "--grant `%s`: 1 to %d of A-Z a-z 0-9 . _ -", a->grant, LIM_GRANT_PROFILE_MAX);
    if (a->timeout_arg && parse_timeout(a->timeout_arg, &a->timeout_ms) < 0)
        return cli_usage_error("run", "--timeout `%s`: must be a number of seconds, 0 < S <= 300", a->timeout_arg);
    return 0;
}

/* Stage 3: the snippet, read and checked: a proto3 string is UTF-8 without NUL here (our codec
 * and the daemon refuse both). */
static int run_snippet(const struct run_args *a, char **code)
{
    size_t code_len = 0;
    int r = load_code(a->code_arg, a->path, code, &code_len);
    if (r)
        return r;
    if (strlen(*code) != code_len)
        return cli_usage_error("run", "%s", "the snippet contains a NUL byte");
    if (!cli_utf8_valid((const uint8_t *)*code, code_len))
        return cli_usage_error("run", "%s", "the snippet is not valid UTF-8");
    return 0;
}

/* Stage 4: the checked call on the target, then the output and the card. */
static int run_send(struct cli_target *target, const struct run_args *a, const char *code)
{
    struct snippet s = {.code = code, .grant = a->grant, .timeout_ms = a->timeout_ms};
    struct cli_run_call call;
    if (cli_target_run(target, PLC_JAVASCRIPT, a->floor, a->grant != NULL, send_snippet, &s, &call) < 0)
        return cli_usage_error("run", "--min-isolation `%s`: must be process, container, kernel or vm", a->floor);
    int status = emit(&call.rep, call.js, a->json_out);
    cli_run_call_done(&call);
    return status;
}

int cli_cmd_run(int argc, char **argv)
{
    struct run_args a = {0};
    struct cli_target target = {0};
    cleanup_free char *code = NULL;
    int r = run_parse(argc, argv, &a, &target);
    if (r || a.help || (r = run_judge(&a)) || (r = run_snippet(&a, &code)))
        return r;
    if ((r = cli_target_open(&target, "run")))
        return r;
    r = run_send(&target, &a, code);
    cli_target_done(&target);
    return r;
}
