/* docker.c: the docker provider's ops table, its constructor and destructor, and Describe. It
 * only calls down: the tier and the entry gate live in state.c, the runs in their own files.
 * Owns: struct dock_state (internal.h) and its lifetime.
 * Trusts: struct dock_config only after the rules of lockdown.c and preflight.c accepted it.
 * Invariant: the constructor talks to no daemon and starts no container; every run passes
 * state.c's gate (core's plm_provider_gate) before it launches anything. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "internal.h"

#define SECCOMP_FILE_MAX (256u * 1024)

static struct dock_state *st(struct plm_provider *p)
{
    return p->state;
}

static enum plm_tier ops_tier(struct plm_provider *p)
{
    return dock_tier(st(p));
}

static void ops_describe(struct plm_provider *p, struct plm_describe *d)
{
    struct dock_state *s = st(p);
    memset(d, 0, sizeof *d);
    d->sandbox = "docker";
    d->tier = dock_tier(s);
    d->supports_project = true;
    bool proven = atomic_load(&s->proven);
    d->supports_javascript_grants = d->supports_project_grants = proven && atomic_load(&s->grants_proven);
    /* a session's snippet reaches the broker through its session directory (session_grant.c) */
    d->supports_session_grants = d->supports_javascript_grants && s->id[DOCK_SESSION][0];
    if (proven) {
        snprintf(d->javascript.identity, sizeof d->javascript.identity, "docker-image:%s", s->id[DOCK_SNIPPET]);
        snprintf(d->project.identity, sizeof d->project.identity, "docker-image:%s", s->id[DOCK_PROJECT]);
        snprintf(d->javascript.software_identity, sizeof d->javascript.software_identity, "%s",
                 s->software_identity[DOCK_SNIPPET]);
        snprintf(d->project.software_identity, sizeof d->project.software_identity, "%s",
                 s->software_identity[DOCK_PROJECT]);
    }
    d->javascript.default_timeout_ms = DOCK_SNIPPET_DEFAULT_MS;
    d->javascript.max_timeout_ms = DOCK_SNIPPET_MAX_MS;
    d->javascript.languages[0] = "javascript";
    d->project.default_timeout_ms = DOCK_PROJECT_DEFAULT_MS;
    d->project.max_timeout_ms = DOCK_PROJECT_MAX_MS;
    d->project.languages[0] = "javascript";
    d->project.languages[1] = "shell";
    if (proven && atomic_load(&s->python_proven))
        d->project.languages[2] = "python"; /* pyproof.c ran the imports in this image */
    d->memory_mb = s->lock.memory_mb;
    d->pids = s->lock.pids;
    d->disk_mb = s->lock.tmp_mb + s->lock.shm_mb + s->lock.work_mb;
    d->cpus = s->lock.cpus;
    /* The card whose tier is the one reported now: a runsc provider whose runtime check lapsed
     * shows the same proof at tier container. */
    const struct plm_evidence *ev = proven ? &s->card[d->tier == s->card[0].tier ? 0 : 1] : NULL;
    d->evidence = ev;
    d->policy = ev ? ev->policy : "";
    dock_module_env(s, d);
}

static int ops_preflight(struct plm_provider *p, struct plm_err *err)
{
    return dock_preflight(st(p), err);
}

static int ops_smoke(struct plm_provider *p, struct plm_err *err)
{
    if (dock_smoke(st(p), err) < 0)
        return -1;
    if (st(p)->ref[DOCK_SESSION][0]) {
        dock_session_sweep(st(p)); /* session containers of daemons that are gone */
        if (dock_session_pool_start(st(p), err) < 0)
            return -1;
    }
    return 0;
}

static int ops_run_js(struct plm_provider *p, const struct plm_run_ctx *ctx, const struct plm_request *req,
                      struct plm_result *out, struct plm_err *err)
{
    return dock_run_snippet(st(p), ctx, req, out, err);
}

static int ops_run_project(struct plm_provider *p, const struct plm_run_ctx *ctx, const struct plm_request *req,
                           struct plm_result *out, struct plm_err *err)
{
    return dock_run_project(st(p), ctx, req, out, err);
}

static int ops_run_module(struct plm_provider *p, const struct plm_run_ctx *ctx, const struct plm_request *req,
                          struct plm_result *out, struct plm_err *err)
{
    return dock_run_module(st(p), ctx, req, out, err);
}

static void state_free(struct dock_state *s)
{
    if (!s)
        return;
    dock_session_pool_stop(s); /* parked session containers first, while the reapers still run */
    dock_bg_stop(s);           /* drains the pool and the removal queue */
    /* Runs are over; a grant-socket thread may still be finishing a call it held (hostsock.c).
     * It touches nothing of ours, but a clean exit waits for it, briefly. */
    dock_hostsock_quiesce(3000);
    free(s->pending);
    for (int k = 0; k < DOCK_KINDS; k++) {
        for (size_t i = 0; i < s->n_env[k]; i++)
            free(s->env[k][i]);
        free(s->env[k]);
    }
    free(s->seccomp);
    pthread_mutex_destroy(&s->mu);
    pthread_mutex_destroy(&s->pf_run);
    pthread_mutex_destroy(&s->pool_mu);
    pthread_mutex_destroy(&s->spool_mu);
    pthread_cond_destroy(&s->spool_cv);
    pthread_cond_destroy(&s->cv);
    pthread_cond_destroy(&s->reap_cv);
    pthread_cond_destroy(&s->pool_cv);
    pthread_cond_destroy(&s->fill_cv);
    free(s);
    curl_global_cleanup();
}

static void ops_destroy(struct plm_provider *p)
{
    state_free(p->state);
    p->state = NULL;
}

/* Two tables: with a session image configured the provider keeps sessions (session.c). */
#define DOCK_OPS_RUNS                                                                                    \
    .name = "docker", .tier = ops_tier, .describe = ops_describe, .preflight = ops_preflight,           \
    .smoke_test = ops_smoke, .run_javascript = ops_run_js, .run_project = ops_run_project,             \
    .run_module = ops_run_module, .destroy = ops_destroy

static const struct plm_provider_ops docker_ops = {DOCK_OPS_RUNS};

static const struct plm_provider_ops docker_session_ops = {
    DOCK_OPS_RUNS,
    .session_env = dock_session_env,
    .session_open = dock_session_open,
    .session_run = dock_session_run,
    .session_run_cell = dock_session_run_cell,
    .session_suspend = dock_session_suspend,
    .session_close = dock_session_close,
};

static int read_profile(const char *path, char **out, size_t *len, struct plm_err *err)
{
    FILE *f cleanup_fclose = fopen(path, "re");
    if (!f)
        return plm_fail(err, errno, PLM_E_INVALID, "SANDBOX_DOCKER_SECCOMP: open \"%s\": %s", path, strerror(errno));
    char *buf cleanup_free = malloc(SECCOMP_FILE_MAX + 1);
    size_t n = buf ? fread(buf, 1, SECCOMP_FILE_MAX + 1, f) : 0;
    if (!buf || ferror(f) || n > SECCOMP_FILE_MAX) {
        return plm_fail(err, EMSGSIZE, PLM_E_INVALID,
                        "SANDBOX_DOCKER_SECCOMP: \"%s\" is unreadable or larger than %u bytes", path, SECCOMP_FILE_MAX);
    }
    buf[n] = 0;
    *out = take_ptr(&buf);
    *len = n;
    return 0;
}

static int setup_seccomp(struct dock_state *s, const char *path, struct plm_err *err)
{
    size_t len = 0;
    const char *source;
    if (!path || !*path) {
        s->seccomp = malloc(dock_seccomp_shipped_len + 1);
        if (!s->seccomp)
            return plm_fail(err, ENOMEM, PLM_E_INTERNAL, "out of memory");
        memcpy(s->seccomp, dock_seccomp_shipped, dock_seccomp_shipped_len);
        s->seccomp[dock_seccomp_shipped_len] = 0;
        len = dock_seccomp_shipped_len;
        source = "seccomp.json (built in)";
    } else if (!strcmp(path, "unconfined")) {
        return plm_fail(err, 0, PLM_E_INVALID,
                        "SANDBOX_DOCKER_SECCOMP=unconfined would drop a wall of the container tier; refused");
    } else {
        if (read_profile(path, &s->seccomp, &len, err) < 0)
            return -1;
        source = path;
    }
    if (dock_seccomp_check(s->seccomp, len, &s->seccomp_allowed, err) < 0)
        return plm_err_wrap(err, "SANDBOX_DOCKER_SECCOMP");
    char digest[PLM_HEX_SHA256];
    rec_sha256_hex(s->seccomp, len, digest);
    snprintf(s->seccomp_sha256, sizeof s->seccomp_sha256, "%s", digest);
    snprintf(s->seccomp_desc, sizeof s->seccomp_desc, "%.40s sha256:%.16s, %zu allowed, default deny", source, digest,
             s->seccomp_allowed);
    return 0;
}

/* The image references, each by its variable's rules, and the pinning rule over all of them. */
static int configure_images(struct dock_state *s, const struct dock_config *c, struct plm_err *err)
{
    if (dock_ref_check("SANDBOX_DOCKER_IMAGE", c->image, err) < 0 ||
        dock_ref_check("SANDBOX_DOCKER_PROJECT_IMAGE", c->project_image, err) < 0)
        return -1;
    snprintf(s->ref[DOCK_SNIPPET], sizeof s->ref[0], "%s", c->image);
    snprintf(s->ref[DOCK_PROJECT], sizeof s->ref[0], "%s", c->project_image);
    if (c->session_image && *c->session_image) {
        if (dock_ref_check("SANDBOX_DOCKER_SESSION_IMAGE", c->session_image, err) < 0)
            return -1;
        snprintf(s->ref[DOCK_SESSION], sizeof s->ref[0], "%s", c->session_image);
    }
    if (c->module_image && *c->module_image) { /* unset or empty: modules are off (spec) */
        if (dock_ref_check("SANDBOX_DOCKER_MODULE_IMAGE", c->module_image, err) < 0)
            return -1;
        snprintf(s->ref[DOCK_MODULE], sizeof s->ref[0], "%s", c->module_image);
    }
    s->require_pinned = c->require_pinned;
    for (int k = 0; k < DOCK_KINDS && s->require_pinned; k++)
        if (s->ref[k][0] && !dock_ref_pinned(s->ref[k]))
            return plm_fail(err, 0, PLM_E_INVALID,
                            "%s=%s is not pinned: SANDBOX_REQUIRE_PINNED_IMAGES wants name@sha256:<64 hex>",
                            k == DOCK_SESSION  ? "SANDBOX_DOCKER_SESSION_IMAGE"
                            : k == DOCK_MODULE ? "SANDBOX_DOCKER_MODULE_IMAGE"
                            : k                ? "SANDBOX_DOCKER_PROJECT_IMAGE"
                                               : "SANDBOX_DOCKER_IMAGE",
                            s->ref[k]);
    return 0;
}

/* SANDBOX_DOCKER_RUNTIME: a runtime name, and whether it is gVisor's. */
static int configure_runtime(struct dock_state *s, const struct dock_config *c, struct plm_err *err)
{
    const char *rt = c->runtime && *c->runtime ? c->runtime : "runc";
    size_t n = strlen(rt);
    bool ok = n < sizeof s->runtime;
    for (size_t i = 0; i < n && ok; i++)
        ok = (rt[i] >= 'a' && rt[i] <= 'z') || (rt[i] >= '0' && rt[i] <= '9') || rt[i] == '-' || rt[i] == '_' ||
             (i && rt[i] == '.');
    if (!ok)
        return plm_fail(err, 0, PLM_E_INVALID, "SANDBOX_DOCKER_RUNTIME=\"%s\": expected a runtime name such as runsc",
                        rt);
    snprintf(s->runtime, sizeof s->runtime, "%s", rt);
    /* gVisor: `runsc`, or another registration of it named runsc-<suffix> (docker-setup.sh keeps
     * the distribution's older one as runsc-bookworm for the before/after bench). Either way the
     * path's basename must be runsc (preflight) and the probe must see gVisor answer. */
    s->runsc = !strcmp(rt, "runsc") || !strncmp(rt, "runsc-", 6);
    return 0;
}

/* The lockdown every container gets: memory, pids, CPUs, disk, the guest uid, the seccomp profile. */
static int configure_lockdown(struct dock_state *s, const struct dock_config *c, struct plm_err *err)
{
    struct dock_lockdown *l = &s->lock;
    l->memory_mb = c->memory_mb ? c->memory_mb : 256;
    l->pids = c->pids ? c->pids : 256;
    l->cpus = c->cpus > 0 ? c->cpus : 1.0;
    l->tmp_mb = l->shm_mb = 16;
    l->runtime = s->runtime;
    if (l->memory_mb < 32)
        return plm_fail(err, 0, PLM_E_INVALID, "SANDBOX_MEMORY_MB=%u: the docker provider needs at least 32",
                        l->memory_mb);
    if (l->cpus < 0.01 || l->cpus > 1024)
        return plm_fail(err, 0, PLM_E_INVALID, "SANDBOX_CPUS=%g: expected 0.01 to 1024", l->cpus);
    if (dock_disk_budget(c->disk_mb, l->tmp_mb, l->shm_mb, &l->work_mb, err) < 0)
        return -1;
    if (dock_guest_uid(c->guest_uid, "/etc/passwd", "/etc/group", &l->uid, err) < 0)
        return -1;
    if (setup_seccomp(s, c->seccomp_path, err) < 0)
        return -1;
    l->seccomp = s->runsc ? NULL : s->seccomp; /* (spec) under runc only */
    if (s->runsc)
        s->seccomp_sha256[0] = 0; /* the card says no profile is sent */
    return 0;
}

static int configure(struct dock_state *s, const struct dock_config *c, struct plm_err *err)
{
    if (dock_parse_host(c->docker_host, s->eng.sock, err) < 0 || configure_images(s, c, err) < 0 ||
        configure_runtime(s, c, err) < 0 || configure_lockdown(s, c, err) < 0)
        return -1;

    if (c->grant_dir && *c->grant_dir) {
        if (c->grant_dir[0] != '/' || strlen(c->grant_dir) >= sizeof s->grant_dir)
            return plm_fail(err, 0, PLM_E_INVALID,
                            "grant socket directory \"%s\": expected an absolute path under %zu bytes", c->grant_dir,
                            sizeof s->grant_dir);
        snprintf(s->grant_dir, sizeof s->grant_dir, "%s", c->grant_dir);
    }
    s->spool_target = c->session_pool < DOCK_SPOOL_MAX ? c->session_pool : DOCK_SPOOL_MAX;
    s->spool_disk = c->session_disk_bytes;
    s->warm[DOCK_SNIPPET] = c->warm < 0 ? 0 : c->warm ? c->warm : 2;
    s->warm[DOCK_PROJECT] = c->warm < 0 ? 0 : c->warm ? c->warm : 1;
    for (int k = 0; k < 2; k++)
        if (s->warm[k] > DOCK_POOL_MAX)
            s->warm[k] = DOCK_POOL_MAX;
    uint8_t rnd[8];
    if (dock_random(rnd, sizeof rnd) < 0)
        return plm_fail(err, errno, PLM_E_INTERNAL, "getrandom failed");
    dock_hex(rnd, sizeof rnd, s->instance);
    return 0;
}

/* A state with its locks and condition variables made, and libcurl initialised: from here on
 * state_free() is its one release path. NULL when out of memory. */
static struct dock_state *state_new(void)
{
    struct dock_state *s = calloc(1, sizeof *s);
    if (!s)
        return NULL;
    /* curl_global_init is not thread-safe on every libcurl: the constructor runs before any
     * thread of ours does. */
    curl_global_init(CURL_GLOBAL_DEFAULT);
    pthread_mutex_init(&s->mu, NULL);
    pthread_mutex_init(&s->pf_run, NULL);
    pthread_mutex_init(&s->pool_mu, NULL);
    clock_cond_init(&s->cv);
    clock_cond_init(&s->reap_cv);
    clock_cond_init(&s->pool_cv);
    clock_cond_init(&s->fill_cv);
    pthread_mutex_init(&s->spool_mu, NULL);
    clock_cond_init(&s->spool_cv);
    return s;
}
DEFINE_CLEANUP(struct dock_state, state_free)

struct plm_provider *dock_provider_new(const struct dock_config *cfg, struct plm_err *err)
{
    struct plm_provider *p cleanup_free = calloc(1, sizeof *p);
    struct dock_state *s cleanup_(state_free) = p ? state_new() : NULL;
    if (!s) {
        plm_fail(err, ENOMEM, PLM_E_INTERNAL, "out of memory");
        return NULL;
    }
    if (configure(s, cfg, err) < 0) {
        plm_err_wrap(err, "docker provider");
        return NULL;
    }
    p->ops = s->ref[DOCK_SESSION][0] ? &docker_session_ops : &docker_ops;
    p->state = take_ptr(&s);
    return take_ptr(&p);
}
