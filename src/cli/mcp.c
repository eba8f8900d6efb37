/* mcp.c: `plimsoll mcp`: the JSON-RPC 2.0 session of the Model Context Protocol over stdio
 * (initialize, ping, tools/list, tools/call), one message per line.
 * Owns: the session state (initialized, agreed revision) and stdout, where only protocol
 * messages go; diagnostics go to stderr.
 * Trusts: nothing from the host: every field is type-checked, ids are echoed only when they are
 * a string or an integer, and a message that is not a request or notification is never answered
 * with anything but a JSON-RPC error.
 * Invariant: notifications are never answered; each request gets exactly one answer. */
#include <getopt.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "mcp.h"

/* Newest first; an unknown requested revision is answered with the newest (MCP lifecycle,
 * version negotiation: the host then decides whether to go on). */
static const char *const revisions[] = {"2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05"};

enum {
    RPC_PARSE_ERROR = -32700,
    RPC_INVALID_REQUEST = -32600,
    RPC_METHOD_NOT_FOUND = -32601,
    RPC_INVALID_PARAMS = -32602,
    RPC_INTERNAL = -32603,
};

void cli_usage_mcp(FILE *f)
{
    fputs("usage: plimsoll mcp [--url URL] [--token-file FILE | --backends FILE]\n"
          "\n"
          "Serves the Model Context Protocol on standard input and output (JSON-RPC 2.0, one message\n"
          "per line) for an agent host. Tools: run_javascript (code, timeout, min_isolation, grant),\n"
          "describe, and where the daemon supports them run_project, run_module (naming the models),\n"
          "open_session / run_cell / close_session and run_python; descriptions state the daemon's\n"
          "runtime, limits and tier\n"
          "(from Describe). Each run is checked like\n"
          "`plimsoll run` (request id, record digests, tier against the floor); its result carries\n"
          "the output and the run card, and a refusal is a tool error stating that no code ran.\n"
          "\n"
          "  --url URL          daemon base URL (default $PLIMSOLL_URL, else " CLI_DEFAULT_URL ")\n"
          "  --token-file FILE  bearer token file, read for each call (default $PLIMSOLL_TOKEN)\n"
          "  --backends FILE    place every call on one of several daemons (docs/cli.md); a session\n"
          "                     stays on the daemon that opened it\n"
          "  -h, --help         this text\n"
          "\n"
          "See docs/mcp.md for host configuration.\n",
          f);
}

static json_t *error_answer(json_t *id, int code, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static json_t *error_answer(json_t *id, int code, const char *fmt, ...)
{
    char msg[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return json_pack("{s:s, s:O, s:{s:i, s:s}}", "jsonrpc", "2.0", "id", id ? id : json_null(), "error", "code",
                     code, "message", msg);
}

static json_t *result_answer(json_t *id, json_t *result /* stolen */)
{
    if (!result)
        return error_answer(id, RPC_INTERNAL, "out of memory");
    return json_pack("{s:s, s:O, s:o}", "jsonrpc", "2.0", "id", id, "result", result);
}

static json_t *initialize(struct mcp_server *s, json_t *params)
{
    const char *want = json_string_value(json_object_get(params, "protocolVersion"));
    const char *agreed = revisions[0];
    for (size_t i = 0; want && i < sizeof revisions / sizeof revisions[0]; i++)
        if (strcmp(want, revisions[i]) == 0)
            agreed = revisions[i];
    snprintf(s->protocol, sizeof s->protocol, "%s", agreed);
    s->initialized = true;
    return json_pack("{s:s, s:{s:{s:b}}, s:{s:s, s:s, s:s}, s:s}", "protocolVersion", agreed, "capabilities",
                     "tools", "listChanged", 0, "serverInfo", "name", "plimsoll", "title",
                     "plimsoll sandbox client", "version", CLI_VERSION, "instructions",
                     "Runs JavaScript in the plimsoll daemon's sandbox. Every result states the isolation "
                     "tier that ran and carries a run card; pass min_isolation to refuse weaker sandboxes "
                     "(a refusal means no code ran).");
}

static bool id_valid(const json_t *id)
{
    /* MCP: a string or an integer, never null. */
    return json_is_string(id) || json_is_integer(id);
}

json_t *mcp_handle(struct mcp_server *s, json_t *msg)
{
    if (!json_is_object(msg))
        return error_answer(NULL, RPC_INVALID_REQUEST, "%s",
                            json_is_array(msg) ? "batches are not supported" : "a message must be a JSON object");
    json_t *id = json_object_get(msg, "id");
    const char *method = json_string_value(json_object_get(msg, "method"));
    if (!method) {
        /* A response to a request we never sent, or garbage: answer only what carries an id. */
        if (json_object_get(msg, "result") || json_object_get(msg, "error"))
            return NULL;
        return error_answer(id_valid(id) ? id : NULL, RPC_INVALID_REQUEST, "method missing or not a string");
    }
    const char *ver = json_string_value(json_object_get(msg, "jsonrpc"));
    bool notification = id == NULL;
    if (!ver || strcmp(ver, "2.0") != 0)
        return notification ? NULL : error_answer(id_valid(id) ? id : NULL, RPC_INVALID_REQUEST, "jsonrpc must be \"2.0\"");
    if (notification)
        return NULL; /* notifications/initialized, cancelled, ...: nothing to answer */
    if (!id_valid(id))
        return error_answer(NULL, RPC_INVALID_REQUEST, "id must be a string or an integer");
    json_t *params = json_object_get(msg, "params");
    if (params && !json_is_object(params))
        return error_answer(id, RPC_INVALID_PARAMS, "params must be an object");

    if (strcmp(method, "initialize") == 0)
        return result_answer(id, initialize(s, params));
    if (strcmp(method, "ping") == 0)
        return result_answer(id, json_object());
    if (strcmp(method, "tools/list") == 0 || strcmp(method, "tools/call") == 0) {
        if (!s->initialized)
            return error_answer(id, RPC_INVALID_REQUEST, "initialize first");
        if (strcmp(method, "tools/list") == 0)
            return result_answer(id, mcp_tools_list(s));
        const char *name = json_string_value(json_object_get(params, "name"));
        json_t *args = json_object_get(params, "arguments");
        if (!name)
            return error_answer(id, RPC_INVALID_PARAMS, "tools/call needs params.name");
        if (args && !json_is_object(args) && !json_is_null(args))
            return error_answer(id, RPC_INVALID_PARAMS, "params.arguments must be an object");
        int code = 0;
        const char *why = NULL;
        json_t *res = mcp_tools_call(s, name, json_is_object(args) ? args : NULL, &code, &why);
        if (!res)
            return error_answer(id, code ? code : RPC_INTERNAL, "%s", why ? why : "out of memory");
        return result_answer(id, res);
    }
    return error_answer(id, RPC_METHOD_NOT_FOUND, "method not found");
}

static int write_message(json_t *m)
{
    /* Compact: jansson escapes control characters, so a message is exactly one line. */
    char *text = json_dumps(m, JSON_COMPACT);
    if (!text)
        return -1;
    int r = fputs(text, stdout) < 0 || fputc('\n', stdout) == EOF || fflush(stdout) != 0 ? -1 : 0;
    free(text);
    return r;
}

/* Stage 1: the options. 0 to go on, or the exit status after a message; -h prints the usage and
 * sets *help. */
static int mcp_parse(int argc, char **argv, struct cli_where *w, bool *help)
{
    static const struct option opts[] = {
        CLI_WHERE_OPTIONS,
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    opterr = 0;
    optind = 0;
    int c, r;
    while ((c = getopt_long(argc, argv, ":h", opts, NULL)) != -1) {
        if (c == 'h') {
            cli_usage_mcp(stdout);
            *help = true;
            return 0;
        }
        if ((r = cli_opt_where("mcp", c, argv, w)))
            return r;
    }
    if (optind < argc)
        return cli_usage_error("mcp", "unexpected argument `%s`", argv[optind]);
    return 0;
}

/* Stage 2, --backends: the pool every call is placed on (s->pool set). 0, or the exit status. */
static int mcp_open_pool(struct mcp_server *s, struct plc_pool *pool, const char *url_flag, const char *backends)
{
    struct plm_err err = {0};
    if (url_flag || s->token_file) {
        fprintf(stderr, "plimsoll mcp: --backends names every daemon with its own token: not with --url or "
                        "--token-file\n");
        return CLI_EXIT_USAGE;
    }
    plc_pool_init(pool);
    if (plc_pool_load(pool, backends, &err) < 0) {
        fprintf(stderr, "plimsoll mcp: %s\n", err.msg);
        return CLI_EXIT_USAGE;
    }
    s->pool = pool;
    s->url = "the daemons of --backends";
    return 0;
}

/* The answer to one line (NULL for none: a notification, a response, a blank line). */
static json_t *answer_line(struct mcp_server *s, enum mcp_line got, const char *line, size_t len)
{
    if (got == MCP_LINE_TOO_LONG)
        return error_answer(NULL, RPC_PARSE_ERROR, "message longer than %u bytes", MCP_LINE_MAX);
    size_t i = 0;
    while (i < len && (line[i] == ' ' || line[i] == '\t' || line[i] == '\r'))
        i++;
    if (i == len)
        return NULL; /* blank lines between messages are tolerated */
    json_error_t jerr;
    cli_cleanup_json json_t *msg = json_loadb(line, len, JSON_REJECT_DUPLICATES, &jerr);
    return msg ? mcp_handle(s, msg) : error_answer(NULL, RPC_PARSE_ERROR, "parse error");
}

/* Stage 3: one answer per message line until the host closes standard input. The exit status. */
static int mcp_serve(struct mcp_server *s)
{
    struct mcp_reader rd;
    mcp_reader_init(&rd, STDIN_FILENO);
    int status = 0;
    for (;;) {
        const char *line = NULL;
        size_t len = 0;
        enum mcp_line got = mcp_read_line(&rd, &line, &len);
        if (got == MCP_LINE_EOF)
            break;
        if (got == MCP_LINE_ERROR) {
            perror("plimsoll mcp: reading standard input");
            status = CLI_EXIT_TRANSPORT;
            break;
        }
        cli_cleanup_json json_t *answer = answer_line(s, got, line, len);
        if (answer && write_message(answer) < 0) {
            status = CLI_EXIT_TRANSPORT; /* the host went away */
            break;
        }
    }
    mcp_sessions_close_all(s); /* the host went away: leave no session behind */
    mcp_reader_done(&rd);
    return status;
}

int cli_cmd_mcp(int argc, char **argv)
{
    struct mcp_server s = {0};
    struct cli_where w = {0};
    bool help = false;
    int r = mcp_parse(argc, argv, &w, &help);
    if (r || help)
        return r;
    s.url = cli_base_url(w.url_flag);
    s.token_file = w.token_file;
    struct plc_pool pool;
    if (w.backends && (r = mcp_open_pool(&s, &pool, w.url_flag, w.backends)))
        return r;
    int status = mcp_serve(&s);
    if (s.pool)
        plc_pool_done(s.pool);
    return status;
}
