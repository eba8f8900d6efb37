/* mcp_tailor.c: the tools of `plimsoll mcp` that depend on what the daemon says it is: every
 * tool's description states the runtime, languages, limits and tier Describe reported; the grant
 * argument appears where the daemon proved grants; run_project and run_module where it supports
 * them; open_session / run_cell / close_session where it keeps sessions; run_python where its
 * session environment lists python. Each schema comes from its tool's own file.
 * Owns: nothing past the call. */
#include <stdlib.h>
#include <string.h>

#include "../core/limits.h"
#include "mcp.h"

static bool is_quickjs(const Plimsoll__V1__DescribeResponse *d)
{
    const char *id = d->javascript_environment ? d->javascript_environment->identity : NULL;
    return (d->sandbox && (strcmp(d->sandbox, "quickjs") == 0 || strcmp(d->sandbox, "microvm") == 0)) ||
           (id && strncmp(id, "quickjs", 7) == 0);
}

static bool lists_language(const Plimsoll__V1__PayloadEnvironment *e, const char *lang)
{
    for (size_t i = 0; e && i < e->n_languages; i++)
        if (e->languages[i] && strcmp(e->languages[i], lang) == 0)
            return true;
    return false;
}

/* The sentence appended to every tool's description: what answers, at which tier, within what. */
static void daemon_words(FILE *m, const Plimsoll__V1__DescribeResponse *d)
{
    fprintf(m, " This daemon: provider %s, isolation tier %s (proven at its startup).", d->sandbox ? d->sandbox : "?",
            d->isolation ? d->isolation : "?");
    if (is_quickjs(d))
        fputs(" JavaScript runs in QuickJS (ECMAScript with console.log and a Node-like prelude): no require(), "
              "no Node.js modules, no file system, no network.",
              m);
    else
        fputs(" JavaScript runs in Node.js: require() and node: modules work; no network.", m);
    if (d->javascript_environment && d->javascript_environment->max_timeout_ms)
        fprintf(m, " Time limit up to %u s", d->javascript_environment->max_timeout_ms / 1000);
    if (d->resources && d->resources->memory_mb)
        fprintf(m, ", memory %u MiB", d->resources->memory_mb);
    fprintf(m, ", code up to %u KiB, output up to %u KiB per stream.", LIM_CODE_MAX / 1024, LIM_OUTPUT_MAX / 1024);
}

static void project_words(FILE *m, const Plimsoll__V1__DescribeResponse *d)
{
    const char *sb = d->sandbox ? d->sandbox : "";
    if (strcmp(sb, "docker") == 0)
        fputs(" Steps run with sh -c in a Debian image with node, tsc (TypeScript) and tsx on PATH.", m);
    else if (strcmp(sb, "microvm") == 0)
        fputs(" Steps run with busybox sh -c; node is on PATH (no tsc/tsx).", m);
    else if (strcmp(sb, "e2b") == 0)
        fputs(" Steps run with sh -c in the E2B template, with node on PATH (the startup probe ran it).", m);
    else
        fputs(" Steps run with sh -c in the provider's image.", m);
}

static void append_description(json_t *tool, const Plimsoll__V1__DescribeResponse *d, bool project)
{
    char *buf = NULL;
    size_t n = 0;
    FILE *m = open_memstream(&buf, &n);
    if (!m)
        return;
    fputs(json_string_value(json_object_get(tool, "description")), m);
    daemon_words(m, d);
    if (project)
        project_words(m, d);
    if (fclose(m) == 0)
        json_object_set_new(tool, "description", json_string(buf));
    free(buf);
}

static void add_grant_argument(json_t *tool)
{
    json_t *props = json_object_get(json_object_get(tool, "inputSchema"), "properties");
    json_object_set_new(props, "grant",
                        json_pack("{s:s, s:i, s:i, s:s, s:s}", "type", "string", "minLength", 1, "maxLength",
                                  LIM_GRANT_PROFILE_MAX, "pattern", "^[A-Za-z0-9._-]+$", "description",
                                  "a grant profile: the code may then call that profile's listed routes of one "
                                  "HTTP API through the `host` object; the credential never enters the sandbox"));
}

void mcp_tailor_tools(json_t *list, const Plimsoll__V1__DescribeResponse *d)
{
    json_t *tools = json_object_get(list, "tools");
    size_t i;
    json_t *t;
    if (d->supports_project)
        json_array_append_new(tools, mcp_project_tool());
    if (d->supports_module)
        json_array_append_new(tools, mcp_module_tool(d));
    if (d->supports_sessions) {
        json_t *st = mcp_session_tools(d);
        json_array_extend(tools, st);
        json_decref(st);
        if (lists_language(d->session_environment, "python"))
            json_array_append_new(tools, mcp_python_tool());
    }
    json_array_foreach(tools, i, t) {
        const char *name = json_string_value(json_object_get(t, "name"));
        if (strcmp(name, "describe") == 0)
            continue;
        append_description(t, d, strcmp(name, "run_project") == 0);
        if ((strcmp(name, "run_javascript") == 0 && d->supports_javascript_grants) ||
            (strcmp(name, "run_project") == 0 && d->supports_project_grants))
            add_grant_argument(t);
    }
}
