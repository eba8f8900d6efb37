/* confine.c: every wall around the QuickJS worker, in the order it goes up (STYLE.md §5).
 * Owns: the only calls to prctl, setrlimit, unshare, mount, pivot_root and seccomp(2) in
 *   the provider (nsjail's containProc(): one ordered list an auditor reads top to bottom).
 * Trusts: its caller (zygote code, before any guest byte exists in the process).
 * Invariant: wk_confine() either completes every step, ending with the filter loaded, or
 *   returns -1 so the worker exits before it reads a request; the filter is always last, so
 *   the steps before it may use any syscall, and nothing after it can undo them. */
#include "confine.h"

#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <linux/capability.h>
#include <linux/seccomp.h>
#include <sched.h>
#include <signal.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "seccomp_table.h"

#ifndef CLOSE_RANGE_UNSHARE
#define CLOSE_RANGE_UNSHARE (1U << 1)
#endif

static int close_from(unsigned first)
{
    /* close_range(2) closes every descriptor >= first in one call (Linux 5.9). */
    if (syscall(SYS_close_range, first, ~0U, 0) == 0)
        return 0;
    /* Older kernels: walk the table. Fail closed if even that cannot be verified. */
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) < 0)
        return -1;
    rlim_t max = rl.rlim_cur == RLIM_INFINITY ? 65536 : rl.rlim_cur;
    for (rlim_t fd = first; fd < max; fd++)
        close((int)fd);
    return 0;
}

static void fixed_environment(void)
{
    /* Environment variables are a channel into the sandbox (DESIGN.md): none survive. The
     * time zone is fixed before the filter, so libc never looks for zone files afterwards. */
    clearenv();
    setenv("TZ", "UTC0", 1);
    tzset();
}

static bool environment_is_fixed(void)
{
    return environ && environ[0] && strcmp(environ[0], "TZ=UTC0") == 0 && !environ[1];
}

static void die_with_parent(pid_t monitor_pid)
{
    /* Parent-death signal first: if the daemon dies from here on, so do we. Then check the
     * race where it died before the prctl (we would have been reparented already). */
    if (prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0) < 0 || getppid() != monitor_pid)
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

/* The bounding and ambient sets emptied (the bounding set only as far as we may still change
 * it: CAP_SETPCAP, so before the uid change). Caps above the kernel's last one answer EINVAL. */
static int drop_bounding_and_ambient(void)
{
    for (unsigned long c = 0; c < 64; c++)
        if (prctl(PR_CAPBSET_DROP, c, 0, 0, 0) < 0 && errno != EINVAL && errno != EPERM)
            return -1;
    if (prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0) < 0 && errno != EINVAL)
        return -1;
    return 0;
}

/* Effective, permitted and inheritable emptied. */
static int clear_capabilities(void)
{
    struct __user_cap_header_struct h = {.version = _LINUX_CAPABILITY_VERSION_3, .pid = 0};
    struct __user_cap_data_struct d[_LINUX_CAPABILITY_U32S_3];
    memset(d, 0, sizeof d);
    return syscall(SYS_capset, &h, d) == 0 ? 0 : -1;
}

static bool no_capabilities(void)
{
    struct __user_cap_header_struct h = {.version = _LINUX_CAPABILITY_VERSION_3, .pid = 0};
    struct __user_cap_data_struct d[_LINUX_CAPABILITY_U32S_3];
    if (syscall(SYS_capget, &h, d) != 0)
        return false;
    for (int i = 0; i < _LINUX_CAPABILITY_U32S_3; i++)
        if (d[i].effective || d[i].permitted || d[i].inheritable)
            return false;
    for (unsigned long c = 0; c < 64; c++)
        if (prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_IS_SET, c, 0, 0) == 1)
            return false;
    return true;
}

/* The zygote's last privileged act. A root daemon (uid 0 in its user namespace) hands its
 * workers no root: no supplementary groups, then WK_UNPRIV_ID as real, effective and saved gid
 * and uid, every capability set empty; verified, fail closed. A non-root daemon already runs
 * them as itself; the capabilities an unprivileged user namespace grants are dropped the same
 * way. The uid change clears the parent-death signal (prctl(2)): it is armed again. */
static int drop_privileges(pid_t monitor_pid, bool root)
{
    if (drop_bounding_and_ambient() < 0)
        return -1;
    if (root && (setgroups(0, NULL) < 0 || setresgid(WK_UNPRIV_ID, WK_UNPRIV_ID, WK_UNPRIV_ID) < 0 ||
                 setresuid(WK_UNPRIV_ID, WK_UNPRIV_ID, WK_UNPRIV_ID) < 0))
        return -1;
    /* Leaving uid 0 already cleared permitted and effective (no SECBIT_KEEP_CAPS); a user
     * namespace's full set is cleared here. Then check rather than trust. */
    if (clear_capabilities() < 0 || !no_capabilities())
        return -1;
    if (root) {
        uid_t ru, eu, su;
        gid_t rg, eg, sg;
        if (getresuid(&ru, &eu, &su) < 0 || getresgid(&rg, &eg, &sg) < 0 || ru == 0 || eu == 0 || su == 0 ||
            rg == 0 || eg == 0 || sg == 0 || getgroups(0, NULL) != 0)
            return -1;
    }
    die_with_parent(monitor_pid);
    return 0;
}

unsigned wk_zygote_setup(pid_t monitor_pid, int ctl_fd)
{
    die_with_parent(monitor_pid);
    prctl(PR_SET_NAME, "qjs-zygote", 0, 0, 0); /* exec'd through /proc/self/fd: name it */
    if (ctl_fd != WK_SOCK_FD || close_from(WK_SOCK_FD + 1) < 0)
        _exit(126);
    fixed_environment();

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
    bool root = geteuid() == 0 && !(ns & WK_NS_USER);
    if (drop_privileges(monitor_pid, root) < 0)
        _exit(126);
    if (root)
        ns |= WK_NS_UNPRIV_ID;
    return ns;
}

static int set_limit(int resource, rlim_t v)
{
    struct rlimit rl = {.rlim_cur = v, .rlim_max = v};
    return setrlimit(resource, &rl);
}

int wk_confine(int sock, pid_t monitor_pid, const struct wk_limits *lim, const struct sock_fprog *filter)
{
    /* 1. Parent-death signal (and a name an operator can find in ps). */
    die_with_parent(monitor_pid);
    prctl(PR_SET_NAME, "qjs-worker", 0, 0, 0);

    /* 2. Descriptors: the socket becomes fd 3 (replacing the zygote's control socket) and
     *    every other descriptor goes. */
    if (sock != WK_SOCK_FD) {
        if (dup2(sock, WK_SOCK_FD) < 0)
            return -1;
    }
    if (close_from(WK_SOCK_FD + 1) < 0)
        return -1;
    for (int fd = 0; fd < WK_SOCK_FD; fd++)
        close(fd);

    /* 3. Environment: empty but TZ=UTC0. The zygote left it so; checked here rather than
     *    redone, because clearenv/setenv/tzset rewrite heap and libc pages that are still the
     *    zygote's, each write a copy-on-write fault (~0.2 ms a worker). Anything else: redo. */
    if (!environment_is_fixed())
        fixed_environment();

    /* 4. Resource limits. RLIMIT_AS sits above the engine's own cap so the engine fails an
     *    allocation cleanly first; the rest make files, cores, children, new descriptors and
     *    locked memory impossible even if a syscall slipped through (RLIMIT_NOFILE 0 leaves
     *    the open socket alone). RLIMIT_NPROC binds only a non-root daemon. */
    rlim_t as = ((rlim_t)lim->memory_mb + WK_AS_HEADROOM_MB) * 1024 * 1024;
    if (set_limit(RLIMIT_AS, as) < 0 ||
        set_limit(RLIMIT_STACK, WK_STACK_BYTES) < 0 ||
        set_limit(RLIMIT_CPU, lim->cpu_seconds) < 0 ||
        set_limit(RLIMIT_FSIZE, 0) < 0 ||
        set_limit(RLIMIT_CORE, 0) < 0 ||
        set_limit(RLIMIT_MEMLOCK, 0) < 0 ||
        set_limit(RLIMIT_MSGQUEUE, 0) < 0 ||
        set_limit(RLIMIT_NPROC, 0) < 0 ||
        set_limit(RLIMIT_NOFILE, 0) < 0)
        return -1;

    /* 5. No new privileges: required for an unprivileged filter, and no exec could gain any. */
    if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0)
        return -1;

    /* 6. The filter, last. A failure here is fatal for the worker (OpenSSH merely logs). No
     *    flags: what seccomp_load would do for this context (no TSYNC, no log). */
    if (!filter || !filter->filter || filter->len == 0 ||
        syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, filter) != 0)
        return -1;
    return 0;
}
