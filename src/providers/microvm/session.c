/* session.c: sessions on the microvm provider (docs/sessions.md, microvm). One VM per session,
 * taken from the project pool (restored from the template with node and python3 on its read-only
 * disk) and switched to session mode by SESSION: /work becomes a tmpfs of the session's disk
 * budget and the guest's PID 1 serves cells (a QuickJS kernel for JavaScript, a python3 kernel
 * for Python, each keeping its state across cells) and snippets until the VM is killed.
 * Owns: the session's QEMU (killed and reaped by mv_vm_kill on every end) and its QMP monitor.
 * Trusts: the guest's frames only as mv_vm_read hands them over (decoded in the guestio helper);
 *   their seq and type are re-checked here. QMP answers only through the bounded reader (qmp.c).
 * Invariant: a guest that dies, garbles its channel or overruns a call ends the session
 *   (MAIN_PROCESS_ENDED or BOUNDARY_FAILED) with an unavailable error, never internal, and its
 *   VM is killed at once; a dead session refuses every later call. Every answered call is
 *   followed by the guest's SESSION_STATUS, read before the call returns: past the disk budget
 *   the session ends DISK_EXCEEDED (the call's result stands). A granted snippet's host calls go
 *   through the call's broker and end with it. Idle suspend is QMP `stop` (memory kept, so the
 *   slot is kept); the next call sends `cont` first.
 * Not thread-safe per session: the daemon serialises a session's calls (its turn). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../core/cleanup.h"
#include "../../core/limits.h"
#include "../../core/validate.h"
#include "mv_int.h"

#define MV_SESSION_DEFAULT_MS 30000u
#define MV_SESSION_MAX_MS 120000u
#define MV_SESSION_GRACE_MS 5000u      /* past a call's timeout before the guest counts as stuck */
#define MV_SESSION_PY_START_MS 60000u  /* the guest gives python3 this long to start (session.c) */
#define MV_QMP_TIMEOUT_MS 5000u
#define MV_FILES_MS 30000u  /* a cell's files to their STATUS (the guest's writer gives up at 20 s) */
#define MV_STATUS_MS 15000u /* a RESULT to the STATUS after it: the guest's sweep and measurement */

struct plm_session {
    struct mv_vm vm;
    struct mv_qmp qmp;
    bool qmp_ready; /* qmp_capabilities was sent */
    bool stopped;   /* suspended with QMP stop: the next call sends cont */
    bool live_js, live_py; /* an interpreter ran a cell and did not end: its next cell is not fresh */
    uint64_t disk_bytes; /* SANDBOX_SESSION_DISK_MB in bytes; 0: not measured */
    enum plm_session_end dead;
    char dead_why[200];
};

static struct mv_state *st_of(struct plm_provider *p)
{
    return p->state;
}

static bool python_ok(struct mv_state *s)
{
    return __atomic_load_n(&s->python_proven, __ATOMIC_ACQUIRE) != 0;
}

void mv_session_env(struct plm_provider *p, struct plm_payload_env *e)
{
    struct mv_state *s = st_of(p);
    memset(e, 0, sizeof *e);
    snprintf(e->identity, sizeof e->identity, "%s", s->proj->identity);
    snprintf(e->software_identity, sizeof e->software_identity, "%s", s->qemu_version);
    e->default_timeout_ms = MV_SESSION_DEFAULT_MS;
    e->max_timeout_ms = MV_SESSION_MAX_MS;
    e->languages[0] = "javascript";
    if (python_ok(s))
        e->languages[1] = "python";
}

/* The VM is gone or no longer trusted: kill it now (no QEMU outlives a dead session) and refuse
 * every later call with the reason. */
static void mark_dead(struct plm_session *h, enum plm_session_end why, const char *text)
{
    if (h->dead == PLM_END_NONE) {
        h->dead = why;
        snprintf(h->dead_why, sizeof h->dead_why, "%s", text);
    }
    mv_vm_kill(&h->vm);
}

static int refuse_dead(struct plm_session *h, enum plm_session_end *ended, struct plm_err *err)
{
    *ended = h->dead;
    return plm_refuse(err, PLM_E_ENDED, PLM_REFUSAL_REQUEST, "the session has ended (%s): %s",
                      plm_session_end_name(h->dead), h->dead_why);
}

/* A failure after the request went out: the code may have run. The VM is ended and the call is
 * unavailable (never internal): a guest can kill its VM or break its channel. */
static int lost(struct plm_session *h, enum plm_session_end *ended, struct plm_err *err)
{
    bool timeout = err->errnum == ETIMEDOUT;
    bool gone = err->errnum == EPIPE || err->errnum == ECONNRESET;
    enum plm_session_end why = gone ? PLM_END_MAIN_PROCESS_ENDED : PLM_END_BOUNDARY_FAILED;
    char text[200];
    snprintf(text, sizeof text, "%.190s",
             timeout ? "the session's VM did not answer within the call's time and its grace" : err->msg);
    mark_dead(h, why, text);
    plm_fail(err, err->errnum ? err->errnum : EPROTO, PLM_E_UNAVAILABLE,
                "the session's VM %s during the call: %s",
                why == PLM_END_MAIN_PROCESS_ENDED ? "went away" : "stopped answering properly", text);
    *ended = why;
    return -1;
}

static int qmp(struct plm_session *h, const char *cmd, char *ans, size_t len, struct plm_err *err)
{
    h->qmp.fd = h->vm.qmp;
    h->qmp.deadline_ns = clock_mono_ns() + (int64_t)MV_QMP_TIMEOUT_MS * 1000000;
    if (!h->qmp_ready) {
        if (mv_qmp_cmd(&h->qmp, "{\"execute\":\"qmp_capabilities\"}", -1, ans, len, err) < 0)
            return -1;
        h->qmp_ready = true;
    }
    return mv_qmp_cmd(&h->qmp, cmd, -1, ans, len, err);
}

/* Before a call: a dead session refuses; a suspended VM is continued first. */
static int ready_for_call(struct plm_session *h, enum plm_session_end *ended, struct plm_err *err)
{
    if (h->dead != PLM_END_NONE)
        return refuse_dead(h, ended, err);
    if (!h->stopped)
        return 0;
    char ans[MV_QMP_LINE_MAX];
    struct plm_err e = {0};
    if (qmp(h, "{\"execute\":\"cont\"}", ans, sizeof ans, &e) < 0) {
        char why[200];
        snprintf(why, sizeof why, "the suspended VM could not be resumed: %.150s", e.msg);
        mark_dead(h, PLM_END_BOUNDARY_FAILED, why);
        return refuse_dead(h, ended, err);
    }
    h->stopped = false;
    return 0;
}

int mv_session_suspend(struct plm_provider *p, struct plm_session *h, bool *holds_memory, struct plm_err *err)
{
    (void)p;
    *holds_memory = true; /* a stopped VM keeps its RAM */
    if (h->dead != PLM_END_NONE || h->stopped)
        return 0;
    char ans[MV_QMP_LINE_MAX];
    if (qmp(h, "{\"execute\":\"stop\"}", ans, sizeof ans, err) < 0)
        return plm_fail(err, err->errnum, PLM_E_UNAVAILABLE, "stopping the session's VM failed: %s", err->msg);
    h->stopped = true; /* from here a cont is owed, whatever the proof says */
    /* Proved by QEMU's own view before it counts. */
    if (qmp(h, "{\"execute\":\"query-status\"}", ans, sizeof ans, err) < 0)
        return plm_fail(err, err->errnum, PLM_E_UNAVAILABLE, "reading the stopped VM's state failed: %s", err->msg);
    if (!strstr(ans, "\"running\": false") && !strstr(ans, "\"running\":false"))
        return plm_fail(err, 0, PLM_E_UNAVAILABLE, "the session's VM did not stop: %.120s", ans);
    return 0;
}

static uint32_t lang_bits(const struct plm_session_spec *spec, bool python)
{
    uint32_t b = 0;
    for (int i = 0; i < 2 && spec->languages[i]; i++) {
        if (!strcmp(spec->languages[i], "javascript"))
            b |= MVC_LANG_JS;
        else if (!strcmp(spec->languages[i], "python"))
            b |= MVC_LANG_PY;
    }
    if (!b) /* no hint: both start now, so either first cell finds its interpreter warm */
        b = MVC_LANG_JS | MVC_LANG_PY;
    return python ? b : b & ~MVC_LANG_PY;
}

int mv_session_open(struct plm_provider *p, const struct plm_session_spec *spec, struct plm_session **out,
                    struct plm_session_opened *info, struct plm_err *err)
{
    struct mv_state *s = st_of(p);
    enum plm_tier tier = p->ops->tier(p);
    if (tier_check_floor(tier, spec->floor, err) < 0)
        return -1;
    if (!s->proj->pool)
        return plm_refuse(err, PLM_E_UNAVAILABLE, PLM_REFUSAL_ENVIRONMENT, "microvm: not proven; nothing ran");
    struct plm_session *h = calloc(1, sizeof *h);
    if (!h)
        return plm_fail(err, ENOMEM, PLM_E_INTERNAL, "out of memory opening a session");
    if (mv_pool_take_parked(s->proj->pool, MV_BOOT_TIMEOUT_MS, &h->vm, err) < 0) {
        free(h);
        return plm_err_wrap(err, "a session VM");
    }
    /* The budget in whole MiB, rounded up, and one MiB more: a cell that fills /work is then seen
     * past the budget after its call (as on docker). 0 (unmeasured) keeps the provider's size. */
    h->disk_bytes = spec->disk_bytes;
    uint64_t mb = spec->disk_bytes ? ((spec->disk_bytes + (1u << 20) - 1) >> 20) + 1 : s->cfg.disk_mb;
    uint8_t pl[MVC_SESSION_LEN];
    f16_put_u32(pl, (uint32_t)(mb > 1048576 ? 1048576 : mb));
    f16_put_u32(pl + 4, lang_bits(spec, python_ok(s)));
    struct mvc_frame f;
    if (mv_vm_send(&h->vm, MVC_SESSION, 0, pl, sizeof pl, NULL, 0, NULL, 0, err) < 0 ||
        mv_vm_read(&h->vm, clock_mono_ns() + (int64_t)MV_SEED_TIMEOUT_MS * 1000000, &f, err) < 0 ||
        f.hdr.type != MVC_SESSION_READY || f.hdr.seq != h->vm.seq) {
        if (err->errnum == 0)
            plm_fail(err, EPROTO, PLM_E_UNAVAILABLE, "microvm: the session VM answered type %u",
                        f.hdr.type);
        mv_vm_kill(&h->vm);
        free(h);
        return plm_err_wrap(err, "opening the session VM");
    }
    info->tier = tier;
    struct plm_payload_env e;
    mv_session_env(p, &e);
    snprintf(info->software_identity, sizeof info->software_identity, "%s", e.software_identity);
    snprintf(info->environment, sizeof info->environment, "%s", e.identity);
    *out = h;
    return 0;
}

static uint32_t call_timeout(const struct plm_run_ctx *ctx)
{
    uint32_t t = ctx->timeout_ms ? ctx->timeout_ms : MV_SESSION_DEFAULT_MS;
    return t > MV_SESSION_MAX_MS ? MV_SESSION_MAX_MS : t;
}

/* What the provider measured for the call; the daemon stamps the environment and software
 * identity the session opened with (session_run.c). */
static int measured(struct plm_provider *p, struct plm_result *out, int64_t ms)
{
    out->duration_ms = ms;
    out->tier = p->ops->tier(p);
    return 0;
}

static int copy_out(struct plm_bytes *b, const uint8_t *p, uint32_t n)
{
    b->data = malloc(n ? n : 1);
    if (!b->data)
        return -1;
    if (n)
        memcpy(b->data, p, n);
    b->len = n;
    return 0;
}

/* The guest's STATUS for the request just answered (seq h->vm.seq), before deadline_ns. -1 with
 * err (a broken channel or a wrong frame: the caller ends the session with lost()). */
static int read_status(struct plm_session *h, int64_t deadline_ns, struct mvc_frame *f, struct plm_err *err)
{
    if (mv_vm_read(&h->vm, deadline_ns, f, err) < 0)
        return -1;
    if (f->hdr.type != MVC_SESSION_STATUS || f->hdr.seq != h->vm.seq)
        return plm_fail(err, EPROTO, PLM_E_UNAVAILABLE,
                           "the guest answered frame type %u where its disk status was due", f->hdr.type);
    return 0;
}

/* The disk budget, measured by the guest after every request (docs/sessions.md, microvm): past
 * it the session ends DISK_EXCEEDED. The guest's code could understate the figure; the tmpfs
 * size (the budget plus 1 MiB), which it cannot change, is what bounds the disk. */
static bool disk_exceeded(struct plm_session *h, const struct mvc_frame *f, enum plm_session_end *ended)
{
    if (!h->disk_bytes || f->u.status.used <= h->disk_bytes)
        return false;
    char why[200];
    snprintf(why, sizeof why, "the session's files (%llu bytes) exceeded SANDBOX_SESSION_DISK_MB (%llu bytes)",
             (unsigned long long)f->u.status.used, (unsigned long long)h->disk_bytes);
    mark_dead(h, PLM_END_DISK_EXCEEDED, why);
    *ended = PLM_END_DISK_EXCEEDED;
    return true;
}

/* A cell's files as one FILES payload (chan.h) in *out: 0, -1 when they break the rules (the
 * daemon checked them: the path rule of core/validate, the caps), -2 out of memory. */
static int encode_files(const struct plm_file *fs, size_t n, uint8_t **out, size_t *len)
{
    size_t total = 4, content = 0;
    if (n > MVC_FILES_MAX)
        return -1;
    for (size_t i = 0; i < n; i++) {
        size_t pl = strlen(fs[i].path), cl = strlen(fs[i].content);
        if (!plm_path_ok(fs[i].path) || pl > MVC_PATH_MAX || pl > LIM_PATH_MAX)
            return -1;
        content += cl;
        total += 8 + pl + cl;
    }
    if (content > LIM_FILES_TOTAL_MAX || total > mvc_max_len(MVC_FILES))
        return -1;
    uint8_t *b = malloc(total), *o = b;
    if (!b)
        return -2;
    f16_put_u32(o, (uint32_t)n);
    o += 4;
    for (size_t i = 0; i < n; i++) {
        const char *f2[2] = {fs[i].path, fs[i].content};
        for (int k = 0; k < 2; k++) {
            size_t l = strlen(f2[k]);
            f16_put_u32(o, (uint32_t)l);
            memcpy(o + 4, f2[k], l);
            o += 4 + l;
        }
    }
    *out = b;
    *len = total;
    return 0;
}

/* A cell's files into /work before its code. A file the guest could not write refuses the call
 * (the code did not run); files past the budget end the session before the code runs. */
static int put_files(struct plm_session *h, const struct plm_request *req, enum plm_session_end *ended,
                     struct plm_err *err)
{
    size_t n = req->cell.n_files, len = 0;
    cleanup_free uint8_t *b = NULL;
    int e = encode_files(req->cell.files, n, &b, &len);
    if (e == -2)
        return plm_fail(err, ENOMEM, PLM_E_INTERNAL, "out of memory encoding a cell's files; nothing ran");
    if (e < 0)
        return plm_refuse(err, PLM_E_INVALID, PLM_REFUSAL_REQUEST,
                          "the cell's files break the path rule or the caps (%u files, %u bytes)", MVC_FILES_MAX,
                          (unsigned)LIM_FILES_TOTAL_MAX);
    struct mvc_frame f;
    if (mv_vm_send(&h->vm, MVC_FILES, 0, b, len, NULL, 0, NULL, 0, err) < 0 ||
        read_status(h, clock_mono_ns() + (int64_t)MV_FILES_MS * 1000000, &f, err) < 0)
        return lost(h, ended, err);
    if (disk_exceeded(h, &f, ended))
        return refuse_dead(h, ended, err);
    if (f.u.status.file) {
        if (f.u.status.file > n) {
            plm_fail(err, EPROTO, PLM_E_UNAVAILABLE, "the guest named file %u of %zu",
                        f.u.status.file, n);
            return lost(h, ended, err);
        }
        const char *name = strerrorname_np((int)f.u.status.errnum);
        return plm_refuse(err, PLM_E_INVALID, PLM_REFUSAL_REQUEST,
                          "file %u of %zu could not be written (%s); the code did not run", f.u.status.file, n,
                          name ? name : "an unknown errno");
    }
    return 0;
}

/* After a call's answer: the guest's STATUS (its sweep done), the disk measured. The result in
 * out stands when the disk ends the session; a missing STATUS loses the call (out freed). */
static int after_call(struct plm_session *h, struct plm_result *out, enum plm_session_end *ended, struct plm_err *err)
{
    struct mvc_frame f;
    int r = read_status(h, clock_mono_ns() + (int64_t)MV_STATUS_MS * 1000000, &f, err);
    if (r == 0 && f.u.status.file != 0)
        r = plm_fail(err, EPROTO, PLM_E_UNAVAILABLE, "the guest reported a file after a call");
    if (r < 0) {
        plm_result_done(out);
        return lost(h, ended, err);
    }
    disk_exceeded(h, &f, ended);
    return 0;
}

int mv_session_run_cell(struct plm_provider *p, struct plm_session *h, const struct plm_run_ctx *ctx,
                        const struct plm_request *req, struct plm_result *out, enum plm_session_end *ended,
                        struct plm_err *err)
{
    struct mv_state *s = st_of(p);
    if (tier_check_floor(p->ops->tier(p), ctx->floor, err) < 0)
        return -1;
    bool py = !strcmp(req->cell.language, "python");
    if (!py && strcmp(req->cell.language, "javascript") != 0)
        return plm_refuse(err, PLM_E_INVALID, PLM_REFUSAL_REQUEST, "cell language must be javascript or python");
    if (py && !python_ok(s))
        return plm_refuse(err, PLM_E_UNSUPPORTED, PLM_REFUSAL_ENVIRONMENT,
                          "the startup proof found no python3 on the microvm disk; python cells cannot run");
    if (ctx->host_api) /* CellRun carries no grant; a grant here is the daemon's mistake */
        return plm_refuse(err, PLM_E_UNSUPPORTED, PLM_REFUSAL_UNSUPPORTED, "a cell carries no grant");
    size_t len = strnlen(req->cell.code, LIM_CODE_MAX + 1);
    if (len == 0 || len > LIM_CODE_MAX)
        return plm_refuse(err, PLM_E_INVALID, PLM_REFUSAL_REQUEST, "code must be 1..%u bytes", LIM_CODE_MAX);
    if (ready_for_call(h, ended, err) < 0)
        return -1;
    if (req->cell.n_files > 0 && put_files(h, req, ended, err) < 0)
        return -1;
    memset(out, 0, sizeof *out);
    uint32_t timeout = call_timeout(ctx);
    bool *live = py ? &h->live_py : &h->live_js;
    uint8_t fixed[MVC_CELL_FIXED];
    f16_put_u32(fixed, timeout);
    f16_put_u32(fixed + 4, py ? MVC_LANG_PY : MVC_LANG_JS);
    int64_t t0 = clock_mono_ns();
    int64_t bound = (int64_t)timeout + MV_SESSION_GRACE_MS + (py && !*live ? MV_SESSION_PY_START_MS : 0);
    struct mvc_frame f;
    if (mv_vm_send(&h->vm, MVC_CELL, 0, fixed, sizeof fixed, req->cell.code, len, NULL, 0, err) < 0 ||
        mv_vm_read(&h->vm, t0 + bound * 1000000, &f, err) < 0)
        return lost(h, ended, err);
    if (f.hdr.type != MVC_RESULT || f.hdr.seq != h->vm.seq) {
        plm_fail(err, EPROTO, PLM_E_UNAVAILABLE, "the guest answered a cell with frame type %u",
                    f.hdr.type);
        return lost(h, ended, err);
    }
    const struct qf_result *r = &f.u.result;
    bool interp_ended = r->flags & QF_RES_ENDED;
    out->kind = PLM_KIND_CELL;
    out->cell = (struct plm_cell_result){.exit_code = r->exit_code, .timed_out = r->flags & QF_RES_TIMED_OUT,
                                         .out_truncated = r->flags & QF_RES_OUT_TRUNC,
                                         .err_truncated = r->flags & QF_RES_ERR_TRUNC,
                                         .interpreter_started = !*live, .interpreter_ended = interp_ended};
    *live = !interp_ended;
    if (copy_out(&out->cell.out, r->out, r->out_len) < 0 || copy_out(&out->cell.err, r->err, r->err_len) < 0) {
        plm_result_done(out);
        mark_dead(h, PLM_END_BOUNDARY_FAILED, "out of memory after a cell"); /* its STATUS is still due */
        *ended = PLM_END_BOUNDARY_FAILED;
        return plm_fail(err, ENOMEM, PLM_E_INTERNAL, "out of memory after the cell");
    }
    int64_t ms = (clock_mono_ns() - t0) / 1000000;
    if (after_call(h, out, ended, err) < 0)
        return -1;
    return measured(p, out, ms);
}

int mv_session_run(struct plm_provider *p, struct plm_session *h, const struct plm_run_ctx *ctx,
                   const struct plm_request *req, struct plm_result *out, enum plm_session_end *ended,
                   struct plm_err *err)
{
    if (tier_check_floor(p->ops->tier(p), ctx->floor, err) < 0)
        return -1;
    if (req->kind != PLM_KIND_JAVASCRIPT || !req->js.code)
        return plm_refuse(err, PLM_E_UNSUPPORTED, PLM_REFUSAL_UNSUPPORTED,
                          "microvm sessions run snippets and cells; projects run as a Run");
    /* A grant is carried as a run's: the guest's run process relays its host calls over the
     * channel, answered here through the call's broker (run.c), which ends with the call. */
    const struct plm_host_api *api = ctx->host_api;
    if (req->js.grant_profile && req->js.grant_profile[0] && !api)
        return plm_fail(err, 0, PLM_E_INTERNAL, "grant_profile named but no host api capability was handed over; "
                                                "nothing ran");
    if (api && (!api->client_js || !api->call))
        return plm_fail(err, 0, PLM_E_INTERNAL, "incomplete host api capability; nothing ran");
    size_t len = strnlen(req->js.code, LIM_CODE_MAX + 1);
    if (len == 0 || len > LIM_CODE_MAX)
        return plm_refuse(err, PLM_E_INVALID, PLM_REFUSAL_REQUEST, "code must be 1..%u bytes", LIM_CODE_MAX);
    if (ready_for_call(h, ended, err) < 0)
        return -1;
    memset(out, 0, sizeof *out);
    uint32_t timeout = call_timeout(ctx);
    int64_t ms = 0;
    if (mv_run_snippet(st_of(p)->proj, &h->vm, req->js.code, len, api, timeout, &out->js, &ms, err) < 0)
        return lost(h, ended, err);
    out->kind = PLM_KIND_JAVASCRIPT;
    /* The host's own deadline passed (the guest's engine ends a run at its timeout): the guest is
     * stuck, so the session ends with this result. */
    if (out->js.timed_out && ms >= (int64_t)timeout + MV_GRACE_MS) {
        mark_dead(h, PLM_END_BOUNDARY_FAILED, "the session's VM did not end a snippet at its deadline");
        *ended = PLM_END_BOUNDARY_FAILED;
    } else if (after_call(h, out, ended, err) < 0) {
        return -1;
    }
    return measured(p, out, ms);
}

int mv_session_close(struct plm_provider *p, struct plm_session *h, struct plm_err *err)
{
    (void)p;
    (void)err;
    if (!h)
        return 0;
    mv_vm_kill(&h->vm); /* SIGKILL (a stopped QEMU too) and waitpid: gone when this returns */
    free(h);
    return 0;
}
