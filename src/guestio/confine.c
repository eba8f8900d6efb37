/* confine.c: every wall around the guestio helper, in the order it goes up, and its syscall
 * allow-list (docs/privsep.md). The helper parses guest-written HTTP; after gio_confine() it
 * holds no credential, no capability, no file and no socket but its channel to the daemon and
 * the guest connections the daemon hands it.
 * Owns: the helper's only use of the confinement steps (confine/steps.h, the one ordered
 *   sequence an auditor reads top to bottom) and its filter context until loaded.
 * Trusts: its caller (helper main(), before any guest byte exists in the process).
 * Invariant: gio_confine() either completes every step, ending with the filter loaded, or
 *   returns -1 and the helper exits before reading; the filter is last, so the steps before it
 *   may use any syscall and nothing after it can undo them. */
#include "confine.h"

#include <sys/resource.h>

#include "../confine/steps.h"
#include "../core/cleanup_seccomp.h"

/* Everything not listed kills the helper (SCMP_ACT_KILL_PROCESS); so does a foreign arch. No
 * open, socket, connect, accept, exec, fork, kill or ptrace: a helper taken over by a guest
 * can only talk HTTP on the connections it holds and frames on its channel. */
const struct cf_row gio_allow[] = {
    CF_ROW(recvmsg,        CF_FD_ONLY, "frames and CONN descriptors (SCM_RIGHTS) from the daemon"),
    CF_ROW(recvfrom,       CF_NO_ADDR, "recv(): request bytes from a guest connection; no source address"),
    CF_ROW(sendto,         CF_NO_ADDR, "send(): answers to a guest, CALL and DONE frames; no destination address"),
    CF_ROW(poll,           CF_ANY,     "the event loop (x86-64 glibc poll)"),
    CF_ROW(ppoll,          CF_ANY,     "the event loop (glibc poll elsewhere)"),
    CF_ROW(close,          CF_ANY,     "a finished guest connection"),
    CF_ROW(clock_gettime,  CF_ANY,     "deadlines, when the vDSO falls back"),
    CF_ROW(brk,            CF_ANY,     "glibc malloc: heads and small frames"),
    CF_ROW(mmap,           CF_NO_EXEC, "glibc malloc: bodies and replies; never PROT_EXEC"),
    CF_ROW(munmap,         CF_ANY,     "glibc free of bodies and replies"),
    CF_ROW(mremap,         CF_ANY,     "glibc realloc of large blocks"),
    CF_ROW(madvise,        CF_ANY,     "glibc free returning pages"),
    CF_ROW(restart_syscall, CF_ANY,    "the kernel resuming an interrupted poll"),
    CF_ROW(exit_group,     CF_ANY,     "leave when the daemon closes the channel"),
    CF_ROW(exit,           CF_ANY,     "leave (single thread)"),
};
const unsigned gio_allow_len = sizeof gio_allow / sizeof gio_allow[0];

int gio_confine(const struct gio_walls *w)
{
    /* No files, cores, children, locked memory or message queues even if a syscall slipped
     * through; descriptors and address space bounded for the connection cap (RLIMIT_NOFILE also
     * bounds what SCM_RIGHTS can deliver). */
    const struct cf_rlimit limits[] = {
        {RLIMIT_FSIZE, 0},
        {RLIMIT_CORE, 0},
        {RLIMIT_MEMLOCK, 0},
        {RLIMIT_MSGQUEUE, 0},
        {RLIMIT_NPROC, 0},
        {RLIMIT_NOFILE, w->max_fds},
        {RLIMIT_AS, w->max_mem},
    };
    cleanup_seccomp scmp_filter_ctx filter = cf_filter_build(gio_allow, gio_allow_len, GIO_CHAN_FD);
    if (!filter)
        return -1;
    /* The steps of confine/steps.h in their order: 0-2 (/dev/null from the spawn) and the
     * channel stay, our own binary and anything else goes; the daemon passes no environment,
     * and we make sure; a root daemon's helper leaves root for good (the parent-death signal the
     * id change clears is armed again); the filter, last. */
    const struct cf_plan plan = {
        .parent = w->parent,
        .comm = "plm-guestio",
        .first_closed = GIO_EXE_FD,
        .must_be_open = GIO_CHAN_FD,
        .limits = limits,
        .n_limits = sizeof limits / sizeof limits[0],
        .ids = w->drop_ids ? CF_IDS_DROP : CF_IDS_KEEP,
        .uid = w->uid,
        .gid = w->gid,
        .ctx = filter,
    };
    return cf_apply(&plan, NULL);
}
