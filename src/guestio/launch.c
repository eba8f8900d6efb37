/* launch.c: the guestio helper process from the daemon's side (launch.h): which binary, which
 * ids, and its start up to the HELLO it sends once confined.
 * Owns: nothing past a call; a helper that did not say HELLO is killed and reaped here.
 * Trusts: the binary only once it is a regular executable file no one but root or our euid can
 *   write; the helper's first frame only after gio_hdr_decode and gio_hello_decode.
 * Invariant: the helper starts with an empty environment, /dev/null on 0-2, its channel on 3
 *   and its own binary on 4 (it closes that first), nothing else, default signal dispositions
 *   and an empty mask; it is exec'd (posix_spawn: vfork+exec, safe in a threaded daemon), so no
 *   page of the daemon's memory reaches it. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <pwd.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "../core/clock.h"
#include "../confine/exe.h"
#include "../core/cleanup.h"
#include "confine.h"
#include "frame.h"
#include "launch.h"

#ifndef GIO_HELPER_BUILD_PATH
#define GIO_HELPER_BUILD_PATH ""
#endif

/* The binary: configured (tests), else beside the daemon (/proc/self/exe), else the build
 * tree's. Opened once per server; every spawn execs this descriptor. */
int gio_helper_open(const char *configured, struct plm_err *err)
{
    int fd = open_trusted_exe(configured, GIO_HELPER_NAME, GIO_HELPER_BUILD_PATH, "guestio helper", NULL, 0, err);
    if (fd < 0)
        return -1;
    /* Above 4, so the spawn's dup2 onto 0-4 never overwrites it first. */
    int hi = fcntl(fd, F_DUPFD_CLOEXEC, 5);
    close(fd);
    if (hi < 0)
        return plm_fail(err, errno, PLM_E_INTERNAL, "guestio helper fd: %s", strerror(errno));
    return hi;
}

/* A root daemon's helper runs as GIO_HELPER_USER, else GIO_HELPER_UID, never as an account
 * that exists for something else. */
int gio_helper_ids(struct gio_ids *ids, struct plm_err *err)
{
    *ids = (struct gio_ids){.drop = geteuid() == 0};
    if (!ids->drop)
        return 0;
    struct passwd pw, *res = NULL;
    char buf[4096];
    if (getpwnam_r(GIO_HELPER_USER, &pw, buf, sizeof buf, &res) == 0 && res) {
        if (pw.pw_uid == 0 || pw.pw_gid == 0)
            return plm_fail(err, EPERM, PLM_E_INTERNAL,
                               "user \"" GIO_HELPER_USER "\" must not have uid or gid 0");
        ids->uid = pw.pw_uid;
        ids->gid = pw.pw_gid;
        return 0;
    }
    if (getpwuid_r(GIO_HELPER_UID, &pw, buf, sizeof buf, &res) == 0 && res)
        return plm_fail(err, EEXIST, PLM_E_INTERNAL,
                           "uid %u belongs to \"%s\"; create a user \"" GIO_HELPER_USER "\" for the guestio helper",
                           GIO_HELPER_UID, pw.pw_name);
    ids->uid = GIO_HELPER_UID;
    ids->gid = GIO_HELPER_UID;
    return 0;
}

/* Spawns the helper (posix_spawn: vfork+exec, safe in a threaded daemon) through the
 * descriptor opened at start and waits for its HELLO, which it sends only once confined. */
/* The helper's command line: the daemon's pid, its ids ("-" when not dropping), the limits and
 * the mode. a[] holds the numbers' text. */
static void helper_argv(const struct gio_spawn *s, char a[9][24], char *argv[12])
{
    snprintf(a[0], sizeof a[0], "%d", (int)getpid());
    snprintf(a[1], sizeof a[1], s->ids.drop ? "%u" : "-", (unsigned)s->ids.uid);
    snprintf(a[2], sizeof a[2], s->ids.drop ? "%u" : "-", (unsigned)s->ids.gid);
    snprintf(a[3], sizeof a[3], "%u", s->lim.conn_max);
    snprintf(a[4], sizeof a[4], "%u", s->lim.head_max);
    snprintf(a[5], sizeof a[5], "%u", s->lim.body_max);
    snprintf(a[6], sizeof a[6], "%u", s->lim.head_ms);
    snprintf(a[7], sizeof a[7], "%u", s->lim.read_ms);
    snprintf(a[8], sizeof a[8], "%u", s->lim.write_ms);
    argv[0] = GIO_HELPER_NAME;
    for (int i = 0; i < 9; i++)
        argv[1 + i] = a[i];
    argv[10] = (char *)(s->mode ? s->mode : "http");
    argv[11] = NULL;
}

/* posix_spawn (vfork+exec, safe in a threaded daemon) of the opened binary with an empty
 * environment, /dev/null on 0-2, the channel on 3, the binary on 4, nothing else, default
 * signal dispositions and an empty mask. Returns posix_spawn's result. */
static int spawn_helper(const struct gio_spawn *s, int theirs, char *argv[], pid_t *pid)
{
    char *const envp[] = {NULL};
    posix_spawn_file_actions_t fa;
    posix_spawnattr_t attr;
    sigset_t none, all;
    sigemptyset(&none);
    sigfillset(&all);
    posix_spawn_file_actions_init(&fa);
    posix_spawnattr_init(&attr);
    posix_spawn_file_actions_adddup2(&fa, s->exe_fd, GIO_EXE_FD);
    posix_spawn_file_actions_adddup2(&fa, theirs, GIO_CHAN_FD);
    posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDWR, 0);
    posix_spawn_file_actions_adddup2(&fa, 0, 1);
    posix_spawn_file_actions_adddup2(&fa, 0, 2);
#if defined(__GLIBC__) && (__GLIBC__ > 2 || (__GLIBC__ == 2 && __GLIBC_MINOR__ >= 34))
    posix_spawn_file_actions_addclosefrom_np(&fa, GIO_EXE_FD + 1);
#endif
    posix_spawnattr_setsigmask(&attr, &none);
    posix_spawnattr_setsigdefault(&attr, &all);
    posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
    int rc = posix_spawn(pid, "/proc/self/fd/4", &fa, &attr, argv, envp);
    posix_spawn_file_actions_destroy(&fa);
    posix_spawnattr_destroy(&attr);
    return rc;
}

/* The helper's one HELLO, within GIO_HELLO_MS: it says it is confined. */
static bool read_hello(int mine)
{
    uint8_t buf[F16_HDR_LEN + 4];
    size_t have = 0;
    int64_t until = (int64_t)clock_mono_ms() + GIO_HELLO_MS;
    while (have < sizeof buf) {
        int64_t left = until - (int64_t)clock_mono_ms();
        struct pollfd p = {mine, POLLIN, 0};
        if (left <= 0 || (poll(&p, 1, (int)left) < 0 && errno != EINTR))
            break;
        ssize_t n = recv(mine, buf + have, sizeof buf - have, MSG_DONTWAIT);
        if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR))
            break;
        if (n > 0)
            have += (size_t)n;
    }
    struct f16_hdr h;
    uint32_t version = 0;
    return have == sizeof buf && gio_hdr_decode(buf, GIO_TO_DAEMON, &h) == 0 && h.type == GIO_T_HELLO &&
           gio_hello_decode(buf + F16_HDR_LEN, h.len, &version) == 0;
}

int gio_helper_spawn(const struct gio_spawn *s, pid_t *pid_out, int *chan_out, int *status, struct plm_err *err)
{
    int sv[2];
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0)
        return plm_fail(err, errno, PLM_E_INTERNAL, "guestio socketpair: %s", strerror(errno));
    cleanup_close int mine = sv[0];
    cleanup_close int theirs = sv[1];
    if (theirs <= GIO_EXE_FD) {
        int moved = fcntl(theirs, F_DUPFD_CLOEXEC, 5);
        if (moved < 0)
            return plm_fail(err, errno, PLM_E_INTERNAL, "guestio fd: %s", strerror(errno));
        close(theirs);
        theirs = moved;
    }
    char a[9][24], *argv[12];
    helper_argv(s, a, argv);
    pid_t pid;
    int rc = spawn_helper(s, theirs, argv, &pid);
    if (rc != 0)
        return plm_fail(err, rc, PLM_E_INTERNAL, "spawn guestio helper: %s", strerror(rc));
    cleanup_pid pid_t child = pid;
    close(take_fd(&theirs));
    if (!read_hello(mine)) {
        int st = 0;
        kill(child, SIGKILL);
        while (waitpid(child, &st, 0) < 0 && errno == EINTR)
            ;
        take_pid(&child);
        *status = st;
        return plm_fail(err, 0, PLM_E_INTERNAL, "guestio helper did not start (exit status %d, signal %d)",
                        WIFEXITED(st) ? WEXITSTATUS(st) : -1, WIFSIGNALED(st) ? WTERMSIG(st) : 0);
    }
    if (fcntl(mine, F_SETFL, O_NONBLOCK) < 0)
        return plm_fail(err, errno, PLM_E_INTERNAL, "guestio channel: %s", strerror(errno));
    *pid_out = take_pid(&child);
    *chan_out = take_fd(&mine);
    return 0;
}
