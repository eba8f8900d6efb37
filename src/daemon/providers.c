/* providers.c: the provider factory. A provider this build lacks stops startup by name: a typo or
 * a missing backend never silently degrades to something weaker. */
#include "providers.h"

#include <errno.h>
#include <stdlib.h>

#include "../providers/disabled/disabled.h"
#include "../providers/docker/docker.h"
#include "../providers/e2b/e2b.h"
#include "../providers/microvm/microvm.h"
#include "../providers/quickjs/quickjs.h"

static const char *env_or(const char *name, const char *fallback)
{
    const char *v = getenv(name);
    return v && *v ? v : fallback;
}

struct plm_provider *providers_build(const struct plm_config *cfg, struct plm_err *err)
{
    struct plm_provider *p = NULL;
    switch (cfg->provider) {
    case CFG_DISABLED:
        p = disabled_provider_new();
        break;
    case CFG_QUICKJS: {
        struct qjs_config qc = {.memory_mb = cfg->memory_mb, .pool_size = cfg->max_concurrent};
        if (qjs_config_from_env(&qc, getenv, err) < 0)
            return NULL;
        return qjs_provider_new(&qc, err);
    }
    case CFG_DOCKER: {
        /* Defaults are the images scripts/build-images.py builds on this host: the reference's
         * node:22-alpine cannot be assumed pullable, and a default must never reach a registry. */
        struct dock_config dc = {
            .memory_mb = cfg->memory_mb,
            .cpus = cfg->cpus,
            .pids = cfg->pids,
            .disk_mb = cfg->disk_mb,
            .image = env_or("SANDBOX_DOCKER_IMAGE", "plimsoll/snippet:latest"),
            .project_image = env_or("SANDBOX_DOCKER_PROJECT_IMAGE", "plimsoll/project:latest"),
            /* only with sessions on: a daemon without them never needs the session image */
            .session_image = cfg->sessions.max_sessions > 0
                                 ? env_or("SANDBOX_DOCKER_SESSION_IMAGE", "plimsoll/session:latest")
                                 : NULL,
            .module_image = getenv("SANDBOX_DOCKER_MODULE_IMAGE"), /* unset or "" = no modules (spec) */
            .session_pool = cfg->sessions.pool,
            .session_disk_bytes = cfg->sessions.disk_bytes,
            .runtime = getenv("SANDBOX_DOCKER_RUNTIME"),
            .seccomp_path = getenv("SANDBOX_DOCKER_SECCOMP"),
            .guest_uid = getenv("SANDBOX_GUEST_UID"),
            .require_pinned = cfg->require_pinned,
            .docker_host = getenv("DOCKER_HOST"),
        };
        return dock_provider_new(&dc, err);
    }
    case CFG_MICROVM: {
        /* SANDBOX_MEMORY_MB is guest RAM, SANDBOX_CPUS whole vCPUs, SANDBOX_DISK_MB the guest's /tmp
         * (config.c refuses what a VM cannot enforce). The pool stays small: a VM costs RAM. */
        struct mv_config mc = {
            .memory_mb = cfg->memory_mb,
            .cpus = (uint32_t)cfg->cpus,
            .disk_mb = cfg->disk_mb,
            .pool_size = cfg->max_concurrent < 2 ? cfg->max_concurrent : 2,
            .accel = cfg->microvm_accel == CFG_ACCEL_KVM   ? MV_ACCEL_KVM
                     : cfg->microvm_accel == CFG_ACCEL_TCG ? MV_ACCEL_TCG
                                                           : MV_ACCEL_AUTO,
            .kernel = getenv("SANDBOX_MICROVM_KERNEL"),
            .initrd = getenv("SANDBOX_MICROVM_INITRD"),
            .qemu = getenv("SANDBOX_MICROVM_QEMU"),
        };
        return mv_provider_new(&mc, err);
    }
    case CFG_E2B: {
        /* Endpoints default to E2B's; any other is stated on the card and in Describe. */
        struct e2b_config ec = {
            .api_key = getenv("E2B_API_KEY"),
            .template_id = getenv("E2B_TEMPLATE"),
            .api_url = getenv("E2B_API_URL"),
            .domain = getenv("E2B_DOMAIN"),
            .envd_url = getenv("E2B_ENVD_URL"),
            .ca_file = getenv("E2B_CA_FILE"),
            .guard_url = getenv("E2B_GUARD_URL"),
            .session_grants = getenv("E2B_SESSION_GRANTS"),
            .guard_addr = cfg->guard_addr,
            .memory_mb = cfg->memory_mb,
            .disk_mb = cfg->disk_mb,
            .cpus = cfg->cpus,
            .pids_set = cfg->pids_set,
            .listen_addr = cfg->addr,
        };
        return e2b_provider_new(&ec, err);
    }
    }
    if (!p)
        plm_fail(err, ENOMEM, PLM_E_INTERNAL, "out of memory");
    return p;
}
