/* confine.h: the worker's walls, applied in order (confine.c is the only file that calls
 * prctl, setrlimit, unshare, mount or seccomp(2)). */
#pragma once
#include <stdint.h>
#include <sys/types.h>

#include <linux/filter.h>

/* Namespace flags the zygote managed to apply (reported in HELLO, printed on the card). */
#define WK_NS_USER 0x01u
#define WK_NS_NET 0x02u
#define WK_NS_IPC 0x04u
#define WK_NS_MNT 0x08u
#define WK_NS_EMPTY_ROOT 0x10u
/* Not a namespace: the daemon was root and the zygote (so every worker) dropped to WK_UNPRIV_ID. */
#define WK_NS_UNPRIV_ID 0x20u

/* The uid and gid the zygote and its workers run as when the daemon is root: dedicated to
 * them (it owns no file and no other process on the host), no supplementary groups. */
#define WK_UNPRIV_ID 61100u

/* Headroom of RLIMIT_AS above the engine's memory cap: the binary, libc, the C stack and
 * malloc's own overhead live there, so the engine's limit trips first and OOM is a result. */
#define WK_AS_HEADROOM_MB 192u
/* The C stack of the worker (RLIMIT_STACK) and the part the engine may use for JS frames:
 * about 12,000 frames of simple recursion, close to Node's default (~10,800). */
#define WK_STACK_BYTES (16u * 1024 * 1024)
#define WK_JS_STACK_BYTES (8u * 1024 * 1024)

struct wk_limits {
    uint32_t memory_mb;      /* the engine's cap; RLIMIT_AS = memory_mb + WK_AS_HEADROOM_MB */
    uint32_t cpu_seconds;    /* RLIMIT_CPU, above the timeout ceiling */
};

/* Zygote, once, before any worker: parent-death signal, every fd but the control socket
 * closed, empty environment with TZ=UTC0, then empty network/IPC/mount namespaces where the
 * host allows them (root, or an unprivileged user namespace), then privileges dropped: no
 * capabilities, and for a root daemon uid/gid WK_UNPRIV_ID without supplementary groups
 * (WK_NS_UNPRIV_ID; exits when that fails). Returns WK_NS_* flags; a
 * namespace the host refuses is skipped and reported, never fatal (the tier is `process`
 * either way). Exits the process when the parent is already gone. */
unsigned wk_zygote_setup(pid_t monitor_pid, int ctl_fd);

/* One worker, right after the zygote forked it, in this order: parent-death signal (checked
 * against monitor_pid, the worker's parent through CLONE_PARENT), `sock` moved to fd 3 and
 * every other fd closed, empty environment and TZ=UTC0, rlimits, no_new_privs, then the
 * seccomp filter (the program cf_filter_export made from the table). Returns 0, or -1 when any
 * step failed: the caller must exit at once with WK_EXIT_CONFINE and never run guest code. */
int wk_confine(int sock, pid_t monitor_pid, const struct wk_limits *lim, const struct sock_fprog *filter);
