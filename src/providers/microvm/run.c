/* run.c: one snippet on one seeded VM: RUN out, then the guest's frames until its RESULT, with
 * a grant's HOST_CALLs answered through the daemon's broker on the way.
 * Owns: nothing beyond the call (the VM is the caller's, and is killed by it afterwards).
 * Trusts: every guest frame only after mvc_decode_guest; host-call numbering is re-checked here.
 * Invariant: the run is bounded by its timeout + MV_GRACE_MS on the host side whatever the guest
 *   does; every failure after RUN was sent is an error without a refusal (code may have run). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "../../core/limits.h"
#include "mv_int.h"

static int copy_bytes(struct plm_bytes *b, const uint8_t *p, uint32_t n)
{
    b->data = malloc(n ? n : 1);
    if (!b->data)
        return -1;
    memcpy(b->data, p, n);
    b->len = n;
    return 0;
}

static int answer_host_call(struct mv_vm *vm, uint64_t run_seq, const struct qf_host_call *hc, const struct plm_host_api *api,
                            int64_t deadline_ns, struct plm_err *err)
{
    uint8_t fixed[QF_HOST_REPLY_FIXED];
    if (clock_mono_ns() >= deadline_ns) {
        qf_host_reply_encode_fixed(fixed, hc->call_no, 0, QF_HR_DEADLINE, 0);
        return mv_vm_send(vm, MVC_HOST_REPLY, run_seq, fixed, sizeof fixed, NULL, 0, NULL, 0, err);
    }
    char method[QF_HOST_METHOD_MAX + 1], *path = malloc(hc->path_len + 1);
    if (!path)
        return plm_fail(err, ENOMEM, PLM_E_INTERNAL, "microvm: out of memory");
    memcpy(method, hc->method, hc->method_len);
    method[hc->method_len] = 0;
    memcpy(path, hc->path, hc->path_len);
    path[hc->path_len] = 0;
    struct plm_host_reply rep = {0};
    api->call(api->cb_ctx, method, path, hc->body_len ? hc->body : NULL, hc->body_len, &rep);
    free(path);
    free(rep.content_type);
    size_t blen = rep.len > QF_HOST_REPLY_MAX ? QF_HOST_REPLY_MAX : rep.len;
    uint32_t status = rep.status >= 100 && rep.status <= 599 ? (uint32_t)rep.status : 502;
    qf_host_reply_encode_fixed(fixed, hc->call_no, status, 0, (uint32_t)blen);
    int r = mv_vm_send(vm, MVC_HOST_REPLY, run_seq, fixed, sizeof fixed, rep.body, blen, NULL, 0, err);
    free(rep.body);
    return r;
}

int mv_run_snippet(struct mv_state *s, struct mv_vm *vm, const char *code, size_t len, const struct plm_host_api *api,
                   uint32_t timeout_ms, struct plm_js_result *out, int64_t *ms, struct plm_err *err)
{
    (void)s;
    memset(out, 0, sizeof *out);
    int64_t t0 = clock_mono_ns();
    int64_t run_deadline = t0 + (int64_t)timeout_ms * 1000000;
    int64_t hard_deadline = run_deadline + (int64_t)MV_GRACE_MS * 1000000;
    const char *client = api ? api->client_js : NULL;
    size_t client_len = client ? strlen(client) : 0;
    if (client_len > QF_CLIENT_MAX)
        return plm_fail(err, 0, PLM_E_INTERNAL, "microvm: grant client too large; nothing ran");
    uint8_t fixed[QF_RUN_FIXED];
    qf_run_encode_fixed(fixed, timeout_ms, api ? QF_RUN_GRANT : 0, (uint32_t)client_len);
    if (mv_vm_send(vm, MVC_RUN, 0, fixed, sizeof fixed, client, client_len, code, len, err) < 0)
        return plm_err_wrap(err, "send the run");
    uint64_t run_seq = vm->seq;
    uint32_t calls = 0;
    for (;;) {
        struct mvc_frame f;
        if (mv_vm_read(vm, hard_deadline, &f, err) < 0) {
            if (err->errnum == ETIMEDOUT) {
                /* The guest ran past its deadline and the grace: the host ends it. */
                plm_err_clear(err);
                out->timed_out = true;
                out->exit_code = 124;
                *ms = (clock_mono_ns() - t0) / 1000000;
                return 0;
            }
            return -1;
        }
        if (f.hdr.seq != run_seq)
            return plm_fail(err, EPROTO, PLM_E_UNAVAILABLE, "microvm: guest frame for another request");
        switch (f.hdr.type) {
        case MVC_RESULT: {
            const struct qf_result *res = &f.u.result;
            if (copy_bytes(&out->out, res->out, res->out_len) < 0 || copy_bytes(&out->err, res->err, res->err_len) < 0) {
                plm_bytes_done(&out->out);
                plm_bytes_done(&out->err);
                return plm_fail(err, ENOMEM, PLM_E_INTERNAL, "microvm: out of memory");
            }
            out->exit_code = res->exit_code;
            out->timed_out = res->flags & QF_RES_TIMED_OUT;
            out->out_truncated = res->flags & QF_RES_OUT_TRUNC;
            out->err_truncated = res->flags & QF_RES_ERR_TRUNC;
            *ms = (clock_mono_ns() - t0) / 1000000;
            return 0;
        }
        case MVC_HOST_CALL:
            if (!api || f.u.host_call.call_no != calls + 1)
                return plm_fail(err, EPROTO, PLM_E_UNAVAILABLE,
                                   "microvm: host call %s", api ? "out of order" : "without a grant");
            calls++;
            if (answer_host_call(vm, run_seq, &f.u.host_call, api, run_deadline, err) < 0)
                return -1;
            break;
        case MVC_DIED:
            /* Killed by a signal inside the guest (its OOM killer, most likely): the code ran and
             * ended, as a process killed by a signal does (exit 128 + signal, no output kept). */
            if (WIFSIGNALED(f.u.died_status)) {
                out->exit_code = 128 + WTERMSIG(f.u.died_status);
                *ms = (clock_mono_ns() - t0) / 1000000;
                return 0;
            }
            return plm_fail(err, 0, PLM_E_UNAVAILABLE,
                               "microvm: the guest's run process ended without a result (wait status %d)",
                               f.u.died_status);
        default:
            return plm_fail(err, EPROTO, PLM_E_UNAVAILABLE, "microvm: unexpected guest frame type %u",
                               f.hdr.type);
        }
    }
}

static void put_u32(uint8_t *p, uint32_t v)
{
    f16_put_u32(p, v);
}

/* The plan as one PROJECT payload (vmchan.h); sizes were validated by the daemon (§1.4). */
static uint8_t *encode_plan(const struct plm_request *req, uint32_t timeout_ms, size_t *len)
{
    size_t n = 16;
    for (size_t i = 0; i < req->project.n_files; i++)
        n += 8 + strlen(req->project.files[i].path) + strlen(req->project.files[i].content);
    for (size_t i = 0; i < req->project.n_steps; i++)
        n += 4 + strlen(req->project.steps[i]);
    for (size_t i = 0; i < req->project.n_artifacts; i++)
        n += 4 + strlen(req->project.artifacts[i]);
    if (n > MVC_PROJECT_MAX)
        return NULL;
    uint8_t *b = malloc(n), *p = b;
    if (!b)
        return NULL;
#define PUT_STR(s)                                                                                                     \
    do {                                                                                                               \
        size_t l_ = strlen(s);                                                                                         \
        put_u32(p, (uint32_t)l_);                                                                                      \
        memcpy(p + 4, s, l_);                                                                                          \
        p += 4 + l_;                                                                                                   \
    } while (0)
    put_u32(p, timeout_ms);
    put_u32(p + 4, (uint32_t)req->project.n_files);
    p += 8;
    for (size_t i = 0; i < req->project.n_files; i++) {
        PUT_STR(req->project.files[i].path);
        PUT_STR(req->project.files[i].content);
    }
    put_u32(p, (uint32_t)req->project.n_steps);
    p += 4;
    for (size_t i = 0; i < req->project.n_steps; i++)
        PUT_STR(req->project.steps[i]);
    put_u32(p, (uint32_t)req->project.n_artifacts);
    p += 4;
    for (size_t i = 0; i < req->project.n_artifacts; i++)
        PUT_STR(req->project.artifacts[i]);
#undef PUT_STR
    *len = (size_t)(p - b);
    return b;
}

static int set_outcome(struct plm_project_result *pr, enum plm_outcome o, const char *detail)
{
    pr->outcome = o;
    free(pr->detail);
    pr->detail = detail ? strdup(detail) : NULL;
    return detail && !pr->detail ? -1 : 0;
}

static int copy_project(const struct mvc_frame *f, const struct plm_request *req, struct plm_project_result *pr)
{
    struct mvc_project_walk w;
    mvc_project_walk_init(&w, f);
    uint32_t ns = f->u.project.n_steps, na = f->u.project.n_artifacts;
    if (ns > req->project.n_steps)
        return -2; /* more steps than were asked for: a lying guest */
    pr->steps = calloc(ns ? ns : 1, sizeof *pr->steps);
    pr->artifacts = calloc(na ? na : 1, sizeof *pr->artifacts);
    if (!pr->steps || !pr->artifacts)
        return -1;
    int timed_out_step = 0;
    struct mvc_step s;
    while (pr->n_steps < ns && mvc_project_next_step(&w, &s) == 1) {
        struct plm_step_result *sr = &pr->steps[pr->n_steps];
        const char *cmd = req->project.steps[pr->n_steps];
        sr->command = strndup(cmd, LIM_STEP_MAX);
        if (!sr->command || copy_bytes(&sr->out, s.out, s.out_len) < 0 || copy_bytes(&sr->err, s.err, s.err_len) < 0)
            return -1;
        pr->n_steps++;
        sr->exit_code = s.exit_code;
        sr->timed_out = s.timed_out;
        sr->out_truncated = s.out_truncated;
        sr->err_truncated = s.err_truncated;
        sr->duration_ms = s.ms;
        if (s.timed_out && !timed_out_step)
            timed_out_step = (int)pr->n_steps;
    }
    struct mvc_artifact a;
    while (pr->n_artifacts < na && mvc_project_next_artifact(&w, &a) == 1) {
        struct plm_artifact *ar = &pr->artifacts[pr->n_artifacts];
        ar->path = strndup((const char *)a.path, a.path_len);
        if (!ar->path || copy_bytes(&ar->content, a.content, a.len) < 0)
            return -1;
        pr->n_artifacts++;
    }
    pr->artifacts_truncated = f->u.project.artifacts_truncated;
    if (f->u.project.error_len) {
        char *e = strndup((const char *)f->u.project.error, f->u.project.error_len);
        if (!e)
            return -1;
        int r = set_outcome(pr, PLM_OUTCOME_SETUP_FAILED, e);
        free(e);
        return r;
    }
    if (timed_out_step) {
        char d[64];
        snprintf(d, sizeof d, "step %d exceeded its time budget", timed_out_step);
        return set_outcome(pr, PLM_OUTCOME_TIMED_OUT, d);
    }
    return set_outcome(pr, PLM_OUTCOME_COMPLETED, NULL);
}

int mv_run_project(struct mv_state *s, struct mv_vm *vm, const struct plm_request *req, uint32_t timeout_ms,
                   struct plm_project_result *pr, int64_t *ms, struct plm_err *err)
{
    (void)s;
    memset(pr, 0, sizeof *pr);
    int64_t t0 = clock_mono_ns();
    /* The outer budget is the project's timeout plus 5 s of grace (providers.md §3.5). */
    int64_t hard_deadline = t0 + ((int64_t)timeout_ms + 5000) * 1000000;
    size_t len = 0;
    uint8_t *plan = encode_plan(req, timeout_ms, &len);
    if (!plan)
        return plm_fail(err, ENOMEM, PLM_E_INTERNAL, "microvm: project plan; nothing ran");
    int r = mv_vm_send(vm, MVC_PROJECT, 0, plan, len, NULL, 0, NULL, 0, err);
    free(plan);
    if (r < 0)
        return plm_err_wrap(err, "send the project");
    uint64_t run_seq = vm->seq;
    struct mvc_frame f;
    r = mv_vm_read(vm, hard_deadline, &f, err);
    *ms = (clock_mono_ns() - t0) / 1000000;
    if (r < 0 && err->errnum == ETIMEDOUT) {
        plm_err_clear(err);
        return set_outcome(pr, PLM_OUTCOME_TIMED_OUT, "run exceeded the time budget") < 0
                   ? plm_fail(err, ENOMEM, PLM_E_INTERNAL, "out of memory")
                   : 0;
    }
    /* The VM launched and took the plan: anything but a valid report is a protocol error. */
    if (r < 0 || f.hdr.seq != run_seq || f.hdr.type != MVC_PROJECT_RESULT) {
        /* The reason stays in the detail (bounded): a startup proof that fails this way under
         * load must say whether the channel broke, the guest answered out of turn, or its
         * runner died. */
        char d[160];
        if (r == 0 && f.hdr.type == MVC_DIED)
            snprintf(d, sizeof d, "the runner did not report");
        else if (r == 0)
            snprintf(d, sizeof d, "could not parse sandbox result (frame type %u, seq %llu for %llu)",
                     (unsigned)f.hdr.type, (unsigned long long)f.hdr.seq, (unsigned long long)run_seq);
        else
            snprintf(d, sizeof d, "could not parse sandbox result (%.100s)", err->msg);
        plm_err_clear(err);
        return set_outcome(pr, PLM_OUTCOME_PROTOCOL_ERROR, d) < 0
                   ? plm_fail(err, ENOMEM, PLM_E_INTERNAL, "out of memory")
                   : 0;
    }
    int c = copy_project(&f, req, pr);
    if (c == -2) {
        struct plm_result tmp = {.kind = PLM_KIND_PROJECT, .project = *pr};
        plm_result_done(&tmp);
        memset(pr, 0, sizeof *pr);
        return set_outcome(pr, PLM_OUTCOME_PROTOCOL_ERROR, "could not parse sandbox result");
    }
    if (c < 0)
        return plm_fail(err, ENOMEM, PLM_E_INTERNAL, "microvm: out of memory after the project");
    return 0;
}
