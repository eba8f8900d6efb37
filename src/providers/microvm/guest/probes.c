/* probes.c: negative probes run inside the guest for the startup evidence card (issue 10, 7).
 * Each line of the answer is "name=observed"; the host (smoke.c) decides what passes, so a guest
 * that lies can only fail its own proof, never widen what the host claims.
 * Probes that could hurt PID 1 (fork bomb, memory bomb) run in a child as the run uid. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../../../guestio/vmchan.h"
#include "guest.h"

#define PROBE_UID 65534
#define FORK_BOMB_NPROC 64

static size_t append(char *buf, size_t off, size_t cap, const char *fmt, ...) __attribute__((format(printf, 4, 5)));
static size_t append(char *buf, size_t off, size_t cap, const char *fmt, ...)
{
    if (off >= cap)
        return off;
    va_list ap;
    va_start(ap, fmt);
    int k = vsnprintf(buf + off, cap - off, fmt, ap);
    va_end(ap);
    if (k < 0)
        return off;
    return off + (size_t)k >= cap ? cap - 1 : off + (size_t)k;
}

/* Entries of a sysfs directory, comma-separated ("" when empty). */
static void dir_list(const char *dir, char *out, size_t cap)
{
    out[0] = 0;
    DIR *d = opendir(dir);
    if (!d) {
        snprintf(out, cap, "(%s)", strerror(errno));
        return;
    }
    size_t off = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (e->d_name[0] == '.')
            continue;
        off = append(out, off, cap, "%s%.40s", off ? "," : "", e->d_name);
    }
    closedir(d);
}

/* A project VM's node disk, as PID 1 (root in the guest) sees it: the kernel's read-only flag,
 * what an attempt to write its first block gets, and whether /usr takes a new file. A snippet
 * VM has no /dev/vda ("absent"). */
static void disk_probe(char *out, size_t cap)
{
    char ro[8] = "?";
    int fd = open("/sys/block/vda/ro", O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        snprintf(out, cap, "absent");
        return;
    }
    ssize_t k = read(fd, ro, sizeof ro - 1);
    close(fd);
    ro[k > 0 ? (size_t)k : 0] = 0;
    ro[strcspn(ro, "\n")] = 0;
    /* The first block written back unchanged (harmless if it ever got through), past the page
     * cache (O_DIRECT), so the kernel's and QEMU's refusals both show. */
    static uint8_t block[4096] __attribute__((aligned(4096)));
    const char *w = "unreadable";
    fd = open("/dev/vda", O_RDONLY | O_CLOEXEC);
    if (fd >= 0 && pread(fd, block, sizeof block, 0) == (ssize_t)sizeof block) {
        close(fd);
        fd = open("/dev/vda", O_WRONLY | O_DIRECT | O_CLOEXEC);
        if (fd < 0)
            w = strerror(errno);
        else
            w = pwrite(fd, block, sizeof block, 0) < 0 ? strerror(errno) : "written";
    }
    if (fd >= 0)
        close(fd);
    fd = open("/usr/.plimsoll-probe", O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    const char *u = fd < 0 ? strerror(errno) : "created";
    if (fd >= 0)
        close(fd);
    snprintf(out, cap, "ro %s, write: %s, new file in /usr: %s", ro, w, u);
}

/* Filesystem types mounted in the guest, comma-separated, in /proc/mounts order. */
static void fs_types(char *out, size_t cap)
{
    out[0] = 0;
    FILE *f = fopen("/proc/mounts", "re");
    if (!f) {
        snprintf(out, cap, "(%s)", strerror(errno));
        return;
    }
    char line[512];
    size_t off = 0;
    while (fgets(line, sizeof line, f)) {
        char dev[128], dir[256], type[64];
        if (sscanf(line, "%127s %255s %63s", dev, dir, type) == 3)
            off = append(out, off, cap, "%s%s", off ? "," : "", type);
    }
    fclose(f);
}

static int become_probe_uid(void)
{
    return setgroups(0, NULL) < 0 || setresgid(PROBE_UID, PROBE_UID, PROBE_UID) < 0 ||
                   setresuid(PROBE_UID, PROBE_UID, PROBE_UID) < 0 || prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0
               ? -1
               : 0;
}

/* A fork bomb as the run uid under RLIMIT_NPROC: reports how many forks succeeded before the
 * kernel refused, then kills them all. Exit status = forks (capped at 250), 255 on error. */
static void fork_bomb(char *out, size_t cap)
{
    pid_t c = fork();
    if (c == 0) {
        struct rlimit nproc = {FORK_BOMB_NPROC, FORK_BOMB_NPROC};
        if (become_probe_uid() < 0 || setrlimit(RLIMIT_NPROC, &nproc) < 0)
            _exit(255);
        int n = 0;
        for (; n < 10000; n++) {
            pid_t g = fork();
            if (g == 0) {
                for (;;)
                    pause();
            }
            if (g < 0)
                break;
        }
        kill(-1, SIGKILL); /* every process of the probe uid but this one */
        _exit(n > 250 ? 250 : n);
    }
    int st = 0;
    if (c < 0 || waitpid(c, &st, 0) < 0) {
        snprintf(out, cap, "fork failed");
        return;
    }
    while (waitpid(-1, NULL, WNOHANG) > 0) /* the bomb's orphans were reparented to us */
        ;
    if (WIFEXITED(st) && WEXITSTATUS(st) != 255)
        snprintf(out, cap, "bounded after %d forks", WEXITSTATUS(st));
    else
        snprintf(out, cap, "probe failed (status %d)", st);
}

/* A memory bomb as the run uid: touches 1 MiB blocks until malloc fails or the guest kernel's
 * OOM killer ends it; PID 1 (and so the VM) answers afterwards. */
static void memory_bomb(char *out, size_t cap)
{
    pid_t c = fork();
    if (c == 0) {
        if (become_probe_uid() < 0)
            _exit(255);
        for (int mb = 0; mb < 1 << 20; mb++) {
            char *p = malloc(1 << 20);
            if (!p)
                _exit(1);
            memset(p, 0xa5, 1 << 20);
        }
        _exit(0);
    }
    int st = 0;
    if (c < 0 || waitpid(c, &st, 0) < 0) {
        snprintf(out, cap, "fork failed");
        return;
    }
    if (WIFSIGNALED(st))
        snprintf(out, cap, "killed by signal %d", WTERMSIG(st));
    else if (WIFEXITED(st) && WEXITSTATUS(st) == 1)
        snprintf(out, cap, "allocation refused");
    else
        snprintf(out, cap, "not bounded (status %d)", st);
}

void gs_probe(uint64_t seq)
{
    static char buf[MVC_PROBE_RESULT_MAX];
    char v[1024];
    size_t off = 0;
    dir_list("/sys/class/net", v, sizeof v);
    off = append(buf, off, sizeof buf, "net=%s\n", v);
    dir_list("/sys/block", v, sizeof v);
    off = append(buf, off, sizeof buf, "block=%s\n", v);
    fs_types(v, sizeof v);
    off = append(buf, off, sizeof buf, "fs=%s\n", v);
    disk_probe(v, sizeof v);
    off = append(buf, off, sizeof buf, "disk=%s\n", v);
    int fd = open("/etc/passwd", O_RDONLY | O_CLOEXEC);
    off = append(buf, off, sizeof buf, "host_file=%s\n", fd >= 0 ? "readable" : strerror(errno));
    if (fd >= 0)
        close(fd);
    fork_bomb(v, sizeof v);
    off = append(buf, off, sizeof buf, "fork_bomb=%s\n", v);
    memory_bomb(v, sizeof v);
    off = append(buf, off, sizeof buf, "memory_bomb=%s\n", v);
    for (size_t i = 0; i < off; i++)
        if (buf[i] != '\n' && (buf[i] < 0x20 || buf[i] > 0x7e))
            buf[i] = '?';
    gs_send(MVC_PROBE_RESULT, seq, buf, (uint32_t)off);
}
