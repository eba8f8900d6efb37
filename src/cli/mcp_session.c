/* mcp_session.c: the session tools of `plimsoll mcp` (open_session, run_cell, close_session, and
 * run_python: open, one cell, close) and their schemas, shaped by what Describe reported.
 * Owns: the open sessions of this MCP server (at most MCP_SESSIONS_MAX, named s1, s2, …; the
 * daemon's session ids stay in memory and are never shown to the host), each closed at EOF.
 * Trusts: no argument (type- and range-checked first, a bad one is a tool error: nothing sent);
 * the daemon's answers go through session.c's chain checks exactly as in `plimsoll repl`. */
#include <stdlib.h>
#include <string.h>

#include "../core/cleanup.h"
#include "../core/limits.h"
#include "mcp.h"

json_t *mcp_session_tools(const Plimsoll__V1__DescribeResponse *d)
{
    json_t *langs = json_array();
    const Plimsoll__V1__PayloadEnvironment *e = d->session_environment;
    for (size_t i = 0; e && i < e->n_languages; i++)
        json_array_append_new(langs, json_string(e->languages[i]));
    if (json_array_size(langs) == 0)
        json_array_append_new(langs, json_string("javascript"));
    return json_pack(
        "[{s:s, s:s, s:s, s:{s:s, s:{s:{s:s, s:o}, s:{s:s, s:[s,s,s,s]}, s:{s:s, s:i}}, s:b}},"
        " {s:s, s:s, s:s, s:{s:s, s:{s:{s:s}, s:{s:s, s:i}, s:{s:s, s:i, s:i}}, s:[s,s], s:b}},"
        " {s:s, s:s, s:s, s:{s:s, s:{s:{s:s}}, s:[s], s:b}}]",
        "name", "open_session", "title", "Open a plimsoll sandbox session", "description",
        "Opens a stateful sandbox session in one language: later run_cell calls keep their variables. Returns a "
        "handle (s1, s2, ...). Every answer's record and the chain linking the calls are checked by this client. "
        "Close it with close_session when done.",
        "inputSchema", "type", "object", "properties", "language", "type", "string", "enum", langs,
        "min_isolation", "type", "string", "enum", "process", "container", "kernel", "vm", "owner", "type", "string",
        "maxLength", 128, "additionalProperties", 0,
        "name", "run_cell", "title", "Run a cell in a plimsoll session", "description",
        "Runs code in an open session; state from earlier cells is kept. The result carries the output and a card "
        "line with the record digest and the chain check.",
        "inputSchema", "type", "object", "properties", "session", "type", "string", "code", "type", "string",
        "maxLength", LIM_CODE_MAX, "timeout", "type", "number", "exclusiveMinimum", 0, "maximum", 300, "required",
        "session", "code", "additionalProperties", 0,
        "name", "close_session", "title", "Close a plimsoll session", "description",
        "Closes a session and checks the daemon's summary (call count, last record) against the chain seen.",
        "inputSchema", "type", "object", "properties", "session", "type", "string", "required", "session",
        "additionalProperties", 0);
}

json_t *mcp_python_tool(void)
{
    return json_pack("{s:s, s:s, s:s, s:{s:s, s:{s:{s:s, s:i}, s:{s:s, s:i, s:i}, s:{s:s, s:[s,s,s,s]}},"
                     " s:[s], s:b}}",
                     "name", "run_python", "title", "Run Python in the plimsoll sandbox", "description",
                     "Runs Python 3 code in a fresh sandbox session (opened, one cell, closed); print() output is "
                     "captured. The result carries stdout, stderr and card lines with the checked records.",
                     "inputSchema", "type", "object", "properties", "code", "type", "string", "maxLength",
                     LIM_CODE_MAX, "timeout", "type", "number", "exclusiveMinimum", 0, "maximum", 300,
                     "min_isolation", "type", "string", "enum", "process", "container", "kernel", "vm", "required",
                     "code", "additionalProperties", 0);
}

/* ---- sessions ---- */

static struct mcp_session *find(struct mcp_server *s, json_t *handle)
{
    const char *h = json_string_value(handle);
    for (size_t i = 0; h && i < MCP_SESSIONS_MAX; i++)
        if (s->sessions[i].used && strcmp(s->sessions[i].handle, h) == 0)
            return &s->sessions[i];
    return NULL;
}

/* Runs fn with the session's output captured; the result's text is stdout, then the card lines. */
static json_t *captured(struct mcp_session *ms, const char *token, int (*fn)(struct cli_session *, const void *),
                        const void *arg, const char *lead)
{
    cleanup_free char *out = NULL;
    cleanup_free char *err = NULL;
    size_t on = 0, en = 0;
    FILE *fo = open_memstream(&out, &on);
    FILE *fe = fo ? open_memstream(&err, &en) : NULL;
    if (!fe) {
        if (fo)
            fclose(fo);
        return NULL;
    }
    ms->s.out = fo;
    ms->s.err = fe;
    if (token) /* one daemon: its token for this call only; a pooled session keeps its backend's */
        ms->s.conn.token = token;
    int rc = fn(&ms->s, arg);
    if (token)
        ms->s.conn.token = NULL;
    ms->s.out = ms->s.err = NULL;
    int c1 = fclose(fo), c2 = fclose(fe);
    json_t *r = NULL;
    cleanup_free char *text = NULL;
    if (c1 == 0 && c2 == 0 &&
        asprintf(&text, "%s%sstdout:\n%s%sstderr and card:\n%s", lead ? lead : "", lead ? "\n" : "",
                 on ? out : "(empty)\n", on && out[on - 1] != '\n' ? "\n" : "", en ? err : "(empty)\n") >= 0)
        r = mcp_tool_result(rc != 0, text, NULL,
                            json_pack("{s:s, s:i, s:b}", "session", ms->handle, "status", rc, "chain_ok",
                                      !ms->s.broken));
    return r;
}

static int do_open(struct cli_session *s, const void *owner)
{
    return cli_session_open(s, owner);
}
static int do_cell(struct cli_session *s, const void *code)
{
    return cli_session_cell(s, code);
}
static int do_close(struct cli_session *s, const void *unused)
{
    (void)unused;
    return cli_session_close(s);
}

/* --backends: the session is placed once; every later call goes to the daemon that opened it. */
struct placed_open {
    struct plc_pool *pool;
    const char *owner;
    struct plc_choice choice;
};

static int do_open_placed(struct cli_session *s, const void *arg)
{
    struct placed_open *po = (struct placed_open *)arg;
    int rc = plc_session_open(po->pool, &(struct plc_requirement){0}, s, po->owner, &po->choice);
    if (po->choice.backend[0])
        cli_print_placement(s->err, &po->choice);
    return rc;
}

static struct mcp_session *new_slot(struct mcp_server *s)
{
    for (size_t i = 0; i < MCP_SESSIONS_MAX; i++) {
        struct mcp_session *ms = &s->sessions[i];
        if (!ms->used) {
            memset(ms, 0, sizeof *ms);
            snprintf(ms->handle, sizeof ms->handle, "s%u", ++s->session_seq);
            return ms;
        }
    }
    return NULL;
}

static json_t *open_in(struct mcp_server *s, const char *lang, const char *floor, const char *owner,
                       struct mcp_session **out)
{
    *out = NULL;
    struct mcp_session *ms = new_slot(s);
    if (!ms)
        return mcp_bad_arguments("this MCP server already holds 8 open sessions; close one first");
    snprintf(ms->language, sizeof ms->language, "%s", lang);
    snprintf(ms->floor, sizeof ms->floor, "%s", floor);
    ms->s.language = ms->language;
    ms->s.floor = ms->floor;
    ms->s.floor_tier = PLM_TIER_UNKNOWN;
    tier_parse_floor(ms->floor, &ms->s.floor_tier, NULL);
    ms->s.conn.url = s->url;
    char *token = NULL;
    json_t *bad = mcp_load_token(s, &token);
    if (bad)
        return bad;
    json_t *r;
    if (s->pool) {
        struct placed_open *po = calloc(1, sizeof *po);
        if (!po)
            return NULL;
        *po = (struct placed_open){.pool = s->pool, .owner = owner};
        r = captured(ms, NULL, do_open_placed, po, NULL);
        /* The merged floor lived in the choice: keep it with the session. */
        snprintf(ms->floor, sizeof ms->floor, "%s", po->choice.floor);
        ms->s.floor = ms->floor;
        snprintf(ms->backend, sizeof ms->backend, "%s", po->choice.backend);
        free(po);
    } else {
        r = captured(ms, token, do_open, owner, NULL);
    }
    cli_token_free(token);
    if (r && !json_is_true(json_object_get(r, "isError"))) {
        ms->used = true;
        *out = ms;
    }
    return r;
}

json_t *mcp_open_session(struct mcp_server *s, json_t *args)
{
    static const char *const keys[] = {"language", "min_isolation", "owner", NULL};
    json_t *stray = mcp_only_arguments(args, keys);
    if (stray)
        return stray;
    json_t *l = json_object_get(args, "language"), *o = json_object_get(args, "owner");
    const char *lang = l ? json_string_value(l) : "javascript";
    if (!lang || (strcmp(lang, "javascript") && strcmp(lang, "python")))
        return mcp_bad_arguments("language must be javascript or python");
    if (o && (!json_is_string(o) || json_string_length(o) > 128 || strlen(json_string_value(o)) != json_string_length(o)))
        return mcp_bad_arguments("owner must be a string of at most 128 bytes");
    int32_t unused = 0;
    const char *floor = "";
    json_t *bad = mcp_run_limits(args, &unused, &floor);
    if (bad)
        return bad;
    struct mcp_session *ms;
    return open_in(s, lang, floor, o ? json_string_value(o) : NULL, &ms);
}

static json_t *cell_in(struct mcp_server *s, struct mcp_session *ms, const char *code, int32_t timeout_ms,
                       const char *lead)
{
    if (ms->s.broken)
        return mcp_bad_arguments("an answer on this session could not be checked, so nothing more is sent on it; "
                                 "close it");
    ms->s.timeout_ms = timeout_ms;
    char *token = NULL;
    json_t *bad = mcp_load_token(s, &token);
    if (bad)
        return bad;
    json_t *r = captured(ms, token, do_cell, code, lead);
    cli_token_free(token);
    return r;
}

static json_t *close_in(struct mcp_server *s, struct mcp_session *ms, const char *lead)
{
    char *token = NULL;
    json_t *bad = mcp_load_token(s, &token);
    if (bad)
        return bad;
    json_t *r = captured(ms, token, do_close, NULL, lead);
    cli_token_free(token);
    ms->used = false;
    return r;
}

static json_t *code_argument(json_t *args, const char **code)
{
    json_t *c = json_object_get(args, "code");
    if (!json_is_string(c) || strlen(json_string_value(c)) != json_string_length(c))
        return mcp_bad_arguments("code must be a string without NUL characters");
    if (json_string_length(c) > LIM_CODE_MAX)
        return mcp_bad_arguments("code is larger than 256 KiB");
    *code = json_string_value(c);
    return NULL;
}

json_t *mcp_run_cell(struct mcp_server *s, json_t *args)
{
    static const char *const keys[] = {"session", "code", "timeout", NULL};
    json_t *stray = mcp_only_arguments(args, keys);
    if (stray)
        return stray;
    struct mcp_session *ms = find(s, json_object_get(args, "session"));
    if (!ms)
        return mcp_bad_arguments("session must name an open session of this server (s1, s2, ...)");
    const char *code = NULL;
    json_t *bad = code_argument(args, &code);
    int32_t timeout_ms = 0;
    const char *floor = "";
    if (!bad)
        bad = mcp_run_limits(args, &timeout_ms, &floor);
    return bad ? bad : cell_in(s, ms, code, timeout_ms, NULL);
}

json_t *mcp_close_session(struct mcp_server *s, json_t *args)
{
    static const char *const keys[] = {"session", NULL};
    json_t *stray = mcp_only_arguments(args, keys);
    if (stray)
        return stray;
    struct mcp_session *ms = find(s, json_object_get(args, "session"));
    if (!ms)
        return mcp_bad_arguments("session must name an open session of this server (s1, s2, ...)");
    return close_in(s, ms, NULL);
}

/* run_python: open, one cell, close; the three steps' card lines in one result. */
json_t *mcp_run_python(struct mcp_server *s, json_t *args)
{
    static const char *const keys[] = {"code", "timeout", "min_isolation", NULL};
    json_t *stray = mcp_only_arguments(args, keys);
    if (stray)
        return stray;
    const char *code = NULL, *floor = "";
    int32_t timeout_ms = 0;
    json_t *bad = code_argument(args, &code);
    if (!bad)
        bad = mcp_run_limits(args, &timeout_ms, &floor);
    if (bad)
        return bad;
    struct mcp_session *ms;
    json_t *opened = open_in(s, "python", floor, NULL, &ms);
    if (!ms)
        return opened;
    const char *open_text =
        json_string_value(json_object_get(json_array_get(json_object_get(opened, "content"), 0), "text"));
    cleanup_free char *lead = open_text ? strdup(open_text) : NULL;
    json_decref(opened);
    json_t *cell = cell_in(s, ms, code, timeout_ms, NULL);
    const char *cell_text = json_string_value(json_object_get(json_array_get(json_object_get(cell, "content"), 0), "text"));
    json_t *closed = close_in(s, ms, NULL);
    /* the cell's result, with the open and close card lines appended */
    if (cell && closed) {
        const char *close_text =
            json_string_value(json_object_get(json_array_get(json_object_get(closed, "content"), 0), "text"));
        cleanup_free char *all = NULL;
        if (asprintf(&all, "%s\nsession:\n%s%s", cell_text ? cell_text : "", lead ? lead : "",
                     close_text ? close_text : "") >= 0)
            json_object_set_new(json_array_get(json_object_get(cell, "content"), 0), "text", json_string(all));
        if (json_is_true(json_object_get(closed, "isError")))
            json_object_set_new(cell, "isError", json_true());
    }
    json_decref(closed);
    return cell;
}

void mcp_sessions_close_all(struct mcp_server *s)
{
    for (size_t i = 0; i < MCP_SESSIONS_MAX; i++)
        if (s->sessions[i].used)
            json_decref(close_in(s, &s->sessions[i], NULL));
}
