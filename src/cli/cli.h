/* cli.h: the `plimsoll` command-line client, shared between its subcommand files.
 * Owns: the client's exit codes, the transport interface (http.c), the pure answer checks
 * (check.c) and the run-card printer (card.c).
 * Invariant: a verdict of "refused before dispatch" is reached only from a bound error answer
 * that carries a decodable NotDispatched detail (or, lacking one, a known
 * Plimsoll-Not-Dispatched header); everything else that is not a fully checked success reads
 * as "may have run" (wire.md §7.5, §9). */
#pragma once
#include <jansson.h>
#include <protobuf-c/protobuf-c.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "../core/err.h"
#include "../core/record.h"
#include "../core/tier.h"
#include "sandbox.pb-c.h"

/* Protocol number this client speaks (wire.md §1, §10). */
#define CLI_PROTOCOL 3
#define CLI_DEFAULT_URL "http://127.0.0.1:8746"
#define CLI_TIMEOUT_S 360L /* whole-exchange deadline (wire.md §5.3) */
#define CLI_VERSION "0.1.0"

/* Exit codes. Guest exit codes 0..198 pass through unchanged after a checked run; the client's
 * own outcomes sit above them so a script can tell them apart (docs/cli.md). */
enum cli_exit {
    CLI_EXIT_GUEST_OUT_OF_RANGE = 199, /* checked run, guest code outside 0..198 (see the card) */
    CLI_EXIT_REFUSED = 200,            /* refused before dispatch: no code ran */
    CLI_EXIT_EVIDENCE = 201,           /* evidence mismatch: isolation below the floor; code may have run */
    CLI_EXIT_RECORD = 202,             /* record mismatch / answer not bound: code may have run */
    CLI_EXIT_TRANSPORT = 203,          /* transport or protocol error (incl. describe protocol mismatch) */
    CLI_EXIT_USAGE = 204,              /* bad command line or unreadable input; nothing was sent */
    CLI_EXIT_SERVER = 205,             /* server error without a not-dispatched mark: may have run */
    CLI_EXIT_ARTIFACTS = 206,          /* `project`: checked run, but an artifact could not be written */
};

enum cli_verdict {
    CLI_V_RAN = 0,           /* checked answer, tier meets the floor */
    CLI_V_REFUSED,           /* bound error marked not dispatched */
    CLI_V_EVIDENCE_MISMATCH, /* checked answer whose isolation does not meet the floor */
    CLI_V_RECORD_MISMATCH,   /* unbound success, record check failed, or result kind mismatch */
    CLI_V_TRANSPORT,         /* no usable HTTP answer, or a malformed one */
    CLI_V_ERROR,             /* Connect error that may have run */
};

/* ---- cleanup helpers for the library types this client uses (STYLE.md §4) ---- */
static inline void cli_json_decref_fn(json_t **j)
{
    if (*j)
        json_decref(*j);
}
static inline void cli_pb_free_fn(void *p)
{
    ProtobufCMessage *m = *(ProtobufCMessage **)p;
    if (m)
        protobuf_c_message_free_unpacked(m, NULL);
}
#define cli_cleanup_json __attribute__((cleanup(cli_json_decref_fn)))
#define cli_cleanup_pb __attribute__((cleanup(cli_pb_free_fn)))

/* ---- http.c: one POST over libcurl ---- */

struct cli_conn {
    const char *url;   /* base URL, no trailing slash needed */
    const char *token; /* NULL: no Authorization header */
};

struct cli_http_answer {
    long status;             /* HTTP status of the final response */
    char *content_type;      /* malloc'd header value or NULL */
    char *request_id_echo;   /* malloc'd Plimsoll-Request-Id value, NULL when absent */
    unsigned request_id_n;   /* how many Plimsoll-Request-Id headers arrived */
    char *not_dispatched;    /* malloc'd Plimsoll-Not-Dispatched value or NULL */
    char *body;              /* malloc'd, NUL-terminated (the NUL is not counted) */
    size_t body_len;
    bool not_sent;           /* transport failed before anything could reach the server */
    double elapsed_s;        /* round trip */
};

/* 32 lowercase hex characters from getrandom(2). Returns -1 (errno set) on failure. */
int cli_request_id(char out[33]);
/* POSTs body to <url><path> with the protocol-3 headers. 0 with *ans filled when an HTTP answer
 * arrived (any status), else -1 with err (kind UNAVAILABLE) and ans->not_sent set when the
 * connection provably never carried the request. */
int cli_http_post(const struct cli_conn *c, const char *path, const char *body, size_t len,
                  const char *request_id, struct cli_http_answer *ans, struct plm_err *err);
void cli_http_answer_done(struct cli_http_answer *a);
/* Reads the token the way docs/cli.md says: --token-file, else $PLIMSOLL_TOKEN, else none.
 * *out is malloc'd (free with cli_token_free) or NULL. -1 with a message in err on a bad file. */
int cli_token_load(const char *token_file, char **out, struct plm_err *err);
void cli_token_free(char *tok);
/* --url, else $PLIMSOLL_URL, else CLI_DEFAULT_URL. */
const char *cli_base_url(const char *flag);

/* ---- check.c: pure functions over answers (unit-tested in cli_test.c) ---- */

/* Decodes standard or URL-safe base64, padded or not. malloc'd into *out (never NULL on
 * success, even for zero bytes). -1 on any invalid input. */
int cli_b64_decode(const char *in, size_t len, uint8_t **out, size_t *out_len);
bool cli_utf8_valid(const uint8_t *s, size_t len);
/* True when the media type (before any ';', surrounding blanks ignored, case-insensitive) is
 * exactly application/json. NULL is false. */
bool cli_content_type_is_json(const char *ct);
/* True when exactly one echo arrived and it equals the id we sent, byte for byte. */
bool cli_answer_bound(const char *sent_id, const char *echo, unsigned echo_n);
/* One of the 16 lowercase Connect codes. */
bool cli_connect_code_valid(const char *code);
/* The code the reference Python client derives from an HTTP status (wire.md §7.2). */
const char *cli_code_from_status(long status);
/* The NotDispatched reason stated by a details array: 1.. when a detail whose type (after the
 * last '/') is plimsoll.v1.NotDispatched decodes as a binary NotDispatched with a non-zero
 * reason; 0 when none does ("states nothing"). */
int cli_not_dispatched_from_details(const json_t *details);
/* The reason number for a Plimsoll-Not-Dispatched header value, 0 when unknown or NULL. */
int cli_not_dispatched_from_header(const char *value);

struct cli_error_answer {
    char code[32];     /* lowercase Connect code, derived from the status when absent/invalid */
    char message[512]; /* "HTTP <status>" when absent */
    int detail_reason; /* from a decodable NotDispatched detail; 0 none */
};
/* Parses a Connect JSON error body (any content; garbage yields the status-derived code). */
void cli_parse_error(long status, const char *body, size_t len, struct cli_error_answer *out);

/* What the client concluded about one call. */
struct cli_outcome {
    enum cli_verdict verdict;
    int refusal;            /* REFUSED: reason number (1..7 known) */
    bool bound;             /* the answer echoed our request id */
    bool detail_disregarded;/* an unbound error carried a NotDispatched detail we ignored */
    bool not_sent;          /* TRANSPORT: nothing reached the server */
    char code[32];          /* ERROR/REFUSED: Connect code */
    char message[512];      /* ERROR/REFUSED: server message; MISMATCH/TRANSPORT: our reason */
};

/* Classifies an error answer (status != 200) per wire.md §9: an unbound answer's detail and
 * header are disregarded. */
void cli_classify_error(const struct cli_error_answer *e, bool bound, const char *nd_header,
                        struct cli_outcome *o);

/* The checks before decoding (wire.md §11.5, §5.3, §9): a 200 must be bound (else record
 * mismatch, "answer not bound") and must be application/json (else a malformed-response transport
 * error); any other status is a Connect error, classified by cli_classify_error. True only for a
 * bound 200 application/json answer, ready to decode; otherwise *o says what it was. */
bool cli_classify_http(const char *sent_id, const struct cli_http_answer *a, struct cli_outcome *o);

/* The record checks of wire.md §13.8 for a single Run: `sent` is the message we encoded,
 * `resp` the response as decoded. 0 when every check passes, else -1 with
 * PLM_E_MISMATCH and the failing check named in err. */
int cli_check_record(const Plimsoll__V1__RunRequest *sent, const Plimsoll__V1__RunResponse *resp,
                     struct plm_err *err);
/* The full success path after decoding (wire.md §11.5): record check, result kind, then the tier
 * against `floor` (PLM_TIER_UNKNOWN = no floor). Sets o->verdict to RAN, RECORD_MISMATCH or
 * EVIDENCE_MISMATCH, with o->message explaining a mismatch. */
void cli_check_answer(const Plimsoll__V1__RunRequest *sent, const Plimsoll__V1__RunResponse *resp,
                      enum plm_tier floor, struct cli_outcome *o);
/* Our process exit status for an outcome; `js` is the result when verdict is RAN/EVIDENCE. */
int cli_exit_status(const struct cli_outcome *o, const Plimsoll__V1__JavaScriptResult *js);
/* A run time limit in seconds, 0 < s <= 300 (fractions allowed), as the timeoutMs sent; -1
 * for anything else (NaN and infinities included). */
int cli_timeout_ms(double seconds, int32_t *ms);
/* "plimsoll CMD: <message>" and the --help hint on stderr; returns CLI_EXIT_USAGE. */
int cli_usage_error(const char *cmd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* A grant profile name as the daemon accepts it: 1..128 bytes of A-Z a-z 0-9 . _ - */
bool cli_grant_name_valid(const char *name);
/* A short machine name for a verdict: ran, refused, evidence_mismatch, record_mismatch,
 * transport_error, error. */
const char *cli_verdict_name(enum cli_verdict v);
/* The name of a NotDispatched reason number ("isolation", ...; "reason <n>" for unknown ones). */
void cli_reason_name(int reason, char *buf, size_t len);

/* ---- card.c: printing ---- */

/* Writes s with control characters (C0, DEL, C1) and invalid UTF-8 escaped as \xNN, so a
 * server string cannot forge lines on the terminal (STYLE.md §8). NULL prints "-"; "" prints
 * `empty`. */
void cli_put_safe(FILE *f, const char *s, const char *empty);

struct cli_run_report {
    const char *request_id;
    const char *floor;                        /* as sent, "" = none */
    const struct cli_outcome *o;
    const Plimsoll__V1__RunResponse *resp;    /* NULL when no decoded answer */
    bool output_withheld;                     /* record mismatch: guest output not printed */
    double elapsed_s;                         /* round trip; < 0: none (the daemon's own view) */
    int exit_status;
};
void cli_card_print(FILE *f, const struct cli_run_report *r);
/* The --json object for a run; NULL out of memory. */
json_t *cli_card_json(const struct cli_run_report *r);
/* Sets k to the bytes as text when valid UTF-8 (enc_k "utf-8"), else standard padded base64
 * (enc_k "base64"). -1 out of memory. */
int cli_json_set_bytes(json_t *o, const char *k, const char *enc_k, const ProtobufCBinaryData *b);

/* card_project.c: the project part of a run card (outcome, each step, artifacts) and of its
 * JSON. Step output and artifact bytes appear in the JSON only, and only when `checked` /
 * not `withheld`: a record that does not check does not vouch for them. */
void cli_card_print_project(FILE *f, const Plimsoll__V1__ProjectResult *p, bool checked);
int cli_card_json_project(json_t *j, const Plimsoll__V1__ProjectResult *p, bool withheld);
/* The exit status after a project run (verdict ran): 0 when it completed and every step exited
 * 0; else the first failing step's code (124 timed out, 199 outside 0..198); 1 when setup failed
 * or the runner broke its protocol. Other verdicts as cli_exit_status. */
int cli_exit_status_project(const struct cli_outcome *o, const Plimsoll__V1__ProjectResult *p);

/* Prints a DescribeResponse as text. */
void cli_describe_print(FILE *f, const Plimsoll__V1__DescribeResponse *d);

/* ---- call.c: one checked Run and one Describe (shared by run, describe and mcp) ---- */

struct cli_run_call {
    char rid[33];
    const char *floor;                          /* as sent, "" = none */
    struct cli_outcome o;
    Plimsoll__V1__RunResponse *resp;            /* owned; NULL when no decoded answer */
    const Plimsoll__V1__JavaScriptResult *js;   /* the result when `checked`, else NULL */
    const Plimsoll__V1__ProjectResult *project; /* the result when `checked`, else NULL */
    const Plimsoll__V1__ModuleResult *module;   /* the result when `checked`, else NULL */
    bool checked;                               /* verdict ran or evidence mismatch: output vouched for */
    struct cli_run_report rep;                  /* points into this struct: never copy it */
};
/* Sends one snippet (code must be UTF-8 without NUL; grant NULL or "" for none, else a profile name;
 * floor "" or process..vm, else -1 and nothing
 * is sent) and checks the answer. 0 with *call filled whatever the daemon said; free with
 * cli_run_call_done. */
int cli_run_javascript(const struct cli_conn *conn, const char *code, const char *grant, const char *floor,
                       int32_t timeout_ms, struct cli_run_call *call);
/* The same for a project (files, steps, artifacts as the caller built them, not owned). */
int cli_run_project(const struct cli_conn *conn, Plimsoll__V1__ProjectRun *project, const char *floor,
                    int32_t timeout_ms, struct cli_run_call *call);
/* The same for a module run (rows as the caller built them, not owned). */
int cli_run_module(const struct cli_conn *conn, Plimsoll__V1__ModuleRun *module, const char *floor,
                   int32_t timeout_ms, struct cli_run_call *call);
void cli_run_call_done(struct cli_run_call *call);
/* Describe: the decoded answer (free with protobuf_c_message_free_unpacked), or NULL with *o
 * saying why (transport, mismatch or a classified error answer). */
Plimsoll__V1__DescribeResponse *cli_describe_call(const struct cli_conn *conn, struct cli_outcome *o);

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
/* After a module run: 0 completed, 124 timed out, 1 setup failed or protocol error; other
 * verdicts as cli_exit_status. */
int cli_exit_status_module(const struct cli_outcome *o, const Plimsoll__V1__ModuleResult *m);

/* ---- subcommands ---- */

/* One row of main.c's command table: `plimsoll NAME ARGS…` calls run(argc, argv) with argv[0] =
 * NAME; `plimsoll help NAME` and `NAME --help` print usage. */
struct cli_command {
    const char *name;
    const char *summary; /* one line of `plimsoll --help` (a second one indented by 13) */
    int (*run)(int argc, char **argv);
    void (*usage)(FILE *f);
};
int cli_cmd_project(int argc, char **argv); /* project.c */
int cli_cmd_module(int argc, char **argv);  /* module.c */
void cli_usage_module(FILE *f);
void cli_usage_project(FILE *f);
int cli_cmd_describe(int argc, char **argv);
int cli_cmd_run(int argc, char **argv);
int cli_cmd_repl(int argc, char **argv); /* session.c */

/* session.c: one session as a client must hold it (the chain it checked, never the id printed).
 * Cell output goes to `out`, card lines and diagnostics to `err` (the repl: stdout and stderr;
 * mcp: memory streams). Each call returns 0 or the exit status that describes what went wrong. */
struct cli_session {
    struct cli_conn conn;
    const char *language;
    const char *floor;
    enum plm_tier floor_tier;
    int32_t timeout_ms;
    char id[64], fp[PLM_HEX_SHA256], last[PLM_HEX_SHA256];
    uint64_t calls;
    bool broken; /* an answer we could not check: nothing more is sent but the close */
    FILE *out, *err;
};
int cli_session_open(struct cli_session *s, const char *owner);
int cli_session_cell(struct cli_session *s, const char *code);
int cli_session_close(struct cli_session *s);
void cli_usage_repl(FILE *f);
void cli_usage_main(FILE *f);
void cli_usage_run(FILE *f);
void cli_usage_describe(FILE *f);
