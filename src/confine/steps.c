/* steps.c: the confinement sequence of steps.h, step by step.
 * Owns: the only prctl/setrlimit/setres[ug]id/capset/seccomp calls of the processes using it.
 * Trusts: its caller (code that runs before any hostile byte exists in the process).
 * Invariant: cf_apply() either completes every step, ending with the filter loaded, or returns
 *   -1; the filter is always last. Every credential step is verified, not assumed. */
#include "steps.h"

#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <linux/capability.h>
#include <linux/seccomp.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

const char *const cf_step_name[CF_STEP_COUNT] = {
    [CF_STEP_PARENT_DEATH] = "parent-death signal",
    [CF_STEP_CLOSE_RANGE] = "close_range",
    [CF_STEP_CLEARENV] = "clearenv",
    [CF_STEP_RLIMITS] = "rlimits",
    [CF_STEP_IDS_CAPS] = "ids and capabilities",
    [CF_STEP_NO_NEW_PRIVS] = "no_new_privs",
    [CF_STEP_FILTER] = "seccomp filter",
};

int cf_parent_death(pid_t parent)
{
    /* Armed first, then the race where the parent died before the prctl (we would have been
     * reparented already). */
    if (prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0) < 0 || getppid() != parent)
        return -1;
    return 0;
}

int cf_close_from(int first)
{
    /* close_range(2) closes every descriptor >= first in one call (Linux 5.9). */
    if (syscall(SYS_close_range, (unsigned)first, ~0U, 0) == 0)
        return 0;
    /* Older kernels: walk the table. Fail closed if even its size cannot be known. */
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) < 0)
        return -1;
    rlim_t max = rl.rlim_cur == RLIM_INFINITY ? 65536 : rl.rlim_cur;
    for (rlim_t fd = (rlim_t)first; fd < max; fd++)
        close((int)fd);
    return 0;
}

static bool environment_is(bool tz_utc)
{
    if (!tz_utc)
        return !environ || !environ[0];
    return environ && environ[0] && strcmp(environ[0], "TZ=UTC0") == 0 && !environ[1];
}

void cf_fixed_environment(bool tz_utc)
{
    /* Environment variables are a channel into the sandbox (DESIGN.md): none survive. */
    clearenv();
    if (tz_utc) {
        setenv("TZ", "UTC0", 1);
        tzset();
    }
}

int cf_set_limits(const struct cf_rlimit *limits, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        struct rlimit rl = {.rlim_cur = (rlim_t)limits[i].value, .rlim_max = (rlim_t)limits[i].value};
        if (setrlimit(limits[i].resource, &rl) < 0)
            return -1;
    }
    return 0;
}

/* The bounding set (only while we may still change it: CAP_SETPCAP, so before the uid change;
 * a non-root caller without it gets EPERM, which leaves nothing to drop) and the ambient set (a
 * daemon started with AmbientCapabilities= passes them across exec). Caps above the kernel's
 * last one answer EINVAL. */
static int drop_bounding_and_ambient(bool root)
{
    for (unsigned long c = 0; c < 64; c++)
        if (prctl(PR_CAPBSET_DROP, c, 0, 0, 0) < 0 && errno != EINVAL && (root || errno != EPERM))
            return -1;
    if (prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0) < 0 && errno != EINVAL)
        return -1;
    return 0;
}

static bool no_capabilities(void)
{
    struct __user_cap_header_struct h = {.version = _LINUX_CAPABILITY_VERSION_3, .pid = 0};
    struct __user_cap_data_struct d[_LINUX_CAPABILITY_U32S_3];
    memset(d, 0, sizeof d);
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

/* No groups, then gid and uid as real, effective and saved; verified, and irreversible. */
static int leave_root(uid_t uid, gid_t gid)
{
    if (uid == 0 || gid == 0)
        return -1;
    if (setgroups(0, NULL) < 0 || setresgid(gid, gid, gid) < 0 || setresuid(uid, uid, uid) < 0)
        return -1;
    uid_t ru, eu, su;
    gid_t rg, eg, sg;
    if (getresuid(&ru, &eu, &su) < 0 || getresgid(&rg, &eg, &sg) < 0 || ru != uid || eu != uid || su != uid ||
        rg != gid || eg != gid || sg != gid || getgroups(0, NULL) != 0)
        return -1;
    if (setuid(0) == 0)
        return -1; /* the change must be irreversible */
    return 0;
}

int cf_ids_and_caps(enum cf_ids ids, uid_t uid, gid_t gid, pid_t parent)
{
    if (ids == CF_IDS_INHERITED)
        return 0;
    if (drop_bounding_and_ambient(ids == CF_IDS_DROP) < 0)
        return -1;
    if (ids == CF_IDS_DROP && leave_root(uid, gid) < 0)
        return -1;
    /* Leaving uid 0 already cleared permitted and effective (no SECBIT_KEEP_CAPS), never the
     * inheritable set; a user namespace's full set is cleared here. Then check, not trust. */
    struct __user_cap_header_struct h = {.version = _LINUX_CAPABILITY_VERSION_3, .pid = 0};
    struct __user_cap_data_struct none[_LINUX_CAPABILITY_U32S_3];
    memset(none, 0, sizeof none);
    if (syscall(SYS_capset, &h, none) != 0 || !no_capabilities())
        return -1;
    return parent > 0 ? cf_parent_death(parent) : 0;
}

int cf_no_new_privs(void)
{
    return prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) == 0 ? 0 : -1;
}

static int load_filter(const struct cf_plan *p)
{
    /* A failure here is fatal for the caller (OpenSSH merely logs). */
    if (p->prog)
        return p->prog->filter && p->prog->len && syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, p->prog) == 0 ? 0
                                                                                                                : -1;
    return p->ctx && seccomp_load(p->ctx) == 0 ? 0 : -1;
}

static int close_step(const struct cf_plan *p)
{
    if (cf_close_from(p->first_closed) < 0)
        return -1;
    for (int fd = 0; p->close_stdio && fd < 3; fd++)
        close(fd);
    return p->must_be_open >= 0 && fcntl(p->must_be_open, F_GETFD) < 0 ? -1 : 0;
}

int cf_apply(const struct cf_plan *p, enum cf_step *failed)
{
    enum cf_step at = CF_STEP_PARENT_DEATH;
    if (cf_parent_death(p->parent) < 0)
        goto fail;
    if (p->comm)
        prctl(PR_SET_NAME, p->comm, 0, 0, 0);
    at = CF_STEP_CLOSE_RANGE;
    if (close_step(p) < 0)
        goto fail;
    /* An environment a parent already fixed is checked rather than redone: clearenv/setenv/
     * tzset rewrite heap and libc pages still shared copy-on-write with that parent. */
    at = CF_STEP_CLEARENV;
    if (!environment_is(p->tz_utc))
        cf_fixed_environment(p->tz_utc);
    if (!environment_is(p->tz_utc))
        goto fail;
    at = CF_STEP_RLIMITS;
    if (cf_set_limits(p->limits, p->n_limits) < 0)
        goto fail;
    at = CF_STEP_IDS_CAPS;
    if (cf_ids_and_caps(p->ids, p->uid, p->gid, p->parent) < 0)
        goto fail;
    at = CF_STEP_NO_NEW_PRIVS;
    if (cf_no_new_privs() < 0)
        goto fail;
    at = CF_STEP_FILTER;
    if (load_filter(p) < 0)
        goto fail;
    return 0;
fail: /* one exit for every step: report which */
    if (failed)
        *failed = at;
    return -1;
}
