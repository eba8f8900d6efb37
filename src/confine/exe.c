/* exe.c: open_trusted_exe (exe.h).
 * Trusts: nothing of the file but what fstat says of the descriptor it opened (checked on the
 *   descriptor, never the path again, so a swap after the check changes nothing: every exec
 *   and hash uses this descriptor).
 * Invariant: a descriptor is returned only for a regular file with an execute bit, owned by
 *   root or the daemon's euid, with no group or other write bit. */
#include "exe.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../core/cleanup.h"

static bool trusted(const struct stat *sb)
{
    return S_ISREG(sb->st_mode) && !(sb->st_mode & (S_IWGRP | S_IWOTH)) && (sb->st_mode & S_IXUSR) &&
           (sb->st_uid == 0 || sb->st_uid == geteuid());
}

/* The candidates in order: configured, else beside the daemon, else the build tree's. */
static int candidates(const char *configured, const char *name, const char *build_path, char cand[2][PATH_MAX])
{
    if (configured) {
        snprintf(cand[0], PATH_MAX, "%s", configured);
        return 1;
    }
    int n = 0;
    char self[PATH_MAX];
    ssize_t k = readlink("/proc/self/exe", self, sizeof self - 1);
    if (k > 0) {
        self[k] = 0;
        char *slash = strrchr(self, '/');
        if (slash) {
            *slash = 0;
            snprintf(cand[n++], PATH_MAX, "%.*s/%s", PATH_MAX - 64, self, name);
        }
    }
    if (build_path && build_path[0])
        snprintf(cand[n++], PATH_MAX, "%s", build_path);
    return n;
}

int open_trusted_exe(const char *configured, const char *name, const char *build_path, const char *what, char *used,
                     size_t used_len, struct plm_err *err)
{
    char cand[2][PATH_MAX];
    int n = candidates(configured, name, build_path, cand);
    for (int i = 0; i < n; i++) {
        cleanup_close int fd = open(cand[i], O_RDONLY | O_CLOEXEC);
        if (fd < 0)
            continue;
        struct stat sb;
        if (fstat(fd, &sb) < 0 || !trusted(&sb))
            return plm_fail(err, EPERM, PLM_E_INTERNAL,
                            "%s \"%s\" is not a private executable file (a regular executable owned by root or "
                            "the daemon's user, writable by no one else)",
                            what, cand[i]);
        if (used && used_len) {
            size_t len = strnlen(cand[i], used_len - 1);
            memcpy(used, cand[i], len);
            used[len] = 0;
        }
        return take_fd(&fd);
    }
    return plm_fail(err, ENOENT, PLM_E_INTERNAL, "%s \"%s\" not found", what, n ? cand[0] : name);
}
