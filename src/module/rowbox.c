/* rowbox.c: see rowbox.h. */
#include "rowbox.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <signal.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../core/cleanup.h"
#include "row_proto.h"

#define MODEL_FD 3

#if defined(__x86_64__)
#define AUDIT_ARCH_HERE AUDIT_ARCH_X86_64
#elif defined(__aarch64__)
#define AUDIT_ARCH_HERE AUDIT_ARCH_AARCH64
#else
#error "rowbox: no seccomp arch for this machine"
#endif

#define LD_NR BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr))
#define ALLOW_NR(n) BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, (n), 0, 1), BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW)
#define ARG_LO(i) offsetof(struct seccomp_data, args[i])

/* What a static model needs after exec: its startup (brk, arch_prctl, set_tid_address,
 * set_robust_list, rseq, prlimit64, mprotect, getrandom for malloc), memory, read/write on its
 * pipes and exit; readlink answers ENOENT. Anything else kills the row (SIGSYS, status ROW_ST_SYSCALL). execveat is allowed
 * only for descriptor MODEL_FD with AT_EMPTY_PATH: that descriptor is close-on-exec and the model
 * can open nothing, so it is a one-time permission. */
static int install_filter(void)
{
    struct sock_filter f[] = {
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, arch)),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, AUDIT_ARCH_HERE, 1, 0),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_KILL_PROCESS),
        LD_NR,
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_execveat, 0, 6),
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, ARG_LO(0)),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, MODEL_FD, 0, 3),
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, ARG_LO(4)),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, AT_EMPTY_PATH, 0, 1),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_KILL_PROCESS),
        ALLOW_NR(SYS_read),
        ALLOW_NR(SYS_write),
        ALLOW_NR(SYS_brk),
        ALLOW_NR(SYS_mmap),
        ALLOW_NR(SYS_munmap),
        ALLOW_NR(SYS_mremap),
        ALLOW_NR(SYS_mprotect),
        ALLOW_NR(SYS_madvise),
        ALLOW_NR(SYS_exit),
        ALLOW_NR(SYS_exit_group),
#ifdef SYS_arch_prctl
        ALLOW_NR(SYS_arch_prctl),
#endif
        ALLOW_NR(SYS_set_tid_address),
        ALLOW_NR(SYS_set_robust_list),
        ALLOW_NR(SYS_rseq),
        ALLOW_NR(SYS_prlimit64),
        ALLOW_NR(SYS_getrandom),
        ALLOW_NR(SYS_rt_sigprocmask),
        ALLOW_NR(SYS_futex),
        /* static glibc's startup asks for /proc/self/exe and copes with a failure: it gets one */
#ifdef SYS_readlink
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_readlink, 0, 1),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | ENOENT),
#endif
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_readlinkat, 0, 1),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | ENOENT),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_KILL_PROCESS),
    };
    struct sock_fprog prog = {sizeof f / sizeof f[0], f};
    if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0)
        return -1;
    if (syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, &prog) == 0)
        return 0;
    /* docker's profile (ours: src/providers/docker/seccomp.json) refuses seccomp(2) but allows
     * prctl; the older call installs the same filter */
    return prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog, 0, 0);
}

static void set_limit(int res, rlim_t v)
{
    struct rlimit r = {v, v};
    setrlimit(res, &r);
}

/* In the child, before exec: one line on stderr naming the step that failed, then exit code. */
static void child_fail(const char *what, int code)
{
    char buf[96];
    int e = errno, n = 0;
    const char *pre = "plimsoll-sim-worker: row process: ";
    for (const char *p = pre; *p && n < 60; p++)
        buf[n++] = *p;
    for (const char *p = what; *p && n < 80; p++)
        buf[n++] = *p;
    buf[n++] = ' ';
    char num[8];
    int k = 0;
    do
        num[k++] = (char)('0' + e % 10), e /= 10;
    while (e && k < 7);
    while (k)
        buf[n++] = num[--k];
    buf[n++] = '\n';
    if (write(2, buf, (size_t)n) < 0)
        _exit(code);
    _exit(code);
}

/* Closes every descriptor above MODEL_FD: close_range where the kernel has it; gVisor lacks it, and
 * a close() loop up to the descriptor limit costs a second per row there, so the open ones are
 * read from /proc/self/fd instead (the loop stays the last resort). */
static void close_above(void)
{
    if (syscall(SYS_close_range, MODEL_FD + 1, ~0u, 0) == 0)
        return;
    int dir = open("/proc/self/fd", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dir >= 0) {
        char buf[4096];
        long n;
        int fds[256], k = 0;
        while ((n = syscall(SYS_getdents64, dir, buf, sizeof buf)) > 0)
            for (long off = 0; off < n;) {
                struct {
                    unsigned long long ino;
                    long long off;
                    unsigned short reclen;
                    unsigned char type;
                    char name[];
                } *e = (void *)(buf + off);
                int fd = atoi(e->name);
                if (fd > MODEL_FD && fd != dir && k < 256)
                    fds[k++] = fd;
                off += e->reclen;
            }
        close(dir);
        if (k < 256) {
            for (int i = 0; i < k; i++)
                close(fds[i]);
            return;
        }
    }
    struct rlimit r;
    int max = getrlimit(RLIMIT_NOFILE, &r) == 0 && r.rlim_cur < 65536 ? (int)r.rlim_cur : 65536;
    for (int fd = MODEL_FD + 1; fd < max; fd++)
        close(fd);
}

/* In the child: never returns. */
static void child(int model_fd, int in_r, int out_w)
{
    if (dup2(in_r, 0) < 0 || dup2(out_w, 1) < 0 || dup2(model_fd, MODEL_FD) < 0 ||
        fcntl(MODEL_FD, F_SETFD, FD_CLOEXEC) < 0)
        child_fail("dup2 (errno)", 120);
    /* fd 2 stays the worker's stderr (the step's stderr, bounded by the runner) */
    close_above();
    set_limit(RLIMIT_AS, ROWBOX_MEMORY_CAP);
    set_limit(RLIMIT_CPU, ROWBOX_CPU_S);
    set_limit(RLIMIT_FSIZE, 0);
    set_limit(RLIMIT_CORE, 0);
    set_limit(RLIMIT_NOFILE, MODEL_FD + 1);
    if (install_filter() < 0)
        child_fail("seccomp (errno)", 122);
    char *argv[] = {"model", NULL}, *envp[] = {NULL};
    syscall(SYS_execveat, MODEL_FD, "", argv, envp, AT_EMPTY_PATH);
    child_fail("execveat (errno)", 123);
}

static int map_status(int ws)
{
    if (WIFEXITED(ws)) {
        switch (WEXITSTATUS(ws)) {
        case ROW_EXIT_OK: return 0;
        case ROW_EXIT_NOMEM: return ROW_ST_NOMEM;
        case ROW_EXIT_PARAMS: return ROW_ST_PARAMS;
        case 120: case 121: case 122: case 123: return ROW_ST_START;
        default: return ROW_ST_CRASHED;
        }
    }
    int sig = WTERMSIG(ws);
    if (sig == SIGSYS)
        return ROW_ST_SYSCALL;
    if (sig == SIGXCPU)
        return ROW_ST_CPU;
    return ROW_ST_CRASHED;
}

static int read_output(int fd, size_t out_max, struct rowbox_out *out)
{
    size_t cap = 4096;
    out->data = malloc(cap);
    if (!out->data)
        return -1;
    for (;;) {
        if (out->len == cap) {
            if (cap > out_max)
                return 1; /* more than allowed */
            size_t nc = cap * 2;
            unsigned char *n = realloc(out->data, nc);
            if (!n)
                return -1;
            out->data = n, cap = nc;
        }
        ssize_t r = read(fd, out->data + out->len, cap - out->len);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0)
            return -1;
        if (r == 0)
            return out->len > out_max ? 1 : 0;
        out->len += (size_t)r;
    }
}

int rowbox_run(int model_fd, const void *in, size_t in_len, size_t out_max, struct rowbox_out *out)
{
    memset(out, 0, sizeof *out);
    int pin[2], pout[2];
    if (pipe2(pin, O_CLOEXEC) < 0)
        return out->status = ROW_ST_START, 0;
    cleanup_close int in_r = pin[0], in_w = pin[1];
    if (pipe2(pout, O_CLOEXEC) < 0)
        return out->status = ROW_ST_START, 0;
    cleanup_close int out_r = pout[0], out_w = pout[1];
    pid_t pid = fork();
    if (pid == 0)
        child(model_fd, in_r, out_w); /* never returns: no cleanup runs in the child */
    /* the child's ends now, so that its exit is our end of file */
    close(take_fd(&in_r));
    close(take_fd(&out_w));
    if (pid < 0)
        return out->status = ROW_ST_START, 0;
    /* in_len < PIPE_BUF: the write completes without the child reading */
    ssize_t w = write(in_w, in, in_len);
    close(take_fd(&in_w));
    int rr = read_output(out_r, out_max, out);
    if (rr != 0)
        kill(pid, SIGKILL);
    close(take_fd(&out_r)); /* before the wait: a child still writing gets SIGPIPE, never blocks */
    int ws = 0;
    while (waitpid(pid, &ws, 0) < 0 && errno == EINTR)
        ;
    if (rr < 0)
        return -1; /* the worker's own failure (out of memory) */
    out->status = rr == 1 ? ROW_ST_BADOUT : map_status(ws);
    if (out->status == 0 && w != (ssize_t)in_len)
        out->status = ROW_ST_START;
    return 0;
}
