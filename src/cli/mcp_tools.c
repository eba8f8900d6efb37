/* mcp_tools.c: the MCP tools of `plimsoll mcp`: run_javascript and describe.
 * Owns: the tool schemas, the argument checks, the token bytes of one call (wiped after it).
 * Trusts: no argument: each is type- and range-checked before anything is sent, and a bad one is a
 * tool error saying nothing was sent. The daemon's answer goes through call.c and check.c exactly
 * as `plimsoll run` does; the card text is card.c's.
 * Invariant: isError is false only for a checked run (verdict ran); a refusal's text says that no
 * code ran, and only a refusal or a transport failure that provably sent nothing says so. */
#include <stdlib.h>
#include <string.h>

#include "../core/cleanup.h"
#include "../core/limits.h"
#include "../wire/json_codec.h"
#include "mcp.h"

static json_t *base_tools(void)
{
    return json_pack(
        "{s:[{s:s, s:s, s:s, s:{s:s, s:{s:{s:s, s:s}, s:{s:s, s:i, s:i, s:s}, s:{s:s, s:[s,s,s,s], s:s}},"
        " s:[s], s:b}, s:{s:b, s:b, s:b}},"
        "    {s:s, s:s, s:s, s:{s:s, s:{}, s:b}, s:{s:b, s:b}}]}",
        "tools",
        "name", "run_javascript", "title", "Run JavaScript in the plimsoll sandbox", "description",
        "Runs one JavaScript snippet in the plimsoll daemon's sandbox (console.log output is captured). "
        "The result carries stdout, stderr and a run card naming the isolation tier that actually ran "
        "and the run record's digest, checked by this client. With min_isolation the daemon refuses "
        "before dispatch when its sandbox is weaker; a refusal is a tool error and no code ran.",
        "inputSchema", "type", "object", "properties", "code", "type", "string", "description",
        "the JavaScript source (at most 256 KiB)", "timeout", "type", "number", "exclusiveMinimum", 0,
        "maximum", 300, "description", "run time limit in seconds (default: the daemon's)", "min_isolation",
        "type", "string", "enum", "process", "container", "kernel", "vm", "description",
        "refuse unless the sandbox is at least this tier", "required", "code", "additionalProperties", 0,
        "annotations", "readOnlyHint", 0, "destructiveHint", 0, "openWorldHint", 0,
        "name", "describe", "title", "Describe the plimsoll sandbox", "description",
        "States the daemon's provider, its proven isolation tier, what it supports, its resources, its "
        "policy and the evidence card behind the tier (each startup probe with its expected and observed "
        "outcome).",
        "inputSchema", "type", "object", "properties", "additionalProperties", 0, "annotations", "readOnlyHint",
        1, "openWorldHint", 0);
}

/* A CallToolResult; takes the reference to structured (may be NULL). */
json_t *mcp_tool_result(bool is_error, const char *text, const char *card, json_t *structured)
{
    json_t *content = json_array();
    json_t *r = json_object();
    if (!content || !r) {
        json_decref(content);
        json_decref(r);
        json_decref(structured);
        return NULL;
    }
    json_array_append_new(content, json_pack("{s:s, s:s}", "type", "text", "text", text));
    if (card)
        json_array_append_new(content, json_pack("{s:s, s:s}", "type", "text", "text", card));
    json_object_set_new(r, "content", content);
    if (structured)
        json_object_set_new(r, "structuredContent", structured);
    json_object_set_new(r, "isError", json_boolean(is_error));
    return r;
}

json_t *mcp_bad_arguments(const char *why)
{
    char text[320];
    snprintf(text, sizeof text, "invalid arguments: %s. Nothing was sent; no code ran.", why);
    return mcp_tool_result(true, text, NULL, NULL);
}

json_t *mcp_run_limits(json_t *args, int32_t *timeout_ms, const char **floor)
{
    json_t *t = json_object_get(args, "timeout");
    if (t && !json_is_null(t) && (!json_is_number(t) || cli_timeout_ms(json_number_value(t), timeout_ms) < 0))
        return mcp_bad_arguments("timeout must be a number of seconds, 0 < timeout <= 300");
    json_t *fl = json_object_get(args, "min_isolation");
    if (fl && !json_is_null(fl)) {
        enum plm_tier floor_tier;
        struct plm_err err = {0};
        *floor = json_string_value(fl);
        if (!*floor || !**floor || tier_parse_floor(*floor, &floor_tier, &err) < 0)
            return mcp_bad_arguments("min_isolation must be process, container, kernel or vm");
    }
    return NULL;
}

int mcp_send(const struct mcp_server *s, const char *token, enum plc_kind kind, const char *floor, bool grant,
             plc_send_fn send, void *ctx, struct cli_run_call *call, struct plc_choice *choice)
{
    if (!s->pool) {
        struct cli_conn conn = {.url = s->url, .token = token};
        return send(&conn, floor, ctx, call);
    }
    struct plc_requirement req = {.grant_profile = grant};
    int r = plc_run(s->pool, kind, floor, &req, send, ctx, call, choice);
    call->rep.choice = choice;
    return r < 0 && call->o.refusal == PLM_REFUSAL_REQUEST ? -1 : 0;
}

json_t *mcp_load_token(const struct mcp_server *s, char **token)
{
    struct plm_err err = {0};
    *token = NULL;
    if (s->pool)
        return NULL; /* each backend has its own, from the backends file */
    if (cli_token_load(s->token_file, token, &err) == 0)
        return NULL;
    char text[640];
    snprintf(text, sizeof text, "cannot read the bearer token: %s. Nothing was sent; no code ran.", err.msg);
    return mcp_tool_result(true, text, NULL, NULL);
}

json_t *mcp_call_result(struct cli_run_call *call, int rc, mcp_text_fn text_of, const char *url)
{
    if (rc < 0)
        return mcp_bad_arguments("min_isolation must be process, container, kernel or vm");
    json_t *j = cli_card_json(&call->rep);
    cleanup_free char *card = mcp_capture_card(&call->rep);
    cleanup_free char *text = j ? text_of(call, j, url) : NULL;
    json_t *res = NULL;
    if (j && card && text)
        res = mcp_tool_result(call->o.verdict != CLI_V_RAN, text, card, json_incref(j));
    json_decref(j);
    cli_run_call_done(call);
    return res;
}

/* Text printed by a FILE* writer, as a malloc'd string. */
char *mcp_capture_card(const struct cli_run_report *rep)
{
    char *buf = NULL;
    size_t n = 0;
    FILE *m = open_memstream(&buf, &n);
    if (!m)
        return NULL;
    cli_card_print(m, rep);
    if (fclose(m) != 0) {
        free(buf);
        return NULL;
    }
    return buf;
}

void mcp_failure_text(FILE *m, const struct cli_outcome *o, const char *url)
{
    char reason[32];
    switch (o->verdict) {
    case CLI_V_RAN:
    case CLI_V_EVIDENCE_MISMATCH:
        break;
    case CLI_V_REFUSED:
        cli_reason_name(o->refusal, reason, sizeof reason);
        fprintf(m, "Refused before dispatch (%s): no code ran. The daemon said: %s: %s\n", reason, o->code, o->message);
        break;
    case CLI_V_TRANSPORT:
        if (o->not_sent)
            fprintf(m, "The plimsoll daemon at %s could not be reached (%s). Nothing was sent; no code ran.\n",
                    url, o->message);
        else
            fprintf(m, "Transport error talking to %s: %s. The code may have run; do not retry blindly.\n", url,
                    o->message);
        break;
    case CLI_V_RECORD_MISMATCH:
        fprintf(m, "Record mismatch: %s. The answer cannot be trusted and its output is withheld; the code may "
                   "have run.\n", o->message);
        break;
    case CLI_V_ERROR:
        fprintf(m, "The daemon answered an error that may have followed a run (%s: %s); do not retry blindly.\n",
                o->code, o->message);
        break;
    }
}

/* The readable text of a run: the guest's output for a checked run, else what went wrong. */
static char *run_text(const struct cli_run_call *call, const json_t *j, const char *url)
{
    char *buf = NULL;
    size_t n = 0;
    FILE *m = open_memstream(&buf, &n);
    if (!m)
        return NULL;
    const struct cli_outcome *o = &call->o;
    switch (o->verdict) {
    case CLI_V_RAN:
    case CLI_V_EVIDENCE_MISMATCH: {
        if (o->verdict == CLI_V_EVIDENCE_MISMATCH)
            fprintf(m, "EVIDENCE MISMATCH: %s. Do not trust this output as isolated.\n", o->message);
        const char *streams[] = {"stdout", "stderr"};
        for (int i = 0; i < 2; i++) {
            char enc_key[32];
            snprintf(enc_key, sizeof enc_key, "%s_encoding", streams[i]);
            const char *text = json_string_value(json_object_get(j, streams[i]));
            const char *enc = json_string_value(json_object_get(j, enc_key));
            fprintf(m, "%s%s:\n%s", i ? "\n" : "", streams[i], text && *text ? "" : "(empty)\n");
            if (text && *text) {
                if (enc && strcmp(enc, "base64") == 0)
                    fputs("(not UTF-8; standard base64 follows)\n", m);
                fputs(text, m);
                if (text[strlen(text) - 1] != '\n')
                    fputc('\n', m);
            }
        }
        if (call->js)
            fprintf(m, "\nexit code: %d%s\n", call->js->exit_code, call->js->timed_out ? " (timed out)" : "");
        break;
    }
    default:
        mcp_failure_text(m, o, url);
        break;
    }
    if (fclose(m) != 0) {
        free(buf);
        return NULL;
    }
    return buf;
}

struct snippet_send {
    const char *code, *grant;
    int32_t timeout_ms;
};

static int send_snippet(const struct cli_conn *conn, const char *floor, void *ctx, struct cli_run_call *call)
{
    const struct snippet_send *ss = ctx;
    return cli_run_javascript(conn, ss->code, ss->grant, floor, ss->timeout_ms, call);
}

static json_t *run_javascript(const struct mcp_server *s, json_t *args)
{
    const char *known[] = {"code", "timeout", "min_isolation", "grant"};
    const char *key;
    json_t *v;
    json_object_foreach(args, key, v) {
        bool ok = false;
        for (size_t i = 0; i < 4; i++)
            ok |= strcmp(key, known[i]) == 0;
        if (!ok)
            return mcp_bad_arguments("unknown argument (expected code, timeout, min_isolation, grant)");
    }
    json_t *code = json_object_get(args, "code");
    if (!json_is_string(code))
        return mcp_bad_arguments("code must be a string");
    size_t code_len = json_string_length(code);
    if (strlen(json_string_value(code)) != code_len)
        return mcp_bad_arguments("code contains a NUL character");
    if (code_len > LIM_CODE_MAX)
        return mcp_bad_arguments("code is larger than 256 KiB");
    int32_t timeout_ms = 0;
    const char *floor = "";
    const char *grant = "";
    json_t *bad = mcp_run_limits(args, &timeout_ms, &floor);
    if (!bad)
        bad = mcp_grant_argument(args, &grant);
    if (bad)
        return bad;

    char *token = NULL;
    if ((bad = mcp_load_token(s, &token)))
        return bad;
    struct snippet_send ss = {.code = json_string_value(code), .grant = grant, .timeout_ms = timeout_ms};
    struct cli_run_call call;
    struct plc_choice choice;
    int r = mcp_send(s, token, PLC_JAVASCRIPT, floor, *grant != '\0', send_snippet, &ss, &call, &choice);
    cli_token_free(token);
    return mcp_call_result(&call, r, run_text, s->url);
}

/* --backends: every daemon's Describe under its name (text), and an object keyed by name. */
static json_t *describe_pool(const struct mcp_server *s)
{
    cleanup_free char *buf = NULL;
    size_t n = 0;
    FILE *m = open_memstream(&buf, &n);
    json_t *structured = json_object();
    bool failed = false;
    if (!m || !structured) {
        if (m)
            fclose(m);
        json_decref(structured);
        return NULL;
    }
    for (size_t i = 0; i < s->pool->n; i++) {
        struct plc_backend *b = &s->pool->b[i];
        struct cli_outcome o;
        cli_cleanup_pb Plimsoll__V1__DescribeResponse *d = cli_describe_call(&b->conn, &o);
        fprintf(m, "== backend %s ==\n", b->name);
        if (!d) {
            failed = true;
            fprintf(m, "could not be described (%s): ", cli_verdict_name(o.verdict));
            cli_put_safe(m, o.message, "");
            fputc('\n', m);
            json_object_set_new(structured, b->name, json_null());
            continue;
        }
        cli_describe_print(m, d);
        size_t jn = 0;
        cleanup_free char *js = wire_json_encode(&d->base, &jn);
        json_t *one = js ? json_loadb(js, jn, 0, NULL) : NULL;
        json_object_set_new(structured, b->name, one ? one : json_null());
    }
    if (fclose(m) != 0) {
        json_decref(structured);
        return NULL;
    }
    return mcp_tool_result(failed, buf, NULL, structured);
}

static json_t *describe(const struct mcp_server *s, json_t *args)
{
    if (args && json_object_size(args) > 0)
        return mcp_bad_arguments("describe takes no arguments");
    if (s->pool)
        return describe_pool(s);
    struct plm_err err = {0};
    char *token = NULL;
    if (cli_token_load(s->token_file, &token, &err) < 0) {
        char text[640];
        snprintf(text, sizeof text, "cannot read the bearer token: %s", err.msg);
        return mcp_tool_result(true, text, NULL, NULL);
    }
    struct cli_conn conn = {.url = s->url, .token = token};
    struct cli_outcome o;
    cli_cleanup_pb Plimsoll__V1__DescribeResponse *d = cli_describe_call(&conn, &o);
    cli_token_free(token);
    char text[1024];
    if (!d) {
        if (o.verdict == CLI_V_TRANSPORT)
            snprintf(text, sizeof text, "The plimsoll daemon at %s could not be described: %s", s->url, o.message);
        else
            snprintf(text, sizeof text, "Describe failed at %s: %s%s%s", s->url, o.code, o.code[0] ? ": " : "",
                     o.message);
        return mcp_tool_result(true, text, NULL, NULL);
    }
    cleanup_free char *buf = NULL;
    size_t n = 0;
    FILE *m = open_memstream(&buf, &n);
    if (!m)
        return NULL;
    cli_describe_print(m, d);
    if (d->protocol != CLI_PROTOCOL)
        fprintf(m, "warning: the daemon serves protocol %u; this client speaks %d, so its runs will be refused\n",
                d->protocol, CLI_PROTOCOL);
    if (fclose(m) != 0)
        return NULL;
    size_t jn = 0;
    cleanup_free char *js = wire_json_encode(&d->base, &jn);
    json_t *structured = js ? json_loadb(js, jn, 0, NULL) : NULL;
    if (!structured)
        return NULL;
    return mcp_tool_result(d->protocol != CLI_PROTOCOL, buf, NULL, structured);
}

json_t *mcp_grant_argument(json_t *args, const char **grant)
{
    json_t *g = json_object_get(args, "grant");
    if (!g || json_is_null(g))
        return NULL;
    if (!json_is_string(g) || !cli_grant_name_valid(json_string_value(g)))
        return mcp_bad_arguments("grant must be a profile name: 1 to 128 of A-Z a-z 0-9 . _ -");
    *grant = json_string_value(g);
    return NULL;
}

/* The tools follow one Describe per list: run_project, the session tools and run_python only where
 * the daemon supports them, and every description names the runtime, limits and tier. A daemon
 * that cannot be described gets the base tools, whose calls will then say why they fail. */
json_t *mcp_tools_list(const struct mcp_server *s)
{
    json_t *r = base_tools();
    if (!r)
        return NULL;
    if (s->pool) {
        /* A pool: the tools of its most capable backend that describes; each call is then placed
         * on a backend that can take it, or refused naming why none could. */
        const Plimsoll__V1__DescribeResponse *best = NULL;
        int best_score = -1;
        for (size_t i = 0; i < s->pool->n; i++) {
            struct plc_backend *b = &s->pool->b[i];
            if (plc_describe(s->pool, b) < 0)
                continue;
            int score = 4 * !!b->desc->supports_sessions + 2 * !!b->desc->supports_project + !!b->desc->supports_module;
            if (score > best_score) {
                best = b->desc;
                best_score = score;
            }
        }
        if (best)
            mcp_tailor_tools(r, best);
        return r;
    }
    struct plm_err err = {0};
    char *token = NULL;
    if (cli_token_load(s->token_file, &token, &err) < 0)
        return r;
    struct cli_conn conn = {.url = s->url, .token = token};
    struct cli_outcome o;
    cli_cleanup_pb Plimsoll__V1__DescribeResponse *d = cli_describe_call(&conn, &o);
    cli_token_free(token);
    if (d)
        mcp_tailor_tools(r, d);
    return r;
}

json_t *mcp_tools_call(struct mcp_server *s, const char *name, json_t *args, int *rpc_code,
                       const char **rpc_msg)
{
    json_t *empty = NULL;
    if (!args)
        args = empty = json_object();
    json_t *r = NULL;
    if (strcmp(name, "run_javascript") == 0) {
        r = run_javascript(s, args);
    } else if (strcmp(name, "run_project") == 0) {
        r = mcp_run_project(s, args);
    } else if (strcmp(name, "run_module") == 0) {
        r = mcp_run_module(s, args);
    } else if (strcmp(name, "describe") == 0) {
        r = describe(s, args);
    } else if (strcmp(name, "open_session") == 0) {
        r = mcp_open_session(s, args);
    } else if (strcmp(name, "run_cell") == 0) {
        r = mcp_run_cell(s, args);
    } else if (strcmp(name, "close_session") == 0) {
        r = mcp_close_session(s, args);
    } else if (strcmp(name, "run_python") == 0) {
        r = mcp_run_python(s, args);
    } else {
        *rpc_code = -32602;
        *rpc_msg = "unknown tool";
    }
    json_decref(empty);
    return r;
}
