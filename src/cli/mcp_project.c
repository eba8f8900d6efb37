/* mcp_project.c: the run_project tool of `plimsoll mcp`: files, steps and artifact paths run as
 * one project by a provider that supports projects (docker).
 * Owns: the ProjectRun built from the arguments (pointers into the arguments' strings, which
 * outlive the call), the token bytes of one call.
 * Trusts: no argument: types and the spec's counts and sizes are checked before anything is
 * sent; path rules are the daemon's (a bad path is refused before dispatch, no code ran).
 * Invariant: the checks and the card are call.c's and card.c's, as for run_javascript. */
#include <stdlib.h>
#include <string.h>

#include "../core/cleanup.h"
#include "../core/limits.h"
#include "mcp.h"

json_t *mcp_project_tool(void)
{
    return json_pack(
        "{s:s, s:s, s:s, s:{s:s, s:{s:{s:s, s:i, s:{s:s, s:{s:{s:s}, s:{s:s}}, s:[s,s], s:b}},"
        " s:{s:s, s:i, s:i, s:{s:s}}, s:{s:s, s:i, s:{s:s}}, s:{s:s, s:i, s:i}, s:{s:s, s:[s,s,s,s]}},"
        " s:[s], s:b}, s:{s:b, s:b, s:b}}",
        "name", "run_project", "title", "Run a project in the plimsoll sandbox", "description",
        "Writes the files into a fresh sandbox, runs the shell steps in order (stopping at the first failure) "
        "and returns each step's output, the requested artifacts and a run card naming the isolation tier that "
        "ran. With min_isolation the daemon refuses before dispatch when its sandbox is weaker (a tool error: no "
        "code ran).",
        "inputSchema", "type", "object", "properties",
        "files", "type", "array", "maxItems", LIM_FILES_MAX, "items", "type", "object", "properties", "path",
        "type", "string", "content", "type", "string", "required", "path", "content", "additionalProperties", 0,
        "steps", "type", "array", "minItems", 1, "maxItems", LIM_STEPS_MAX, "items", "type", "string",
        "artifacts", "type", "array", "maxItems", LIM_ARTIFACTS_MAX, "items", "type", "string",
        "timeout", "type", "number", "exclusiveMinimum", 0, "maximum", 300,
        "min_isolation", "type", "string", "enum", "process", "container", "kernel", "vm",
        "required", "steps", "additionalProperties", 0,
        "annotations", "readOnlyHint", 0, "destructiveHint", 0, "openWorldHint", 0);
}

static bool string_array(json_t *a, size_t max, size_t max_len)
{
    if (!json_is_array(a) || json_array_size(a) > max)
        return false;
    size_t i;
    json_t *v;
    json_array_foreach(a, i, v) {
        if (!json_is_string(v) || json_string_length(v) > max_len)
            return false;
    }
    return true;
}

/* The text of a project run: each step's output for a checked run, else what went wrong. */
static char *project_text(const struct cli_run_call *call, const json_t *j, const char *url)
{
    cleanup_free char *buf = NULL;
    size_t n = 0;
    FILE *m = open_memstream(&buf, &n);
    if (!m)
        return NULL;
    const json_t *p = json_object_get(j, "project");
    if (call->checked && p) {
        if (call->o.verdict == CLI_V_EVIDENCE_MISMATCH)
            fprintf(m, "EVIDENCE MISMATCH: %s. Do not trust this output as isolated.\n", call->o.message);
        fprintf(m, "outcome: %s\n", json_string_value(json_object_get(p, "outcome")));
        size_t i;
        json_t *st;
        json_array_foreach(json_object_get(p, "steps"), i, st) {
            fprintf(m, "\nstep %zu `%s`: exit %lld%s\n", i + 1, json_string_value(json_object_get(st, "command")),
                    (long long)json_integer_value(json_object_get(st, "exit_code")),
                    json_is_true(json_object_get(st, "timed_out")) ? " (timed out)" : "");
            const char *names[] = {"stdout", "stderr"};
            for (int k = 0; k < 2; k++) {
                char enc_key[32];
                snprintf(enc_key, sizeof enc_key, "%s_encoding", names[k]);
                const char *text = json_string_value(json_object_get(st, names[k]));
                const char *enc = json_string_value(json_object_get(st, enc_key));
                if (!text || !*text)
                    continue;
                fprintf(m, "%s%s:\n%s", names[k], enc && strcmp(enc, "base64") == 0 ? " (base64, not UTF-8)" : "",
                        text);
                if (text[strlen(text) - 1] != '\n')
                    fputc('\n', m);
            }
        }
        json_array_foreach(json_object_get(p, "artifacts"), i, st) {
            fprintf(m, "%sartifact %s (%lld bytes, in structuredContent)\n", i ? "" : "\n",
                    json_string_value(json_object_get(st, "path")),
                    (long long)json_integer_value(json_object_get(st, "bytes")));
        }
    } else {
        mcp_failure_text(m, &call->o, url);
    }
    return fclose(m) == 0 ? take_ptr(&buf) : NULL;
}

struct project_send {
    Plimsoll__V1__ProjectRun *pr;
    int32_t timeout_ms;
};

static int send_project(const struct cli_conn *conn, const char *floor, void *ctx, struct cli_run_call *call)
{
    const struct project_send *p = ctx;
    return cli_run_project(conn, p->pr, floor, p->timeout_ms, call);
}

json_t *mcp_run_project(struct mcp_server *s, json_t *args)
{
    static const char *const known[] = {"files", "steps", "artifacts", "timeout", "min_isolation", "grant", NULL};
    json_t *stray = mcp_only_arguments(args, known);
    if (stray)
        return stray;
    json_t *files = json_object_get(args, "files"), *steps = json_object_get(args, "steps"),
           *arts = json_object_get(args, "artifacts");
    if (!steps || !string_array(steps, LIM_STEPS_MAX, LIM_STEP_MAX) || json_array_size(steps) == 0)
        return mcp_bad_arguments("steps must be 1 to 20 strings of at most 16 KiB");
    if (arts && !string_array(arts, LIM_ARTIFACTS_MAX, LIM_PATH_MAX))
        return mcp_bad_arguments("artifacts must be at most 100 paths of at most 1024 bytes");
    if (files && (!json_is_array(files) || json_array_size(files) > LIM_FILES_MAX))
        return mcp_bad_arguments("files must be an array of at most 200 {path, content} objects");
    size_t n_files = files ? json_array_size(files) : 0, total = 0;
    for (size_t i = 0; i < n_files; i++) {
        json_t *f = json_array_get(files, i);
        json_t *path = json_object_get(f, "path"), *content = json_object_get(f, "content");
        if (!json_is_object(f) || json_object_size(f) != 2 || !json_is_string(path) || !json_is_string(content) ||
            json_string_length(path) > LIM_PATH_MAX)
            return mcp_bad_arguments("each file must be exactly {path: string, content: string}");
        total += json_string_length(content);
    }
    if (total > LIM_FILES_TOTAL_MAX)
        return mcp_bad_arguments("file contents exceed 4 MiB in total");
    int32_t timeout_ms = 0;
    const char *floor = "";
    const char *grant = "";
    json_t *bad = mcp_run_limits(args, &timeout_ms, &floor);
    if (!bad)
        bad = mcp_grant_argument(args, &grant);
    if (bad)
        return bad;

    /* The message points into the arguments; only the arrays are ours. */
    cleanup_free Plimsoll__V1__ProjectFile *pf = calloc(n_files ? n_files : 1, sizeof *pf);
    cleanup_free Plimsoll__V1__ProjectFile **pfp = calloc(n_files ? n_files : 1, sizeof *pfp);
    size_t n_steps = json_array_size(steps), n_arts = arts ? json_array_size(arts) : 0;
    cleanup_free char **st = calloc(n_steps, sizeof *st);
    cleanup_free char **ar = calloc(n_arts ? n_arts : 1, sizeof *ar);
    if (!pf || !pfp || !st || !ar)
        return NULL;
    for (size_t i = 0; i < n_files; i++) {
        json_t *f = json_array_get(files, i);
        plimsoll__v1__project_file__init(&pf[i]);
        pf[i].path = (char *)json_string_value(json_object_get(f, "path"));
        pf[i].content = (char *)json_string_value(json_object_get(f, "content"));
        pfp[i] = &pf[i];
    }
    for (size_t i = 0; i < n_steps; i++)
        st[i] = (char *)json_string_value(json_array_get(steps, i));
    for (size_t i = 0; i < n_arts; i++)
        ar[i] = (char *)json_string_value(json_array_get(arts, i));
    Plimsoll__V1__ProjectRun pr = PLIMSOLL__V1__PROJECT_RUN__INIT;
    pr.n_files = n_files;
    pr.files = pfp;
    pr.n_steps = n_steps;
    pr.steps = st;
    pr.n_artifacts = n_arts;
    pr.artifacts = ar;
    pr.grant_profile = (char *)grant;

    char *token = NULL;
    if ((bad = mcp_load_token(s, &token)))
        return bad;
    struct project_send ps = {.pr = &pr, .timeout_ms = timeout_ms};
    struct cli_run_call call;
    struct plc_choice choice;
    int r = mcp_send(s, token, PLC_PROJECT, floor, grant && *grant, send_project, &ps, &call, &choice);
    cli_token_free(token);
    return mcp_call_result(&call, r, project_text, s->url);
}
