/* posture.c: the docker host's posture (issue 14 §6): rootful, rootless or userns-remap, found
 * from the Engine API's /info and the uid that serves the API socket; the LSM confinement a
 * container actually got; the card lines that state them.
 * Owns: nothing beyond struct dock_posture values (fixed-size, no allocation).
 * Trusts: nothing in /info: every field is type-checked, bounded and reduced to printable ASCII;
 * a SecurityOptions value that is not a short list of short strings is an error, never a guess.
 * Invariant: a mode is stated only when /info and the socket's peer uid agree (a rootless daemon
 * is served by a non-root uid, a rootful or remapping one by uid 0); otherwise the mode is
 * unknown and the card's posture check fails, so the provider is not proven. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "internal.h"

#define SECOPT_MAX 32      /* SecurityOptions entries we read */
#define SECOPT_LEN_MAX 256 /* bytes per entry */

const char *dock_mode_name(enum dock_mode m)
{
    switch (m) {
    case DOCK_MODE_ROOTFUL:
        return "rootful";
    case DOCK_MODE_ROOTLESS:
        return "rootless";
    case DOCK_MODE_USERNS_REMAP:
        return "userns-remap";
    default:
        return "unknown";
    }
}

static void printable(char *dst, size_t cap, const char *s, size_t n)
{
    size_t k = 0;
    for (size_t i = 0; s && i < n && s[i] && k + 1 < cap; i++)
        dst[k++] = (s[i] >= 0x20 && s[i] < 0x7f) ? s[i] : '?';
    dst[k] = 0;
}

static void field(char *dst, size_t cap, const json_t *v)
{
    const char *s = json_string_value(v);
    printable(dst, cap, s ? s : "", s ? json_string_length(v) : 0);
    if (!*dst)
        snprintf(dst, cap, "?");
}

/* One SecurityOptions entry, "name=seccomp,profile=default": the name and, for seccomp, the
 * profile. Returns -1 when the entry has no name= key. */
static int secopt_parse(const char *e, size_t len, char *name, size_t ncap, char *profile, size_t pcap)
{
    *name = *profile = 0;
    size_t i = 0;
    while (i < len) {
        size_t j = i;
        while (j < len && e[j] != ',')
            j++;
        if (j - i > 5 && !memcmp(e + i, "name=", 5))
            printable(name, ncap, e + i + 5, j - i - 5);
        else if (j - i > 8 && !memcmp(e + i, "profile=", 8))
            printable(profile, pcap, e + i + 8, j - i - 8);
        i = j + 1;
    }
    return *name ? 0 : -1;
}

int dock_posture_from_info(const json_t *info, long peer_uid, struct dock_posture *p, struct plm_err *err)
{
    memset(p, 0, sizeof *p);
    p->daemon_uid = peer_uid;
    snprintf(p->seccomp_default, sizeof p->seccomp_default, "none");
    if (!json_is_object(info))
        return plm_fail(err, 0, PLM_E_INTERNAL, "docker info: not a JSON object");
    field(p->server_version, sizeof p->server_version, json_object_get(info, "ServerVersion"));
    field(p->cgroup_version, sizeof p->cgroup_version, json_object_get(info, "CgroupVersion"));
    field(p->cgroup_driver, sizeof p->cgroup_driver, json_object_get(info, "CgroupDriver"));
    const json_t *so = json_object_get(info, "SecurityOptions");
    if (!json_is_array(so) || json_array_size(so) > SECOPT_MAX)
        return plm_fail(err, 0, PLM_E_INTERNAL, "docker info: SecurityOptions is not a list of at most %d entries",
                        SECOPT_MAX);
    bool rootless = false, userns = false;
    size_t used = 0;
    for (size_t i = 0; i < json_array_size(so); i++) {
        const json_t *v = json_array_get(so, i);
        const char *e = json_string_value(v);
        size_t len = e ? json_string_length(v) : 0;
        if (!e || len == 0 || len > SECOPT_LEN_MAX || memchr(e, 0, len))
            return plm_fail(err, 0, PLM_E_INTERNAL, "docker info: SecurityOptions entry %zu is not a short string", i);
        char name[32], profile[sizeof p->seccomp_default];
        if (secopt_parse(e, len, name, sizeof name, profile, sizeof profile) < 0)
            return plm_fail(err, 0, PLM_E_INTERNAL, "docker info: SecurityOptions entry %zu names no option", i);
        if (!strcmp(name, "rootless"))
            rootless = true;
        else if (!strcmp(name, "userns"))
            userns = true;
        else if (!strcmp(name, "apparmor"))
            p->apparmor = true;
        else if (!strcmp(name, "selinux"))
            p->selinux = true;
        else if (!strcmp(name, "seccomp"))
            snprintf(p->seccomp_default, sizeof p->seccomp_default, "%s", *profile ? profile : "default");
        int n = snprintf(p->security_options + used, sizeof p->security_options - used, "%s%s", used ? "," : "",
                         name);
        if (n > 0 && (size_t)n < sizeof p->security_options - used)
            used += (size_t)n;
    }
    /* A rootless daemon runs inside a user namespace of an unprivileged user, so its socket's peer
     * is that user; a rootful daemon, remapping or not, is root. Anything else (a proxy run by
     * another user, a lying /info) leaves the mode unknown. */
    const char *claimed = rootless ? "rootless" : userns ? "userns-remap" : "rootful";
    if (peer_uid < 0)
        snprintf(p->why, sizeof p->why, "/info says %s; the API socket's peer uid is unreadable", claimed);
    else if (rootless && peer_uid == 0)
        snprintf(p->why, sizeof p->why, "/info says rootless, but uid 0 serves the API socket");
    else if (!rootless && peer_uid != 0)
        snprintf(p->why, sizeof p->why, "/info says %s, but uid %ld (not root) serves the API socket", claimed,
                 peer_uid);
    else {
        p->mode = rootless ? DOCK_MODE_ROOTLESS : userns ? DOCK_MODE_USERNS_REMAP : DOCK_MODE_ROOTFUL;
        snprintf(p->why, sizeof p->why, "/info SecurityOptions [%.60s]; dockerd uid %ld", p->security_options,
                 peer_uid);
    }
    return 0;
}

long dock_peer_uid(const char *sock)
{
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -1;
    struct sockaddr_un a = {.sun_family = AF_UNIX};
    snprintf(a.sun_path, sizeof a.sun_path, "%s", sock);
    struct ucred cr;
    socklen_t len = sizeof cr;
    long uid = -1;
    if (connect(fd, (struct sockaddr *)&a, sizeof a) == 0 && getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cr, &len) == 0 &&
        len == sizeof cr)
        uid = (long)cr.uid;
    close(fd);
    return uid;
}

/* The first line of /proc/<pid>/<rel>, printable, or "" when unreadable. */
static void proc_line(long pid, const char *rel, char *out, size_t cap)
{
    *out = 0;
    char path[64];
    snprintf(path, sizeof path, "/proc/%ld/%s", pid, rel);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return;
    char buf[256];
    ssize_t n = read(fd, buf, sizeof buf - 1);
    close(fd);
    if (n <= 0)
        return;
    buf[n] = 0;
    buf[strcspn(buf, "\n")] = 0;
    printable(out, cap, buf, (size_t)n);
}

void dock_posture_container(const json_t *inspect, long pid, struct dock_posture *p)
{
    field(p->apparmor_profile, sizeof p->apparmor_profile, json_object_get(inspect, "AppArmorProfile"));
    field(p->selinux_label, sizeof p->selinux_label, json_object_get(inspect, "ProcessLabel"));
    /* What the kernel says about the container's first process, when its pid is visible here
     * (not under a rootless daemon with its own pid namespace). */
    snprintf(p->lsm_observed, sizeof p->lsm_observed, "unreadable");
    if (pid > 0) {
        char cur[sizeof p->lsm_observed];
        proc_line(pid, "attr/apparmor/current", cur, sizeof cur);
        if (!*cur)
            proc_line(pid, "attr/current", cur, sizeof cur);
        if (*cur)
            snprintf(p->lsm_observed, sizeof p->lsm_observed, "%s", cur);
    }
}

bool dock_posture_confined(const struct dock_posture *p)
{
    const char *o = p->lsm_observed;
    return *o && strcmp(o, "unreadable") != 0 && strcmp(o, "unconfined") != 0 && strncmp(o, "unconfined ", 11) != 0;
}

int dock_posture_lines(const struct dock_posture *p, const char *runtime, const char *runtime_version,
                       const char *seccomp_sha256, struct plm_evidence *ev)
{
    int r = 0;
    r |= ev_add_confinement(ev, "docker host: %s, dockerd %.40s uid %ld", dock_mode_name(p->mode), p->server_version,
                            p->daemon_uid);
    r |= ev_add_confinement(ev, "docker runtime: %.30s %.60s", runtime, runtime_version);
    if (seccomp_sha256 && *seccomp_sha256)
        r |= ev_add_confinement(ev, "seccomp profile sha256:%.64s", seccomp_sha256);
    else
        r |= ev_add_confinement(ev, "docker seccomp profile: none sent (the runtime filters on its own)");
    r |= ev_add_confinement(ev, "apparmor: %s on the host; container profile \"%.40s\"", p->apparmor ? "on" : "off",
                            p->apparmor_profile);
    r |= ev_add_confinement(ev, "selinux: %s on the host; container label \"%.60s\"", p->selinux ? "on" : "off",
                            p->selinux_label);
    r |= ev_add_confinement(ev, "LSM label of the container's process (kernel): %.60s", p->lsm_observed);
    r |= ev_add_confinement(ev, "cgroup v%.4s, driver %.15s", p->cgroup_version, p->cgroup_driver);
    return r ? -1 : 0;
}
