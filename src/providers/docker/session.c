/* session.c: sessions on the docker provider (docs/sessions.md): one container per session, from
 * the session image, under the same lockdown as every run (lockdown.c: read-only root, no
 * network, every capability dropped, seccomp under runc, memory/pids limits, the labels the
 * sweeps look for), living as long as the session. Its main process is the agent
 * (images/session/agent.py), which keeps one interpreter per language alive between cells.
 * The host talks to it over the container's attach stream, kept open from the start: a cell is
 * one request frame on stdin and one reply frame on stdout (sessframe.h), no `docker exec`.
 * Owns: the session's container (removed by dock_session_close on every path; the labelled sweeps
 * reap one a crashed daemon left behind) and its attach connection.
 * Trusts: nothing the container writes: replies are decoded with bounds (sessframe.c) under a
 * deadline, and a stream that ends, stalls or carries anything but the one expected reply ends
 * the session (MAIN_PROCESS_ENDED when the container is gone, BOUNDARY_FAILED otherwise).
 * Invariant: one call at a time per session (the daemon's turn); a session's calls touch only
 * its own container, so a guest can block or break nothing but its own session. */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "../../core/limits.h"
#include "internal.h"
#include "session_grant.h"
#include "sessframe.h"

#define AGENT_PATH "/opt/plimsoll/session/agent.py"
#define READY_MS 30000      /* the agent's first frame after the start marker */
#define CALL_SLACK_MS 10000 /* past the call's own timeout: the interrupt grace, sweep and reply */
#define LABEL_SLACK_S 60    /* the container's label deadline: the session's end plus this */

struct plm_session {
    struct dock_state *st;
    struct dock_box *box;
    struct dock_bytes in; /* stdout bytes not yet decoded */
    uint64_t next_id, disk_bytes;
    bool paused;
    enum plm_session_end dead; /* set once the container cannot serve another call */
    json_t *proven; /* the read-back taken at open (readback.c); compared before each call */
    char dead_why[120];
    /* The grant transport (session_grant.c): the host directory mounted at DOCK_SG_DIR_IN ("" when
     * the provider proved no grant socket), and whether the agent said it runs granted snippets. */
    char grant_dir[108];
    bool agent_grants;
};

static struct dock_state *state_of(struct plm_provider *p)
{
    return p->state;
}

static const char *const session_languages[] = {"javascript", "python", NULL};

void dock_session_env(struct plm_provider *p, struct plm_payload_env *e)
{
    struct dock_state *s = state_of(p);
    memset(e, 0, sizeof *e);
    if (atomic_load(&s->proven) && s->id[DOCK_SESSION][0]) {
        snprintf(e->identity, sizeof e->identity, "docker-image:%s", s->id[DOCK_SESSION]);
        snprintf(e->software_identity, sizeof e->software_identity, "%s", s->software_identity[DOCK_SESSION]);
    }
    e->default_timeout_ms = DOCK_PROJECT_DEFAULT_MS;
    e->max_timeout_ms = DOCK_PROJECT_MAX_MS;
    /* python only where a session container's Python cell imported the data libraries (pyproof.c) */
    size_t n = 0;
    for (size_t i = 0; session_languages[i]; i++)
        if (strcmp(session_languages[i], "python") != 0 || atomic_load(&s->session_python_proven))
            e->languages[n++] = session_languages[i];
}

/* ---- the channel -------------------------------------------------------------------------------- */

struct chan_ctx {
    struct plm_session *h;
    struct dock_sf_reply *rep;
    int state; /* 0 waiting, 1 a reply decoded, -1 malformed */
};

static void chan_sink(void *ctx, int stream, const uint8_t *p, size_t n)
{
    struct chan_ctx *c = ctx;
    if (stream == DOCK_STDOUT)
        dock_bytes_add(&c->h->in, p, n); /* stderr (the agent's own) is not part of the protocol */
}

static bool chan_try(struct chan_ctx *c)
{
    struct dock_bytes *b = &c->h->in;
    if (c->state)
        return true;
    if (b->truncated || b->oom) {
        c->state = -1;
        return true;
    }
    if (!b->len)
        return false;
    size_t used = 0;
    int r = dock_sf_parse(b->data, b->len, &used, c->rep);
    if (r == 0)
        return false;
    if (r > 0) {
        memmove(b->data, b->data + used, b->len - used);
        b->len -= used;
    }
    c->state = r > 0 ? 1 : -1;
    return true;
}

static bool chan_stop(void *ctx)
{
    return chan_try(ctx);
}

static void mark_dead(struct plm_session *h, enum plm_session_end e, const char *why)
{
    if (h->dead == PLM_END_NONE) {
        h->dead = e;
        snprintf(h->dead_why, sizeof h->dead_why, "%.119s", why);
    }
}

/* After the stream failed: MAIN_PROCESS_ENDED when dockerd says the container no longer runs
 * (killed from outside, its agent ended, out of memory), BOUNDARY_FAILED otherwise. */
static enum plm_session_end classify_loss(struct plm_session *h)
{
    json_t *j = NULL;
    struct plm_err e = {0};
    if (dock_container_inspect(&h->st->eng, h->box->id, &j, &e) < 0)
        return PLM_END_MAIN_PROCESS_ENDED; /* 404: the container is gone */
    json_t *running = json_object_get(json_object_get(j, "State"), "Running");
    bool up = json_is_true(running);
    json_decref(j);
    return up ? PLM_END_BOUNDARY_FAILED : PLM_END_MAIN_PROCESS_ENDED;
}

/* Sends one request and waits for its reply until deadline_ms. 0 with rep filled; otherwise -1
 * with err, the session marked dead and *ended set. *sent says whether any byte of the request
 * left (before that, nothing of the call can have run). */
static int chan_call(struct plm_session *h, const uint8_t *frame, size_t len, uint64_t id, int64_t deadline_ms,
                     struct dock_sf_reply *rep, bool *sent, enum plm_session_end *ended, struct plm_err *err)
{
    struct chan_ctx c = {.h = h, .rep = rep};
    struct dock_io io = {.in = frame, .in_len = len, .sink = chan_sink, .stop = chan_stop, .ctx = &c};
    int r = dock_attach_pump(&h->box->at, &io, deadline_ms, err);
    *sent = io.in_off > 0;
    if (c.state == 1 && rep->id == id && rep->status != DOCK_SF_READY)
        return 0;
    if (c.state == 1)
        dock_sf_reply_done(rep);
    /* Each outcome below can be the guest's doing (its code runs as the agent's uid, can write to
     * the agent's stdout through /proc/1/fd/1 or kill it), so none is `internal`: the session
     * ends, the call is answered as unanswered (its code may have run) with the session's end. */
    enum plm_session_end why;
    if (c.state != 0) {
        why = PLM_END_BOUNDARY_FAILED;
        plm_fail(err, EPROTO, PLM_E_ENDED,
                 "the session's agent wrote something other than the reply it owed; the session ended");
    } else if (r == 0) {
        why = PLM_END_BOUNDARY_FAILED;
        plm_fail(err, ETIMEDOUT, PLM_E_DEADLINE,
                 "the session's agent did not answer within the call's time and its grace");
    } else {
        why = classify_loss(h);
        plm_fail(err, EPIPE, PLM_E_UNAVAILABLE, "the session's container %s during the call",
                 why == PLM_END_MAIN_PROCESS_ENDED ? "ended" : "stopped answering");
    }
    mark_dead(h, why, err->msg);
    *ended = why;
    return -1;
}

/* Before a call: the container must still be there and silent. A stream that ended or carries
 * bytes nobody asked for (a guest process writing to the agent's stdout between calls) means no
 * clean sandbox for the call: refused, nothing ran, the session ends. */
static int chan_check_idle(struct plm_session *h, enum plm_session_end *ended, struct plm_err *err)
{
    if (h->dead == PLM_END_NONE && dock_attach_stirred(&h->box->at)) {
        struct dock_sf_reply rep = {0};
        struct chan_ctx c = {.h = h, .rep = &rep};
        struct dock_io io = {.sink = chan_sink, .stop = chan_stop, .ctx = &c};
        struct plm_err e = {0};
        int r = dock_attach_pump(&h->box->at, &io, (int64_t)clock_mono_ms() + 100, &e);
        dock_sf_reply_done(&rep);
        if (r != 0 || h->box->at.eof)
            mark_dead(h, classify_loss(h), "the session's container ended between calls");
        else if (h->in.len || c.state)
            mark_dead(h, PLM_END_BOUNDARY_FAILED, "the session's container wrote to the agent's channel between calls");
    }
    if (h->dead == PLM_END_NONE)
        return 0;
    *ended = h->dead;
    return plm_refuse(err, PLM_E_ENDED, PLM_REFUSAL_REQUEST, "the session has ended (%s): %s",
                      plm_session_end_name(h->dead), h->dead_why);
}

static int resume(struct plm_session *h, enum plm_session_end *ended, struct plm_err *err)
{
    if (!h->paused)
        return 0;
    char path[160];
    snprintf(path, sizeof path, DOCK_API "/containers/%s/unpause", h->box->id);
    struct dock_reply r;
    struct plm_err e = {0};
    long status = dock_call(&h->st->eng, "POST", path, NULL, 10000, 64 * 1024, &r, &e) < 0 ? 0 : r.status;
    if (status)
        dock_reply_done(&r);
    if (status != 204) {
        mark_dead(h, status == 404 ? PLM_END_MAIN_PROCESS_ENDED : PLM_END_BOUNDARY_FAILED,
                  "the suspended container could not be resumed");
        *ended = h->dead;
        return plm_refuse(err, PLM_E_ENDED, PLM_REFUSAL_REQUEST, "the session has ended (%s): %s",
                          plm_session_end_name(h->dead), h->dead_why);
    }
    h->paused = false;
    return 0;
}

/* Before a call: the container must still be the one proven at open (readback.c). A difference
 * ends the session SANDBOX_CHANGED; an inspect that cannot be read refuses this call only. */
static int read_back(struct dock_state *s, struct plm_session *h, enum plm_session_end *ended, struct plm_err *err)
{
    char what[32];
    int r = h->proven ? dock_readback_check(&s->eng, h->box->id, h->proven, what, sizeof what, err) : 0;
    if (r <= 0)
        return r;
    char why[120];
    snprintf(why, sizeof why, "the container's %s changed after the session was opened", what);
    mark_dead(h, PLM_END_SANDBOX_CHANGED, why);
    *ended = h->dead;
    return plm_refuse(err, PLM_E_ENDED, PLM_REFUSAL_REQUEST, "the session has ended (%s): %s",
                      plm_session_end_name(h->dead), h->dead_why);
}

/* ---- open, close, suspend --------------------------------------------------------------------- */

static void session_free(struct dock_state *s, struct plm_session *h)
{
    if (!h)
        return;
    if (h->box) {
        dock_attach_close(&h->box->at);
        struct plm_err e = {0};
        if (h->box->id[0] && dock_container_remove(&s->eng, h->box->id, 3, &e) == 0)
            h->box->id[0] = 0; /* removed here: nothing left for the reapers */
        dock_box_release(s, h->box); /* queues what could not be removed yet */
    }
    dock_sg_dir_remove(h->grant_dir); /* after the container: nothing serves from it any more */
    dock_bytes_done(&h->in);
    json_decref(h->proven);
    free(h);
}

/* The one owner of a session being started: session_free() at scope exit unless taken. */
struct session_hold {
    struct dock_state *s;
    struct plm_session *h;
};
static void session_hold_release(struct session_hold *x)
{
    session_free(x->s, x->h);
}
#define cleanup_session_hold __attribute__((cleanup(session_hold_release)))

/* Starts one session container and waits for its agent's ready frame. */
static int session_start(struct dock_state *s, uint64_t disk_bytes, const char *const *langs, int64_t label,
                         struct plm_session **out, struct plm_err *err)
{
    struct session_hold sh cleanup_session_hold = {.s = s, .h = calloc(1, sizeof *sh.h)};
    struct plm_session *h = sh.h;
    if (!h)
        return plm_fail(err, ENOMEM, PLM_E_INTERNAL, "out of memory opening a session");
    h->st = s;
    h->in.max = DOCK_SF_HDR + DOCK_SF_REPLY_MAX;
    h->disk_bytes = disk_bytes;
    h->next_id = 1;
    /* /work holds the disk budget and one MiB more, so a cell that fills it is seen past the
     * budget by the measurement after the call (sessions.md §4.4). */
    struct dock_lockdown l = s->lock;
    if (disk_bytes) {
        uint64_t mb = (disk_bytes + (1u << 20) - 1) >> 20;
        l.work_mb = mb + 1 > UINT32_MAX ? UINT32_MAX : (uint32_t)(mb + 1);
    }
    const char *cmd[8] = {"/usr/bin/python3", "-I", AGENT_PATH};
    size_t n = 3;
    for (size_t i = 0; i < 3 && langs && langs[i]; i++)
        cmd[n++] = langs[i];
    if (n == 3) /* no hint: both interpreters start now, so no first cell pays for a start */
        cmd[n++] = "javascript", cmd[n++] = "python";
    /* Every session container gets its grant directory when the provider proved grant sockets:
     * a mount cannot be added later, and a pool member may serve any session. */
    if (atomic_load(&s->grants_proven) && s->hs_base[0] &&
        dock_sg_dir_make(s->hs_base, h->grant_dir, sizeof h->grant_dir, err) < 0)
        return plm_err_wrap(err, "session grant directory");
    struct dock_grant_paths g = {.session_dir = h->grant_dir};
    if (dock_box_start(s, DOCK_SESSION, cmd, n, h->grant_dir[0] ? &g : NULL, &l, label, &h->box, err) < 0)
        return plm_err_wrap(err, "session container");
    /* What the agent wrote after the marker while starting is the first of its stdout. */
    dock_bytes_add(&h->in, h->box->early_out.data, h->box->early_out.len);
    struct dock_sf_reply rep = {0};
    struct chan_ctx c = {.h = h, .rep = &rep};
    struct dock_io io = {.sink = chan_sink, .stop = chan_stop, .ctx = &c};
    int r = dock_attach_pump(&h->box->at, &io, (int64_t)clock_mono_ms() + READY_MS, err);
    bool ready = c.state == 1 && rep.status == DOCK_SF_READY && rep.id == 0;
    h->agent_grants = ready && rep.grants; /* said before any guest code ran */
    dock_sf_reply_done(&rep);
    if (!ready) {
        if (r < 0)
            return plm_err_wrap(err, "session agent");
        return plm_fail(err, 0, PLM_E_INTERNAL, "the session's agent did not report ready within %d s",
                        READY_MS / 1000);
    }
    *out = take_ptr(&sh.h);
    return 0;
}

/* A parked pool member for a session of this disk budget, still clean, or NULL. Pool members
 * start both interpreters, so any language hint is served. */
static struct plm_session *pool_take(struct dock_state *s, uint64_t disk_bytes)
{
    for (;;) {
        pthread_mutex_lock(&s->spool_mu);
        struct plm_session *h = NULL;
        if (s->n_spool && s->spool_disk == disk_bytes) {
            h = s->spool[0];
            memmove(&s->spool[0], &s->spool[1], (s->n_spool - 1) * sizeof h);
            s->n_spool--;
            pthread_cond_broadcast(&s->spool_cv); /* the filler starts a replacement */
        }
        pthread_mutex_unlock(&s->spool_mu);
        if (!h)
            return NULL;
        enum plm_session_end e = PLM_END_NONE;
        struct plm_err err = {0};
        if (chan_check_idle(h, &e, &err) == 0)
            return h;
        session_free(s, h); /* it changed while parked: never handed out */
    }
}

int dock_session_open(struct plm_provider *p, const struct plm_session_spec *spec, struct plm_session **out,
                      struct plm_session_opened *info, struct plm_err *err)
{
    struct dock_state *s = state_of(p);
    *out = NULL;
    if (dock_session_gate(s, spec->floor, err) < 0)
        return -1;
    struct plm_session *h = pool_take(s, spec->disk_bytes);
    /* The container's label deadline is the session's end (plus slack), for the deadline sweep. */
    int64_t label = clock_unix_ms() / 1000 + (int64_t)(spec->lifetime_ms / 1000) + LABEL_SLACK_S;
    if (!h && session_start(s, spec->disk_bytes, spec->languages, label, &h, err) < 0)
        return -1;
    /* What is proven now is what every call is checked against (a pool member included). */
    if (!(h->proven = dock_readback_take(&s->eng, h->box->id, err))) {
        session_free(s, h);
        return plm_err_wrap(err, "reading the session's container back");
    }
    info->tier = dock_tier(s);
    snprintf(info->software_identity, sizeof info->software_identity, "%s", s->software_identity[DOCK_SESSION]);
    snprintf(info->environment, sizeof info->environment, "docker-image:%s", s->id[DOCK_SESSION]);
    *out = h;
    return 0;
}

/* ---- the session pool ---------------------------------------------------------------------------- */

#define POOL_LABEL_S (12 * 3600 + LABEL_SLACK_S) /* a member may become a session of the longest lifetime */

static void *pool_main(void *arg)
{
    struct dock_state *s = arg;
    pthread_mutex_lock(&s->spool_mu);
    while (!s->spool_stop) {
        if (s->n_spool >= s->spool_target || !atomic_load(&s->ready) || atomic_load(&s->repointed)) {
            struct timespec ts = clock_mono_after(1000);
            pthread_cond_timedwait(&s->spool_cv, &s->spool_mu, &ts);
            continue;
        }
        uint64_t disk = s->spool_disk;
        pthread_mutex_unlock(&s->spool_mu);
        struct plm_session *h = NULL;
        struct plm_err e = {0};
        int r = session_start(s, disk, NULL, clock_unix_ms() / 1000 + POOL_LABEL_S, &h, &e);
        pthread_mutex_lock(&s->spool_mu);
        if (r == 0 && !s->spool_stop && s->n_spool < s->spool_target) {
            s->spool[s->n_spool++] = h;
            h = NULL;
        }
        if (h || r < 0) {
            pthread_mutex_unlock(&s->spool_mu);
            session_free(s, h);
            if (r < 0)
                sleep(1); /* dockerd trouble: try again later, not in a loop */
            pthread_mutex_lock(&s->spool_mu);
        }
    }
    pthread_mutex_unlock(&s->spool_mu);
    return NULL;
}

int dock_session_pool_start(struct dock_state *s, struct plm_err *err)
{
    if (!s->spool_target || s->spool_started)
        return 0;
    if (pthread_create(&s->spool_thread, NULL, pool_main, s) != 0)
        return plm_fail(err, errno, PLM_E_INTERNAL, "starting the session pool's thread failed");
    s->spool_started = true;
    return 0;
}

void dock_session_pool_stop(struct dock_state *s)
{
    pthread_mutex_lock(&s->spool_mu);
    s->spool_stop = true;
    pthread_cond_broadcast(&s->spool_cv);
    pthread_mutex_unlock(&s->spool_mu);
    if (s->spool_started)
        pthread_join(s->spool_thread, NULL);
    s->spool_started = false;
    for (size_t i = 0; i < s->n_spool; i++)
        session_free(s, s->spool[i]);
    s->n_spool = 0;
}

static int session_remove(struct dock_state *s, struct plm_session *h, struct plm_err *err)
{
    if (!h)
        return 0;
    bool removed = true;
    if (h->box && h->box->id[0]) {
        dock_attach_close(&h->box->at);
        removed = dock_container_remove(&s->eng, h->box->id, 3, err) == 0;
        if (removed)
            h->box->id[0] = 0;
    }
    session_free(s, h); /* what is left goes to the reapers */
    return removed ? 0 : plm_err_wrap(err, "closing the session's container");
}

int dock_session_close(struct plm_provider *p, struct plm_session *h, struct plm_err *err)
{
    return session_remove(state_of(p), h, err);
}

/* docker pause: the interpreters keep their state and memory (so the daemon keeps the slot). */
int dock_session_suspend(struct plm_provider *p, struct plm_session *h, bool *holds_memory, struct plm_err *err)
{
    struct dock_state *s = state_of(p);
    *holds_memory = true;
    if (h->paused || h->dead != PLM_END_NONE)
        return 0;
    char path[160];
    snprintf(path, sizeof path, DOCK_API "/containers/%s/pause", h->box->id);
    struct dock_reply r;
    if (dock_call(&s->eng, "POST", path, NULL, 10000, 64 * 1024, &r, err) < 0)
        return plm_err_wrap(err, "pausing the session's container");
    long status = r.status;
    dock_reply_done(&r);
    if (status != 204)
        return plm_fail(err, 0, PLM_E_INTERNAL, "pausing the session's container: HTTP %ld", status);
    h->paused = true;
    return 0;
}

/* ---- calls ------------------------------------------------------------------------------------- */

/* One request through the agent. A refusal (nothing ran) when the session cannot take a call,
 * the files could not be written or the interpreter could not start. */
static int agent_call(struct dock_state *s, struct plm_session *h, const struct plm_run_ctx *ctx, const char *op,
                      const char *lang, const char *code, const struct plm_file *files, size_t n_files,
                      const struct dock_sg_call *g, struct dock_sf_reply *rep, int64_t *ms, enum plm_session_end *ended,
                      struct plm_err *err)
{
    if (dock_session_gate(s, ctx->floor, err) < 0 || chan_check_idle(h, ended, err) < 0 ||
        read_back(s, h, ended, err) < 0 || resume(h, ended, err) < 0)
        return -1;
    uint8_t *frame cleanup_free = NULL;
    size_t len = 0;
    uint64_t id = h->next_id++;
    if (dock_sf_request(id, op, lang, code, files, n_files, ctx->timeout_ms, LIM_OUTPUT_MAX, g ? g->sock_in : NULL,
                        g ? g->preload_in : NULL, &frame, &len) < 0)
        return plm_refuse(err, PLM_E_INVALID, PLM_REFUSAL_REQUEST, "the call could not be encoded (not UTF-8?)");
    int64_t t0 = (int64_t)clock_mono_ms();
    bool sent = false;
    int r = chan_call(h, frame, len, id, t0 + ctx->timeout_ms + CALL_SLACK_MS, rep, &sent, ended, err);
    *ms = (int64_t)clock_mono_ms() - t0;
    if (r < 0) {
        if (!sent) /* not a byte of the call left: it did not run */
            err->refusal = PLM_REFUSAL_REQUEST, err->kind = PLM_E_ENDED;
        return -1;
    }
    if (h->disk_bytes && rep->disk > h->disk_bytes) {
        *ended = PLM_END_DISK_EXCEEDED; /* measured after the call; the call's own result stands */
        mark_dead(h, PLM_END_DISK_EXCEEDED, "the session's files exceeded SANDBOX_SESSION_DISK_MB");
    }
    if (rep->status != DOCK_SF_FILES && rep->status != DOCK_SF_NOINTERP)
        return 0;
    /* the agent refused before the code ran: the reply carries nothing for the caller */
    int rr = rep->status == DOCK_SF_FILES
                 ? plm_refuse(err, PLM_E_INVALID, PLM_REFUSAL_REQUEST,
                              "file %u of %zu could not be written (%s); the code did not run", rep->file + 1, n_files,
                              rep->errno_name)
                 : plm_refuse(err, PLM_E_UNSUPPORTED, PLM_REFUSAL_ENVIRONMENT,
                              "the session image cannot start a %s interpreter", lang ? lang : "node");
    dock_sf_reply_done(rep);
    return rr;
}

int dock_session_run_cell(struct plm_provider *p, struct plm_session *h, const struct plm_run_ctx *ctx,
                          const struct plm_request *req, struct plm_result *out, enum plm_session_end *ended,
                          struct plm_err *err)
{
    struct dock_state *s = state_of(p);
    const char *lang = req->cell.language;
    if (!lang || (strcmp(lang, "python") != 0 && strcmp(lang, "javascript") != 0))
        return plm_refuse(err, PLM_E_INVALID, PLM_REFUSAL_REQUEST, "cell language must be javascript or python");
    if (!strcmp(lang, "python") && !atomic_load(&s->session_python_proven))
        return plm_refuse(err, PLM_E_UNSUPPORTED, PLM_REFUSAL_UNSUPPORTED,
                          "a Python cell, and the startup proof found no python3 with numpy, pandas and matplotlib "
                          "in the session image (see the evidence card); nothing ran");
    size_t len = req->cell.code ? strnlen(req->cell.code, LIM_CODE_MAX + 1) : 0;
    if (len > LIM_CODE_MAX)
        return plm_refuse(err, PLM_E_INVALID, PLM_REFUSAL_REQUEST, "code must be at most %u bytes", LIM_CODE_MAX);
    memset(out, 0, sizeof *out);
    struct dock_sf_reply rep = {0};
    int64_t ms = 0;
    if (ctx->host_api) /* CellRun carries no grant; a grant here is the daemon's mistake */
        return plm_refuse(err, PLM_E_UNSUPPORTED, PLM_REFUSAL_UNSUPPORTED, "a cell carries no grant");
    if (agent_call(s, h, ctx, "cell", lang, req->cell.code ? req->cell.code : "", req->cell.files, req->cell.n_files,
                   NULL, &rep, &ms, ended, err) < 0)
        return -1;
    out->kind = PLM_KIND_CELL;
    out->cell = (struct plm_cell_result){.out = rep.out, .err = rep.err, .exit_code = rep.exit_code,
                                         .timed_out = rep.timed_out, .out_truncated = rep.out_trunc,
                                         .err_truncated = rep.err_trunc, .interpreter_started = rep.started,
                                         .interpreter_ended = rep.ended};
    rep.out = rep.err = (struct plm_bytes){0}; /* moved */
    out->duration_ms = ms;
    out->tier = dock_tier(s); /* the daemon stamps the session's image and identity (session_run.c) */
    return 0;
}

/* A granted snippet's socket, served for this call only. A refusal (nothing ran) when this session
 * has no transport: the provider proved no grant socket, or the image's agent predates grants. */
static int grant_begin(struct dock_state *s, struct plm_session *h, const struct plm_host_api *api,
                       struct dock_sg_call *g, struct plm_err *err)
{
    if (!api->call || !atomic_load(&s->grants_proven) || !h->grant_dir[0])
        return plm_refuse(err, PLM_E_UNSUPPORTED, PLM_REFUSAL_UNSUPPORTED,
                          "the docker provider did not prove its host-API socket at startup; nothing ran");
    if (!h->agent_grants)
        return plm_refuse(err, PLM_E_UNSUPPORTED, PLM_REFUSAL_UNSUPPORTED,
                          "the session image's agent carries no grant (rebuild it: scripts/build-images.py); "
                          "nothing ran");
    if (dock_sg_begin(h->grant_dir, api, g, err) < 0)
        return plm_err_wrap(err, "the session's grant socket");
    return 0;
}

int dock_session_run(struct plm_provider *p, struct plm_session *h, const struct plm_run_ctx *ctx,
                     const struct plm_request *req, struct plm_result *out, enum plm_session_end *ended,
                     struct plm_err *err)
{
    struct dock_state *s = state_of(p);
    if (req->kind != PLM_KIND_JAVASCRIPT)
        return plm_refuse(err, PLM_E_UNSUPPORTED, PLM_REFUSAL_UNSUPPORTED,
                          "docker sessions run snippets and cells; projects run as Run calls");
    memset(out, 0, sizeof *out);
    struct dock_sf_reply rep = {0};
    int64_t ms = 0;
    struct dock_sg_call g = {0};
    if (ctx->host_api && grant_begin(s, h, ctx->host_api, &g, err) < 0)
        return -1;
    int r =
        agent_call(s, h, ctx, "snippet", NULL, req->js.code, NULL, 0, ctx->host_api ? &g : NULL, &rep, &ms, ended, err);
    dock_sg_end(&g); /* the grant ends with the call's code: a process left behind cannot call */
    if (r < 0)
        return -1;
    out->kind = PLM_KIND_JAVASCRIPT;
    out->js.out = rep.out;
    out->js.err = rep.err;
    out->js.exit_code = rep.exit_code;
    out->js.timed_out = rep.timed_out;
    out->js.out_truncated = rep.out_trunc;
    out->js.err_truncated = rep.err_trunc;
    out->duration_ms = ms;
    out->tier = dock_tier(s); /* the daemon stamps the session's image and identity (session_run.c) */
    return 0;
}

/* ---- the startup sweep -------------------------------------------------------------------------- */

void dock_session_sweep(struct dock_state *s)
{
    json_t *list;
    struct plm_err e = {0};
    /* filters={"label":["org.plimsoll.session"]}, URL-encoded */
    if (dock_call_json(&s->eng, "GET",
                       DOCK_API "/containers/json?all=1&filters=%7B%22label%22%3A%5B%22" DOCK_LABEL_SESSION
                                "%22%5D%7D",
                       NULL, 200, 10000, 8 * 1024 * 1024, &list, &e) < 0)
        return; /* the deadline sweep (sweep.c) still reaps them later */
    size_t i;
    json_t *c;
    json_array_foreach(list, i, c)
    {
        const char *id = json_string_value(json_object_get(c, "Id"));
        const char *pid = json_string_value(json_object_get(json_object_get(c, "Labels"), DOCK_LABEL_SESSION));
        if (!id || !dock_id_ok(id) || !pid)
            continue;
        char *end;
        errno = 0;
        long v = strtol(pid, &end, 10);
        if (errno || *end || end == pid || v <= 0)
            continue;
        /* a daemon on this host that still runs keeps its sessions; ours has none yet */
        if (v == (long)getpid() || (kill((pid_t)v, 0) < 0 && errno == ESRCH))
            dock_container_remove(&s->eng, id, 1, &e);
    }
    json_decref(list);
}

/* ---- the startup probe ---------------------------------------------------------------------------- */

/* One cell in a fresh session container, then the container is removed: the startup proofs'
 * way into the sandbox a session really gets. It runs before the provider is proven, so it
 * bypasses dock_session_gate() (which refuses until then) and the pool. The reply's bytes move into *out. */
int dock_session_probe_cell(struct dock_state *s, const char *lang, const char *code, uint32_t timeout_ms,
                            struct plm_step_result *out, struct plm_err *err)
{
    const char *langs[] = {lang, NULL};
    struct plm_session *h = NULL;
    if (session_start(s, 0, langs, clock_unix_ms() / 1000 + timeout_ms / 1000 + LABEL_SLACK_S, &h, err) < 0)
        return -1;
    uint8_t *frame = NULL;
    size_t len = 0;
    struct dock_sf_reply rep = {0};
    bool sent = false;
    enum plm_session_end ended = PLM_END_NONE;
    int r = dock_sf_request(h->next_id, "cell", lang, code, NULL, 0, timeout_ms, LIM_OUTPUT_MAX, NULL, NULL, &frame,
                            &len);
    if (r < 0)
        r = plm_fail(err, 0, PLM_E_INTERNAL, "the probe cell could not be encoded");
    else
        r = chan_call(h, frame, len, h->next_id, (int64_t)clock_mono_ms() + timeout_ms + CALL_SLACK_MS, &rep, &sent,
                      &ended, err);
    free(frame);
    if (r == 0) {
        *out = (struct plm_step_result){.out = rep.out, .err = rep.err, .exit_code = rep.exit_code,
                                        .timed_out = rep.timed_out};
        rep.out = rep.err = (struct plm_bytes){0}; /* moved */
        dock_sf_reply_done(&rep);
    }
    struct plm_err cerr = {0};
    if (session_remove(s, h, &cerr) < 0 && r == 0) {
        plm_bytes_done(&out->out);
        plm_bytes_done(&out->err);
        *err = cerr;
        return -1;
    }
    return r;
}
