/* project.c: a multi-file project driven by the in-container runner (providers.md §3.5).
 * Owns: the per-run report key, the plan, the run's box, and the result it fills.
 * Trusts: only a report frame that carries the key's MAC; nothing else the container prints
 * (step output reaches us only inside the runner's authenticated body).
 * Invariant: the key is 32 fresh bytes from getrandom(), sent first on the container's stdin and
 * wiped from our memory before we return; it never appears in argv, ENV, labels or logs; the
 * outcome follows the table of §3.5 in its order; the container is removed before we return;
 * a granted run's socket (hostsock.h) lives from before the container until the run ends. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../core/limits.h"
#include "../../core/pylang.h"
#include "internal.h"

static char *dup_s(const char *s)
{
    return strdup(s);
}

int dock_project_outcome(const struct dock_project_end *e, struct plm_project_result *pr, struct plm_err *err)
{
    char buf[96];
    const char *detail = "";
    bool drop_steps = true; /* (spec) timed_out and protocol_error carry no steps */
    if (e->deadline_passed && !e->marked)
        return plm_fail(err, ETIMEDOUT, PLM_E_INTERNAL, "project: the sandbox did not start before the run ended");
    if (e->report == DOCK_REPORT_NONE && !e->marked && !e->deadline_passed)
        return plm_fail(err, 0, PLM_E_INTERNAL, "project: docker failed before the runner started");
    if (e->deadline_passed) {
        pr->outcome = PLM_OUTCOME_TIMED_OUT;
        detail = "run exceeded the time budget";
    } else if (e->report == DOCK_REPORT_NONE) {
        pr->outcome = PLM_OUTCOME_PROTOCOL_ERROR;
        if (e->have_exit) {
            snprintf(buf, sizeof buf, "the runner did not report (container exit %lld)", (long long)e->exit_code);
            detail = buf;
        } else {
            detail = "the runner did not report";
        }
    } else if (e->report == DOCK_REPORT_FORGED) {
        pr->outcome = PLM_OUTCOME_PROTOCOL_ERROR;
        detail = "no authenticated runner report";
    } else if (!e->decoded) {
        pr->outcome = PLM_OUTCOME_PROTOCOL_ERROR;
        detail = "could not parse sandbox result";
    } else {
        drop_steps = false; /* the runner's authenticated report stands */
        if (e->error) {
            pr->outcome = PLM_OUTCOME_SETUP_FAILED;
            detail = e->error;
        } else if (e->timed_out_step) {
            pr->outcome = PLM_OUTCOME_TIMED_OUT;
            snprintf(buf, sizeof buf, "step %d exceeded its time budget", e->timed_out_step);
            detail = buf;
        } else {
            pr->outcome = PLM_OUTCOME_COMPLETED;
        }
    }
    if (drop_steps) {
        enum plm_outcome o = pr->outcome;
        dock_project_result_done(pr);
        pr->outcome = o;
    }
    free(pr->detail);
    pr->detail = dup_s(detail);
    if (!pr->detail)
        return plm_fail(err, ENOMEM, PLM_E_INTERNAL, "out of memory");
    return 0;
}

struct plan {
    uint8_t *p;
    size_t len, cap;
    bool bad;
};

static void put(struct plan *pl, const void *data, size_t n)
{
    if (pl->bad || n > pl->cap - pl->len) {
        pl->bad = true;
        return;
    }
    memcpy(pl->p + pl->len, data, n);
    pl->len += n;
}

static void put_u32(struct plan *pl, uint32_t v)
{
    uint8_t b[4];
    rw_put_u32(b, v);
    put(pl, b, 4);
}

static void put_field(struct plan *pl, const char *s)
{
    size_t n = strlen(s);
    if (n > UINT32_MAX) {
        pl->bad = true;
        return;
    }
    put_u32(pl, (uint32_t)n);
    put(pl, s, n);
}

int dock_plan_encode(const uint8_t key[RW_KEY_LEN], uint32_t step_timeout_ms, const struct plm_request *req,
                     uint8_t **out, size_t *len, struct plm_err *err)
{
    /* Sized before allocating: every count and length was validated (limits.h), so the sum is
     * bounded; overflow is still checked. */
    size_t need = RW_KEY_LEN + RW_MAGIC_LEN + 16;
    for (size_t i = 0; i < req->project.n_files; i++)
        if (__builtin_add_overflow(need, 8 + strlen(req->project.files[i].path) + strlen(req->project.files[i].content),
                                   &need))
            need = SIZE_MAX;
    for (size_t i = 0; i < req->project.n_steps; i++)
        if (__builtin_add_overflow(need, 4 + strlen(req->project.steps[i]), &need))
            need = SIZE_MAX;
    for (size_t i = 0; i < req->project.n_artifacts; i++)
        if (__builtin_add_overflow(need, 4 + strlen(req->project.artifacts[i]), &need))
            need = SIZE_MAX;
    if (need > RW_KEY_LEN + RW_PLAN_MAX || req->project.n_files > RW_FILES_MAX || req->project.n_steps > RW_STEPS_MAX ||
        req->project.n_steps == 0 || req->project.n_artifacts > RW_ARTIFACTS_MAX)
        return plm_refuse(err, PLM_E_INVALID, PLM_REFUSAL_REQUEST, "project plan exceeds the runner's limits");
    struct plan pl = {.p = malloc(need), .cap = need};
    if (!pl.p)
        return plm_fail(err, ENOMEM, PLM_E_INTERNAL, "out of memory");
    put(&pl, key, RW_KEY_LEN);
    put(&pl, RW_PLAN_MAGIC, RW_MAGIC_LEN);
    put_u32(&pl, step_timeout_ms);
    put_u32(&pl, (uint32_t)req->project.n_files);
    for (size_t i = 0; i < req->project.n_files; i++) {
        put_field(&pl, req->project.files[i].path);
        put_field(&pl, req->project.files[i].content);
    }
    put_u32(&pl, (uint32_t)req->project.n_steps);
    for (size_t i = 0; i < req->project.n_steps; i++)
        put_field(&pl, req->project.steps[i]);
    put_u32(&pl, (uint32_t)req->project.n_artifacts);
    for (size_t i = 0; i < req->project.n_artifacts; i++)
        put_field(&pl, req->project.artifacts[i]);
    if (pl.bad) {
        explicit_bzero(pl.p, pl.cap);
        free(pl.p);
        return plm_fail(err, EMSGSIZE, PLM_E_INTERNAL, "project plan encoding overflowed");
    }
    *out = pl.p;
    *len = pl.len;
    return 0;
}

struct proj_io {
    struct dock_bytes out, err;
    size_t scan;
    bool complete;
};
static void proj_io_done(struct proj_io *c)
{
    dock_bytes_done(&c->out);
    dock_bytes_done(&c->err);
}
#define cleanup_proj_io __attribute__((cleanup(proj_io_done)))

/* The plan carries the run's key: wiped before it is freed. */
struct key_plan {
    uint8_t key[RW_KEY_LEN];
    uint8_t *plan;
    size_t len;
};
static void key_plan_wipe(struct key_plan *kp)
{
    explicit_bzero(kp->key, sizeof kp->key);
    if (kp->plan) {
        explicit_bzero(kp->plan, kp->len);
        free(kp->plan);
        kp->plan = NULL;
    }
}
#define cleanup_key_plan __attribute__((cleanup(key_plan_wipe)))

static void proj_sink(void *ctx, int stream, const uint8_t *p, size_t n)
{
    struct proj_io *c = ctx;
    dock_bytes_add(stream == DOCK_STDERR ? &c->err : &c->out, p, n);
    if (stream == DOCK_STDOUT && !c->complete)
        c->complete = dock_report_complete(c->out.data, c->out.len, &c->scan);
}

/* The runner exits right after its report: stop reading then, not when dockerd notices. */
static bool proj_done(void *ctx)
{
    return ((struct proj_io *)ctx)->complete;
}

int dock_run_project(struct dock_state *s, const struct plm_run_ctx *ctx, const struct plm_request *req,
                     struct plm_result *out, struct plm_err *err)
{
    if (dock_run_gate(s, ctx, req, err) < 0)
        return -1;
    if (plm_project_is_python(req) && !atomic_load(&s->python_proven))
        return plm_refuse(err, PLM_E_UNSUPPORTED, PLM_REFUSAL_UNSUPPORTED,
                          "a step runs python, and the startup proof found no python3 with numpy, pandas and "
                          "matplotlib in the project image (see the evidence card); nothing ran");
    uint32_t timeout = plm_clamp_timeout((int32_t)ctx->timeout_ms, DOCK_PROJECT_DEFAULT_MS, DOCK_PROJECT_MAX_MS);
    return dock_project_exec(s, timeout, req, ctx->host_api, out, err);
}

static int project_run(struct dock_state *s, enum dock_kind k, uint32_t timeout, const struct plm_request *req,
                       const struct dock_grant_paths *g, struct plm_result *out, struct plm_err *err);

int dock_project_exec_in(struct dock_state *s, enum dock_kind k, uint32_t timeout, const struct plm_request *req,
                         struct plm_result *out, struct plm_err *err)
{
    return project_run(s, k, timeout, req, NULL, out, err);
}

int dock_project_exec(struct dock_state *s, uint32_t timeout, const struct plm_request *req,
                      const struct plm_host_api *api, struct plm_result *out, struct plm_err *err)
{
    if (!api)
        return project_run(s, DOCK_PROJECT, timeout, req, NULL, out, err);
    /* as for snippets: the socket lives exactly from before the container to the end of the run */
    struct dock_hostsock *hs = NULL;
    if (dock_hostsock_start(s->hs_base, api, NULL, &hs, err) < 0)
        return plm_err_wrap(err, "project");
    struct dock_grant_paths g = {.sock = dock_hostsock_sock_path(hs), .preload = dock_hostsock_preload_path(hs)};
    int r = project_run(s, DOCK_PROJECT, timeout, req, &g, out, err);
    dock_hostsock_stop(hs);
    return r;
}

static int project_run(struct dock_state *s, enum dock_kind k, uint32_t timeout, const struct plm_request *req,
                       const struct dock_grant_paths *g, struct plm_result *out, struct plm_err *err)
{
    struct key_plan kp cleanup_key_plan = {.plan = NULL};
    if (dock_random(kp.key, sizeof kp.key) < 0)
        return plm_fail(err, errno, PLM_E_INTERNAL, "getrandom failed");
    if (dock_plan_encode(kp.key, timeout, req, &kp.plan, &kp.len, err) < 0)
        return -1;
    struct dock_box *b = NULL;
    /* a module container is never pooled (its image is its own and runs are rare) */
    if (dock_box_acquire(s, k, NULL, 0, k == DOCK_PROJECT, g, &b, err) < 0)
        return plm_err_wrap(err, "project");
    struct proj_io c cleanup_proj_io = {.out = {.max = RW_STDOUT_MAX}, .err = {.max = LIM_OUTPUT_MAX}};
    proj_sink(&c, DOCK_STDOUT, b->early_out.data, b->early_out.len);
    struct dock_io io = {
        .in = kp.plan, .in_len = kp.len, .close_in = true, .sink = proj_sink, .stop = proj_done, .ctx = &c};
    int r = dock_attach_pump(&b->at, &io, (int64_t)clock_mono_ms() + timeout + DOCK_PROJECT_GRACE_MS, err);
    struct dock_project_end e = {.marked = true, .deadline_passed = r == 0 && !c.complete};
    e.have_exit = r == 1 && dock_container_wait(&s->eng, b->id, 10000, &e.exit_code, err) == 0;
    dock_box_release(s, b);
    if (r < 0)
        return plm_err_wrap(err, "project: the container's stream failed");
    const uint8_t *body = NULL;
    size_t body_len = 0;
    e.report = dock_report_find(c.out.data, c.out.len, kp.key, &body, &body_len);
    key_plan_wipe(&kp); /* the key is not needed past the MAC: wiped now, not at scope exit */
    char *setup_error cleanup_free = NULL;
    struct plm_project_result pr = {0};
    if (e.report == DOCK_REPORT_OK && !e.deadline_passed) {
        e.decoded = dock_report_decode(body, body_len, req->project.steps, req->project.n_steps, req->project.artifacts,
                                       req->project.n_artifacts, &pr, &setup_error) == 0;
        e.error = setup_error;
        for (size_t i = 0; e.decoded && i < pr.n_steps && !e.timed_out_step; i++)
            if (pr.steps[i].timed_out)
                e.timed_out_step = (int)i + 1;
    }
    int rc = dock_project_outcome(&e, &pr, err);
    if (rc < 0) {
        dock_project_result_done(&pr);
        return -1;
    }
    out->kind = PLM_KIND_PROJECT;
    out->project = pr;
    out->tier = dock_tier(s); /* the daemon stamps the image and identity Describe states */
    return 0;
}
