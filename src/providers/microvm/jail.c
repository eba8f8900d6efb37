/* jail.c: the jail every QEMU runs in (jail.h). The one file of this provider that calls clone,
 * mount, pivot_root, setresuid or prctl; its rlimits and no_new_privs are confine/steps.c's.
 * Trusts: the host's QEMU installation (Debian's package) and the kernel and initramfs the
 *   provider hashed; nothing from a guest (no guest byte is read here).
 * Invariant: QEMU never runs as root, never holds a capability, never sees a host file beyond
 *   the read-only binds listed at init, and dies with the thread that spawned it
 *   (PR_SET_PDEATHSIG) or with its pid namespace. Every step failing in the child ends it with a
 *   distinct status before exec; nothing of the jail outlives the child's namespaces. */
#include "jail.h"

#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <linux/sched.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../../confine/steps.h"
#include "../../core/cleanup.h"

#define TRACE_MAX (64 * 1024)

static int add_file(struct mv_jail *j, const char *host_path, const char *jail_path, struct plm_err *err)
{
    if (j->n_files == MV_JAIL_FILES_MAX)
        return plm_fail(err, 0, PLM_E_INTERNAL, "microvm jail: too many files");
    struct mv_jail_file *f = &j->files[j->n_files];
    if (!realpath(host_path, f->src))
        return plm_fail(err, errno, PLM_E_INTERNAL, "microvm jail: `%s`: %s", host_path,
                           strerror(errno));
    struct statvfs sv;
    if (statvfs(f->src, &sv) < 0)
        return plm_fail(err, errno, PLM_E_INTERNAL, "microvm jail: statvfs `%s`", f->src);
    f->lock_flags = (sv.f_flag & ST_NOSUID ? MS_NOSUID : 0) | (sv.f_flag & ST_NODEV ? MS_NODEV : 0) |
                    (sv.f_flag & ST_NOEXEC ? MS_NOEXEC : 0);
    if (snprintf(f->dst, sizeof f->dst, "%s%s", j->root, jail_path) >= (int)sizeof f->dst)
        return plm_fail(err, 0, PLM_E_INTERNAL, "microvm jail: path too long");
    /* Every ancestor directory of the jail path, parents first, once. */
    char tmp[PATH_MAX];
    snprintf(tmp, sizeof tmp, "%s", jail_path);
    for (char *s = strchr(tmp + 1, '/'); s; s = strchr(s + 1, '/')) {
        *s = 0;
        char d[PATH_MAX];
        if (snprintf(d, sizeof d, "%s%.3900s", j->root, tmp) >= (int)sizeof d)
            return plm_fail(err, 0, PLM_E_INTERNAL, "microvm jail: path too long");
        bool have = false;
        for (int i = 0; i < j->n_dirs && !have; i++)
            have = strcmp(j->dirs[i], d) == 0;
        if (!have) {
            if (j->n_dirs == MV_JAIL_DIRS_MAX)
                return plm_fail(err, 0, PLM_E_INTERNAL, "microvm jail: too many directories");
            memcpy(j->dirs[j->n_dirs++], d, sizeof d);
        }
        *s = '/';
    }
    j->n_files++;
    return 0;
}

/* QEMU's shared libraries as its dynamic loader resolves them (what ldd prints): the binary is
 * started with LD_TRACE_LOADED_OBJECTS=1, which lists and exits without running QEMU's code. */
static int trace_libs(struct mv_jail *j, const char *qemu, struct plm_err *err)
{
    int pfd[2];
    if (pipe2(pfd, O_CLOEXEC) < 0)
        return plm_fail(err, errno, PLM_E_INTERNAL, "microvm jail: pipe");
    pid_t pid = fork();
    if (pid == 0) {
        dup2(pfd[1], 1);
        char *const argv[] = {(char *)qemu, NULL};
        char *const envp[] = {"LD_TRACE_LOADED_OBJECTS=1", NULL};
        execve(qemu, argv, envp);
        _exit(127);
    }
    close(pfd[1]);
    if (pid < 0) {
        close(pfd[0]);
        return plm_fail(err, errno, PLM_E_INTERNAL, "microvm jail: fork");
    }
    cleanup_free char *buf = malloc(TRACE_MAX + 1);
    size_t len = 0;
    while (buf && len < TRACE_MAX) {
        ssize_t k = read(pfd[0], buf + len, TRACE_MAX - len);
        if (k < 0 && errno == EINTR)
            continue;
        if (k <= 0)
            break;
        len += (size_t)k;
    }
    close(pfd[0]);
    int st = 0;
    while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
        ;
    if (!buf)
        return plm_fail(err, ENOMEM, PLM_E_INTERNAL, "microvm jail: out of memory");
    if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
        return plm_fail(err, 0, PLM_E_INTERNAL,
                           "microvm: `%s` does not run (install Debian's qemu-system-x86)", qemu);
    buf[len] = 0;
    int n = 0;
    for (char *line = strtok(buf, "\n"); line; line = strtok(NULL, "\n")) {
        char *path = strstr(line, "=> ");
        path = path ? path + 3 : line;
        while (*path == ' ' || *path == '\t')
            path++;
        if (*path != '/')
            continue; /* linux-vdso.so.1 and the like: no file */
        char *end = strstr(path, " (");
        if (end)
            *end = 0;
        if (add_file(j, path, path, err) < 0)
            return -1;
        n++;
    }
    if (n == 0)
        return plm_fail(err, 0, PLM_E_INTERNAL, "microvm jail: no libraries traced for `%s`", qemu);
    return 0;
}

int mv_jail_init(struct mv_jail *j, const char *qemu, const char *kernel, const char *initrd, bool kvm, uid_t uid,
                 gid_t gid, struct plm_err *err)
{
    memset(j, 0, sizeof *j);
    j->uid = uid;
    j->gid = gid;
    /* The host directory the jail's tmpfs covers, in the child's mount namespace only. It must
     * not hide a bind source, which is mounted from its host path. */
    const char *roots[] = {"/mnt", "/media", "/srv"};
    for (size_t i = 0; i < sizeof roots / sizeof *roots && !j->root[0]; i++) {
        struct stat sb;
        size_t n = strlen(roots[i]);
        if (stat(roots[i], &sb) == 0 && S_ISDIR(sb.st_mode) && strncmp(kernel, roots[i], n) != 0 &&
            strncmp(initrd, roots[i], n) != 0 && strncmp(qemu, roots[i], n) != 0)
            snprintf(j->root, sizeof j->root, "%s", roots[i]);
    }
    if (!j->root[0])
        return plm_fail(err, 0, PLM_E_INTERNAL, "microvm jail: no mount point (/mnt) for the root");
    if (access(qemu, X_OK) < 0)
        return plm_fail(err, errno, PLM_E_UNAVAILABLE,
                           "microvm: `%s` not found: install Debian's qemu-system-x86 (scripts/install-deps.sh)", qemu);
    snprintf(j->qemu_in_jail, sizeof j->qemu_in_jail, "/usr/bin/qemu-system-x86_64");
    if (add_file(j, qemu, j->qemu_in_jail, err) < 0 || trace_libs(j, qemu, err) < 0)
        return -1;
    /* microvm's firmware (qboot) and, in Debian's build, the TCG accelerator is a module. */
    if (add_file(j, "/usr/share/qemu/bios-microvm.bin", "/usr/share/qemu/bios-microvm.bin", err) < 0)
        return plm_err_wrap(err, "qemu-system-x86's microvm firmware");
    if (access("/usr/lib/x86_64-linux-gnu/qemu/accel-tcg-x86_64.so", R_OK) == 0 &&
        add_file(j, "/usr/lib/x86_64-linux-gnu/qemu/accel-tcg-x86_64.so",
                 "/usr/lib/x86_64-linux-gnu/qemu/accel-tcg-x86_64.so", err) < 0)
        return -1;
    if (add_file(j, kernel, "/vmlinuz", err) < 0 || add_file(j, initrd, "/initrd", err) < 0)
        return -1;
    if (kvm && add_file(j, "/dev/kvm", "/dev/kvm", err) < 0)
        return -1;
    return 0;
}

int mv_jail_add_disk(struct mv_jail *j, const char *image, struct plm_err *err)
{
    if (strncmp(image, j->root, strlen(j->root)) == 0)
        return plm_fail(err, 0, PLM_E_INTERNAL, "microvm jail: `%s` is under the jail's root %s",
                           image, j->root);
    return add_file(j, image, "/disk.img", err);
}

/* ---- the child, between clone and exec: only syscalls, no allocation ---- */

enum {
    JX_SYNC = 100,
    JX_MOUNT,
    JX_ROOT,
    JX_FDS,
    JX_LIMITS,
    JX_IDS,
    JX_EXEC,
};

/* The child's last words on QEMU's stderr pipe (read by vm.c): async-signal-safe, no stdio. */
__attribute__((noreturn)) static void die(int errfd, int code, const char *step, const char *path)
{
    int e = errno;
    char num[12];
    int n = 0;
    do {
        num[sizeof num - 1 - n++] = (char)('0' + e % 10);
        e /= 10;
    } while (e && n < 11);
    struct iovec v[] = {{"jail: ", 6}, {(void *)step, strlen(step)}, {" ", 1}, {(void *)path, strlen(path)},
                        {": errno ", 8}, {num + sizeof num - n, (size_t)n}, {"\n", 1}};
    if (errfd >= 0)
        (void)!writev(errfd, v, 7);
    _exit(code);
}

static int touch(const char *path)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_CLOEXEC, 0444);
    if (fd < 0)
        return -1;
    close(fd);
    return 0;
}

/* The child's walls, in the order of confine/steps.h where QEMU lets it: the parent-death
 * signal; ids before everything else (the jail's files must be owned by an id mapped in the new
 * user namespace, and raw syscalls, not glibc's, in this raw clone), which clears the signal, so
 * it is armed again; then the mounts and pivot_root, which steps.h has no row for; the
 * descriptors (cf_close_from); the environment is none (execve's envp); the rlimit table
 * (cf_set_limits); no_new_privs (cf_no_new_privs); and in place of our filter, QEMU's own
 * seccomp sandbox (-sandbox on), which it loads after exec. */
__attribute__((noreturn)) static void child(const struct mv_jail *j, char *const argv[], const int *fds, int n_fds,
                                            unsigned fsize_mb, int sync_fd)
{
    /* Die with the spawning thread; then wait until the parent wrote our id maps. */
    if (prctl(PR_SET_PDEATHSIG, SIGKILL) < 0)
        _exit(JX_SYNC);
    char c;
    if (read(sync_fd, &c, 1) != 1)
        _exit(JX_SYNC);

    const int ef = fds[0];
    /* To the unprivileged id first (the jail's files must be owned by a mapped id): inside the
     * user namespace it is MV_JAIL_INNER_ID (mapped to the host's uid/gid), never 0. The
     * namespace's capabilities stay until execve, which, for a non-root uid without file
     * capabilities, leaves none. */
    /* Raw syscalls: glibc's set*id would signal the daemon's other threads (which do not exist
     * in this child) and wait for them forever. */
    if (syscall(SYS_setgroups, 0, NULL) < 0 ||
        syscall(SYS_setresgid, MV_JAIL_INNER_ID, MV_JAIL_INNER_ID, MV_JAIL_INNER_ID) < 0 ||
        syscall(SYS_setresuid, MV_JAIL_INNER_ID, MV_JAIL_INNER_ID, MV_JAIL_INNER_ID) < 0)
        die(ef, JX_IDS, "drop ids", "");
    /* A credential change clears the parent-death signal: set it again, tell the parent, and go
     * on only if the parent is still there to answer (else it died before our signal was armed). */
    if (prctl(PR_SET_PDEATHSIG, SIGKILL) < 0 || write(sync_fd, "a", 1) != 1 || read(sync_fd, &c, 1) != 1)
        _exit(JX_SYNC);
    close(sync_fd);
    if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0)
        die(ef, JX_MOUNT, "make / private", "");
    if (mount("tmpfs", j->root, "tmpfs", MS_NOSUID | MS_NODEV, "size=64k,nr_inodes=256,mode=0755") < 0)
        die(ef, JX_MOUNT, "mount tmpfs", j->root);
    for (int i = 0; i < j->n_dirs; i++)
        if (mkdir(j->dirs[i], 0755) < 0 && errno != EEXIST)
            die(ef, JX_ROOT, "mkdir", j->dirs[i]);
    for (int i = 0; i < j->n_files; i++) {
        const struct mv_jail_file *f = &j->files[i];
        if (touch(f->dst) < 0)
            die(ef, JX_ROOT, "create", f->dst);
        if (mount(f->src, f->dst, NULL, MS_BIND, NULL) < 0)
            die(ef, JX_ROOT, "bind", f->src);
        if (mount(NULL, f->dst, NULL, MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | f->lock_flags, NULL) < 0)
            die(ef, JX_ROOT, "remount read-only", f->dst);
    }
    if (mount(NULL, j->root, NULL, MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV, NULL) < 0)
        die(ef, JX_ROOT, "remount root read-only", j->root);
    if (chdir(j->root) < 0 || syscall(SYS_pivot_root, ".", ".") < 0 || umount2(".", MNT_DETACH) < 0 || chdir("/") < 0)
        die(ef, JX_ROOT, "pivot_root", j->root);

    /* fds[0] becomes 0, 1 and 2 (a pipe the caller reads QEMU's complaints from); fds[1..]
     * become 3, 4, ...: first lifted above the target range so no dup2 overwrites one still to
     * be moved, then placed; everything else is closed. */
    int hi[8];
    if (n_fds < 1 || n_fds > 8)
        _exit(JX_FDS);
    for (int i = 0; i < n_fds; i++)
        if ((hi[i] = fcntl(fds[i], F_DUPFD, 64)) < 0)
            _exit(JX_FDS);
    for (int i = 0; i < 3; i++)
        if (dup2(hi[0], i) < 0)
            _exit(JX_FDS);
    for (int i = 1; i < n_fds; i++)
        if (dup2(hi[i], 2 + i) < 0)
            _exit(JX_FDS);
    if (cf_close_from(2 + n_fds) < 0)
        _exit(JX_FDS);

    /* QEMU writes no core and no file but a template's state (fsize_mb; 0 for every other VM). */
    const struct cf_rlimit limits[] = {
        {RLIMIT_CORE, 0},
        {RLIMIT_NOFILE, 64},
        {RLIMIT_FSIZE, (uint64_t)fsize_mb << 20},
    };
    if (cf_set_limits(limits, sizeof limits / sizeof limits[0]) < 0)
        _exit(JX_LIMITS);
    if (cf_no_new_privs() < 0)
        die(2, JX_IDS, "no_new_privs", "");
    char *const envp[] = {NULL};
    execve(j->qemu_in_jail, argv, envp);
    die(2, JX_EXEC, "execve", j->qemu_in_jail);
}

static int write_map(pid_t pid, const char *file, unsigned host_id)
{
    char path[64], line[64];
    snprintf(path, sizeof path, "/proc/%d/%s", (int)pid, file);
    int n = snprintf(line, sizeof line, "%u %u 1\n", MV_JAIL_INNER_ID, host_id);
    int fd = open(path, O_WRONLY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    ssize_t k = write(fd, line, (size_t)n);
    close(fd);
    return k == n ? 0 : -1;
}

pid_t mv_jail_spawn(const struct mv_jail *j, char *const argv[], const int *fds, int n_fds, unsigned fsize_mb,
                    struct plm_err *err)
{
    int sync[2];
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sync) < 0)
        return plm_fail(err, errno, PLM_E_INTERNAL, "microvm jail: socketpair");
    long flags = CLONE_NEWUSER | CLONE_NEWNS | CLONE_NEWPID | CLONE_NEWIPC | CLONE_NEWNET | CLONE_NEWUTS |
                 CLONE_NEWCGROUP | SIGCHLD;
    /* A raw clone (no atfork handlers, no locks taken in the child): the child makes syscalls
     * only until execve. */
    long r = syscall(SYS_clone, flags, 0L, 0L, 0L, 0L);
    if (r == 0) {
        close(sync[1]);
        child(j, argv, fds, n_fds, fsize_mb, sync[0]);
    }
    close(sync[0]);
    if (r < 0) {
        int e = errno;
        close(sync[1]);
        return plm_fail(err, e, PLM_E_INTERNAL, "microvm jail: clone: %s", strerror(e));
    }
    pid_t pid = (pid_t)r;
    char ack = 0;
    if (write_map(pid, "uid_map", j->uid) < 0 || write_map(pid, "gid_map", j->gid) < 0 || write(sync[1], "g", 1) != 1 ||
        read(sync[1], &ack, 1) != 1 || ack != 'a' || write(sync[1], "h", 1) != 1) {
        int e = errno;
        close(sync[1]);
        kill(pid, SIGKILL);
        while (waitpid(pid, NULL, 0) < 0 && errno == EINTR)
            ;
        return plm_fail(err, e, PLM_E_INTERNAL, "microvm jail: id maps: %s", strerror(e));
    }
    close(sync[1]);
    return pid;
}
