/* quickjs.c: the `quickjs` provider's ops table (process tier).
 * Owns: the resolved configuration, the opened worker binary and its SHA-256 (the engine
 *   identity), the pool, and the evidence card once proven.
 * Trusts: the daemon's validation of requests (re-checked where cheap) and its grant
 *   (ctx->host_api: a callback and a client text, never a credential); nothing from a worker
 *   (monitor.c decodes that).
 * Invariant: tier() is `process` only after smoke_test() proved every check on the card, else
 *   `unknown`; every run re-checks the floor against that tier before it takes a worker, so a
 *   refusal provably launched nothing. */
#include "quickjs.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../../core/cleanup.h"
#include "../../core/limits.h"
#include "../../core/provider_gate.h"
#include "../../confine/exe.h"
#include "qjs_int.h"

#ifndef QJS_WORKER_BUILD_PATH
#define QJS_WORKER_BUILD_PATH ""
#endif

struct qjs_state {
    struct qjs_config cfg; /* resolved: no zeros */
    uint32_t cpu_seconds;
    int exe_fd;
    char identity[160];    /* quickjs-ng:sha256:<hex of the worker binary> */
    struct qjs_pool *pool;
    struct plm_evidence ev;
    int proven;            /* 1 once the card passed (atomic) */
};

static struct qjs_state *st_of(struct plm_provider *p)
{
    return p->state;
}

static enum plm_tier qjs_tier(struct plm_provider *p)
{
    return __atomic_load_n(&st_of(p)->proven, __ATOMIC_ACQUIRE) ? PLM_TIER_PROCESS : PLM_TIER_UNKNOWN;
}

static void qjs_describe(struct plm_provider *p, struct plm_describe *d)
{
    struct qjs_state *s = st_of(p);
    bool proven = __atomic_load_n(&s->proven, __ATOMIC_ACQUIRE);
    memset(d, 0, sizeof *d);
    d->sandbox = "quickjs";
    d->tier = qjs_tier(p);
    snprintf(d->javascript.identity, sizeof d->javascript.identity, "%s", s->identity);
    d->javascript.default_timeout_ms = s->cfg.default_timeout_ms;
    d->javascript.max_timeout_ms = s->cfg.max_timeout_ms;
    d->javascript.languages[0] = "javascript";
    /* Grants ride the worker's socket (docs/quickjs.md, Grants); projects do not exist here. */
    d->supports_javascript_grants = true;
    d->supports_session_grants = true; /* a session snippet is a run in its own worker (session.c) */
    d->memory_mb = s->cfg.memory_mb;
    d->policy = proven ? s->ev.policy : "";
    d->evidence = proven ? &s->ev : NULL;
}

static int qjs_preflight(struct plm_provider *p, struct plm_err *err)
{
    if (!qjs_pool_alive(st_of(p)->pool))
        return plm_fail(err, 0, PLM_E_UNAVAILABLE, "quickjs zygote is not running");
    return 0;
}

static int qjs_smoke(struct plm_provider *p, struct plm_err *err)
{
    struct qjs_state *s = st_of(p);
    struct qjs_proof_cfg pc = {
        .memory_mb = s->cfg.memory_mb,
        .default_timeout_ms = s->cfg.default_timeout_ms,
        .max_timeout_ms = s->cfg.max_timeout_ms,
        .cpu_seconds = s->cpu_seconds,
        .zygote_forks = s->cfg.zygote_forks,
        .zygote_age_s = s->cfg.zygote_age_s,
        .identity = s->identity,
    };
    __atomic_store_n(&s->proven, 0, __ATOMIC_RELEASE);
    if (qjs_prove(s->pool, &pc, &s->ev, err) < 0)
        return -1;
    __atomic_store_n(&s->proven, 1, __ATOMIC_RELEASE);
    return 0;
}

static int qjs_run_js(struct plm_provider *p, const struct plm_run_ctx *ctx, const struct plm_request *req,
                      struct plm_result *out, struct plm_err *err)
{
    struct qjs_state *s = st_of(p);
    enum plm_tier tier = qjs_tier(p);
    /* The one entry gate (core/provider_gate.h): the floor first (a floor above what we proved
     * wins over every other answer), then the grant: a named grant arrives as ctx->host_api (the
     * daemon selected it and minted its credential); a name without one is a daemon bug and fails
     * closed rather than run without the grant.
     * The proof is no precondition here: a zygote that is up runs before (or without) its proof,
     * and the result then says isolation `unknown` (qjs_tier), which any floor refuses. */
    const struct plm_gate gate = {.tier = tier, .proven = true, .grants_ready = true};
    if (plm_provider_gate(&gate, ctx, req, err) < 0)
        return -1;
    if (req->kind != PLM_KIND_JAVASCRIPT || !req->js.code)
        return plm_refuse(err, PLM_E_INVALID, PLM_REFUSAL_REQUEST, "quickjs runs javascript snippets only");
    const struct plm_host_api *api = ctx->host_api;
    size_t len = strnlen(req->js.code, LIM_CODE_MAX + 1);
    if (len == 0 || len > LIM_CODE_MAX)
        return plm_refuse(err, PLM_E_INVALID, PLM_REFUSAL_REQUEST, "code must be 1..%u bytes", LIM_CODE_MAX);
    uint32_t timeout = ctx->timeout_ms ? ctx->timeout_ms : s->cfg.default_timeout_ms;
    if (timeout > s->cfg.max_timeout_ms)
        timeout = s->cfg.max_timeout_ms;

    memset(out, 0, sizeof *out);
    int64_t ms = 0;
    if (mon_run_js(s->pool, req->js.code, len, api ? api->client_js : NULL, api, timeout, &out->js, &ms, err) < 0)
        return -1;
    out->kind = PLM_KIND_JAVASCRIPT;
    out->duration_ms = ms;
    out->tier = tier; /* the daemon stamps the environment Describe states (s->identity) */
    return 0;
}

static void state_free(struct qjs_state *s)
{
    if (!s)
        return;
    qjs_pool_free(s->pool);
    if (s->exe_fd >= 0)
        close(s->exe_fd);
    free(s);
}

static void qjs_destroy(struct plm_provider *p)
{
    state_free(st_of(p));
    p->state = NULL;
}

struct qjs_pool *qjs_provider_pool(struct plm_provider *p)
{
    return st_of(p)->pool;
}

static const struct plm_provider_ops qjs_ops = {
    .name = "quickjs",
    .tier = qjs_tier,
    .describe = qjs_describe,
    .preflight = qjs_preflight,
    .smoke_test = qjs_smoke,
    .run_javascript = qjs_run_js,
    .run_project = NULL,
    /* JavaScript sessions, one kept worker each (session.c) */
    .session_env = qjs_session_env,
    .session_open = qjs_session_open,
    .session_run = qjs_session_run,
    .session_run_cell = qjs_session_run_cell,
    .session_suspend = qjs_session_suspend,
    .session_close = qjs_session_close,
    .destroy = qjs_destroy,
};

/* The worker binary: configured, else beside the daemon (/proc/self/exe), else the build
 * directory's, under the one trust rule (confine/exe.h). Opened once; the hash and every exec
 * use this descriptor. */
static int open_worker(const char *configured, char *used, size_t used_len, struct plm_err *err)
{
    return open_trusted_exe(configured, QJS_WORKER_NAME, QJS_WORKER_BUILD_PATH, "quickjs worker", used, used_len, err);
}

static int hash_fd(int fd, char hex[65], struct plm_err *err)
{
    EVP_MD_CTX *md = EVP_MD_CTX_new();
    if (!md || EVP_DigestInit_ex(md, EVP_sha256(), NULL) != 1) {
        EVP_MD_CTX_free(md);
        return plm_fail(err, 0, PLM_E_INTERNAL, "sha256 unavailable");
    }
    uint8_t buf[65536];
    off_t off = 0;
    for (;;) {
        ssize_t k = pread(fd, buf, sizeof buf, off);
        if (k < 0 && errno == EINTR)
            continue;
        if (k < 0) {
            EVP_MD_CTX_free(md);
            return plm_fail(err, errno, PLM_E_INTERNAL, "read worker binary: %s", strerror(errno));
        }
        if (k == 0)
            break;
        EVP_DigestUpdate(md, buf, (size_t)k);
        off += k;
    }
    uint8_t d[32];
    unsigned dl = 0;
    EVP_DigestFinal_ex(md, d, &dl);
    EVP_MD_CTX_free(md);
    for (int i = 0; i < 32; i++)
        snprintf(hex + 2 * i, 3, "%02x", d[i]);
    return 0;
}

static uint32_t clamp_u32(uint32_t v, uint32_t def, uint32_t lo, uint32_t hi)
{
    if (v == 0)
        v = def;
    return v < lo ? lo : v > hi ? hi : v;
}

/* One variable: unset or empty keeps *out; else a plain decimal in [1, max] or an error naming it. */
static int env_u32(char *(*get)(const char *), const char *name, uint32_t max, uint32_t *out, struct plm_err *err)
{
    const char *v = get(name);
    if (!v || !*v)
        return 0;
    uint64_t x = 0;
    size_t i = 0;
    for (; v[i] >= '0' && v[i] <= '9' && i < 10; i++)
        x = x * 10 + (uint64_t)(v[i] - '0');
    if (v[i] != 0 || x < 1 || x > max)
        return plm_fail(err, 0, PLM_E_INVALID, "%s must be an integer from 1 to %u, got \"%.40s\"",
                           name, max, v);
    *out = (uint32_t)x;
    return 0;
}

int qjs_config_from_env(struct qjs_config *cfg, char *(*get)(const char *), struct plm_err *err)
{
    if (env_u32(get, "SANDBOX_QUICKJS_ZYGOTE_FORKS", QJS_MAX_ZYGOTE_FORKS, &cfg->zygote_forks, err) < 0 ||
        env_u32(get, "SANDBOX_QUICKJS_ZYGOTE_AGE_S", QJS_MAX_ZYGOTE_AGE_S, &cfg->zygote_age_s, err) < 0)
        return -1;
    return 0;
}

struct plm_provider *qjs_provider_new(const struct qjs_config *cfg, struct plm_err *err)
{
    struct qjs_config zero = {0};
    if (!cfg)
        cfg = &zero;
    struct qjs_state *s = calloc(1, sizeof *s);
    struct plm_provider *p = calloc(1, sizeof *p);
    if (!s || !p) {
        free(s);
        free(p);
        plm_fail(err, ENOMEM, PLM_E_INTERNAL, "quickjs: out of memory");
        return NULL;
    }
    s->exe_fd = -1;
    s->cfg.memory_mb = clamp_u32(cfg->memory_mb, QJS_DEFAULT_MEMORY_MB, QJS_MIN_MEMORY_MB, QJS_MAX_MEMORY_MB);
    s->cfg.pool_size = clamp_u32(cfg->pool_size, QJS_DEFAULT_POOL, 1, QJS_MAX_POOL);
    s->cfg.max_timeout_ms = clamp_u32(cfg->max_timeout_ms, QJS_MAX_TIMEOUT_MS, 1, QJS_MAX_TIMEOUT_MS);
    s->cfg.default_timeout_ms = clamp_u32(cfg->default_timeout_ms, QJS_DEFAULT_TIMEOUT_MS, 1, s->cfg.max_timeout_ms);
    s->cpu_seconds = s->cfg.max_timeout_ms / 1000 + 5;
    s->cfg.zygote_forks = clamp_u32(cfg->zygote_forks, QJS_DEFAULT_ZYGOTE_FORKS, 1, QJS_MAX_ZYGOTE_FORKS);
    s->cfg.zygote_age_s = clamp_u32(cfg->zygote_age_s, QJS_DEFAULT_ZYGOTE_AGE_S, 1, QJS_MAX_ZYGOTE_AGE_S);

    char used[PATH_MAX], hex[65];
    s->exe_fd = open_worker(cfg->worker_path, used, sizeof used, err);
    if (s->exe_fd < 0 || hash_fd(s->exe_fd, hex, err) < 0) {
        state_free(s);
        free(p);
        return NULL;
    }
    snprintf(s->identity, sizeof s->identity, QJS_IDENTITY_PREFIX "%s", hex);
    struct qjs_pool_cfg pc = {
        .exe_fd = s->exe_fd,
        .memory_mb = s->cfg.memory_mb,
        .cpu_seconds = s->cpu_seconds,
        .size = s->cfg.pool_size,
        .zygote_forks = s->cfg.zygote_forks,
        .zygote_age_ms = s->cfg.zygote_age_s * 1000,
    };
    s->pool = qjs_pool_new(&pc, err);
    if (!s->pool) {
        plm_err_wrap(err, "quickjs worker `%s`", used);
        state_free(s);
        free(p);
        return NULL;
    }
    p->ops = &qjs_ops;
    p->state = s;
    return p;
}
