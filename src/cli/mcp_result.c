/* mcp_result.c: what every tool of `plimsoll mcp` shares: the CallToolResult, the bad-arguments
 * error, the common arguments (timeout, min_isolation, grant), the token of one call, one checked
 * call to a daemon or a pool, and the words of a failed call. A leaf: the tool files call it, it
 * calls only libplimsoll and the card library.
 * Owns: the token bytes it loads for a caller (released by the caller with cli_token_free).
 * Invariant: a tool error says "no code ran" only when nothing was sent, or the daemon refused
 * before dispatch. */
#include <stdlib.h>
#include <string.h>

#include "../core/cleanup.h"
#include "mcp.h"

/* A CallToolResult; takes the reference to structured (may be NULL). */
json_t *mcp_tool_result(bool is_error, const char *text, const char *card, json_t *structured)
{
    cli_cleanup_json json_t *owned = structured;
    cli_cleanup_json json_t *content = json_array();
    cli_cleanup_json json_t *r = json_object();
    if (!content || !r)
        return NULL;
    json_array_append_new(content, json_pack("{s:s, s:s}", "type", "text", "text", text));
    if (card)
        json_array_append_new(content, json_pack("{s:s, s:s}", "type", "text", "text", card));
    json_object_set_new(r, "content", take_ptr(&content));
    if (owned)
        json_object_set_new(r, "structuredContent", take_ptr(&owned));
    json_object_set_new(r, "isError", json_boolean(is_error));
    return take_ptr(&r);
}

json_t *mcp_bad_arguments(const char *why)
{
    char text[320];
    snprintf(text, sizeof text, "invalid arguments: %s. Nothing was sent; no code ran.", why);
    return mcp_tool_result(true, text, NULL, NULL);
}

json_t *mcp_only_arguments(json_t *args, const char *const *known)
{
    const char *key;
    json_t *v;
    json_object_foreach(args, key, v) {
        size_t i = 0;
        while (known[i] && strcmp(key, known[i]))
            i++;
        if (known[i])
            continue;
        /* The caller's key is quoted only when it is short and plain: it goes back to a model. */
        char why[256], list[160] = "";
        for (size_t k = 0; known[k]; k++)
            snprintf(list + strlen(list), sizeof list - strlen(list), "%s%s", k ? ", " : "", known[k]);
        bool plain = strlen(key) <= 40;
        for (const char *p = key; plain && *p; p++)
            plain = *p == '_' || (*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9');
        snprintf(why, sizeof why, "unknown argument%s%s%s (expected %s)", plain ? " `" : "", plain ? key : "",
                 plain ? "`" : "", list);
        return mcp_bad_arguments(why);
    }
    return NULL;
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
    cleanup_free char *buf = NULL;
    size_t n = 0;
    FILE *m = open_memstream(&buf, &n);
    if (!m)
        return NULL;
    cli_card_print(m, rep);
    return fclose(m) == 0 ? take_ptr(&buf) : NULL;
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
