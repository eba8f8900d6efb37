/* mcp_tools.c: the tool table of `plimsoll mcp`: tools/list (the base tools, then the ones the
 * daemon's Describe offers, mcp_tailor.c) and tools/call (one row per tool, pointing down to the
 * tool's own file).
 * Owns: the token bytes of the one Describe behind a list (wiped after it).
 * Invariant: an unknown tool name is a JSON-RPC error (-32602), never a call. */
#include <stdlib.h>
#include <string.h>

#include "mcp.h"

/* The tools a host can call, each in its own file; tools/call finds its row by name. A tool that
 * the daemon does not support is still found here: its call reaches the daemon, which refuses it
 * before dispatch, so the host hears why. */
static const struct mcp_tool {
    const char *name;
    json_t *(*call)(struct mcp_server *s, json_t *args);
} tools[] = {
    {"run_javascript", mcp_run_javascript}, /* mcp_javascript.c */
    {"run_project", mcp_run_project},       /* mcp_project.c */
    {"run_module", mcp_run_module},         /* mcp_module.c */
    {"describe", mcp_describe},             /* mcp_describe.c */
    {"open_session", mcp_open_session},     /* mcp_session.c */
    {"run_cell", mcp_run_cell},
    {"close_session", mcp_close_session},
    {"run_python", mcp_run_python},
};

/* The base tools, offered whatever the daemon is. */
static json_t *base_tools(void)
{
    cli_cleanup_json json_t *list = json_array();
    if (!list || json_array_append_new(list, mcp_javascript_tool()) < 0 ||
        json_array_append_new(list, mcp_describe_tool()) < 0)
        return NULL;
    return json_pack("{s:o}", "tools", take_ptr(&list));
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
    for (size_t i = 0; i < sizeof tools / sizeof tools[0]; i++) {
        if (strcmp(name, tools[i].name) != 0)
            continue;
        if (args)
            return tools[i].call(s, args);
        cli_cleanup_json json_t *empty = json_object();
        return empty ? tools[i].call(s, empty) : NULL;
    }
    *rpc_code = -32602;
    *rpc_msg = "unknown tool";
    return NULL;
}
