/* client.h: libplimsoll's internal interface (the public one is include/plimsoll.h): the
 * transport (http.c), the pure answer checks (check.c), one checked Run and Describe (call.c),
 * sessions (session.c), placement over several daemons (placement.c, backends.c). The CLI and
 * `plimsoll mcp` are built on these; the public API (api*.c) wraps the same functions, so there is
 * one client implementation.
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

#include "../core/cleanup_json.h"
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
static inline void cli_pb_free_fn(void *p)
{
    ProtobufCMessage *m = *(ProtobufCMessage **)p;
    if (m)
        protobuf_c_message_free_unpacked(m, NULL);
}
#define cli_cleanup_json cleanup_json /* core/cleanup_json.h's, under the name the client uses */
#define cli_cleanup_pb __attribute__((cleanup(cli_pb_free_fn)))

/* ---- http.c: one POST over libcurl ---- */

struct cli_http_answer;
struct cli_conn;
struct plc_choice;
/* A transport other than libcurl (the placement unit tests' fake daemons). Same contract as
 * cli_http_post. */
struct cli_transport {
    int (*post)(void *ctx, const struct cli_conn *c, const char *path, const char *body, size_t len,
                const char *request_id, struct cli_http_answer *ans, struct plm_err *err);
    void *ctx;
};

struct cli_conn {
    const char *url;   /* base URL, no trailing slash needed */
    const char *token; /* NULL: no Authorization header */
    const char *ca;    /* PEM file of the CA that signs an https daemon's certificate; NULL: the system's */
    const struct cli_transport *transport; /* NULL: libcurl */
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
/* A grant profile name as the daemon accepts it: 1..128 bytes of A-Z a-z 0-9 . _ - */
bool cli_grant_name_valid(const char *name);
/* A short machine name for a verdict: ran, refused, evidence_mismatch, record_mismatch,
 * transport_error, error. */
const char *cli_verdict_name(enum cli_verdict v);
/* The name of a NotDispatched reason number ("isolation", ...; "reason <n>" for unknown ones). */
void cli_reason_name(int reason, char *buf, size_t len);

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
    const struct plc_choice *choice;          /* placed on a pool: where, and who refused first; else NULL */
};

/* The exit status after a project run (verdict ran): 0 when it completed and every step exited
 * 0; else the first failing step's code (124 timed out, 199 outside 0..198); 1 when setup failed
 * or the runner broke its protocol. Other verdicts as cli_exit_status. */
int cli_exit_status_project(const struct cli_outcome *o, const Plimsoll__V1__ProjectResult *p);

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

/* After a module run: 0 completed, 124 timed out, 1 setup failed or protocol error; other
 * verdicts as cli_exit_status. */
int cli_exit_status_module(const struct cli_outcome *o, const Plimsoll__V1__ModuleResult *m);

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
    struct cli_outcome opened; /* what cli_session_open concluded (placement reads a refusal's reason) */
};
int cli_session_open(struct cli_session *s, const char *owner);
int cli_session_cell(struct cli_session *s, const char *code);
int cli_session_close(struct cli_session *s);
/* ---- placement.c, backends.c: one caller, several daemons (docs/library.md) ---- */

#define PLC_BACKENDS_MAX 32
#define PLC_NAME_MAX 64
#define PLC_DEFAULT_TTL_S 60.0

/* One daemon of a pool with the caller's own credential for it. */
struct plc_backend {
    char name[PLC_NAME_MAX];
    char *url, *token, *ca; /* owned; the token is wiped on release */
    struct cli_conn conn;   /* points into the fields above (and at the pool's transport) */
    Plimsoll__V1__DescribeResponse *desc; /* the cached Describe; NULL: never described or failed */
    double described_at;                  /* the pool clock's reading when desc was fetched */
    bool stale;                           /* describe again before the next use */
    char why[256];                        /* why the last Describe failed */
};

struct plc_pool {
    struct plc_backend b[PLC_BACKENDS_MAX];
    size_t n;
    double ttl_s;                     /* a description older than this is fetched again */
    double (*now)(void *ctx);         /* seconds, monotonic; NULL: CLOCK_MONOTONIC */
    void *now_ctx;
    const struct cli_transport *transport; /* NULL: libcurl (set before adding backends) */
};

/* The kind of call a request is, which decides the Describe flags it needs. */
enum plc_kind { PLC_JAVASCRIPT, PLC_PROJECT, PLC_MODULE, PLC_SESSION };

/* Ranks two backends' descriptions: < 0 when a should be tried before b. */
typedef int (*plc_prefer_fn)(const Plimsoll__V1__DescribeResponse *a, const Plimsoll__V1__DescribeResponse *b,
                             void *ctx);

struct plc_requirement {
    const char *backend;       /* this backend only; NULL: any */
    const char *provider;      /* Describe's sandbox must equal this; NULL: any */
    const char *min_isolation; /* merged with the request's floor (the stronger wins); NULL/"": none */
    const char *environment;   /* the payload kind's environment identity must equal this */
    bool grant_profile;        /* the request carries a grant */
    const char *language;      /* PLC_SESSION: the session environment must list it */
    plc_prefer_fn prefer;      /* NULL: the pool's order */
    void *prefer_ctx;
};

/* A backend left out, or one that refused before the answer. */
struct plc_pass {
    char backend[PLC_NAME_MAX];
    char why[320];
    int reason;    /* the NotDispatched reason of a refusal; 0 for a filter or connection failure */
    bool sent;     /* the request reached it (a refusal), as opposed to filtered or never connected */
};

/* Where a request went. */
struct plc_choice {
    char backend[PLC_NAME_MAX]; /* the backend that answered; "" when none did */
    char floor[16];             /* the merged floor stamped on the request ("" none) */
    size_t n_refused;           /* refused before the answer (tried, proved nothing ran) */
    struct plc_pass refused[PLC_BACKENDS_MAX];
    size_t n_skipped;           /* filtered out (Describe says it cannot take the request) */
    struct plc_pass skipped[PLC_BACKENDS_MAX];
};

void plc_pool_init(struct plc_pool *p);
/* Adds a backend (name unique, 1..63 of A-Z a-z 0-9 . _ -; url http(s)://; token and ca may be
 * NULL). The token is copied. -1 with err on a bad value or a full pool. */
int plc_pool_add(struct plc_pool *p, const char *name, const char *url, const char *token, const char *ca,
                 struct plm_err *err);
/* Reads a backends file: a JSON array of {"name", "url", "token_file"?, "ca"?} (docs/cli.md).
 * Relative paths are read against the file's directory. -1 with err naming the entry. */
int plc_pool_load(struct plc_pool *p, const char *path, struct plm_err *err);
void plc_pool_done(struct plc_pool *p);
/* The backend named `name`, or NULL. */
struct plc_backend *plc_pool_find(struct plc_pool *p, const char *name);
/* Describes b when it has no description, it is stale or older than the TTL. 0 when b has a
 * usable description afterwards (b->desc), else -1 with b->why. */
int plc_describe(struct plc_pool *p, struct plc_backend *b);
/* Describes every backend now (whatever the cache holds). */
void plc_refresh(struct plc_pool *p);
/* Why b cannot take a request of `kind` under `req` with the merged floor, or NULL when it can. */
const char *plc_filter(const struct plc_backend *b, enum plc_kind kind, const struct plc_requirement *req,
                       enum plm_tier floor, char *why, size_t n);
/* True for the NotDispatched reasons another daemon may not give: unsupported, isolation,
 * capacity. */
bool plc_retryable(int reason);
/* Merges a request's floor with the requirement's: the stronger wins; "" when neither states one.
 * -1 when either is not a floor name (nothing may be sent). */
int plc_merge_floor(const char *request_floor, const char *required, char out[16], enum plm_tier *tier);

/* A Run through the pool: `send` performs one checked call on a backend's connection with the
 * merged floor (cli_run_javascript and friends). Returns 0 with *call filled by the backend that
 * answered (or the last refusal), -1 when nothing was sent at all (*call then holds a refusal
 * built here: verdict REFUSED, its message naming every backend and why). */
typedef int (*plc_send_fn)(const struct cli_conn *conn, const char *floor, void *ctx, struct cli_run_call *call);
int plc_run(struct plc_pool *p, enum plc_kind kind, const char *request_floor, const struct plc_requirement *req,
            plc_send_fn send, void *ctx, struct cli_run_call *call, struct plc_choice *choice);
/* Opens a session on the first backend that takes it (sessions, language, floor), retrying as
 * plc_run does; s->conn is then that backend's and every later call goes there. The session's
 * floor is set to the merged floor (choice->floor, which must outlive s). Returns as
 * cli_session_open, or CLI_EXIT_REFUSED when no backend could take it (reason on s->err). */
int plc_session_open(struct plc_pool *p, const struct plc_requirement *req, struct cli_session *s, const char *owner,
                     struct plc_choice *choice);
/* "a (capacity), b (connection refused)" for the card; "" when nothing refused. */
void plc_choice_refused_text(const struct plc_choice *c, char *buf, size_t n);
