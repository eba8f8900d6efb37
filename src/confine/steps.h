/* steps.h: the one confinement sequence of a process that will read hostile bytes (the quickjs
 * worker, the guestio helper; the microvm jail and the quickjs zygote use its steps one by one,
 * see their files). The walls go up in one order, an auditor reads them top to bottom here
 * (nsjail's containProc(), OpenSSH's privsep child), and the evidence card prints the same list:
 *     1. parent-death signal   SIGKILL when the daemon dies; the parent re-checked after arming
 *     2. close_range           every descriptor from `first_closed` up (and 0-2 when asked)
 *     3. clearenv              no variable survives (TZ=UTC0 when asked, fixed before the filter)
 *     4. rlimits               the caller's table
 *     5. ids and capabilities  a root daemon's child leaves root for good; every set emptied
 *     6. no_new_privs          no exec can gain a privilege; needed for an unprivileged filter
 *     7. seccomp filter        last: every step before may use any syscall, none after undoes one
 * This file holds the only calls to prctl, setrlimit, setres[ug]id, capset and seccomp of the
 * processes that use it. Nothing here allocates; a failed step returns -1 and the caller exits
 * before it reads a byte. */
#pragma once
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include <linux/filter.h>
#include <seccomp.h>

enum cf_step {
    CF_STEP_PARENT_DEATH,
    CF_STEP_CLOSE_RANGE,
    CF_STEP_CLEARENV,
    CF_STEP_RLIMITS,
    CF_STEP_IDS_CAPS,
    CF_STEP_NO_NEW_PRIVS,
    CF_STEP_FILTER,
    CF_STEP_COUNT,
};
/* The steps' names, in order (for the evidence card and the docs). */
extern const char *const cf_step_name[CF_STEP_COUNT];

struct cf_rlimit {
    int resource; /* RLIMIT_* */
    uint64_t value; /* soft and hard */
};

enum cf_ids {
    CF_IDS_INHERITED, /* a parent of this process did step 5 (the quickjs zygote): nothing to do */
    CF_IDS_KEEP,      /* keep the uid (a non-root daemon's); empty every capability set */
    CF_IDS_DROP,      /* a root daemon's child: no groups, uid/gid below for good, then as KEEP */
};

struct cf_plan {
    pid_t parent;        /* 1: the process whose death kills us (getppid() must equal it) */
    const char *comm;    /* 1: PR_SET_NAME, so an operator can find it in ps; NULL: unchanged */
    int first_closed;    /* 2: every descriptor >= this is closed */
    bool close_stdio;    /* 2: 0-2 too (the worker writes nothing there) */
    int must_be_open;    /* 2: a descriptor below first_closed that must be open after; -1: none */
    bool tz_utc;         /* 3: TZ=UTC0 is the one variable (libc reads no zone file afterwards) */
    const struct cf_rlimit *limits; /* 4 */
    size_t n_limits;
    enum cf_ids ids;     /* 5 */
    uid_t uid;           /* 5: CF_IDS_DROP only; never 0 */
    gid_t gid;
    const struct sock_fprog *prog; /* 7: a program exported before (cf_filter_export), or */
    scmp_filter_ctx ctx;           /* 7: a context to load; exactly one of the two */
};

/* Runs steps 1 to 7 in order. Returns 0 with the filter loaded, or -1 at the first step that
 * failed (*failed, when not NULL, says which). */
int cf_apply(const struct cf_plan *p, enum cf_step *failed);

/* The steps one by one, for a sequence that must put something between them (the zygote's
 * namespaces, the jail's mounts and exec). Each returns 0 or -1. */
int cf_parent_death(pid_t parent);
int cf_close_from(int first);
void cf_fixed_environment(bool tz_utc);
int cf_set_limits(const struct cf_rlimit *limits, size_t n);
/* Step 5; re-arms step 1 afterwards when parent > 0 (a credential change clears the signal). */
int cf_ids_and_caps(enum cf_ids ids, uid_t uid, gid_t gid, pid_t parent);
int cf_no_new_privs(void);
