/* probe.c: plimsoll-probe, the startup probe run inside a container under the exact lockdown
 * (providers.md §3.7; issue 5 §6). It only observes: one `key=value` line per observation on
 * stdout, then `probe-done`, then it waits to be killed so the host can read the container's
 * cgroup while it still exists. The host decides what passes (smoke.c); this file judges nothing.
 * Usage: plimsoll-probe <tmpfs-dir>... (the directories whose tmpfs the host wants measured)
 * Each escape syscall is made with arguments that would *succeed* if the call were allowed, in
 * the style of bubblewrap's tests/try-syscall.c, so a failure means the wall, not bad arguments. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/keyctl.h>
#include <linux/perf_event.h>
#include <linux/reboot.h>
#include <netinet/in.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/klog.h>
#include <sys/mount.h>
#include <sys/ptrace.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/statvfs.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <unistd.h>

#ifndef SYS_clone3
#define SYS_clone3 435
#endif
#ifndef SYS_io_uring_setup
#define SYS_io_uring_setup 425
#endif

static const char *errname(int e)
{
    switch (e) {
    case EPERM: return "EPERM";
    case ENOENT: return "ENOENT";
    case EACCES: return "EACCES";
    case EROFS: return "EROFS";
    case ENOSYS: return "ENOSYS";
    case EINVAL: return "EINVAL";
    case EFAULT: return "EFAULT";
    case EBADF: return "EBADF";
    case ENETUNREACH: return "ENETUNREACH";
    case EAFNOSUPPORT: return "EAFNOSUPPORT";
    case EOPNOTSUPP: return "EOPNOTSUPP";
    case EPROTONOSUPPORT: return "EPROTONOSUPPORT";
    case ENOKEY: return "ENOKEY";
    case EEXIST: return "EEXIST";
    case ENOTDIR: return "ENOTDIR";
    case EBUSY: return "EBUSY";
    case ENOMEM: return "ENOMEM";
    case EOVERFLOW: return "EOVERFLOW";
    case ESRCH: return "ESRCH";
    case ECONNREFUSED: return "ECONNREFUSED";
    case EHOSTUNREACH: return "EHOSTUNREACH";
    case ETIMEDOUT: return "ETIMEDOUT";
    default: return "EOTHER";
    }
}

static void out(const char *key, const char *value)
{
    printf("%s=%s\n", key, value);
}

/* "ok" when the call returned >= 0 (the wall did not hold), otherwise the errno name. */
static void res(const char *key, long r)
{
    out(key, r >= 0 ? "ok" : errname(errno));
}

static void status_line(const char *want, const char *key)
{
    FILE *f = fopen("/proc/self/status", "r");
    char line[512], val[512] = "unavailable";
    while (f && fgets(line, sizeof line, f)) {
        size_t n = strlen(want);
        if (strncmp(line, want, n) == 0 && line[n] == ':') {
            char *v = line + n + 1, *w = val;
            for (; *v && *v != '\n' && w < val + sizeof val - 1; v++)
                if (*v != ' ')
                    *w++ = *v == '\t' ? ',' : *v;
            *w = 0;
            if (val[0] == ',')
                memmove(val, val + 1, strlen(val));
        }
    }
    if (f)
        fclose(f);
    out(key, val);
}

static void first_line(const char *key, const char *const *paths)
{
    for (; *paths; paths++) {
        FILE *f = fopen(*paths, "r");
        char line[128];
        int got = f && fgets(line, sizeof line, f);
        if (f)
            fclose(f);
        if (got) {
            line[strcspn(line, "\n")] = 0;
            out(key, line);
            return;
        }
    }
    out(key, "unavailable");
}

static void ifaces(void)
{
    FILE *f = fopen("/proc/net/dev", "r");
    char line[512], list[512] = "";
    int n = 0;
    while (f && fgets(line, sizeof line, f)) {
        char *colon = strchr(line, ':');
        if (!colon || ++n > 16)
            continue;
        *colon = 0;
        char *name = line + strspn(line, " ");
        if (strlen(list) + strlen(name) + 2 < sizeof list) {
            if (*list)
                strcat(list, ",");
            strcat(list, name);
        }
    }
    if (f)
        fclose(f);
    out("ifaces", f ? list : "unavailable");
}

static int can_create_in(const char *dir)
{
    char p[512];
    snprintf(p, sizeof p, "%s/.plimsoll-probe-%d", strcmp(dir, "/") ? dir : "", (int)getpid());
    int fd = open(p, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (fd < 0)
        return 0;
    close(fd);
    unlink(p);
    return 1;
}

/* Every mount point (and the usual top-level directories) where this uid can create a file, or
 * which is a file it can open for writing. */
static void writable(void)
{
    static char seen[128][256];
    int n_seen = 0;
    static const char *fixed[] = {"/",    "/etc", "/usr",   "/var", "/root",    "/home",      "/opt", "/run",
                                  "/srv", "/mnt", "/media", "/dev", "/var/tmp", "/usr/local", NULL};
    for (int i = 0; fixed[i] && n_seen < 128; i++)
        snprintf(seen[n_seen++], sizeof seen[0], "%s", fixed[i]);
    FILE *f = fopen("/proc/self/mountinfo", "r");
    char line[1024];
    while (f && fgets(line, sizeof line, f) && n_seen < 128) {
        /* id parent major:minor root mountpoint ... */
        char *save = NULL, *tok = strtok_r(line, " ", &save);
        for (int i = 0; tok && i < 4; i++)
            tok = strtok_r(NULL, " ", &save);
        if (!tok || strchr(tok, '\\'))
            continue;
        int dup = 0;
        for (int i = 0; i < n_seen && !dup; i++)
            dup = strcmp(seen[i], tok) == 0;
        if (!dup)
            snprintf(seen[n_seen++], sizeof seen[0], "%s", tok);
    }
    if (f)
        fclose(f);
    char list[2048] = "";
    for (int i = 0; i < n_seen; i++) {
        struct stat st;
        int w = 0;
        if (stat(seen[i], &st) < 0)
            continue;
        if (S_ISDIR(st.st_mode)) {
            w = can_create_in(seen[i]);
        } else if (S_ISREG(st.st_mode)) {
            int fd = open(seen[i], O_WRONLY | O_APPEND | O_NOFOLLOW | O_CLOEXEC);
            w = fd >= 0;
            if (fd >= 0)
                close(fd);
        }
        if (w && strlen(list) + strlen(seen[i]) + 2 < sizeof list) {
            if (*list)
                strcat(list, ",");
            strcat(list, seen[i]);
        }
    }
    out("writable", list);
}

/* The mount's per-mount and super options as mountinfo states them: "rw,nosuid,...|rw,size=16384k". */
static void mount_opts(const char *dir)
{
    FILE *f = fopen("/proc/self/mountinfo", "r");
    char line[1024], val[300] = "unavailable", key[300];
    while (f && fgets(line, sizeof line, f)) {
        char *fld[12] = {0}, *save = NULL;
        int n = 0;
        for (char *t = strtok_r(line, " \n", &save); t && n < 12; t = strtok_r(NULL, " \n", &save))
            fld[n++] = t;
        if (n < 7 || strcmp(fld[4], dir) != 0)
            continue;
        int dash = 6;
        while (dash < n && strcmp(fld[dash], "-") != 0)
            dash++;
        /* fields: ... 5 per-mount options ... "-" fstype source super-options */
        if (dash + 3 < n)
            snprintf(val, sizeof val, "%s|%s|%s", fld[5], fld[dash + 1], fld[dash + 3]);
    }
    if (f)
        fclose(f);
    snprintf(key, sizeof key, "tmpfs_opts.%s", dir);
    out(key, val);
}

static void kernel(void)
{
    struct utsname u;
    if (uname(&u) == 0) {
        out("uname_release", u.release);
    }
    char buf[4096];
    int n = klogctl(3 /* SYSLOG_ACTION_READ_ALL */, buf, sizeof buf - 1);
    if (n < 0) {
        out("syslog", errname(errno));
        return;
    }
    buf[n] = 0;
    out("syslog", strstr(buf, "gVisor") ? "gVisor" : n ? "host-like" : "empty");
}

static void tmpfs(const char *dir)
{
    mount_opts(dir);
    char key[300], val[128];
    struct statfs fs;
    struct statvfs vfs;
    snprintf(key, sizeof key, "tmpfs_size.%s", dir);
    if (statfs(dir, &fs) == 0 && fs.f_type == 0x01021994 /* TMPFS_MAGIC */)
        snprintf(val, sizeof val, "%llu", (unsigned long long)fs.f_blocks * (unsigned long long)fs.f_bsize);
    else
        snprintf(val, sizeof val, "not-tmpfs");
    out(key, val);
    snprintf(key, sizeof key, "tmpfs_flags.%s", dir);
    if (statvfs(dir, &vfs) == 0)
        snprintf(val, sizeof val, "%s%s%s", vfs.f_flag & ST_NOEXEC ? "noexec" : "exec",
                 vfs.f_flag & ST_NOSUID ? ",nosuid" : ",suid", vfs.f_flag & ST_RDONLY ? ",ro" : ",rw");
    else
        snprintf(val, sizeof val, "unavailable");
    out(key, val);
    /* noexec, functionally: a script we may write there must not run. */
    char path[300];
    snprintf(path, sizeof path, "%s/plimsoll-exec-probe", dir);
    snprintf(key, sizeof key, "tmpfs_exec.%s", dir);
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0755);
    if (fd < 0) {
        out(key, "cannot-write");
        return;
    }
    static const char script[] = "#!/bin/sh\nexit 0\n";
    ssize_t w = write(fd, script, sizeof script - 1);
    close(fd);
    if (w != (ssize_t)(sizeof script - 1)) {
        out(key, "cannot-write");
        unlink(path);
        return;
    }
    pid_t pid = fork();
    if (pid == 0) {
        char *argv[] = {path, NULL};
        execve(path, argv, (char *[]){NULL});
        _exit(errno & 0x7f);
    }
    int st = 0;
    if (pid > 0)
        waitpid(pid, &st, 0);
    unlink(path);
    if (pid < 0)
        out(key, "fork-failed");
    else
        out(key, WIFEXITED(st) && WEXITSTATUS(st) == 0 ? "ok" : errname(WIFEXITED(st) ? WEXITSTATUS(st) : EINVAL));
}

static void syscalls(void)
{
    char buf[64] = "probe", dst[64];
    struct iovec lv = {dst, sizeof dst}, rv = {buf, sizeof buf};
    res("sys.process_vm_readv", syscall(SYS_process_vm_readv, getpid(), &lv, 1, &rv, 1, 0));
    res("sys.process_vm_writev", syscall(SYS_process_vm_writev, getpid(), &rv, 1, &lv, 1, 0));
    unsigned char params[120] = {0};
    res("sys.io_uring_setup", syscall(SYS_io_uring_setup, 1, params));
    res("sys.userfaultfd", syscall(SYS_userfaultfd, O_CLOEXEC));
    struct perf_event_attr pa;
    memset(&pa, 0, sizeof pa);
    pa.type = PERF_TYPE_SOFTWARE;
    pa.size = sizeof pa;
    pa.config = PERF_COUNT_SW_TASK_CLOCK;
    pa.disabled = 1;
    pa.exclude_kernel = 1;
    res("sys.perf_event_open", syscall(SYS_perf_event_open, &pa, 0, -1, -1, 0));
    unsigned char battr[128] = {0};
    res("sys.bpf", syscall(SYS_bpf, 0 /* BPF_MAP_CREATE */, battr, sizeof battr));
    res("sys.keyctl", syscall(SYS_keyctl, KEYCTL_JOIN_SESSION_KEYRING, NULL));
    res("sys.add_key", syscall(SYS_add_key, "user", "plimsoll-probe", "x", 1, KEY_SPEC_PROCESS_KEYRING));
    res("sys.request_key", syscall(SYS_request_key, "user", "plimsoll-probe", NULL, 0));
    int ns = open("/proc/self/ns/uts", O_RDONLY | O_CLOEXEC);
    res("sys.setns", syscall(SYS_setns, ns, 0));
    if (ns >= 0)
        close(ns);
    res("sys.mount", syscall(SYS_mount, "none", "/tmp", "tmpfs", 0, NULL));
    res("sys.umount2", syscall(SYS_umount2, "/tmp", MNT_DETACH));
    res("sys.pivot_root", syscall(SYS_pivot_root, "/", "/"));
    res("sys.chroot", syscall(SYS_chroot, "/"));
    res("sys.kexec_load", syscall(SYS_kexec_load, 0, 0, NULL, 0));
    res("sys.init_module", syscall(SYS_init_module, buf, 0, ""));
    res("sys.finit_module", syscall(SYS_finit_module, 0, "", 0));
    res("sys.reboot", syscall(SYS_reboot, LINUX_REBOOT_MAGIC1, LINUX_REBOOT_MAGIC2, LINUX_REBOOT_CMD_CAD_OFF, NULL));
    res("sys.swapon", syscall(SYS_swapon, "/tmp", 0));
#ifdef SYS_modify_ldt
    unsigned char ldt[16];
    res("sys.modify_ldt", syscall(SYS_modify_ldt, 0, ldt, sizeof ldt));
#endif
    struct {
        unsigned int bytes;
        int type;
        unsigned char h[128];
    } fh = {128, 0, {0}};
    int mount_id;
    res("sys.name_to_handle_at", syscall(SYS_name_to_handle_at, AT_FDCWD, "/", &fh, &mount_id, 0));
    res("sys.open_by_handle_at", syscall(SYS_open_by_handle_at, AT_FDCWD, &fh, O_RDONLY));
    res("sys.unshare", syscall(SYS_unshare, CLONE_NEWUSER));
    uint64_t ca[11] = {0};
    ca[4] = SIGCHLD; /* exit_signal */
    long r = syscall(SYS_clone3, ca, sizeof ca);
    if (r == 0)
        _exit(0);
    if (r > 0)
        waitpid((pid_t)r, NULL, 0);
    res("sys.clone3", r);
    /* Last: success would make this process traced by its parent. */
    res("sys.ptrace", syscall(SYS_ptrace, PTRACE_TRACEME, 0, NULL, NULL));
}

/* Opens and closes one socket, recording whether the kernel allowed it. */
static void try_socket(const char *key, int domain, int type)
{
    int fd = socket(domain, type | SOCK_CLOEXEC, 0);
    res(key, fd);
    if (fd >= 0)
        close(fd);
}

static void sockets(void)
{
    try_socket("sock.unix", AF_UNIX, SOCK_STREAM);
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    res("sock.inet", fd);
    if (fd >= 0) {
        struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(80), .sin_addr = {htonl(0x01010101)}};
        res("connect.inet", connect(fd, (struct sockaddr *)&a, sizeof a));
        close(fd);
    } else {
        out("connect.inet", "no-socket");
    }
    try_socket("sock.inet6", AF_INET6, SOCK_DGRAM);
    try_socket("sock.netlink", AF_NETLINK, SOCK_RAW);
    try_socket("sock.packet", AF_PACKET, SOCK_RAW);
}

int main(int argc, char **argv)
{
    setvbuf(stdout, NULL, _IOLBF, 0);
    int fd = open("/plimsoll-probe", O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    res("root_write", fd);
    if (fd >= 0) {
        close(fd);
        unlink("/plimsoll-probe");
    }
    res("root_mkdir", mkdir("/plimsoll-probe-dir", 0700));
    status_line("Uid", "uid");
    status_line("Gid", "gid");
    status_line("Groups", "groups");
    status_line("NoNewPrivs", "nonewprivs");
    status_line("Seccomp", "seccomp");
    status_line("CapInh", "capinh");
    status_line("CapPrm", "capprm");
    status_line("CapEff", "capeff");
    status_line("CapBnd", "capbnd");
    status_line("CapAmb", "capamb");
    struct rlimit rl;
    char v[64];
    getrlimit(RLIMIT_CORE, &rl);
    snprintf(v, sizeof v, "%llu:%llu", (unsigned long long)rl.rlim_cur, (unsigned long long)rl.rlim_max);
    out("rlimit_core", v);
    getrlimit(RLIMIT_NOFILE, &rl);
    snprintf(v, sizeof v, "%llu:%llu", (unsigned long long)rl.rlim_cur, (unsigned long long)rl.rlim_max);
    out("rlimit_nofile", v);
    first_line("pids_max", (const char *const[]){"/sys/fs/cgroup/pids/pids.max", "/sys/fs/cgroup/pids.max", NULL});
    ifaces();
    kernel();
    for (int i = 1; i < argc; i++)
        tmpfs(argv[i]);
    writable();
    sockets();
    syscalls();
    out("probe-done", "1");
    fflush(stdout);
    for (;;)
        pause();
}
