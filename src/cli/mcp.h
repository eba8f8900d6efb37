/* mcp.h: `plimsoll mcp`, a Model Context Protocol server over stdio, split into the JSON-RPC
 * session (mcp.c), the bounded line reader (mcp_read.c), the tool table (mcp_tools.c, with the
 * Describe-shaped list in mcp_tailor.c), one file per tool, and the helpers they share
 * (mcp_result.c). Calls point down: mcp.c -> mcp_tools.c -> each tool -> mcp_result.c. */
#pragma once
#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

#include "cli.h"

/* One message is one line; longer lines are discarded whole and answered with a parse error. A
 * snippet is at most 256 KiB, which JSON escaping can grow about six times. */
#define MCP_LINE_MAX (4u * 1024 * 1024)

struct mcp_reader {
    int fd;
    char *buf;       /* buffered bytes not yet returned */
    size_t len, cap; /* cap never exceeds MCP_LINE_MAX + read chunk */
    size_t returned; /* bytes of the line handed out last, dropped on the next call */
    bool discarding; /* inside an overlong line: drop bytes up to its newline */
    bool eof;
};

enum mcp_line { MCP_LINE_OK, MCP_LINE_TOO_LONG, MCP_LINE_EOF, MCP_LINE_ERROR };

void mcp_reader_init(struct mcp_reader *r, int fd);
void mcp_reader_done(struct mcp_reader *r);
/* The next line without its '\n' in *line and *len (valid until the next call). An overlong line is
 * reported once (TOO_LONG) and its bytes skipped; a last line without '\n' still counts. */
enum mcp_line mcp_read_line(struct mcp_reader *r, const char **line, size_t *len);

#define MCP_SESSIONS_MAX 8

/* One session opened through the MCP tools; the host knows only its handle. */
struct mcp_session {
    bool used;
    char handle[16]; /* "s<n>" */
    char language[16], floor[16];
    char backend[PLC_NAME_MAX]; /* --backends: the daemon it was placed on */
    struct cli_session s;
};

struct mcp_server {
    const char *url;        /* daemon base URL */
    const char *token_file; /* --token-file, else $PLIMSOLL_TOKEN (read per call) */
    struct plc_pool *pool;  /* --backends: every call placed on one of these daemons; else NULL */
    bool initialized;       /* initialize answered */
    char protocol[16];      /* the revision agreed */
    struct mcp_session sessions[MCP_SESSIONS_MAX];
    unsigned session_seq;
};

/* Handles one parsed JSON-RPC message; returns the answer to write (a new reference) or NULL for
 * none (notifications, responses). */
json_t *mcp_handle(struct mcp_server *s, json_t *msg);
/* The tools: the tools/list result, and one tools/call result (a CallToolResult object), or NULL
 * with *rpc_code and *rpc_msg set for a protocol error (unknown tool). */
json_t *mcp_tools_list(const struct mcp_server *s);
json_t *mcp_tools_call(struct mcp_server *s, const char *name, json_t *args, int *rpc_code,
                       const char **rpc_msg);

/* ---- mcp_result.c: what every tool shares (a leaf below the tool files) ---- */
/* A CallToolResult: text, then the card when non-NULL; takes the reference to structured. */
json_t *mcp_tool_result(bool is_error, const char *text, const char *card, json_t *structured);
/* A tool error for bad arguments: "invalid arguments: WHY. Nothing was sent; no code ran." */
json_t *mcp_bad_arguments(const char *why);
/* NULL when every key of args is one of known (NULL-terminated); else the bad-arguments result
 * naming the first stray key and the keys the tool takes. */
json_t *mcp_only_arguments(json_t *args, const char *const *known);
/* The common run arguments `timeout` (seconds) and `min_isolation`: NULL when valid (the outputs
 * set; *floor stays "" without a floor), else the bad-arguments tool error. */
json_t *mcp_run_limits(json_t *args, int32_t *timeout_ms, const char **floor);
/* A grant argument: NULL when absent or valid (*grant set), else the bad-arguments tool error. */
json_t *mcp_grant_argument(json_t *args, const char **grant);
/* NULL with *token loaded, or the tool error saying the token could not be read. */
json_t *mcp_load_token(const struct mcp_server *s, char **token);
/* One checked call through `send`: to the one daemon (with token), or placed on the pool, then
 * call->rep.choice = choice. Returns as cli_target_run. */
int mcp_send(const struct mcp_server *s, const char *token, enum plc_kind kind, const char *floor, bool grant,
             plc_send_fn send, void *ctx, struct cli_run_call *call, struct plc_choice *choice);
/* The answer text of one tool, from the checked call and its card as JSON. */
typedef char *(*mcp_text_fn)(const struct cli_run_call *call, const json_t *card, const char *url);
/* The CallToolResult of a finished call (rc: the cli_run_* return); consumes the call. */
json_t *mcp_call_result(struct cli_run_call *call, int rc, mcp_text_fn text_of, const char *url);
/* The text run card (the card library's) as a malloc'd string. */
char *mcp_capture_card(const struct cli_run_report *rep);
/* The words for a verdict other than ran / evidence mismatch. */
void mcp_failure_text(FILE *m, const struct cli_outcome *o, const char *url);

/* ---- the tools, one file each: a schema and a call (the table in mcp_tools.c) ---- */
/* mcp_javascript.c: run_javascript. */
json_t *mcp_javascript_tool(void);
json_t *mcp_run_javascript(struct mcp_server *s, json_t *args);

/* mcp_describe.c: describe. */
json_t *mcp_describe_tool(void);
json_t *mcp_describe(struct mcp_server *s, json_t *args);

/* mcp_project.c: the run_project tool. */
json_t *mcp_project_tool(void);
json_t *mcp_run_project(struct mcp_server *s, json_t *args);

/* mcp_module.c: the run_module tool (listed only when Describe says supportsModule; its
 * description and model enum name Describe's models). */
json_t *mcp_module_tool(const Plimsoll__V1__DescribeResponse *d);
json_t *mcp_run_module(struct mcp_server *s, json_t *args);

/* mcp_session.c: the session tools (their schemas name Describe's session languages), and
 * run_python (open, one cell, close). */
json_t *mcp_session_tools(const Plimsoll__V1__DescribeResponse *d);
json_t *mcp_python_tool(void);
json_t *mcp_open_session(struct mcp_server *s, json_t *args);
json_t *mcp_run_cell(struct mcp_server *s, json_t *args);
json_t *mcp_close_session(struct mcp_server *s, json_t *args);
json_t *mcp_run_python(struct mcp_server *s, json_t *args);
/* Closes every session still open (at the end of input). */
void mcp_sessions_close_all(struct mcp_server *s);

/* ---- mcp_tailor.c: the tools shaped by Describe ---- */
/* Adds the tools the daemon supports (run_project, run_module, the session tools, run_python),
 * the grant argument where grants are proven, and the daemon's runtime, limits and tier to
 * descriptions. */
void mcp_tailor_tools(json_t *list, const Plimsoll__V1__DescribeResponse *d);
