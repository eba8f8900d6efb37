/* microvm.h: the `microvm` provider (vm tier): one jailed QEMU `microvm` per run, Debian's cloud
 * kernel, our static guest init and QuickJS agent (docs/microvm.md). KVM where a probe guest
 * boots, TCG otherwise: the accelerator is evidence, not a tier. Projects run `sh -c` steps with
 * busybox, node and python3 (a read-only disk image); module runs use the worker and models on
 * that disk (module.c, docs/modules.md); project grants are unsupported. */
#pragma once
#include <stdint.h>

#include "../../core/provider.h"

#define MV_DEFAULT_MEMORY_MB 256u
#define MV_MIN_MEMORY_MB 96u
#define MV_MAX_MEMORY_MB 4096u
#define MV_DEFAULT_DISK_MB 16u
#define MV_DEFAULT_TIMEOUT_MS 5000u
#define MV_MAX_TIMEOUT_MS 30000u
/* Under TCG importing numpy, pandas and matplotlib took 34.6 s on this machine kind (loaded
 * host; docs/python.md): a 30 s default timed out the data project, so the default is the
 * ceiling, 3.4 times that figure. */
#define MV_PROJECT_DEFAULT_MS 120000u
#define MV_PROJECT_MAX_MS 120000u
#define MV_DEFAULT_POOL 2u
#define MV_MAX_POOL 16u
#define MV_PROJECT_POOL 1u /* project VMs kept ready (each project restores one more on demand) */
#define MV_DEFAULT_UID 61100u

enum mv_accel { MV_ACCEL_AUTO, MV_ACCEL_KVM, MV_ACCEL_TCG };

struct mv_config {
    uint32_t memory_mb;  /* guest RAM; 0 -> 256 */
    uint32_t cpus;       /* vCPUs; 0 -> 1 */
    uint32_t disk_mb;    /* the guest's /tmp tmpfs; 0 -> 16 */
    uint32_t pool_size;  /* VMs kept ready; 0 -> 2 */
    enum mv_accel accel;
    uint32_t uid;        /* host uid/gid QEMU runs as; 0 -> 61100 */
    const char *qemu;    /* NULL -> /usr/bin/qemu-system-x86_64 */
    const char *kernel;  /* NULL -> third_party/microvm/vmlinuz of the source tree */
    const char *initrd;  /* NULL -> the build's initramfs */
    const char *node_image; /* NULL -> the build's node image (project VMs' read-only disk) */
};

/* Resolves the configuration, hashes kernel + initramfs (the environment identity) and prepares
 * the jail. Boots nothing: smoke_test chooses the accelerator, saves the template, proves the
 * card and starts the pool. Returns NULL and fills err on failure (naming the package when QEMU
 * is missing). */
struct plm_provider *mv_provider_new(const struct mv_config *cfg, struct plm_err *err);
