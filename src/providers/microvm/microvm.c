/* microvm.c: the `microvm` provider's ops table (vm tier).
 * Owns: the resolved configuration, the environment identity (a SHA-256 over the kernel and the
 *   initramfs), the jail description, the template state, the pool and the evidence card.
 * Trusts: the daemon's validation of requests (re-checked where cheap) and its grant (a callback
 *   and a client text, never a credential); nothing from a guest (vm.c/chan.c decode that).
 * Invariant: tier() is `vm` only after smoke_test() proved every check on the card, else
 *   `unknown`; every run re-checks the floor against that tier before it takes a VM, so a
 *   refusal provably launched nothing; every VM a run takes is killed before the run returns. */
#include "microvm.h"

#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <openssl/evp.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../../core/limits.h"
#include "../../core/module.h"
#include "../../core/provider_gate.h"
#include "../../core/pylang.h"
#include "mv_int.h"

#ifndef MV_KERNEL_BUILD_PATH
#define MV_KERNEL_BUILD_PATH ""
#endif
#ifndef MV_NODE_IMAGE_BUILD_PATH
#define MV_NODE_IMAGE_BUILD_PATH ""
#endif
#ifndef MV_INITRD_BUILD_PATH
#define MV_INITRD_BUILD_PATH ""
#endif

static struct mv_state *st_of(struct plm_provider *p)
{
    return p->state;
}

static enum plm_tier mv_tier(struct plm_provider *p)
{
    return __atomic_load_n(&st_of(p)->proven, __ATOMIC_ACQUIRE) ? PLM_TIER_VM : PLM_TIER_UNKNOWN;
}

static void mv_describe(struct plm_provider *p, struct plm_describe *d)
{
    struct mv_state *s = st_of(p);
    bool proven = __atomic_load_n(&s->proven, __ATOMIC_ACQUIRE);
    memset(d, 0, sizeof *d);
    d->sandbox = "microvm";
    d->tier = mv_tier(p);
    snprintf(d->javascript.identity, sizeof d->javascript.identity, "%s", s->identity);
    d->javascript.default_timeout_ms = MV_DEFAULT_TIMEOUT_MS;
    d->javascript.max_timeout_ms = MV_MAX_TIMEOUT_MS;
    d->javascript.languages[0] = "javascript";
    d->supports_javascript_grants = true;
    /* A session's snippet relays its host calls as a run's does (session.c); only once proven. */
    d->supports_session_grants = proven;
    /* Projects: files, `sh -c` steps (busybox, node), artifacts; no grants for projects yet. */
    d->supports_project = true;
    snprintf(d->project.identity, sizeof d->project.identity, "%s", s->proj->identity);
    d->project.default_timeout_ms = MV_PROJECT_DEFAULT_MS;
    d->project.max_timeout_ms = MV_PROJECT_MAX_MS;
    d->project.languages[0] = "shell";
    if (proven && __atomic_load_n(&s->python_proven, __ATOMIC_ACQUIRE))
        d->project.languages[1] = "python"; /* smoke.c imported the data libraries in a project VM */
    mv_module_env(s, d); /* module runs: only once module.c's proof passed */
    d->memory_mb = s->cfg.memory_mb;
    d->disk_mb = s->cfg.disk_mb;
    d->cpus = s->cfg.cpus;
    d->policy = proven ? s->ev.policy : "";
    d->evidence = proven ? &s->ev : NULL;
}

static int mv_preflight(struct plm_provider *p, struct plm_err *err)
{
    struct mv_state *s = st_of(p);
    if (access(s->cfg.qemu, X_OK) < 0)
        return plm_fail(err, errno, PLM_E_UNAVAILABLE,
                           "microvm: `%s` is gone (Debian package qemu-system-x86)", s->cfg.qemu);
    return 0;
}

static int mv_smoke(struct plm_provider *p, struct plm_err *err)
{
    struct mv_state *s = st_of(p);
    __atomic_store_n(&s->proven, 0, __ATOMIC_RELEASE);
    mv_pool_free(s->pool);
    s->pool = NULL;
    mv_pool_free(s->proj->pool);
    s->proj->pool = NULL;
    if (mv_prove(s, err) < 0)
        return -1;
    plm_progress("microvm", "pool", "filling: %u snippet VMs, %u project VMs (in the background)", s->cfg.pool_size,
                 MV_PROJECT_POOL);
    s->pool = mv_pool_new(s, s->cfg.pool_size, err);
    if (!s->pool)
        return -1;
    s->proj->pool = mv_pool_new(s->proj, MV_PROJECT_POOL, err);
    if (!s->proj->pool)
        return -1;
    __atomic_store_n(&s->proven, 1, __ATOMIC_RELEASE);
    plm_progress("microvm", "proof", "all %zu checks passed: tier vm", s->ev.n_checks);
    return 0;
}

/* The one entry gate (core/provider_gate.h) for every run: the floor against what the startup
 * proof measured first, then the grant transport (no_grants: why this kind of run carries none;
 * snippets carry grants over the channel, projects and modules would need an HTTP transport in
 * the guest), then the proof itself. */
static int mv_gate(struct plm_provider *p, const struct plm_run_ctx *ctx, const struct plm_request *req,
                   const char *no_grants, struct plm_err *err)
{
    const struct plm_gate gate = {
        .tier = PLM_TIER_VM,
        .proven = mv_tier(p) == PLM_TIER_VM,
        .grants_ready = no_grants == NULL,
        .no_grants = no_grants,
    };
    return plm_provider_gate(&gate, ctx, req, err);
}

static int mv_run_js(struct plm_provider *p, const struct plm_run_ctx *ctx, const struct plm_request *req,
                     struct plm_result *out, struct plm_err *err)
{
    struct mv_state *s = st_of(p);
    enum plm_tier tier = mv_tier(p);
    if (mv_gate(p, ctx, req, NULL, err) < 0)
        return -1;
    if (req->kind != PLM_KIND_JAVASCRIPT || !req->js.code)
        return plm_refuse(err, PLM_E_INVALID, PLM_REFUSAL_REQUEST, "microvm runs javascript snippets only");
    const struct plm_host_api *api = ctx->host_api;
    size_t len = strnlen(req->js.code, LIM_CODE_MAX + 1);
    if (len == 0 || len > LIM_CODE_MAX)
        return plm_refuse(err, PLM_E_INVALID, PLM_REFUSAL_REQUEST, "code must be 1..%u bytes", LIM_CODE_MAX);
    if (!s->pool)
        return plm_fail(err, 0, PLM_E_UNAVAILABLE, "microvm: not proven; nothing ran");
    uint32_t timeout = ctx->timeout_ms ? ctx->timeout_ms : MV_DEFAULT_TIMEOUT_MS;
    if (timeout > MV_MAX_TIMEOUT_MS)
        timeout = MV_MAX_TIMEOUT_MS;

    memset(out, 0, sizeof *out);
    struct mv_vm vm;
    if (mv_pool_take(s->pool, &vm, err) < 0) {
        /* No VM came up: no request byte was sent, so nothing of the caller's ran. */
        return plm_err_wrap(err, "start a VM (nothing ran)");
    }
    int64_t ms = 0;
    int r = mv_run_snippet(s, &vm, req->js.code, len, api, timeout, &out->js, &ms, err);
    mv_vm_kill(&vm);
    if (r < 0)
        return -1;
    out->kind = PLM_KIND_JAVASCRIPT;
    out->duration_ms = ms;
    out->tier = tier; /* the daemon stamps the environment Describe states (s->identity) */
    return 0;
}

static int mv_run_project_op(struct plm_provider *p, const struct plm_run_ctx *ctx, const struct plm_request *req,
                             struct plm_result *out, struct plm_err *err)
{
    struct mv_state *s = st_of(p);
    enum plm_tier tier = mv_tier(p);
    /* Project grants would need an HTTP transport in the guest: refused before anything ran. */
    if (mv_gate(p, ctx, req, "microvm does not support grants for projects", err) < 0)
        return -1;
    if (req->kind != PLM_KIND_PROJECT)
        return plm_refuse(err, PLM_E_INVALID, PLM_REFUSAL_REQUEST, "not a project");
    if (!s->pool || !s->proj->pool)
        return plm_fail(err, 0, PLM_E_UNAVAILABLE, "microvm: not proven; nothing ran");
    if (plm_project_is_python(req) && !__atomic_load_n(&s->python_proven, __ATOMIC_ACQUIRE))
        return plm_refuse(err, PLM_E_UNSUPPORTED, PLM_REFUSAL_UNSUPPORTED,
                           "a step runs python, and the startup proof found no python3 with numpy, pandas and "
                           "matplotlib on the project disk (see the evidence card); nothing ran");
    struct mv_state *ps = s->proj;
    uint32_t timeout = ctx->timeout_ms ? ctx->timeout_ms : MV_PROJECT_DEFAULT_MS;
    if (timeout > MV_PROJECT_MAX_MS)
        timeout = MV_PROJECT_MAX_MS;
    memset(out, 0, sizeof *out);
    struct mv_vm vm;
    if (mv_pool_take(ps->pool, &vm, err) < 0)
        return plm_err_wrap(err, "start a VM (nothing ran)");
    int64_t ms = 0;
    int r = mv_run_project(ps, &vm, req, timeout, &out->project, &ms, err);
    mv_vm_kill(&vm);
    out->kind = PLM_KIND_PROJECT;
    if (r < 0) {
        plm_result_done(out);
        return -1;
    }
    out->duration_ms = ms;
    out->tier = tier; /* the daemon stamps the environment Describe states (ps->identity) */
    return 0;
}

static int mv_run_module_op(struct plm_provider *p, const struct plm_run_ctx *ctx, const struct plm_request *req,
                            struct plm_result *out, struct plm_err *err)
{
    if (mv_gate(p, ctx, req, "microvm does not support grants for module runs", err) < 0)
        return -1;
    if (req->kind != PLM_KIND_MODULE || !req->module.model)
        return plm_refuse(err, PLM_E_INVALID, PLM_REFUSAL_REQUEST, "not a module run");
    if (plm_module_check(req, err) < 0) /* the daemon checked; cheap to hold here too */
        return -1;
    return mv_run_module(st_of(p), ctx, req, out, err);
}

static void state_free(struct mv_state *s)
{
    if (!s)
        return;
    state_free(s->proj);
    mv_pool_free(s->pool);
    if (s->template_fd >= 0)
        close(s->template_fd);
    free(s);
}

static void mv_destroy(struct plm_provider *p)
{
    state_free(st_of(p));
    p->state = NULL;
}

static const struct plm_provider_ops mv_ops = {
    .name = "microvm",
    .tier = mv_tier,
    .describe = mv_describe,
    .preflight = mv_preflight,
    .smoke_test = mv_smoke,
    .run_javascript = mv_run_js,
    .run_project = mv_run_project_op,
    .session_env = mv_session_env,
    .session_open = mv_session_open,
    .session_run = mv_session_run,
    .session_run_cell = mv_session_run_cell,
    .session_suspend = mv_session_suspend,
    .session_close = mv_session_close,
    .run_module = mv_run_module_op,
    .destroy = mv_destroy,
};

/* SHA-256 over the files' bytes in order (b or c may be NULL). */
static int hash_files(const char *a, const char *b, const char *c, char hex[65], struct plm_err *err)
{
    EVP_MD_CTX *md = EVP_MD_CTX_new();
    if (!md || EVP_DigestInit_ex(md, EVP_sha256(), NULL) != 1) {
        EVP_MD_CTX_free(md);
        return plm_fail(err, 0, PLM_E_INTERNAL, "sha256 unavailable");
    }
    const char *files[3] = {a, b, c};
    uint8_t buf[65536];
    for (int i = 0; i < 3 && files[i]; i++) {
        int fd = open(files[i], O_RDONLY | O_CLOEXEC);
        if (fd < 0) {
            int e = errno;
            EVP_MD_CTX_free(md);
            return plm_fail(err, e, PLM_E_INTERNAL,
                               "microvm: `%s`: %s (run scripts/microvm-setup.sh and build)", files[i], strerror(e));
        }
        ssize_t k;
        while ((k = read(fd, buf, sizeof buf)) > 0)
            EVP_DigestUpdate(md, buf, (size_t)k);
        close(fd);
    }
    uint8_t d[32];
    unsigned dl = 0;
    EVP_DigestFinal_ex(md, d, &dl);
    EVP_MD_CTX_free(md);
    for (int i = 0; i < 32; i++)
        snprintf(hex + 2 * i, 3, "%02x", d[i]);
    return 0;
}

/* The host's TSC rate in kHz (under TCG the guest reads the host's TSC); 0 when unknown. */
static uint32_t host_tsc_khz(void)
{
    FILE *f = fopen("/proc/cpuinfo", "re");
    if (!f)
        return 0;
    char line[256];
    double mhz = 0;
    while (fgets(line, sizeof line, f))
        if (sscanf(line, "cpu MHz : %lf", &mhz) == 1)
            break;
    fclose(f);
    return mhz > 100 && mhz < 100000 ? (uint32_t)(mhz * 1000) : 0;
}

static void qemu_version(const char *qemu, char *out, size_t len)
{
    snprintf(out, len, "unknown");
    char cmd[4200];
    snprintf(cmd, sizeof cmd, "'%s' -version 2>/dev/null", qemu);
    if (strchr(qemu, '\''))
        return;
    FILE *f = popen(cmd, "re");
    if (!f)
        return;
    char line[160];
    if (fgets(line, sizeof line, f)) {
        line[strcspn(line, "\n")] = 0;
        snprintf(out, len, "%.90s", line);
    }
    pclose(f);
}

int mv_state_jail(struct mv_state *s, bool kvm, gid_t gid, struct plm_err *err)
{
    if (mv_jail_init(&s->jail, s->cfg.qemu, s->kernel_path, s->initrd_path, kvm, s->cfg.uid, gid, err) < 0)
        return -1;
    return s->disk_path[0] ? mv_jail_add_disk(&s->jail, s->disk_path, err) : 0;
}

static uint32_t clamp_u32(uint32_t v, uint32_t def, uint32_t lo, uint32_t hi)
{
    if (v == 0)
        v = def;
    return v < lo ? lo : v > hi ? hi : v;
}

struct plm_provider *mv_provider_new(const struct mv_config *cfg, struct plm_err *err)
{
    struct mv_config zero = {0};
    if (!cfg)
        cfg = &zero;
    if (geteuid() != 0) {
        plm_fail(err, EPERM, PLM_E_INTERNAL,
                    "microvm: the QEMU jail needs root (id-mapped user namespaces, mounts); run plimsolld as root");
        return NULL;
    }
    struct mv_state *s = calloc(1, sizeof *s);
    struct plm_provider *p = calloc(1, sizeof *p);
    if (!s || !p) {
        free(s);
        free(p);
        plm_fail(err, ENOMEM, PLM_E_INTERNAL, "microvm: out of memory");
        return NULL;
    }
    s->template_fd = -1;
    s->cfg = *cfg;
    s->cfg.memory_mb = clamp_u32(cfg->memory_mb, MV_DEFAULT_MEMORY_MB, MV_MIN_MEMORY_MB, MV_MAX_MEMORY_MB);
    s->cfg.cpus = clamp_u32(cfg->cpus, 1, 1, 8);
    s->cfg.disk_mb = clamp_u32(cfg->disk_mb, MV_DEFAULT_DISK_MB, 1, 4096);
    s->cfg.pool_size = clamp_u32(cfg->pool_size, MV_DEFAULT_POOL, 1, MV_MAX_POOL);
    s->cfg.uid = clamp_u32(cfg->uid, MV_DEFAULT_UID, 1000, 65532);
    s->cfg.qemu = cfg->qemu && *cfg->qemu ? cfg->qemu : "/usr/bin/qemu-system-x86_64";
    snprintf(s->kernel_path, sizeof s->kernel_path, "%s", cfg->kernel && *cfg->kernel ? cfg->kernel : MV_KERNEL_BUILD_PATH);
    snprintf(s->initrd_path, sizeof s->initrd_path, "%s", cfg->initrd && *cfg->initrd ? cfg->initrd : MV_INITRD_BUILD_PATH);
    s->cfg.kernel = s->kernel_path;
    s->cfg.initrd = s->initrd_path;
    /* The jail's uid and gid must belong to nobody on this host. */
    if (getpwuid(s->cfg.uid) || getgrgid(s->cfg.uid)) {
        plm_fail(err, 0, PLM_E_INTERNAL, "microvm: uid/gid %u exists on this host; QEMU needs an unused one",
                    s->cfg.uid);
        goto fail;
    }
    char hex[65];
    if (mv_state_jail(s, false, s->cfg.uid, err) < 0 || hash_files(s->kernel_path, s->initrd_path, NULL, hex, err) < 0)
        goto fail;
    snprintf(s->identity, sizeof s->identity, "microvm:sha256:%s", hex);
    /* Projects: the same kernel and initramfs plus node's read-only disk, in their own jail;
     * their identity covers the disk image too. */
    struct mv_state *ps = calloc(1, sizeof *ps);
    if (!ps) {
        plm_fail(err, ENOMEM, PLM_E_INTERNAL, "microvm: out of memory");
        goto fail;
    }
    s->proj = ps;
    ps->template_fd = -1;
    ps->cfg = s->cfg;
    snprintf(ps->kernel_path, sizeof ps->kernel_path, "%s", s->kernel_path);
    snprintf(ps->initrd_path, sizeof ps->initrd_path, "%s", s->initrd_path);
    snprintf(ps->disk_path, sizeof ps->disk_path, "%s",
             cfg->node_image && *cfg->node_image ? cfg->node_image : MV_NODE_IMAGE_BUILD_PATH);
    ps->cfg.kernel = ps->kernel_path;
    ps->cfg.initrd = ps->initrd_path;
    ps->cfg.node_image = ps->disk_path;
    if (mv_state_jail(ps, false, ps->cfg.uid, err) < 0 ||
        hash_files(ps->kernel_path, ps->initrd_path, ps->disk_path, hex, err) < 0)
        goto fail;
    snprintf(ps->identity, sizeof ps->identity, "microvm:sha256:%s", hex);
    s->tsc_khz = host_tsc_khz();
    qemu_version(s->cfg.qemu, s->qemu_version, sizeof s->qemu_version);
    /* Without the TSC rate a loaded TCG host hangs the project VMs' boots (vm.c). */
    ps->tsc_khz = s->tsc_khz;
    memcpy(ps->qemu_version, s->qemu_version, sizeof ps->qemu_version);
    p->ops = &mv_ops;
    p->state = s;
    return p;
fail:
    state_free(s);
    free(p);
    return NULL;
}
