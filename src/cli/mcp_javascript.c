/* mcp_javascript.c: the run_javascript tool of `plimsoll mcp`: one snippet, run and checked
 * exactly as `plimsoll run` does.
 * Owns: the token bytes of one call (wiped after it).
 * Trusts: no argument: each is type- and range-checked before anything is sent, and a bad one is a
 * tool error saying nothing was sent. The answer goes through call.c and check.c; the card text
 * is the card library's.
 * Invariant: isError is false only for a checked run (verdict ran). */
#include <stdlib.h>
#include <string.h>

#include "../core/cleanup.h"
#include "../core/limits.h"
#include "mcp.h"

json_t *mcp_javascript_tool(void)
{
    return json_pack(
        "{s:s, s:s, s:s, s:{s:s, s:{s:{s:s, s:s}, s:{s:s, s:i, s:i, s:s}, s:{s:s, s:[s,s,s,s], s:s}},"
        " s:[s], s:b}, s:{s:b, s:b, s:b}}",
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
        "annotations", "readOnlyHint", 0, "destructiveHint", 0, "openWorldHint", 0);
}

/* The readable text of a run: the guest's output for a checked run, else what went wrong. */
static char *run_text(const struct cli_run_call *call, const json_t *j, const char *url)
{
    cleanup_free char *buf = NULL;
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
    return fclose(m) == 0 ? take_ptr(&buf) : NULL;
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

json_t *mcp_run_javascript(struct mcp_server *s, json_t *args)
{
    static const char *const known[] = {"code", "timeout", "min_isolation", "grant", NULL};
    json_t *stray = mcp_only_arguments(args, known);
    if (stray)
        return stray;
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
