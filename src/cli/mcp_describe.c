/* mcp_describe.c: the describe tool of `plimsoll mcp`: the daemon's Describe (or every pooled
 * daemon's) as the text `plimsoll describe` prints and as structured JSON.
 * Owns: the token bytes of one call (wiped after it).
 * Invariant: a daemon that speaks another protocol is a tool error (its runs would be refused). */
#include <stdlib.h>
#include <string.h>

#include "../core/cleanup.h"
#include "../wire/json_codec.h"
#include "mcp.h"

json_t *mcp_describe_tool(void)
{
    return json_pack(
        "{s:s, s:s, s:s, s:{s:s, s:{}, s:b}, s:{s:b, s:b}}",
        "name", "describe", "title", "Describe the plimsoll sandbox", "description",
        "States the daemon's provider, its proven isolation tier, what it supports, its resources, its "
        "policy and the evidence card behind the tier (each startup probe with its expected and observed "
        "outcome).",
        "inputSchema", "type", "object", "properties", "additionalProperties", 0, "annotations", "readOnlyHint",
        1, "openWorldHint", 0);
}

/* --backends: every daemon's Describe under its name (text), and an object keyed by name. */
static json_t *describe_pool(const struct mcp_server *s)
{
    cleanup_free char *buf = NULL;
    size_t n = 0;
    cli_cleanup_json json_t *structured = json_object();
    FILE *m = structured ? open_memstream(&buf, &n) : NULL;
    bool failed = false;
    if (!m)
        return NULL;
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
    if (fclose(m) != 0)
        return NULL;
    return mcp_tool_result(failed, buf, NULL, take_ptr(&structured));
}

json_t *mcp_describe(struct mcp_server *s, json_t *args)
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
