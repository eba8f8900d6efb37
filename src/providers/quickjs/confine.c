/* confine.c: every wall around the QuickJS worker, in the order it goes up (STYLE.md §5): the
 *   zygote's namespaces and empty root here, every other step the one sequence of
 *   confine/steps.h (one ordered list an auditor reads top to bottom, as nsjail's containProc()).
 * Owns: the provider's only calls to unshare, mount and pivot_root, and its only use of the
 *   confinement steps.
 * Trusts: its caller (zygote code, before any guest byte exists in the process).
 * Invariant: wk_confine() either completes every step, ending with the filter loaded, or
 *   returns -1 so the worker exits before it reads a request; the filter is always last, so
 *   the steps before it may use any syscall, and nothing after it can undo them. */
#include "confine.h"

#include <sched.h>
#include <stdbool.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "../../confine/steps.h"
#include "seccomp_table.h"

/* A failed wall before the zygote has a socket to report on: exit, and the monitor sees it. */
static void die_with_parent(pid_t monitor_pid)
{
    if (cf_parent_death(monitor_pid) < 0)
        _exit(126);
}

/* An empty, read-only root in the zygote's private mount namespace. Best effort: on failure the
 * namespace stays a private copy of the host's, which the filter already keeps out of reach. */
static int empty_root(void)
{
    if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0)
        return -1;
    if (mount("plimsoll-qjs", "/tmp", "tmpfs", MS_NOSUID | MS_NODEV | MS_NOEXEC,
              "size=4k,nr_inodes=2,mode=0555") < 0)
        return -1;
    if (chdir("/tmp") < 0)
        return -1;
    if (syscall(SYS_pivot_root, ".", ".") < 0)
        return -1;
    if (umount2(".", MNT_DETACH) < 0)
        return -1;
    if (chdir("/") < 0)
        return -1;
    if (mount(NULL, "/", NULL, MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC,
              NULL) < 0)
        return -1;
    return 0;
}

unsigned wk_zygote_setup(pid_t monitor_pid, int ctl_fd)
{
    die_with_parent(monitor_pid);
    prctl(PR_SET_NAME, "qjs-zygote", 0, 0, 0); /* exec'd through /proc/self/fd: name it */
    if (ctl_fd != WK_SOCK_FD || cf_close_from(WK_SOCK_FD + 1) < 0)
        _exit(126);
    cf_fixed_environment(true);

    /* Namespaces: shared by every worker of this zygote (creating a network namespace per run
     * would cost more than the run). The filter forbids socket, IPC and file syscalls anyway;
     * these are a second wall behind it. */
    unsigned ns = 0;
    int base = CLONE_NEWNS | CLONE_NEWNET | CLONE_NEWIPC;
    if (unshare(base) == 0) {
        ns = WK_NS_NET | WK_NS_IPC | WK_NS_MNT;
    } else if (unshare(CLONE_NEWUSER | base) == 0) {
        ns = WK_NS_USER | WK_NS_NET | WK_NS_IPC | WK_NS_MNT;
    }
    if ((ns & WK_NS_MNT) && empty_root() == 0)
        ns |= WK_NS_EMPTY_ROOT;
    /* Root in the daemon's own user namespace (not merely in the one we just made, where
     * our uid is unmapped and cannot change). */
    /* The zygote's last privileged act, step 5 of confine/steps.h for it and every worker: a
     * root daemon hands its workers no root (no supplementary groups, WK_UNPRIV_ID as every uid
     * and gid); a non-root one runs them as itself. Every capability set is emptied, verified,
     * and the parent-death signal the uid change cleared armed again; fail closed. */
    bool root = geteuid() == 0 && !(ns & WK_NS_USER);
    if (cf_ids_and_caps(root ? CF_IDS_DROP : CF_IDS_KEEP, WK_UNPRIV_ID, WK_UNPRIV_ID, monitor_pid) < 0)
        _exit(126);
    if (root)
        ns |= WK_NS_UNPRIV_ID;
    return ns;
}

int wk_confine(int sock, pid_t monitor_pid, const struct wk_limits *lim, const struct sock_fprog *filter)
{
    /* The socket becomes fd 3 (replacing the zygote's control socket) before the descriptors go. */
    if (sock != WK_SOCK_FD && dup2(sock, WK_SOCK_FD) < 0)
        return -1;
    /* RLIMIT_AS sits above the engine's own cap so the engine fails an allocation cleanly first;
     * the rest make files, cores, children, new descriptors and locked memory impossible even if
     * a syscall slipped through (RLIMIT_NOFILE 0 leaves the open socket alone). RLIMIT_NPROC
     * binds only a non-root daemon. */
    const struct cf_rlimit limits[] = {
        {RLIMIT_AS, ((uint64_t)lim->memory_mb + WK_AS_HEADROOM_MB) * 1024 * 1024},
        {RLIMIT_STACK, WK_STACK_BYTES},
        {RLIMIT_CPU, lim->cpu_seconds},
        {RLIMIT_FSIZE, 0},
        {RLIMIT_CORE, 0},
        {RLIMIT_MEMLOCK, 0},
        {RLIMIT_MSGQUEUE, 0},
        {RLIMIT_NPROC, 0},
        {RLIMIT_NOFILE, 0},
    };
    /* The steps of confine/steps.h in their order; ids and capabilities are the zygote's
     * (inherited), the environment the zygote fixed is checked rather than redone, and the
     * filter is the program the zygote exported once (no flags: what seccomp_load would do). */
    const struct cf_plan plan = {
        .parent = monitor_pid,
        .comm = "qjs-worker",
        .first_closed = WK_SOCK_FD + 1,
        .close_stdio = true,
        .must_be_open = WK_SOCK_FD,
        .tz_utc = true,
        .limits = limits,
        .n_limits = sizeof limits / sizeof limits[0],
        .ids = CF_IDS_INHERITED,
        .prog = filter,
    };
    return cf_apply(&plan, NULL);
}
