/* readback.c: the docker session read-back (issue 23 item 3; sessions.md §6). A session's
 * container is proved once, at open; between its calls anyone with the docker socket can change
 * it (`docker update`, a swapped runtime, a new mount). Before each call the daemon inspects the
 * container again and compares the fields that make the sandbox what was proven: the image by
 * content ID, the runtime, the security options, the mounts and tmpfs, the network, the
 * capabilities, privilege, the read-only root, the namespaces, the user and the resource limits.
 * Owns: the snapshot (a jansson object) it returns. Trusts: nothing in the inspect answer but its
 * shape: the fields are compared as dockerd reports them, never interpreted.
 * Invariant: any difference ends the session SANDBOX_CHANGED before a byte of the call is sent;
 * an inspect that cannot be read refuses the call (environment) and changes nothing. */
#include <stdio.h>
#include <string.h>

#include "internal.h"

/* The fields compared, as (name in the snapshot, object in the inspect answer, key). */
static const struct {
    const char *name, *where, *key;
} fields[] = {
    {"image", NULL, "Image"},
    {"runtime", "HostConfig", "Runtime"},
    {"security_opt", "HostConfig", "SecurityOpt"},
    {"network_mode", "HostConfig", "NetworkMode"},
    {"cap_add", "HostConfig", "CapAdd"},
    {"cap_drop", "HostConfig", "CapDrop"},
    {"privileged", "HostConfig", "Privileged"},
    {"readonly_rootfs", "HostConfig", "ReadonlyRootfs"},
    {"tmpfs", "HostConfig", "Tmpfs"},
    {"binds", "HostConfig", "Binds"},
    {"host_mounts", "HostConfig", "Mounts"},
    {"devices", "HostConfig", "Devices"},
    {"userns_mode", "HostConfig", "UsernsMode"},
    {"ipc_mode", "HostConfig", "IpcMode"},
    {"pid_mode", "HostConfig", "PidMode"},
    {"memory", "HostConfig", "Memory"},
    {"memory_swap", "HostConfig", "MemorySwap"},
    {"nano_cpus", "HostConfig", "NanoCpus"},
    {"cpu_quota", "HostConfig", "CpuQuota"},
    {"cpu_period", "HostConfig", "CpuPeriod"},
    {"pids_limit", "HostConfig", "PidsLimit"},
    {"mounts", NULL, "Mounts"},
    {"user", "Config", "User"},
};

json_t *dock_readback_of(const json_t *inspect)
{
    json_t *snap = json_object();
    if (!snap)
        return NULL;
    for (size_t i = 0; i < sizeof fields / sizeof *fields; i++) {
        const json_t *from = fields[i].where ? json_object_get(inspect, fields[i].where) : inspect;
        json_t *v = json_is_object(from) ? json_object_get(from, fields[i].key) : NULL;
        /* absent and null are one value: dockerd omits some empty fields */
        if (json_object_set_new(snap, fields[i].name, v ? json_deep_copy(v) : json_null()) < 0) {
            json_decref(snap);
            return NULL;
        }
    }
    return snap;
}

json_t *dock_readback_take(const struct dock_engine *e, const char *id, struct plm_err *err)
{
    json_t *j = NULL;
    if (dock_container_inspect(e, id, &j, err) < 0)
        return NULL;
    json_t *snap = json_is_object(j) ? dock_readback_of(j) : NULL;
    json_decref(j);
    if (!snap)
        plm_fail(err, 0, PLM_E_INTERNAL, "the container's inspect answer is not an object");
    return snap;
}

int dock_readback_compare(const json_t *proven, const json_t *now, char *what, size_t cap)
{
    for (size_t i = 0; i < sizeof fields / sizeof *fields; i++) {
        const json_t *a = json_object_get(proven, fields[i].name), *b = json_object_get(now, fields[i].name);
        if (!a || !b || !json_equal(a, b)) {
            snprintf(what, cap, "%s", fields[i].name);
            return 1;
        }
    }
    return 0;
}

int dock_readback_check(const struct dock_engine *e, const char *id, const json_t *proven, char *what, size_t cap,
                        struct plm_err *err)
{
    json_t *now = dock_readback_take(e, id, err);
    if (!now) {
        char why[200];
        snprintf(why, sizeof why, "%.199s", err->msg);
        return plm_refuse(err, PLM_E_ENVIRONMENT, PLM_REFUSAL_ENVIRONMENT,
                          "the session's container could not be read back before the call (%s); nothing ran", why);
    }
    int r = dock_readback_compare(proven, now, what, cap);
    json_decref(now);
    return r;
}
