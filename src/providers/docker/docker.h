/* docker.h: the docker provider (providers.md §3; issue 5). Docker Engine API over a local unix
 * socket (libcurl), never the docker CLI. Tier `container` under runc; `kernel` under gVisor's
 * runsc once preflight verified the registration and the startup smoke test ran under it.
 * The constructor only checks configuration: it talks to no daemon and starts no container.
 * preflight() and smoke_test() prove the rest at startup (the daemon calls them in that order). */
#pragma once
#include <stdbool.h>
#include <stdint.h>

#include "../../core/provider.h"

struct dock_config {
    uint32_t memory_mb;        /* SANDBOX_MEMORY_MB; 0 = 256 (memory and memory+swap) */
    double cpus;               /* SANDBOX_CPUS; 0 = 1 */
    uint32_t pids;             /* SANDBOX_PIDS; 0 = 256 */
    uint32_t disk_mb;          /* SANDBOX_DISK_MB; 0 = /tmp 16 + /dev/shm 16 + /work 128 MiB */
    const char *image;         /* SANDBOX_DOCKER_IMAGE (snippets); required */
    const char *project_image; /* SANDBOX_DOCKER_PROJECT_IMAGE; required (holds /opt/plimsoll/runner) */
    const char *session_image; /* SANDBOX_DOCKER_SESSION_IMAGE: NULL or "" = no sessions; else the image
                                * of one container per session (python3, node, the agent) */
    const char *module_image;  /* SANDBOX_DOCKER_MODULE_IMAGE: NULL or "" = no modules; else the image
                                * with the worker and the models (docs/modules.md) */
    uint32_t session_pool;       /* SANDBOX_SESSION_POOL: session containers kept started (session.c) */
    uint64_t session_disk_bytes; /* SANDBOX_SESSION_DISK_MB in bytes: what pool members are made for */
    const char *runtime;       /* SANDBOX_DOCKER_RUNTIME: NULL, "" or "runc" = runc; "runsc" = gVisor */
    const char *seccomp_path;  /* SANDBOX_DOCKER_SECCOMP: NULL or "" = the shipped seccomp.json (built
                                * in); a path = that profile; "unconfined" is refused */
    const char *guest_uid;     /* SANDBOX_GUEST_UID as written; NULL or "" = 61000 */
    bool require_pinned;       /* SANDBOX_REQUIRE_PINNED_IMAGES */
    const char *docker_host;   /* DOCKER_HOST; NULL or "" = unix:///var/run/docker.sock; only a
                                * local unix socket is accepted ("remote daemon" otherwise) */
    int warm;                  /* started, never-used containers kept per image: 0 = default (2 for
                                * snippets, 1 for projects), < 0 = none */
    const char *grant_dir;     /* where each granted run's private socket directory is made; NULL
                                * or "" = $RUNTIME_DIRECTORY, else /run/plimsoll, else /tmp
                                * (hostsock.h). dockerd must see the same path. */
};

/* Checks the configuration (images, uid rules, disk budget, seccomp profile, DOCKER_HOST) and
 * returns a provider, or NULL with err set (PLM_E_INVALID). */
struct plm_provider *dock_provider_new(const struct dock_config *cfg, struct plm_err *err);
