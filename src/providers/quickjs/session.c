/* session.c: JavaScript-only sessions on the quickjs provider (docs/sessions.md).
 * A session owns one worker taken from the pool: the same zygote fork, seccomp filter,
 * namespaces, rlimits and memory cap as a Run's worker, kept across runs with QF_RUN_SESSION so
 * its engine context (globals, functions) is the session's interpreter state. The worker dies
 * with the session (close, expiry, shutdown), or earlier when a cell ends its interpreter
 * (deadline, process.exit, RLIMIT_CPU, a crash): the next cell then starts a fresh worker and
 * says so (interpreter_started).
 * Owns: the worker (killed and reaped on every path). No files exist here: a cell with files
 * is refused. A snippet in a session runs in a fresh single-use worker exactly like Run (it
 * shares nothing with the cells, as a `node -e` exec would share no interpreter).
 * Not thread-safe per session: the daemon serialises a session's calls (its turn). */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <time.h>
#include <stdlib.h>
#include <string.h>

#include "../../core/limits.h"
#include "../../core/provider.h"
#include "qjs_int.h"
#include "quickjs.h"

struct plm_session {
    struct qjs_worker w; /* pid -1: no live interpreter */
    uint64_t cells;
    bool stopped;        /* suspended with SIGSTOP: resumed with SIGCONT by the next cell */
};

/* The worker's state letter from /proc/<pid>/stat ('T' stopped), or 0 when unreadable. */
static char proc_state(pid_t pid)
{
    char path[64], buf[512];
    snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
    FILE *f = fopen(path, "re");
    if (!f)
        return 0;
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = 0;
    char *rp = strrchr(buf, ')'); /* the name may hold spaces and parentheses */
    return rp && rp[1] == ' ' ? rp[2] : 0;
}

/* Idle suspend: the interpreter is stopped (SIGSTOP), keeping its memory and state, so the
 * daemon keeps its concurrency slot. Proved by the kernel's own view before it counts. */
int qjs_session_suspend(struct plm_provider *p, struct plm_session *s, bool *holds_memory, struct plm_err *err)
{
    (void)p;
    *holds_memory = true;
    if (s->w.pid <= 0 || s->stopped)
        return 0; /* no interpreter to stop: the next cell starts one anyway */
    if (kill(s->w.pid, SIGSTOP) < 0)
        return plm_fail(err, errno, PLM_E_INTERNAL, "stopping the session's worker failed");
    for (int i = 0; i < 100; i++) { /* SIGSTOP is asynchronous: wait (1 s at most) until it took */
        if (proc_state(s->w.pid) == 'T') {
            s->stopped = true;
            return 0;
        }
        nanosleep(&(struct timespec){0, 10 * 1000 * 1000}, NULL);
    }
    kill(s->w.pid, SIGCONT);
    return plm_fail(err, 0, PLM_E_INTERNAL, "the session's worker did not stop");
}

static void resume(struct plm_session *s)
{
    if (s->stopped && s->w.pid > 0)
        kill(s->w.pid, SIGCONT); /* a worker that died meanwhile fails its run, reported as such */
    s->stopped = false;
}

static const char *const js_only[] = {"javascript", NULL};

void qjs_session_env(struct plm_provider *p, struct plm_payload_env *e)
{
    struct plm_describe d;
    p->ops->describe(p, &d);
    *e = d.javascript;
    e->languages[0] = js_only[0];
    e->languages[1] = NULL;
}

int qjs_session_open(struct plm_provider *p, const struct plm_session_spec *spec, struct plm_session **out,
                     struct plm_session_opened *info, struct plm_err *err)
{
    enum plm_tier tier = p->ops->tier(p);
    if (tier_check_floor(tier, spec->floor, err) < 0)
        return -1;
    struct plm_session *s = calloc(1, sizeof *s);
    if (!s)
        return plm_fail(err, ENOMEM, PLM_E_INTERNAL, "out of memory opening a session");
    s->w = (struct qjs_worker){.pid = -1, .fd = -1};
    /* The interpreter starts now, so the first cell finds it warm. */
    if (mon_session_take(qjs_provider_pool(p), &s->w, err) < 0) {
        free(s);
        return -1; /* nothing was left behind */
    }
    struct plm_payload_env e;
    qjs_session_env(p, &e);
    info->tier = tier;
    snprintf(info->software_identity, sizeof info->software_identity, "%s", e.software_identity);
    snprintf(info->environment, sizeof info->environment, "%s", e.identity);
    *out = s;
    return 0;
}

/* What the provider measured for the call; the daemon stamps the environment and software
 * identity the session opened with (session_run.c). */
static int measured(struct plm_provider *p, struct plm_result *out, int64_t ms)
{
    out->duration_ms = ms;
    out->tier = p->ops->tier(p);
    return 0;
}

int qjs_session_run_cell(struct plm_provider *p, struct plm_session *s, const struct plm_run_ctx *ctx,
                         const struct plm_request *req, struct plm_result *out, enum plm_session_end *ended,
                         struct plm_err *err)
{
    (void)ended; /* a cell ends at most its interpreter; the session goes on */
    if (tier_check_floor(p->ops->tier(p), ctx->floor, err) < 0)
        return -1;
    if (strcmp(req->cell.language, "javascript") != 0)
        return plm_refuse(err, PLM_E_UNSUPPORTED, PLM_REFUSAL_ENVIRONMENT,
                          "quickjs sessions run javascript cells only; \"%s\" has no interpreter here",
                          req->cell.language);
    if (req->cell.n_files > 0)
        return plm_refuse(err, PLM_E_UNSUPPORTED, PLM_REFUSAL_UNSUPPORTED,
                          "quickjs sessions have no filesystem: a cell cannot carry files");
    size_t len = strnlen(req->cell.code, LIM_CODE_MAX + 1);
    if (len == 0 || len > LIM_CODE_MAX)
        return plm_refuse(err, PLM_E_INVALID, PLM_REFUSAL_REQUEST, "code must be 1..%u bytes", LIM_CODE_MAX);
    memset(out, 0, sizeof *out);
    resume(s);
    bool started = false;
    if (s->w.pid <= 0) { /* the last cell ended its interpreter: a fresh one, before any code */
        if (mon_session_take(qjs_provider_pool(p), &s->w, err) < 0)
            return -1;
        started = true;
    } else if (s->cells == 0) {
        started = true; /* the interpreter taken at open runs its first cell */
    }
    struct plm_js_result js;
    int64_t ms = 0;
    bool gone = false;
    int rc = mon_session_run(&s->w, req->cell.code, len, ctx->timeout_ms, &js, &ms, &gone, err);
    if (gone || rc < 0)
        s->w = (struct qjs_worker){.pid = -1, .fd = -1}; /* reaped by mon_session_run */
    s->cells++;
    if (rc < 0)
        return -1; /* the code was sent: never a refusal */
    out->kind = PLM_KIND_CELL;
    out->cell = (struct plm_cell_result){.out = js.out, .err = js.err, .exit_code = js.exit_code,
                                         .timed_out = js.timed_out, .out_truncated = js.out_truncated,
                                         .err_truncated = js.err_truncated, .interpreter_started = started,
                                         .interpreter_ended = gone};
    return measured(p, out, ms);
}

int qjs_session_run(struct plm_provider *p, struct plm_session *s, const struct plm_run_ctx *ctx,
                    const struct plm_request *req, struct plm_result *out, enum plm_session_end *ended,
                    struct plm_err *err)
{
    (void)s;
    (void)ended;
    if (req->kind != PLM_KIND_JAVASCRIPT)
        return plm_refuse(err, PLM_E_UNSUPPORTED, PLM_REFUSAL_UNSUPPORTED, "quickjs runs no projects");
    return p->ops->run_javascript(p, ctx, req, out, err);
}

int qjs_session_close(struct plm_provider *p, struct plm_session *s, struct plm_err *err)
{
    (void)p;
    (void)err;
    if (!s)
        return 0;
    if (s->w.pid > 0 || s->w.fd >= 0)
        qjs_worker_end(&s->w); /* SIGKILL and reap: gone when this returns */
    free(s);
    return 0;
}
