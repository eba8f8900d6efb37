/* repl.c: `plimsoll repl`: one session (session.c), cells read from standard input (cell.c's
 * rule), on a terminal through libedit with this process's history.
 * Owns: the command line and the input lines. Trusts: no input line (cells are bounded by
 * cell.c, checked as UTF-8 before they are sent). */
#include <editline/readline.h>
#include <getopt.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../core/limits.h"
#include "cli.h"

static bool only_blank_line(const char *s)
{
    return s[strspn(s, " \t\r")] == 0;
}

void cli_usage_repl(FILE *f)
{
    fputs("usage: plimsoll repl [--language javascript|python] [--min-isolation TIER] [--timeout SECONDS]\n"
          "                     [--owner NAME] [--url URL] [--token-file FILE | --backends FILE]\n"
          "\n"
          "Opens a session, runs cells read from standard input in it, checks every answer's record\n"
          "and the session chain (fingerprint, sequence, previous digest), prints each cell's output\n"
          "and a card line on stderr, then closes the session and checks its summary.\n"
          "\n"
          "A cell is one or more lines; it ends at a blank line or at a line holding only %%, so a\n"
          "Python block (`def f(x):` and its indented body) is one cell. On a terminal, lines are\n"
          "edited with libedit and kept in this process's history (no history file is written);\n"
          "the prompt is `> `, and `... ` inside a cell. End with Ctrl-D (end of input).\n"
          "\n"
          "  --language LANG        javascript (default) or python\n"
          "  --min-isolation TIER   refuse unless the sandbox is at least TIER\n"
          "  --timeout SECONDS      each cell's time limit, 0 < SECONDS <= 300\n"
          "  --owner NAME           the session's owner label (per-owner caps, docs/sessions.md)\n"
          "  --url URL              daemon base URL (default $PLIMSOLL_URL, else " CLI_DEFAULT_URL ")\n"
          "  --token-file FILE      bearer token file (default $PLIMSOLL_TOKEN, else no token)\n"
          "  --backends FILE        open the session on one of several daemons (docs/cli.md); every\n"
          "                         cell goes to the daemon that opened it\n"
          "\n"
          "Exit status: 0 all checked; 200 the open was refused; 202 a record or the chain did not\n"
          "check; 203 transport error; 204 usage error; 205 server error that may have run.\n",
          f);
}


/* One input line without its '\n' (malloc'd), or NULL at end of input. On a terminal it comes
 * from libedit, with line editing and this process's history (kept in memory only: cells may
 * carry secrets, so no history file is written). */
static char *read_line(bool tty, bool continuation, size_t *len)
{
    char *line = NULL;
    if (tty) {
        line = readline(continuation ? "... " : "> ");
        if (line && *line && !only_blank_line(line))
            add_history(line);
        *len = line ? strlen(line) : 0;
        return line;
    }
    size_t cap = 0;
    ssize_t n = getline(&line, &cap, stdin);
    if (n < 0) {
        free(line);
        return NULL;
    }
    if (n && line[n - 1] == '\n')
        line[--n] = 0;
    *len = (size_t)n;
    return line;
}

/* Reads the next cell (cell.c's rule: it ends at a blank line, a %% line or the end of input).
 * NULL at the end of input. A cell beyond the code limit is named and skipped. */
static char *next_cell(bool tty, struct cli_cell *cell)
{
    for (;;) {
        size_t len = 0;
        char *line = read_line(tty, cell->len > 0, &len);
        enum cli_cell_feed f = line ? cli_cell_feed(cell, line, len) : CLI_CELL_DONE;
        free(line);
        if (f == CLI_CELL_MORE)
            continue;
        bool too_big = cell->too_big, has_nul = cell->has_nul;
        char *code = cli_cell_take(cell);
        if (too_big)
            fprintf(stderr, "plimsoll repl: cell skipped: larger than %u KiB (the daemon's code limit)\n",
                    LIM_CODE_MAX / 1024);
        else if (has_nul)
            fputs("plimsoll repl: cell skipped: it contains a NUL byte\n", stderr);
        if (code || !line)
            return code;
    }
}

/* Stage 1: the options, judged locally. 0 to go on, -1 after --help, or the usage exit status. */
static int repl_parse(int argc, char **argv, struct cli_session *r, const char **owner, struct cli_target *target)
{
    static const struct option opts[] = {
        {"language", required_argument, NULL, 'l'}, {"min-isolation", required_argument, NULL, 'i'},
        {"timeout", required_argument, NULL, 't'},  {"owner", required_argument, NULL, 'o'},
        CLI_WHERE_OPTIONS,
        {"help", no_argument, NULL, 'h'},           {NULL, 0, NULL, 0},
    };
    opterr = 0;
    optind = 0;
    /* language and floor start with defaults; each is still accepted once only. */
    const char *language = NULL, *floor = NULL, *timeout_arg = NULL;
    int c, e;
    while ((c = getopt_long(argc, argv, ":h", opts, NULL)) != -1) {
        const char **slot = c == 'l' ? &language : c == 'i' ? &floor : c == 't' ? &timeout_arg
                            : c == 'o' ? owner : NULL;
        if (slot) {
            if ((e = cli_opt_once("repl", opts, c, slot)))
                return e;
            continue;
        }
        if (c == 'h') {
            cli_usage_repl(stdout);
            return -1;
        }
        if ((e = cli_opt_where("repl", c, argv, &target->where)))
            return e;
    }
    if (language)
        r->language = language;
    if (floor)
        r->floor = floor;
    if (optind < argc)
        return cli_usage_error("repl", "unexpected argument `%s`", argv[optind]);
    if (strcmp(r->language, "javascript") && strcmp(r->language, "python"))
        return cli_usage_error("repl", "--language `%s`: javascript or python", r->language);
    struct plm_err err = {0};
    if (tier_parse_floor(r->floor, &r->floor_tier, &err) < 0)
        return cli_usage_error("repl", "--min-isolation `%s`: must be process, container, kernel or vm", r->floor);
    if (timeout_arg) {
        char *end;
        double s = strtod(timeout_arg, &end);
        if (*end || !(s > 0 && s <= 300))
            return cli_usage_error("repl", "--timeout `%s`: seconds, 0 < S <= 300", timeout_arg);
        r->timeout_ms = (int32_t)(s * 1000);
    }
    return 0;
}

int cli_cmd_repl(int argc, char **argv)
{
    struct cli_session r = {.language = "javascript", .floor = "", .floor_tier = PLM_TIER_UNKNOWN, .out = stdout, .err = stderr};
    const char *owner = NULL;
    struct cli_target target = {0};
    int parsed = repl_parse(argc, argv, &r, &owner, &target);
    if (parsed)
        return parsed < 0 ? 0 : parsed;
    int rc = cli_target_open(&target, "repl");
    if (rc)
        return rc;
    if (target.pooled) {
        /* Placed once: every cell and the close go to the daemon that opened the session. */
        rc = plc_session_open(&target.pool, &(struct plc_requirement){0}, &r, owner, &target.choice);
        if (target.choice.backend[0])
            cli_print_placement(stderr, &target.choice);
    } else {
        r.conn = target.conn;
        rc = cli_session_open(&r, owner);
    }
    if (rc == 0) {
        bool tty = isatty(STDIN_FILENO) && isatty(STDERR_FILENO);
        if (tty)
            stifle_history(1000);
        struct cli_cell cell = {0};
        char *code;
        while (!r.broken && (code = next_cell(tty, &cell))) {
            if (!cli_utf8_valid((const uint8_t *)code, strlen(code))) {
                fputs("plimsoll repl: cell skipped: not valid UTF-8\n", stderr);
            } else {
                int x = cli_session_cell(&r, code);
                if (x == CLI_EXIT_RECORD || x == CLI_EXIT_TRANSPORT)
                    rc = x;
            }
            free(code);
        }
        cli_cell_done(&cell);
        int x = cli_session_close(&r);
        if (rc == 0)
            rc = x;
    }
    cli_target_done(&target);
    return rc;
}
