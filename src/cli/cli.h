/* cli.h: the `plimsoll` command-line client, shared between its subcommand files.
 * Owns: the client's input readers (project_files.c, cell.c, module_rows.c) and the
 * subcommands; every request, check and placement decision is libplimsoll's (src/lib/client.h),
 * and every card it prints is the card library's (src/card/card.h). */
#pragma once
#include <getopt.h>

#include "../card/card.h"
#include "../lib/client.h"

/* "plimsoll CMD: <message>" and the --help hint on stderr; returns CLI_EXIT_USAGE (usage.c). */
int cli_usage_error(const char *cmd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* ---- options.c: the options every daemon-talking command shares ---- */

/* Where a command's calls go, as its command line said: --url, --token-file, --backends. */
struct cli_where {
    const char *url_flag, *token_file, *backends;
};
#define CLI_WHERE_OPTIONS                                                                          \
    {"url", required_argument, NULL, 'u'}, {"token-file", required_argument, NULL, 'k'},          \
        {"backends", required_argument, NULL, 'b'}
/* The default branch of every command's getopt switch: takes c when it is one of the where
 * options (0), else answers getopt's error (':' a value missing, anything else unknown) with the
 * usage exit status. Each where option may be given once. */
int cli_opt_where(const char *cmd, int c, char **argv, struct cli_where *w);
/* A single-valued option c (named in opts) takes optarg into *slot; the usage exit status when it
 * was given before. */
int cli_opt_once(const char *cmd, const struct option *opts, int c, const char **slot);

/* ---- target.c: one daemon or a pool (--backends) ---- */

struct cli_target {
    struct cli_where where; /* the command line's */
    char *token;
    struct cli_conn conn; /* one daemon */
    bool pooled;
    struct plc_pool pool;
    struct plc_choice choice; /* the last placed call's */
};
/* Loads the token or the backends file; 0, or the exit status after a message on stderr. */
int cli_target_open(struct cli_target *t, const char *cmd);
/* One checked call through `send`: directly, or placed on the pool (call->rep.choice set). -1 only
 * for a floor that is not one (nothing sent). */
int cli_target_run(struct cli_target *t, enum plc_kind kind, const char *floor, bool grant, plc_send_fn send,
                   void *ctx, struct cli_run_call *call);
void cli_target_done(struct cli_target *t);

/* ---- mcp*.c: `plimsoll mcp` ---- */
int cli_cmd_mcp(int argc, char **argv);
void cli_usage_mcp(FILE *f);

/* ---- project_files.c: `plimsoll project`'s directory and --out (unit-tested in cli_test.c) ---- */

struct cli_project_files {
    size_t n;
    char **paths;    /* relative, '/'-separated, byte order */
    char **contents; /* UTF-8 text without NUL */
    size_t total;    /* content bytes */
};
/* Reads every regular file under dir (recursively, in byte order) within the wire's limits (200
 * files, 4 MiB in all, paths of 1024 bytes). A symlink is followed only to a regular file inside
 * dir; one that escapes, a special file, a non-UTF-8 file or any limit exceeded is -1 with the
 * reason in why (nothing kept). */
int cli_project_read_dir(const char *dir, struct cli_project_files *out, char *why, size_t why_n);
void cli_project_files_done(struct cli_project_files *f);
/* A relative path without empty, `.` or `..` components, at most 1024 bytes. */
bool cli_artifact_path_safe(const char *path);
/* Creates dir (one level; *created set) or opens it when it exists and is empty; its fd, or -1
 * with why. */
int cli_out_prepare(const char *dir, bool *created, char *why, size_t why_n);
/* Writes one artifact under out_fd: intermediate directories created, no symlink followed, an
 * existing file never replaced (O_EXCL). 0, or -1 with why (a partial file is removed). */
int cli_artifact_write(int out_fd, const char *path, const uint8_t *data, size_t len, char *why, size_t why_n);

/* ---- cell.c: the repl's cell reader (unit-tested in cli_test.c) ---- */

/* A cell ends at a blank line or a line holding only %% (surrounding blanks ignored) once it has
 * content; blank and %% lines before any content are skipped. Lines are fed without their '\n'. */
struct cli_cell {
    char *buf; /* the cell so far, lines joined with '\n' (malloc'd) */
    size_t len, cap;
    bool too_big; /* beyond the daemon's 256 KiB code limit: the cell is dropped */
    bool has_nul; /* a line held a NUL byte (not sendable): the cell is dropped */
};
enum cli_cell_feed { CLI_CELL_MORE, CLI_CELL_DONE };
enum cli_cell_feed cli_cell_feed(struct cli_cell *c, const char *line, size_t len);
/* The cell's text (owned by the caller) and a reset; NULL when empty. */
char *cli_cell_take(struct cli_cell *c);
void cli_cell_done(struct cli_cell *c);

/* ---- module_rows.c: `plimsoll module`'s rows file and exact doubles (unit-tested in
 * cli_module_test.c) ---- */

#define CLI_ROWS_FILE_MAX (64u << 20) /* bytes of a rows file */
struct cli_rows {
    size_t n_rows, width;
    double *values; /* n_rows x width, row after row */
};
/* CSV rows: one row per line, values separated by commas (blanks around a value ignored), every
 * value a plain finite decimal ([+-]digits[.digits][e[+-]digits]); blank lines and lines starting
 * with '#' skipped; 1..100,000 rows, all of one width 1..64. -1 with "line L, column C: ..." in why
 * (nothing kept). */
int cli_rows_parse(const char *buf, size_t len, struct cli_rows *out, char *why, size_t why_n);
/* Reads path ("-" = standard input; at most CLI_ROWS_FILE_MAX bytes) and parses it. */
int cli_rows_read_file(const char *path, struct cli_rows *out, char *why, size_t why_n);
void cli_rows_done(struct cli_rows *r);
/* The shortest decimal that strtod reads back as the same 64 bits (-0 and subnormals kept);
 * NaN as "nan", infinities as "inf" / "-inf". buf needs 32 bytes; returns the length. */
size_t cli_fmt_double(double x, char buf[32]);
/* The same as a JSON value: non-finite values as the strings "NaN", "Infinity", "-Infinity". */
size_t cli_fmt_double_json(double x, char buf[32]);

/* ---- subcommands ---- */

/* One row of main.c's command table: `plimsoll NAME ARGS…` calls run(argc, argv) with argv[0] =
 * NAME; `plimsoll help NAME` and `NAME --help` print usage. `plimsoll --help` lists the rows with
 * a summary ("  NAME  SUMMARY") or options ("  NAME OPTIONS"); the rest (-h, --help, --version)
 * are dispatched the same way but not listed. */
struct cli_command {
    const char *name;
    const char *summary; /* one line of `plimsoll --help` (a second one indented by 13), or NULL */
    const char *options; /* what follows the name in `plimsoll --help` when there is no summary */
    int (*run)(int argc, char **argv);
    void (*usage)(FILE *f); /* NULL: `plimsoll help NAME` does not know it */
};
int cli_cmd_project(int argc, char **argv); /* project.c */
int cli_cmd_module(int argc, char **argv);  /* module.c */
void cli_usage_module(FILE *f);
void cli_usage_project(FILE *f);
int cli_cmd_describe(int argc, char **argv);
int cli_cmd_run(int argc, char **argv);
int cli_cmd_repl(int argc, char **argv); /* session.c */
void cli_usage_repl(FILE *f);
void cli_usage_main(FILE *f);
void cli_usage_run(FILE *f);
void cli_usage_describe(FILE *f);
