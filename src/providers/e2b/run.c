/* run.c: one snippet or one project in one fresh sandbox (providers.md §6 call sequence).
 * Owns: the run's sandbox from create to delete, the run's guard token from register to
 * unregister, and the result it fills.
 * Invariant: the sandbox is deleted (3 tries) on every path once it exists, before the result is
 * returned; a granted run's token is registered before the create (its transform rule carries
 * it) and unregistered on every path, so it answers 401 once the run is over; a grant without a
 * guard is refused before any VM exists. */
#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../core/cleanup.h"
#include "../../core/cleanup_json.h"
#include "../../core/limits.h"
#include "../../core/validate.h"
#include "../../core/provider_gate.h"
#include "internal.h"

/* The guard transport for the grant client (client_js.h's contract): fetch to the guard URL,
 * redirects refused; E2B's egress proxy adds the guard header outside the VM. */
#define GUARD_SEND_FMT \
    "globalThis.__plimsoll_host_send = async function (method, path, body) {\n" \
    "  const GUARD = %s;\n" \
    "  if (!GUARD) throw new Error(\"host api guard unavailable\");\n" \
    "  const req = {method: String(method).toUpperCase(), path: path};\n" \
    "  if (body !== undefined) req.body = body;\n" \
    "  const r = await fetch(GUARD, {method: \"POST\", redirect: \"error\",\n" \
    "                                headers: {\"content-type\": \"application/json\"},\n" \
    "                                body: JSON.stringify(req)});\n" \
    "  return {status: r.status, body: await r.text()};\n" \
    "};\n"

static char *js_literal(const char *s)
{
    cleanup_json json_t *j = json_string(s);
    return j ? json_dumps(j, JSON_ENCODE_ANY | JSON_ESCAPE_SLASH) : NULL;
}

/* send + `(0, eval)(client)`: the client runs as a classic script at global scope, as under the
 * other transports, so its names never collide with the guest's module-level declarations. */
static char *prelude(const char *guard_url, const char *client_js)
{
    cleanup_free char *g = js_literal(guard_url);
    cleanup_free char *c = js_literal(client_js);
    char *out = NULL;
    if (g && c && asprintf(&out, GUARD_SEND_FMT "(0, eval)(%s);\n", g, c) < 0)
        out = NULL;
    return out;
}

char *e2b_host_module(const char *guard_url, const char *client_js)
{
    cleanup_free char *p = prelude(guard_url, client_js);
    char *out = NULL;
    if (p && asprintf(&out, "// plimsoll grant client (e2b egress guard)\n%s", p) < 0)
        out = NULL;
    return out;
}

char *e2b_snippet_text(const char *guard_url, const char *client_js, const char *code)
{
    if (!client_js)
        return strdup(code);
    cleanup_free char *p = prelude(guard_url, client_js);
    char *out = NULL;
    if (p && asprintf(&out, "%s%s", p, code) < 0)
        out = NULL;
    return out;
}

int e2b_project_path(const char *rel, char *out, size_t cap)
{
    if (!rel || !*rel || rel[0] == '/' || strchr(rel, '\\'))
        return -1;
    const char *seg = rel;
    for (;;) {
        size_t n = strcspn(seg, "/");
        if (n == 0 || (n == 1 && seg[0] == '.') || (n == 2 && seg[0] == '.' && seg[1] == '.'))
            return -1;
        for (size_t i = 0; i < n; i++)
            if ((unsigned char)seg[i] < 0x20 || seg[i] == 0x7f)
                return -1;
        if (!seg[n])
            break;
        seg += n + 1;
    }
    if ((size_t)snprintf(out, cap, "%s/%s", E2B_PROJECT_DIR, rel) >= cap)
        return -1;
    return 0;
}

int e2b_gate(struct e2b_state *s, const struct plm_run_ctx *ctx, const struct plm_request *req, struct plm_err *err)
{
    /* (spec step 2) a grant needs the guard: refused before any VM exists */
    struct plm_gate g = {
        .tier = PLM_TIER_VM,
        .proven = atomic_load(&s->proven),
        .grants_ready = s->guard && s->guard_url[0],
        .no_grants = "grants need E2B_GUARD_URL and PLIMSOLL_GUARD_ADDR; nothing ran",
        .unavailable = s->api_key[0] ? NULL : "E2B_API_KEY is not set",
        .validate_payload = true,
    };
    return plm_provider_gate(&g, ctx, req, err) < 0 ? plm_err_wrap(err, "e2b") : 0;
}

/* The run's sandbox and guard token, set up and torn down together. */
struct vm {
    struct e2b_sandbox sb;
    bool created;
    char token[E2B_GUARD_TOKEN_LEN + 1];
};

static int vm_open(struct e2b_state *s, const struct plm_host_api *api, uint32_t budget_ms, struct vm *vm,
                   struct plm_err *err)
{
    memset(vm, 0, sizeof *vm);
    if (api && e2b_guard_register(s->guard, api, vm->token, err) < 0)
        return -1;
    if (e2b_create(s, budget_ms, api ? vm->token : NULL, &vm->sb, err) < 0) {
        e2b_guard_unregister(s->guard, vm->token);
        return -1;
    }
    vm->created = true;
    if ((s->memory_mb || s->cpus || s->disk_mb) && e2b_check_resources(s, &vm->sb, NULL, 0, err) < 0)
        return -1;
    return 0;
}

static void vm_close(struct e2b_state *s, struct vm *vm)
{
    if (vm->created)
        e2b_delete(s, vm->sb.id);
    if (vm->token[0])
        e2b_guard_unregister(s->guard, vm->token);
    explicit_bzero(vm, sizeof *vm);
}

/* The snippet in sb: its file, then node on it in cwd (NULL: envd's default). The budget running
 * out before node started is a timed-out run (the VM exists: this is no refusal). */
static int snippet_in_vm(struct e2b_state *s, const struct e2b_sandbox *sb, const struct plm_host_api *api,
                         const char *text, int64_t deadline, const char *cwd, struct e2b_proc_result *pr,
                         struct plm_err *err)
{
    struct e2b_upload up = {E2B_SNIPPET_PATH, text, strlen(text)};
    int rc = e2b_write_files(s, sb, &up, 1, deadline, err);
    if (rc < 0 && err->kind == PLM_E_DEADLINE) {
        plm_err_clear(err);
        memset(pr, 0, sizeof *pr);
        pr->timed_out = true;
        pr->exit_code = E2B_EXIT_TIMEOUT;
        return 0;
    }
    if (rc < 0)
        return -1;
    const char *args[] = {E2B_SNIPPET_PATH};
    struct e2b_env env[] = {{"NODE_EXTRA_CA_CERTS", E2B_CA_BUNDLE}};
    return e2b_process(s, sb, "node", args, 1, cwd, env, api ? 1 : 0, deadline, pr, err);
}

static int snippet_result(struct e2b_proc_result *pr, struct plm_result *out)
{
    out->kind = PLM_KIND_JAVASCRIPT;
    out->js.out = pr->out, out->js.err = pr->err;
    out->js.out_truncated = pr->out_truncated || pr->exit_code == E2B_EXIT_BUDGET;
    out->js.err_truncated = pr->err_truncated || pr->exit_code == E2B_EXIT_BUDGET;
    out->js.exit_code = pr->exit_code;
    out->js.timed_out = pr->timed_out;
    out->duration_ms = pr->duration_ms;
    out->tier = PLM_TIER_VM; /* the daemon stamps the template Describe states */
    return 0;
}

/* What every run does first: the gate, then the time budget and its deadline. */
static int run_begin(struct e2b_state *s, const struct plm_run_ctx *ctx, const struct plm_request *req,
                     uint32_t *budget, int64_t *deadline, struct plm_err *err)
{
    if (e2b_gate(s, ctx, req, err) < 0)
        return -1;
    *budget = plm_clamp_timeout((int32_t)ctx->timeout_ms, E2B_DEFAULT_TIMEOUT_MS, E2B_MAX_TIMEOUT_MS);
    *deadline = e2b_mono_ms() + *budget;
    return 0;
}

int e2b_run_snippet(struct e2b_state *s, const struct plm_run_ctx *ctx, const struct plm_request *req,
                    struct plm_result *out, struct plm_err *err)
{
    uint32_t budget;
    int64_t deadline;
    if (run_begin(s, ctx, req, &budget, &deadline, err) < 0)
        return -1;
    const struct plm_host_api *api = ctx->host_api;
    cleanup_free char *text = e2b_snippet_text(s->guard_url, api ? api->client_js : NULL, req->js.code);
    if (!text)
        return plm_fail(err, ENOMEM, PLM_E_INTERNAL, "out of memory");
    struct vm vm;
    int rc = vm_open(s, api, budget, &vm, err);
    struct e2b_proc_result pr = {0};
    if (rc == 0)
        rc = snippet_in_vm(s, &vm.sb, api, text, deadline, NULL, &pr, err);
    vm_close(s, &vm);
    if (rc < 0)
        return plm_err_wrap(err, "snippet");
    return snippet_result(&pr, out);
}

int e2b_snippet_in(struct e2b_state *s, const struct e2b_sandbox *sb, const struct plm_run_ctx *ctx,
                   const struct plm_request *req, const char *cwd, struct plm_result *out, struct plm_err *err)
{
    uint32_t budget;
    int64_t deadline;
    if (run_begin(s, ctx, req, &budget, &deadline, err) < 0)
        return -1;
    const struct plm_host_api *api = ctx->host_api; /* a session's grant (session_grant.c) */
    cleanup_free char *text = api ? e2b_snippet_text(s->guard_url, api->client_js, req->js.code) : NULL;
    if (api && !text)
        return plm_fail(err, ENOMEM, PLM_E_INTERNAL, "out of memory");
    struct e2b_proc_result pr = {0};
    int rc = snippet_in_vm(s, sb, api, text ? text : req->js.code, deadline, cwd, &pr, err);
    if (rc < 0)
        return plm_err_wrap(err, "snippet");
    return snippet_result(&pr, out);
}

static int setup_failed(struct plm_project_result *pr, const char *path)
{
    pr->outcome = PLM_OUTCOME_SETUP_FAILED;
    if (asprintf(&pr->detail, "illegal file path: %s", path) < 0)
        pr->detail = NULL;
    return pr->detail ? 0 : -1;
}

static int upload_project(struct e2b_state *s, const struct e2b_sandbox *sb, const struct plm_request *req,
                          const struct plm_host_api *api, int64_t deadline, struct plm_project_result *pr,
                          struct plm_err *err)
{
    size_t n = req->project.n_files;
    cleanup_free struct e2b_upload *up = calloc(n + 1, sizeof *up);
    cleanup_free char(*paths)[LIM_PATH_MAX + 64] = calloc(n + 1, sizeof *paths);
    cleanup_free char *module = api ? e2b_host_module(s->guard_url, api->client_js) : NULL;
    if (!up || !paths || (api && !module))
        return plm_fail(err, ENOMEM, PLM_E_INTERNAL, "out of memory");
    for (size_t i = 0; i < n; i++) {
        if (e2b_project_path(req->project.files[i].path, paths[i], sizeof paths[i]) < 0)
            return setup_failed(pr, req->project.files[i].path) < 0 ? -1 : 1;
        up[i] = (struct e2b_upload){paths[i], req->project.files[i].content, strlen(req->project.files[i].content)};
    }
    if (module)
        up[n++] = (struct e2b_upload){E2B_HOST_MODULE, module, strlen(module)};
    return n ? e2b_write_files(s, sb, up, n, deadline, err) : 0;
}

/* A step cut by the budget before it could start: it says so, exit 124. */
static int step_timed_out(struct plm_project_result *pr, const char *step, struct plm_err *err)
{
    struct plm_step_result *sr = &pr->steps[pr->n_steps++];
    sr->command = strdup(step);
    sr->exit_code = E2B_EXIT_TIMEOUT;
    sr->timed_out = true;
    return sr->command ? 0 : plm_fail(err, ENOMEM, PLM_E_INTERNAL, "out of memory");
}

/* One step: its script written to E2B_STEP_PATH, then `sh` on it in the project directory. 1 when
 * the steps stop here (its time ran out, or a non-zero exit), 0 to go on, -1 on error. */
static int run_step(struct e2b_state *s, const struct e2b_sandbox *sb, const struct plm_host_api *api,
                    const char *step, int64_t deadline, struct plm_project_result *pr, bool *timed_out,
                    struct plm_err *err)
{
    struct e2b_upload up = {E2B_STEP_PATH, step, strlen(step)};
    if (e2b_write_files(s, sb, &up, 1, deadline, err) < 0) {
        if (err->kind != PLM_E_DEADLINE)
            return -1;
        plm_err_clear(err);
        *timed_out = true;
        return step_timed_out(pr, step, err) < 0 ? -1 : 1;
    }
    const char *args[] = {E2B_STEP_PATH};
    struct e2b_env env[] = {{"NODE_EXTRA_CA_CERTS", E2B_CA_BUNDLE}, {"NODE_OPTIONS", "--import " E2B_HOST_MODULE}};
    struct e2b_proc_result p;
    if (e2b_process(s, sb, "sh", args, 1, E2B_PROJECT_DIR, env, api ? 2 : 0, deadline, &p, err) < 0)
        return -1;
    struct plm_step_result *sr = &pr->steps[pr->n_steps++];
    sr->command = strdup(step);
    sr->out = p.out, sr->err = p.err;
    sr->out_truncated = p.out_truncated || p.exit_code == E2B_EXIT_BUDGET;
    sr->err_truncated = p.err_truncated || p.exit_code == E2B_EXIT_BUDGET;
    sr->exit_code = p.exit_code;
    sr->timed_out = p.timed_out;
    sr->duration_ms = p.duration_ms;
    if (!sr->command)
        return plm_fail(err, ENOMEM, PLM_E_INTERNAL, "out of memory");
    *timed_out = p.timed_out;
    return p.timed_out || p.exit_code != 0; /* (spec) steps stop at the first non-zero exit */
}

static int run_steps(struct e2b_state *s, const struct e2b_sandbox *sb, const struct plm_host_api *api,
                     const struct plm_request *req, int64_t deadline, struct plm_project_result *pr,
                     bool *timed_out, struct plm_err *err)
{
    size_t n = req->project.n_steps;
    if (!n || *timed_out)
        return 0;
    if (!(pr->steps = calloc(n, sizeof *pr->steps)))
        return plm_fail(err, ENOMEM, PLM_E_INTERNAL, "out of memory");
    for (size_t i = 0; i < n; i++) {
        int rc = run_step(s, sb, api, req->project.steps[i], deadline, pr, timed_out, err);
        if (rc != 0)
            return rc < 0 ? -1 : 0;
    }
    return 0;
}

/* Artifacts, within the 8 MiB total, only after the steps ran (and not after a time-out). A 404
 * counts as missing (spec); past the total the list is cut and flagged. */
static int read_artifacts(struct e2b_state *s, const struct e2b_sandbox *sb, const struct plm_request *req,
                          int64_t deadline, struct plm_project_result *pr, bool *timed_out, struct plm_err *err)
{
    if (!(pr->artifacts = calloc(req->project.n_artifacts, sizeof *pr->artifacts)))
        return plm_fail(err, ENOMEM, PLM_E_INTERNAL, "out of memory");
    size_t used = 0;
    for (size_t i = 0; i < req->project.n_artifacts; i++) {
        char path[LIM_PATH_MAX + 64];
        if (e2b_project_path(req->project.artifacts[i], path, sizeof path) < 0)
            continue;
        struct plm_bytes b = {0};
        bool over = false;
        int got = e2b_read_file(s, sb, path, E2B_ARTIFACTS_MAX - used, deadline, &b, &over, err);
        if (got < 0 && err->kind == PLM_E_DEADLINE) {
            plm_err_clear(err);
            *timed_out = true;
            return 0;
        }
        if (got < 0)
            return -1;
        if (over) {
            plm_bytes_done(&b);
            pr->artifacts_truncated = true;
            return 0;
        }
        if (got == 0)
            continue;
        used += b.len;
        struct plm_artifact *a = &pr->artifacts[pr->n_artifacts++];
        a->path = strdup(req->project.artifacts[i]);
        a->content = b;
        if (!a->path)
            return plm_fail(err, ENOMEM, PLM_E_INTERNAL, "out of memory");
    }
    return 0;
}

/* The project's stages in its sandbox: files (an illegal path is reported in pr, nothing runs),
 * steps, artifacts; a budget that runs out in any stage ends it as timed out, not as an error. */
static int project_in_vm(struct e2b_state *s, const struct e2b_sandbox *sb, const struct plm_host_api *api,
                         const struct plm_request *req, int64_t deadline, struct plm_project_result *pr,
                         bool *timed_out_out, struct plm_err *err)
{
    bool timed_out = false;
    *timed_out_out = false;
    int rc = upload_project(s, sb, req, api, deadline, pr, err);
    if (rc < 0 && err->kind == PLM_E_DEADLINE) {
        plm_err_clear(err); /* the budget ran out while the files were written */
        rc = 0;
        timed_out = true;
    }
    if (rc > 0)
        return 0;
    if (rc == 0)
        rc = run_steps(s, sb, api, req, deadline, pr, &timed_out, err);
    if (rc == 0 && pr->outcome == PLM_OUTCOME_UNSPECIFIED && !timed_out && req->project.n_artifacts)
        rc = read_artifacts(s, sb, req, deadline, pr, &timed_out, err);
    *timed_out_out = timed_out;
    return rc;
}

static int project_result(bool timed_out, struct plm_result *out, struct plm_err *err)
{
    struct plm_project_result *pr = &out->project;
    out->kind = PLM_KIND_PROJECT;
    if (pr->outcome == PLM_OUTCOME_UNSPECIFIED) {
        pr->outcome = timed_out ? PLM_OUTCOME_TIMED_OUT : PLM_OUTCOME_COMPLETED;
        pr->detail = strdup(timed_out ? "run exceeded the time budget" : "");
    }
    if (!pr->detail)
        return plm_fail(err, ENOMEM, PLM_E_INTERNAL, "out of memory");
    out->tier = PLM_TIER_VM; /* the daemon stamps the template Describe states */
    return 0;
}

/* An escaping path is refused before any VM exists (validation refuses it earlier still):
 * 1 = reported in out, 0 = every path is fine, -1 = out of memory. */
static int bad_path(const struct plm_request *req, struct plm_result *out)
{
    char probe[LIM_PATH_MAX + 64];
    for (size_t i = 0; i < req->project.n_files; i++)
        if (e2b_project_path(req->project.files[i].path, probe, sizeof probe) < 0) {
            out->kind = PLM_KIND_PROJECT;
            out->tier = PLM_TIER_VM; /* nothing ran, but the answer states where it would have */
            return setup_failed(&out->project, req->project.files[i].path) < 0 ? -1 : 1;
        }
    return 0;
}

int e2b_run_project(struct e2b_state *s, const struct plm_run_ctx *ctx, const struct plm_request *req,
                    struct plm_result *out, struct plm_err *err)
{
    uint32_t budget;
    int64_t deadline;
    if (run_begin(s, ctx, req, &budget, &deadline, err) < 0)
        return -1;
    const struct plm_host_api *api = ctx->host_api;
    int bp = bad_path(req, out);
    if (bp != 0)
        return bp < 0 ? plm_fail(err, ENOMEM, PLM_E_INTERNAL, "out of memory") : 0;
    struct vm vm;
    bool timed_out = false;
    int rc = vm_open(s, api, budget, &vm, err);
    if (rc == 0)
        rc = project_in_vm(s, &vm.sb, api, req, deadline, &out->project, &timed_out, err);
    vm_close(s, &vm);
    if (rc < 0)
        return plm_err_wrap(err, "project");
    return project_result(timed_out, out, err);
}

int e2b_project_in(struct e2b_state *s, const struct e2b_sandbox *sb, const struct plm_run_ctx *ctx,
                   const struct plm_request *req, struct plm_result *out, struct plm_err *err)
{
    uint32_t budget;
    int64_t deadline;
    if (run_begin(s, ctx, req, &budget, &deadline, err) < 0)
        return -1;
    int bp = bad_path(req, out);
    if (bp != 0)
        return bp < 0 ? plm_fail(err, ENOMEM, PLM_E_INTERNAL, "out of memory") : 0;
    bool timed_out = false;
    if (project_in_vm(s, sb, ctx->host_api, req, deadline, &out->project, &timed_out, err) < 0)
        return plm_err_wrap(err, "project");
    return project_result(timed_out, out, err);
}
