/* confine.c: every wall around the guestio helper, in the order it goes up, and its syscall
 * allow-list (docs/privsep.md). The helper parses guest-written HTTP; after gio_confine() it
 * holds no credential, no capability, no file and no socket but its channel to the daemon and
 * the guest connections the daemon hands it.
 * Owns: the helper's only calls to setgroups/setresgid/setresuid, capset, prctl, setrlimit and
 *   seccomp(2) (STYLE.md §1: one file an auditor reads top to bottom).
 * Trusts: its caller (helper main(), before any guest byte exists in the process).
 * Invariant: gio_confine() either completes every step, ending with the filter loaded, or
 *   returns -1 and the helper exits before reading; the filter is last, so the steps before it
 *   may use any syscall and nothing after it can undo them. */
#include "confine.h"

#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <linux/capability.h>
#include <linux/seccomp.h>
#include <seccomp.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

/* clang-format off */
#define ROW(sys, arg, why) {SCMP_SYS(sys), #sys, arg, why}
/* clang-format on */

/* Everything not listed kills the helper (SCMP_ACT_KILL_PROCESS); so does a foreign arch. No
 * open, socket, connect, accept, exec, fork, kill or ptrace: a helper taken over by a guest
 * can only talk HTTP on the connections it holds and frames on its channel. */
const struct gio_rule gio_allow[] = {
    ROW(recvmsg, GIO_ARG_CHAN_ONLY, "frames and CONN descriptors (SCM_RIGHTS) from the daemon"),
    ROW(recvfrom, GIO_ARG_NO_ADDR, "recv(): request bytes from a guest connection; no source address"),
    ROW(sendto, GIO_ARG_NO_ADDR, "send(): answers to a guest, CALL and DONE frames; no destination address"),
    ROW(poll, GIO_ARG_ANY, "the event loop (x86-64 glibc poll)"),
    ROW(ppoll, GIO_ARG_ANY, "the event loop (glibc poll elsewhere)"),
    ROW(close, GIO_ARG_ANY, "a finished guest connection"),
    ROW(clock_gettime, GIO_ARG_ANY, "deadlines, when the vDSO falls back"),
    ROW(brk, GIO_ARG_ANY, "glibc malloc: heads and small frames"),
    ROW(mmap, GIO_ARG_NO_EXEC, "glibc malloc: bodies and replies; never PROT_EXEC"),
    ROW(munmap, GIO_ARG_ANY, "glibc free of bodies and replies"),
    ROW(mremap, GIO_ARG_ANY, "glibc realloc of large blocks"),
    ROW(madvise, GIO_ARG_ANY, "glibc free returning pages"),
    ROW(restart_syscall, GIO_ARG_ANY, "the kernel resuming an interrupted poll"),
    ROW(exit_group, GIO_ARG_ANY, "leave when the daemon closes the channel"),
    ROW(exit, GIO_ARG_ANY, "leave (single thread)"),
};
const unsigned gio_allow_len = sizeof gio_allow / sizeof gio_allow[0];

static int add_rule(scmp_filter_ctx ctx, const struct gio_rule *r)
{
    if (r->nr < 0)
        return 0; /* a pseudo number: the syscall does not exist on this architecture */
    switch (r->arg) {
    case GIO_ARG_CHAN_ONLY:
        return seccomp_rule_add_exact(ctx, SCMP_ACT_ALLOW, r->nr, 1, SCMP_A0(SCMP_CMP_EQ, (scmp_datum_t)GIO_CHAN_FD));
    case GIO_ARG_NO_ADDR:
        /* recv/send on the connected sockets it holds: the address argument is always NULL */
        return seccomp_rule_add_exact(ctx, SCMP_ACT_ALLOW, r->nr, 1, SCMP_A4(SCMP_CMP_EQ, (scmp_datum_t)0));
    case GIO_ARG_NO_EXEC:
        return seccomp_rule_add_exact(ctx, SCMP_ACT_ALLOW, r->nr, 1,
                                      SCMP_A2(SCMP_CMP_MASKED_EQ, (scmp_datum_t)PROT_EXEC, 0));
    default: return seccomp_rule_add_exact(ctx, SCMP_ACT_ALLOW, r->nr, 0);
    }
}

static int load_filter(void)
{
    scmp_filter_ctx ctx = seccomp_init(SCMP_ACT_KILL_PROCESS);
    if (!ctx)
        return -1;
    int r = seccomp_attr_set(ctx, SCMP_FLTATR_ACT_BADARCH, SCMP_ACT_KILL_PROCESS);
    for (unsigned i = 0; r == 0 && i < gio_allow_len; i++)
        r = add_rule(ctx, &gio_allow[i]);
    if (r == 0)
        r = seccomp_load(ctx);
    seccomp_release(ctx);
    return r == 0 ? 0 : -1;
}

static int set_limit(int resource, rlim_t v)
{
    struct rlimit rl = {.rlim_cur = v, .rlim_max = v};
    return setrlimit(resource, &rl);
}

static int caps_empty(void)
{
    struct __user_cap_header_struct h = {.version = _LINUX_CAPABILITY_VERSION_3, .pid = 0};
    struct __user_cap_data_struct d[2];
    memset(d, 0, sizeof d);
    if (syscall(SYS_capget, &h, d) < 0)
        return 0;
    for (int i = 0; i < 2; i++)
        if (d[i].effective || d[i].permitted || d[i].inheritable)
            return 0;
    return 1;
}

/* Leaves no capability in any set: bounding (needs CAP_SETPCAP, so only while still root),
 * ambient (a non-root daemon started with AmbientCapabilities= passes them across exec),
 * then effective, permitted and inheritable (the id change clears the first two, never the
 * inheritable set). Verified, not assumed. */
static int drop_ids_and_caps(const struct gio_walls *w)
{
    if (w->drop_ids) {
        if (w->uid == 0 || w->gid == 0)
            return -1;
        for (int c = 0; c <= 63; c++)
            if (prctl(PR_CAPBSET_DROP, c, 0, 0, 0) < 0 && errno != EINVAL)
                return -1;
        if (setgroups(0, NULL) < 0 || setresgid(w->gid, w->gid, w->gid) < 0 || setresuid(w->uid, w->uid, w->uid) < 0)
            return -1;
        uid_t r, e, s;
        if (getresuid(&r, &e, &s) < 0 || r != w->uid || e != w->uid || s != w->uid)
            return -1;
        if (setuid(0) == 0)
            return -1; /* the change must be irreversible */
    }
    if (prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0) < 0 && errno != EINVAL)
        return -1;
    struct __user_cap_header_struct h = {.version = _LINUX_CAPABILITY_VERSION_3, .pid = 0};
    struct __user_cap_data_struct none[2];
    memset(none, 0, sizeof none);
    if (syscall(SYS_capset, &h, none) < 0)
        return -1;
    return caps_empty() ? 0 : -1;
}

int gio_confine(const struct gio_walls *w)
{
    /* 1. Ids and capabilities first: a credential change clears the parent-death signal, so
     *    it has to come before step 2. */
    if (drop_ids_and_caps(w) < 0)
        return -1;

    /* 2. Parent-death signal, then the race where the daemon died before it was set. */
    if (prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0) < 0 || getppid() != w->parent)
        return -1;
    prctl(PR_SET_NAME, "plm-guestio", 0, 0, 0);

    /* 3. Descriptors: 0-2 (/dev/null from the spawn) and the channel; our own binary and
     *    anything else goes. close_range(2) is Linux 5.9; without it, fail closed. */
    if (syscall(SYS_close_range, GIO_EXE_FD, ~0U, 0) < 0)
        return -1;
    if (fcntl(GIO_CHAN_FD, F_GETFD) < 0)
        return -1;

    /* 4. Environment: the daemon passes none; make sure. */
    if (clearenv() != 0)
        return -1;

    /* 5. Resource limits: no files, cores, children, locked memory or message queues even if
     *    a syscall slipped through; descriptors and address space bounded for the connection
     *    cap (RLIMIT_NOFILE also bounds what SCM_RIGHTS can deliver). */
    if (set_limit(RLIMIT_FSIZE, 0) < 0 || set_limit(RLIMIT_CORE, 0) < 0 || set_limit(RLIMIT_MEMLOCK, 0) < 0 ||
        set_limit(RLIMIT_MSGQUEUE, 0) < 0 || set_limit(RLIMIT_NPROC, 0) < 0 ||
        set_limit(RLIMIT_NOFILE, w->max_fds) < 0 || set_limit(RLIMIT_AS, w->max_mem) < 0)
        return -1;

    /* 6. No new privileges (required for the filter without CAP_SYS_ADMIN). */
    if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0)
        return -1;

    /* 7. The filter, last. OpenSSH merely logs when it cannot load one; we exit. */
    return load_filter();
}
