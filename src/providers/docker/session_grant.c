/* session_grant.c: how a grant reaches a docker session's snippet (docs/sessions.md, "Grants in
 * sessions"). A session's container lives for many calls and cannot gain a mount after it
 * started, so the transport is laid out in two stages:
 *  - at open, a private host directory <base>/plimsoll-session-<daemon pid>-XXXXXX, mode 0711
 *    (the guest uid may traverse it but not list it), is bind-mounted at DOCK_SG_DIR_IN;
 *  - per granted call, a broker socket and the profile's node preload appear in it under a name
 *    of 128 random bits (hostsock.c serves them) and are removed when the call ends, so a
 *    process a call left behind knows only a name that no longer exists, and cannot learn the
 *    next one (the directory is not readable to it).
 * Owns: the session directory (made at open, removed with the session; the startup sweep removes
 *   those whose daemon is gone) and, for one call, its socket and preload.
 * Trusts: nothing from the container; the socket is served by hostsock.c (guestio). */
#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "internal.h"
#include "session_grant.h"

#define DIR_PREFIX "plimsoll-session-"

/* Room for "<dir>/<32 hex>.sock" in sun_path. */
#define NAME_ROOM (1 + 32 + sizeof ".sock")

int dock_sg_dir_make(const char *base, char *out, size_t cap, struct plm_err *err)
{
    out[0] = 0;
    char tmpl[sizeof((struct sockaddr_un *)0)->sun_path];
    int n = snprintf(tmpl, sizeof tmpl, "%s/" DIR_PREFIX "%ld-XXXXXX", base, (long)getpid());
    if (n < 0 || (size_t)n + NAME_ROOM > sizeof tmpl || (size_t)n >= cap)
        return plm_fail(err, ENAMETOOLONG, PLM_E_INTERNAL, "\"%s\" is too long for a session's socket path", base);
    if (!mkdtemp(tmpl))
        return plm_fail(err, errno, PLM_E_INTERNAL, "mkdtemp under \"%s\": %s", base, strerror(errno));
    /* 0711: the container's uid reaches a socket whose name it was given, and lists nothing. */
    if (chmod(tmpl, 0711) < 0) {
        int e = errno;
        rmdir(tmpl);
        return plm_fail(err, e, PLM_E_INTERNAL, "chmod \"%s\": %s", tmpl, strerror(e));
    }
    snprintf(out, cap, "%s", tmpl);
    return 0;
}

void dock_sg_dir_remove(const char *dir)
{
    if (!dir || !*dir)
        return;
    DIR *d = opendir(dir);
    if (d) { /* what a call could not remove (a daemon stopping mid-call): ours, flat files */
        for (struct dirent *e; (e = readdir(d));) {
            if (e->d_name[0] == '.')
                continue;
            char f[sizeof((struct sockaddr_un *)0)->sun_path + 64];
            if ((size_t)snprintf(f, sizeof f, "%s/%s", dir, e->d_name) < sizeof f)
                unlink(f);
        }
        closedir(d);
    }
    rmdir(dir);
}

int dock_sg_sweep(const char *base)
{
    DIR *d = opendir(base);
    if (!d)
        return 0;
    int n = 0;
    for (struct dirent *e; (e = readdir(d));) {
        if (strncmp(e->d_name, DIR_PREFIX, sizeof DIR_PREFIX - 1))
            continue;
        char *end;
        errno = 0;
        long pid = strtol(e->d_name + sizeof DIR_PREFIX - 1, &end, 10);
        if (errno || *end != '-' || pid <= 0)
            continue;
        /* a daemon on this host that still runs keeps its sessions' directories; ours has none yet */
        if (pid != (long)getpid() && !(kill((pid_t)pid, 0) < 0 && errno == ESRCH))
            continue;
        char dir[sizeof((struct sockaddr_un *)0)->sun_path + 64];
        struct stat st;
        if ((size_t)snprintf(dir, sizeof dir, "%s/%s", base, e->d_name) >= sizeof dir || lstat(dir, &st) < 0 ||
            !S_ISDIR(st.st_mode) || st.st_uid != geteuid())
            continue;
        dock_sg_dir_remove(dir);
        n += access(dir, F_OK) < 0;
    }
    closedir(d);
    return n;
}

int dock_sg_begin(const char *dir, const struct plm_host_api *api, struct dock_sg_call *c, struct plm_err *err)
{
    memset(c, 0, sizeof *c);
    uint8_t rnd[16];
    char stem[33];
    if (dock_random(rnd, sizeof rnd) < 0)
        return plm_fail(err, errno, PLM_E_INTERNAL, "getrandom failed");
    dock_hex(rnd, sizeof rnd, stem);
    stem[32] = 0;
    if (dock_hostsock_start_in(dir, stem, api, NULL, &c->hs, err) < 0)
        return -1;
    snprintf(c->sock_in, sizeof c->sock_in, DOCK_SG_DIR_IN "/%s.sock", stem);
    snprintf(c->preload_in, sizeof c->preload_in, DOCK_SG_DIR_IN "/%s.mjs", stem);
    return 0;
}

void dock_sg_end(struct dock_sg_call *c)
{
    dock_hostsock_stop(c->hs); /* no call begins; the socket and preload are gone */
    c->hs = NULL;
}
