/* session.c: sessions on the e2b provider (docs/sessions.md "e2b", sessions.md §6): one E2B
 * sandbox per session, created at open with E2B's timeout covering the session's lifetime, and
 * deleted at close, expiry, replacement and shutdown. Cells run in one long-lived interpreter per
 * language (interp.c), started at the language's first cell and again after one ended; snippets
 * and projects run in the same sandbox (run.c); every call works in the session directory
 * E2B_PROJECT_DIR, so files persist across calls of every kind.
 * Owns: the session's sandbox (tracked from its create answer, so the reconcile spares it while
 * it lives and deletes it once a restarted daemon no longer knows it) and its interpreters.
 * Trusts: E2B for the VM; nothing the guest prints (cellscan.h).
 * Invariant: an error after code may have run is never a refusal; a sandbox found gone ends the
 * session (MAIN_PROCESS_ENDED), one whose state cannot be read ends it BOUNDARY_FAILED; close
 * frees the session on every path. The daemon serialises a session's calls. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../../core/cleanup.h"
#include "../../core/limits.h"
#include "interp.h"
#include "session_grant.h"
#include "sweep.h"

#define E2B_SESSION_MARGIN_S 60 /* E2B's own timeout outlives the lifetime by this much */

struct plm_session {
    struct e2b_state *s;
    struct e2b_sandbox sb;
    int64_t until_ms;               /* monotonic end of the lifetime */
    struct e2b_interp *interp[2];   /* javascript, python */
    struct e2b_sg grant;            /* how a granted call reaches the guard (session_grant.c) */
    char *baseline;                 /* the VM's own processes at open, which every sweep spares */
};

/* The session's memory (its sandbox and grant are released by their owners before this). */
static void session_free(struct plm_session *ss)
{
    free(ss->baseline);
    explicit_bzero(ss, sizeof *ss);
    free(ss);
}
DEFINE_CLEANUP(struct plm_session, session_free)

/* The open's work once its sandbox exists: the resource read-back (when a cap is set), the session
 * directory (a cell's interpreter starts in it), the process baseline (before any guest code). */
static int session_set_up(struct e2b_state *s, struct plm_session *ss, struct plm_err *err)
{
    if ((s->memory_mb || s->cpus || s->disk_mb) && e2b_check_resources(s, &ss->sb, NULL, 0, err) < 0)
        return -1;
    char path[128];
    snprintf(path, sizeof path, "%s/.plimsoll-session", E2B_PROJECT_DIR);
    struct e2b_upload up = {path, "", 0};
    if (e2b_write_files(s, &ss->sb, &up, 1, e2b_mono_ms() + E2B_CONTROL_TIMEOUT_MS, err) < 0)
        return -1;
    return e2b_sweep_baseline(s, &ss->sb, &ss->baseline, err);
}

static int lang_index(const char *lang)
{
    return !strcmp(lang, "javascript") ? 0 : !strcmp(lang, "python") ? 1 : -1;
}

void e2b_ops_session_env(struct plm_provider *p, struct plm_payload_env *e)
{
    struct e2b_state *s = p->state;
    memset(e, 0, sizeof *e);
    e2b_identity(s, e->identity, sizeof e->identity);
    e->default_timeout_ms = E2B_DEFAULT_TIMEOUT_MS;
    e->max_timeout_ms = E2B_MAX_TIMEOUT_MS;
    e->languages[0] = "javascript";
    e->languages[1] = atomic_load(&s->python3) ? "python" : NULL;
}

int e2b_ops_session_open(struct plm_provider *p, const struct plm_session_spec *spec, struct plm_session **out,
                         struct plm_session_opened *info, struct plm_err *err)
{
    struct e2b_state *s = p->state;
    *out = NULL;
    enum plm_tier tier = atomic_load(&s->proven) ? PLM_TIER_VM : PLM_TIER_NONE;
    if (tier_check_floor(tier, spec->floor, err) < 0)
        return -1;
    if (!s->api_key[0] || !atomic_load(&s->proven))
        return plm_refuse(err, PLM_E_UNAVAILABLE, PLM_REFUSAL_UNSUPPORTED, "e2b: the provider has not been proven");
    struct plm_session *ss cleanup_(session_free) = calloc(1, sizeof *ss);
    if (!ss)
        return plm_fail(err, ENOMEM, PLM_E_INTERNAL, "out of memory opening a session");
    ss->s = s;
    uint64_t life = spec->lifetime_ms ? spec->lifetime_ms : 30 * 60 * 1000;
    ss->until_ms = e2b_mono_ms() + (int64_t)life;
    /* E2B ends the VM by itself a minute after the lifetime, even if this daemon is gone */
    uint64_t budget = life + (uint64_t)E2B_SESSION_MARGIN_S * 1000 - 10000;
    const char *guard_token = NULL; /* E2B_SESSION_GRANTS=session: the guard's rule from the start */
    if (e2b_sg_open(s, &ss->grant, &guard_token, err) < 0)
        return -1;
    if (e2b_create(s, budget > UINT32_MAX ? UINT32_MAX : (uint32_t)budget, guard_token, &ss->sb, err) < 0) {
        e2b_sg_close(s, &ss->grant);
        return -1; /* a VM may exist: never a refusal (the reconcile finds an unnamed one) */
    }
    if (session_set_up(s, ss, err) < 0) {
        e2b_delete(s, ss->sb.id);
        e2b_sg_close(s, &ss->grant);
        return plm_err_wrap(err, "opening a session");
    }
    e2b_log("info", "e2b_session_sandbox", "\"sandbox\":\"%s\",\"lifetime_ms\":%llu", ss->sb.id,
            (unsigned long long)life);
    info->tier = tier;
    info->software_identity[0] = 0;
    e2b_identity(s, info->environment, sizeof info->environment);
    *out = take_ptr(&ss);
    return 0;
}

/* After an envd failure: is the sandbox still there? Sets *ended when it is not (or unknown). */
static void check_sandbox(struct plm_session *ss, enum plm_session_end *ended)
{
    int alive = e2b_sandbox_alive(ss->s, &ss->sb);
    if (alive < 0) { /* one transport blip must not end a session: asked once more */
        nanosleep(&(struct timespec){0, 500 * 1000 * 1000}, NULL);
        alive = e2b_sandbox_alive(ss->s, &ss->sb);
    }
    e2b_log(alive == 1 ? "info" : "warning", "e2b_session_read_back", "\"sandbox\":\"%s\",\"state\":\"%s\"",
            ss->sb.id, alive == 1 ? "running" : alive == 0 ? "gone" : "unreadable");
    if (alive == 0)
        *ended = PLM_END_MAIN_PROCESS_ENDED;
    else if (alive < 0)
        *ended = PLM_END_BOUNDARY_FAILED;
}

/* Item 46 (no process outlives its call), after every call whose code may have run: every process
 * but the VM's own and the live interpreters is killed (sweep.c). A sweep that cannot prove that
 * ends the session, never silently: MAIN_PROCESS_ENDED when the sandbox is gone, else
 * BOUNDARY_FAILED. The call's own result stands (its code ran and ended); the answer says ended. */
static void sweep_after_call(struct plm_session *ss, enum plm_session_end *ended)
{
    if (*ended != PLM_END_NONE)
        return; /* the session ends with its sandbox */
    int64_t keep[2];
    for (int i = 0; i < 2; i++)
        keep[i] = ss->interp[i] ? e2b_interp_pid(ss->interp[i]) : -1;
    struct plm_err e = {0};
    if (e2b_sweep_after_call(ss->s, &ss->sb, ss->baseline, keep, 2, &e) == 0)
        return;
    char why[200]; /* the log's fields are JSON text: no quote or backslash of the message */
    snprintf(why, sizeof why, "%.190s", e.msg);
    for (char *c = why; *c; c++)
        *c = (*c == '"' || *c == '\\' || (unsigned char)*c < 0x20) ? '\'' : *c;
    e2b_log("warning", "e2b_session_sweep_failed", "\"sandbox\":\"%s\",\"detail\":\"%s\"", ss->sb.id, why);
    check_sandbox(ss, ended);
    if (*ended == PLM_END_NONE)
        *ended = PLM_END_BOUNDARY_FAILED;
}

static long stream_ms(const struct plm_session *ss)
{
    int64_t left = ss->until_ms - e2b_mono_ms() + (int64_t)E2B_SESSION_MARGIN_S * 1000;
    return left > 1000 ? (long)left : 1000L;
}

static int write_cell_files(struct plm_session *ss, const struct plm_request *req, int64_t deadline,
                            enum plm_session_end *ended, struct plm_err *err)
{
    size_t n = req->cell.n_files;
    if (!n)
        return 0;
    cleanup_free struct e2b_upload *up = calloc(n, sizeof *up);
    cleanup_free char(*paths)[LIM_PATH_MAX + 64] = calloc(n, sizeof *paths);
    if (!up || !paths)
        return plm_fail(err, ENOMEM, PLM_E_INTERNAL, "out of memory");
    for (size_t i = 0; i < n; i++) {
        if (e2b_project_path(req->cell.files[i].path, paths[i], sizeof paths[i]) < 0)
            return plm_refuse(err, PLM_E_INVALID, PLM_REFUSAL_REQUEST, "file %zu of %zu: illegal file path (EINVAL)",
                              i + 1, n);
        up[i] = (struct e2b_upload){paths[i], req->cell.files[i].content, strlen(req->cell.files[i].content)};
    }
    if (e2b_write_files(ss->s, &ss->sb, up, n, deadline, err) == 0)
        return 0;
    check_sandbox(ss, ended);
    if (*ended != PLM_END_NONE)
        return plm_fail(err, 0, PLM_E_UNAVAILABLE, "e2b: the session's sandbox is gone (%s)", plm_session_end_name(*ended));
    if (err->kind == PLM_E_DEADLINE)
        return plm_refuse(err, PLM_E_DEADLINE, PLM_REFUSAL_CAPACITY,
                          "e2b: the cell's deadline passed while its files were written; its code was not run");
    char why[200];
    snprintf(why, sizeof why, "%.190s", err->msg);
    return plm_refuse(err, PLM_E_INVALID, PLM_REFUSAL_REQUEST,
                      "file 1..%zu of %zu: the files could not all be written (EIO: %s); the code was not run", n, n, why);
}

/* The tier of the call (run.c's, when a snippet or project already set it); the daemon stamps the
 * environment the session opened with, e2b_identity's (session_run.c). */
static int measured(struct plm_result *out)
{
    out->tier = PLM_TIER_VM;
    return 0;
}

int e2b_ops_session_cell(struct plm_provider *p, struct plm_session *ss, const struct plm_run_ctx *ctx,
                         const struct plm_request *req, struct plm_result *out, enum plm_session_end *ended,
                         struct plm_err *err)
{
    struct e2b_state *s = p->state;
    enum plm_tier tier = atomic_load(&s->proven) ? PLM_TIER_VM : PLM_TIER_NONE;
    if (tier_check_floor(tier, ctx->floor, err) < 0)
        return -1;
    int li = lang_index(req->cell.language ? req->cell.language : "");
    if (li < 0)
        return plm_refuse(err, PLM_E_INVALID, PLM_REFUSAL_REQUEST, "cell language must be javascript or python");
    if (li == 1 && !atomic_load(&s->python3))
        return plm_refuse(err, PLM_E_UNSUPPORTED, PLM_REFUSAL_ENVIRONMENT,
                          "e2b: template %s has no python3 (checked at startup); python cells cannot run", s->template_id);
    size_t len = strnlen(req->cell.code, LIM_CODE_MAX + 1);
    if (len == 0 || len > LIM_CODE_MAX)
        return plm_refuse(err, PLM_E_INVALID, PLM_REFUSAL_REQUEST, "code must be 1..%u bytes", LIM_CODE_MAX);
    uint32_t budget = plm_clamp_timeout((int32_t)ctx->timeout_ms, E2B_DEFAULT_TIMEOUT_MS, E2B_MAX_TIMEOUT_MS);
    int64_t deadline = e2b_mono_ms() + budget;
    memset(out, 0, sizeof *out);
    if (write_cell_files(ss, req, deadline, ended, err) < 0)
        return -1;
    struct e2b_interp **it = &ss->interp[li];
    if (*it && !e2b_interp_alive(*it)) { /* ended after the last cell (between calls) */
        e2b_interp_free(*it, true);
        *it = NULL;
    }
    bool started = false;
    if (!*it) {
        bool transport = false;
        if (e2b_interp_start(s, &ss->sb, req->cell.language, E2B_PROJECT_DIR, stream_ms(ss), deadline, it, &transport,
                             err) < 0) {
            if (transport) {
                check_sandbox(ss, ended);
                if (*ended != PLM_END_NONE)
                    return plm_fail(err, 0, PLM_E_UNAVAILABLE, "e2b: the session's sandbox is gone (%s)",
                                    plm_session_end_name(*ended));
            }
            return -1; /* a refusal: the cell's code was not handed over */
        }
        started = true;
    }
    struct e2b_cell_out r;
    int rc = e2b_interp_cell(*it, req->cell.code, len, deadline, &r, err);
    if (rc < 0 || r.ended) {
        e2b_interp_free(*it, true);
        *it = NULL;
    }
    if (rc < 0) {
        if (!plm_err_is_refusal(err)) {
            check_sandbox(ss, ended);
            sweep_after_call(ss, ended);
        }
        return -1;
    }
    if (r.ended && !r.timed_out && r.exit_code >= 128)
        check_sandbox(ss, ended); /* killed by a signal: perhaps with its whole sandbox */
    sweep_after_call(ss, ended);
    out->kind = PLM_KIND_CELL;
    out->cell = (struct plm_cell_result){.out = r.out, .err = r.err, .exit_code = r.exit_code, .timed_out = r.timed_out,
                                         .out_truncated = r.out_truncated, .err_truncated = r.err_truncated,
                                         .interpreter_started = started, .interpreter_ended = r.ended};
    out->duration_ms = r.duration_ms;
    return measured(out);
}

int e2b_ops_session_run(struct plm_provider *p, struct plm_session *ss, const struct plm_run_ctx *ctx,
                        const struct plm_request *req, struct plm_result *out, enum plm_session_end *ended,
                        struct plm_err *err)
{
    struct e2b_state *s = p->state;
    struct e2b_sg_call gc = {0};
    if (ctx->host_api && e2b_sg_begin(s, &ss->grant, ss->sb.id, ctx->host_api, &gc, err) < 0)
        return -1;
    int rc = req->kind == PLM_KIND_PROJECT ? e2b_project_in(s, &ss->sb, ctx, req, out, err)
                                           : e2b_snippet_in(s, &ss->sb, ctx, req, E2B_PROJECT_DIR, out, err);
    e2b_sg_end(s, &ss->grant, ss->sb.id, &gc, ended); /* the grant ends with the call's code */
    if (rc < 0) {
        if (!plm_err_is_refusal(err)) {
            check_sandbox(ss, ended);
            sweep_after_call(ss, ended);
        }
        return -1;
    }
    sweep_after_call(ss, ended);
    return measured(out);
}

int e2b_ops_session_close(struct plm_provider *p, struct plm_session *ss, struct plm_err *err)
{
    struct e2b_state *s = p->state;
    if (!ss)
        return 0;
    for (int i = 0; i < 2; i++)
        e2b_interp_stop(ss->interp[i]); /* the delete ends their streams */
    int rc = e2b_delete(s, ss->sb.id);   /* 3 tries; a failure is left to the reconcile */
    e2b_sg_close(s, &ss->grant);         /* the guard refuses the session's credential from now */
    for (int i = 0; i < 2; i++)
        e2b_interp_free(ss->interp[i], false);
    if (rc < 0)
        plm_fail(err, 0, PLM_E_UNAVAILABLE, "e2b: sandbox %s could not be deleted; the reconcile will retry", ss->sb.id);
    session_free(ss);
    return rc;
}
