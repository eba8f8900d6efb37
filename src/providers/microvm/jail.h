/* jail.h: one jailed QEMU process (the Firecracker jailer's idea, for QEMU; docs/microvm.md, Jail).
 * The daemon (root) clones the child into new user, mount, pid, ipc, net and uts namespaces; the
 * child mounts a fresh tmpfs root holding only read-only binds of QEMU's binary, its shared
 * libraries, its TCG module and microvm firmware, the guest kernel and the initramfs (and
 * /dev/kvm for KVM), pivots into it, sets rlimits and the parent-death signal, becomes an
 * unprivileged host uid/gid with no capabilities and no_new_privs, and execs QEMU, which then
 * turns on its own seccomp sandbox. Its only descriptors are the ones handed in (fd 3, 4, ...).
 * No file, socket or mount of the jail exists outside its mount namespace: nothing to clean up. */
#pragma once
#include <limits.h>
#include <stdbool.h>
#include <sys/types.h>

#include "../../core/err.h"

#define MV_JAIL_FILES_MAX 96
#define MV_JAIL_DIRS_MAX 32
#define MV_JAIL_INNER_ID 1000 /* the id QEMU has inside its user namespace */

struct mv_jail_file {
    char src[PATH_MAX]; /* resolved host path */
    char dst[PATH_MAX]; /* <root mount><path inside the jail> */
    unsigned long lock_flags; /* MS_NOSUID/NODEV/NOEXEC of the source's mount (kept on remount) */
};

struct mv_jail {
    uid_t uid; /* host uid QEMU runs as */
    gid_t gid; /* host gid QEMU runs as */
    char root[64]; /* host directory the jail's tmpfs is mounted over, inside the child only */
    char qemu_in_jail[PATH_MAX];
    struct mv_jail_file files[MV_JAIL_FILES_MAX];
    int n_files;
    char dirs[MV_JAIL_DIRS_MAX][PATH_MAX]; /* to create, parents first */
    int n_dirs;
};

/* Resolves QEMU's libraries (the dynamic loader's own trace), the firmware and the TCG module, and
 * records every bind. kernel and initrd appear in the jail as /vmlinuz and /initrd. Returns 0 or
 * -1 with err naming what is missing. */
int mv_jail_init(struct mv_jail *j, const char *qemu, const char *kernel, const char *initrd, bool kvm, uid_t uid,
                 gid_t gid, struct plm_err *err);
/* Adds a read-only disk image, bound at /disk.img in the jail (a project VM's node image). */
int mv_jail_add_disk(struct mv_jail *j, const char *image, struct plm_err *err);
/* Starts QEMU in the jail with argv and the descriptors fds[0..n): fds[0] becomes its stdin,
 * stdout and stderr (the write end of a pipe for its complaints), fds[1..] become 3, 4, ...
 * fsize_mb bounds what QEMU may write to a file (a template's
 * state; 0 for every other VM). Returns the host pid (PID 1 of its pid namespace; the caller owns
 * it: SIGKILL and waitpid), or -1 with err (nothing left running). Thread-safe. */
pid_t mv_jail_spawn(const struct mv_jail *j, char *const argv[], const int *fds, int n_fds, unsigned fsize_mb,
                    struct plm_err *err);
