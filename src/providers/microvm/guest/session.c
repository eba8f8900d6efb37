/* session.c (guest): PID 1's loop in a session VM (docs/sessions.md, microvm). After SESSION the
 * VM answers many requests, one at a time: CELLs (JavaScript in a QuickJS kernel forked from PID
 * 1's warm engine, Python in a python3 kernel from the read-only disk) and RUNs (snippets, each in
 * a fresh run process exactly as in a run VM), until the host kills the VM.
 * Owns: /work (a tmpfs of the session's disk budget), the two kernels (uid 65534) and their pipes.
 * Trusts: nothing a kernel writes: a JavaScript kernel's RESULT is decoded (qf_result_decode) and
 *   re-framed with the cell's seq; a Python kernel's output is only copied under caps.
 * Invariant: every CELL gets exactly one RESULT with its seq, bounded by its timeout plus a grace
 *   whatever the kernel does (a kernel that overruns is killed: exit 124, interpreter ended).
 *   After every CELL and RUN each other process of uid 65534 is killed, every orphan reaped, and
 *   one SESSION_STATUS (the tmpfs usage) follows the answer; a FILES is answered by one
 *   SESSION_STATUS alone, its files written by a child of uid 65534 bounded by an alarm. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <setjmp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "../../../core/cleanup.h"
#include "../../../core/clock.h"
#include "../../../core/exact_io.h"
#include "../../../core/limits.h"
#include "../../../jsrt/jsrt.h"
#include "../../../guestio/vmchan.h"
#include "guest.h"
#include "pykernel_py.h"

#define JS_GRACE_MS 2000u     /* the engine ends its own run at the deadline; this is for a stuck one */
#define PY_START_MS 60000u    /* python3 to its first b"R" under a loaded TCG host */
#define PY_INT_GRACE_MS 1000u /* after SIGINT at the deadline, before SIGKILL */
#define FILES_ALARM_S 20u     /* the files child's own bound (the host waits 30 s for the answer) */

struct kernel {
    pid_t pid; /* -1: none */
    int in;    /* cells to the kernel (JavaScript: also its RESULT frames back) */
    int out, err, st; /* Python only */
    bool ready;
};

static struct kernel js = {-1, -1, -1, -1, -1, false}, py = {-1, -1, -1, -1, -1, false};
static struct jsrt *engine;
static uint64_t seed;

/* Signed, for this file's deadline arithmetic; the reading is core/clock.h's. */
static int64_t now_ms(void)
{
    return (int64_t)clock_mono_ms();
}

static uint32_t be32(const uint8_t *p)
{
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

static void close_fd(int *fd)
{
    if (*fd >= 0)
        close(*fd);
    *fd = -1;
}

/* Kills a kernel's process group, reaps it and closes its pipes; its wait status or -1. */
static int kernel_end(struct kernel *k)
{
    int st = -1;
    if (k->pid > 0) {
        kill(-k->pid, SIGKILL);
        kill(k->pid, SIGKILL);
        while (waitpid(k->pid, &st, 0) < 0 && errno == EINTR)
            ;
    }
    close_fd(&k->in);
    close_fd(&k->out);
    close_fd(&k->err);
    close_fd(&k->st);
    k->pid = -1;
    k->ready = false;
    return st;
}

static int32_t exit_of(int st)
{
    if (st < 0)
        return 1;
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

/* One RESULT for the cell: the kernel's fields, PID 1's framing (a static buffer: no allocation
 * can fail between a cell and its answer). */
static void send_result(uint64_t seq, int32_t code, uint8_t flags, const uint8_t *out, uint32_t olen,
                        const uint8_t *err, uint32_t elen)
{
    static uint8_t p[QF_RESULT_FIXED + 2 * LIM_OUTPUT_MAX];
    olen = olen > LIM_OUTPUT_MAX ? LIM_OUTPUT_MAX : olen;
    elen = elen > LIM_OUTPUT_MAX ? LIM_OUTPUT_MAX : elen;
    qf_result_encode_fixed(p, code, flags, olen, elen);
    if (olen)
        memcpy(p + QF_RESULT_FIXED, out, olen);
    if (elen)
        memcpy(p + QF_RESULT_FIXED + olen, err, elen);
    gs_send(MVC_RESULT, seq, p, QF_RESULT_FIXED + olen + elen);
}

static void send_text_result(uint64_t seq, int32_t code, uint8_t flags, const char *msg)
{
    send_result(seq, code, flags, NULL, 0, (const uint8_t *)msg, (uint32_t)strlen(msg));
}

/* ---- the JavaScript kernel (a child of PID 1, uid 65534) ---- */

static jmp_buf js_next;
static int js_sock = -1;

/* jsrt's finish in the kernel: the RESULT goes back to PID 1; the engine is kept only when the run
 * ended at the top level (a deadline or process.exit ended it inside guest code). */
static void js_finish(int32_t exit_code, bool timed_out, const struct jsrt_out *out, const struct jsrt_out *err)
{
    bool keep = !timed_out && !jsrt_exit_called(engine);
    uint8_t fixed[QF_RESULT_FIXED];
    uint8_t flags = (uint8_t)((timed_out ? QF_RES_TIMED_OUT : 0) | (out->truncated ? QF_RES_OUT_TRUNC : 0) |
                              (err->truncated ? QF_RES_ERR_TRUNC : 0) | (keep ? 0 : QF_RES_ENDED));
    qf_result_encode_fixed(fixed, exit_code, flags, out->len, err->len);
    uint8_t h[F16_HDR_LEN];
    f16_hdr_encode(h, &(struct f16_hdr){.len = QF_RESULT_FIXED + out->len + err->len, .type = MVC_RESULT});
    if (plm_write_exact(js_sock, h, sizeof h) < 0 || plm_write_exact(js_sock, fixed, sizeof fixed) < 0 ||
        plm_write_exact(js_sock, out->data, out->len) < 0 || plm_write_exact(js_sock, err->data, err->len) < 0)
        _exit(GS_EXIT_IO);
    if (keep)
        longjmp(js_next, 1);
    _exit(0);
}

__attribute__((noreturn)) static void js_kernel_main(int sock)
{
    /* Only its socket: not the port, not the Python kernel's pipes (PID 1's ends). */
    if (dup2(sock, 3) < 0)
        _exit(GS_EXIT_CONFINE);
    syscall(SYS_close_range, 0, 2, 0); /* PID 1 has no stdio: the port may be one of these */
    syscall(SYS_close_range, 4, ~0U, 0);
    sock = 3;
    js_sock = sock;
    gs_session_finish = js_finish;
    if (gs_drop_privileges() < 0)
        _exit(GS_EXIT_CONFINE);
    if (jsrt_adopt(engine, seed ^ 0x6a73636b65726e6cull) < 0)
        _exit(GS_EXIT_ENGINE);
    jsrt_set_session(engine, true);
    static uint8_t *held; /* the previous cell's code, freed when the next begins */
    if (setjmp(js_next)) {
        free(held);
        held = NULL;
        jsrt_next_run(engine);
    }
    uint8_t h[8];
    if (plm_read_exact(sock, h, sizeof h) < 0)
        _exit(0);
    uint32_t timeout = be32(h), len = be32(h + 4);
    if (len == 0 || len > LIM_CODE_MAX || timeout == 0)
        _exit(GS_EXIT_PROTOCOL);
    held = malloc((size_t)len + 1);
    if (!held || plm_read_exact(sock, held, len) < 0)
        _exit(GS_EXIT_IO);
    held[len] = 0;
    jsrt_run(engine, (const char *)held, len, timeout, NULL, 0, NULL);
}

static int js_start(void)
{
    int sv[2];
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0)
        return -1;
    pid_t pid = fork();
    if (pid == 0) {
        close(sv[0]);
        setsid();
        js_kernel_main(sv[1]);
    }
    close(sv[1]);
    if (pid < 0) {
        close(sv[0]);
        return -1;
    }
    js = (struct kernel){.pid = pid, .in = sv[0], .out = -1, .err = -1, .st = -1, .ready = true};
    return 0;
}

/* Reads exactly n bytes from fd before deadline (ms); 0, or -1 (EOF, error, or ETIMEDOUT). */
static int read_by(int fd, uint8_t *p, size_t n, int64_t deadline)
{
    while (n > 0) {
        int64_t left = deadline - now_ms();
        if (left <= 0) {
            errno = ETIMEDOUT;
            return -1;
        }
        struct pollfd pf = {.fd = fd, .events = POLLIN};
        int r = poll(&pf, 1, (int)(left > 1000 ? 1000 : left));
        if (r < 0 && errno != EINTR)
            return -1;
        if (r <= 0)
            continue;
        ssize_t k = read(fd, p, n);
        if (k < 0 && (errno == EINTR || errno == EAGAIN))
            continue;
        if (k <= 0) {
            errno = EPIPE;
            return -1;
        }
        p += k;
        n -= (size_t)k;
    }
    return 0;
}

static void js_cell(uint64_t seq, uint32_t timeout, const uint8_t *code, uint32_t len, bool *ended)
{
    if (js.pid <= 0 && js_start() < 0) {
        send_text_result(seq, 1, QF_RES_ENDED, "the JavaScript interpreter could not be started\n");
        return;
    }
    uint8_t h[8];
    f16_put_u32(h, timeout);
    f16_put_u32(h + 4, len);
    int64_t deadline = now_ms() + timeout + JS_GRACE_MS;
    uint8_t hb[F16_HDR_LEN];
    struct f16_hdr rh;
    struct qf_result res;
    uint8_t *payload = NULL;
    if (plm_write_exact(js.in, h, sizeof h) < 0 || plm_write_exact(js.in, code, len) < 0 ||
        read_by(js.in, hb, sizeof hb, deadline) < 0)
        goto lost;
    if (mvc_hdr_decode(hb, &rh) < 0 || rh.type != MVC_RESULT)
        goto broken;
    payload = malloc(rh.len ? rh.len : 1);
    if (!payload || read_by(js.in, payload, rh.len, deadline) < 0)
        goto lost;
    if (qf_result_decode(payload, rh.len, &res) < 0)
        goto broken;
    send_result(seq, res.exit_code, res.flags, res.out, res.out_len, res.err, res.err_len);
    free(payload);
    if (res.flags & QF_RES_ENDED) {
        kernel_end(&js);
        *ended = true;
    }
    return;
lost: {
    bool late = errno == ETIMEDOUT;
    free(payload);
    int st = kernel_end(&js);
    *ended = true;
    if (late)
        send_text_result(seq, 124, QF_RES_TIMED_OUT | QF_RES_ENDED, "the cell passed its time limit\n");
    else
        send_text_result(seq, exit_of(st), QF_RES_ENDED, "");
    return;
}
broken:
    free(payload);
    kernel_end(&js);
    *ended = true;
    send_text_result(seq, 1, QF_RES_ENDED, "the JavaScript interpreter broke its channel and was ended\n");
}

/* ---- the Python kernel ---- */

static int py_start(void)
{
    int cin[2], out[2], err[2], st[2];
    if (pipe2(cin, O_CLOEXEC) < 0)
        return -1;
    if (pipe2(out, O_CLOEXEC) < 0 || pipe2(err, O_CLOEXEC) < 0 || pipe2(st, O_CLOEXEC) < 0) {
        close(cin[0]), close(cin[1]);
        return -1; /* the VM is failing anyway: the few descriptors of a half-made set stay */
    }
    pid_t pid = fork();
    if (pid == 0) {
        setsid();
        int nul = open("/dev/null", O_RDONLY | O_CLOEXEC);
        /* Above every fd number the targets use, then into place (dup2 clears FD_CLOEXEC). */
        int hi[5] = {fcntl(nul, F_DUPFD_CLOEXEC, 10), fcntl(out[1], F_DUPFD_CLOEXEC, 10),
                     fcntl(err[1], F_DUPFD_CLOEXEC, 10), fcntl(cin[0], F_DUPFD_CLOEXEC, 10),
                     fcntl(st[1], F_DUPFD_CLOEXEC, 10)};
        for (int i = 0; i < 5; i++)
            if (hi[i] < 0 || dup2(hi[i], i) < 0)
                _exit(GS_EXIT_CONFINE);
        syscall(SYS_close_range, 5, ~0U, 0);
        if (gs_drop_privileges() < 0 || chdir("/work") < 0)
            _exit(GS_EXIT_CONFINE);
        char *argv[] = {"python3", "-I", "-u", "-c", (char *)pykernel_py, NULL};
        char *envp[] = {"PATH=/usr/bin:/bin", "HOME=/work", "LANG=C.UTF-8", NULL};
        execve("/usr/bin/python3", argv, envp);
        _exit(127);
    }
    close(cin[0]), close(out[1]), close(err[1]), close(st[1]);
    if (pid < 0) {
        close(cin[1]), close(out[0]), close(err[0]), close(st[0]);
        return -1;
    }
    fcntl(out[0], F_SETFL, O_NONBLOCK);
    fcntl(err[0], F_SETFL, O_NONBLOCK);
    py = (struct kernel){.pid = pid, .in = cin[1], .out = out[0], .err = err[0], .st = st[0], .ready = false};
    return 0;
}

struct capture {
    uint8_t *p;
    uint32_t len;
    bool truncated;
};

/* What is in the pipe now, kept up to LIM_OUTPUT_MAX (the rest read and dropped). */
static void drain(int fd, struct capture *c)
{
    uint8_t buf[4096];
    for (;;) {
        ssize_t k = read(fd, buf, sizeof buf);
        if (k <= 0)
            return;
        size_t room = LIM_OUTPUT_MAX - c->len;
        size_t n = (size_t)k < room ? (size_t)k : room;
        if (c->p && n) {
            memcpy(c->p + c->len, buf, n);
            c->len += (uint32_t)n;
        }
        if ((size_t)k > n)
            c->truncated = true;
    }
}

/* Waits for one status byte (b"R" at start), draining both streams into out/err. 1 with *b,
 * 0 at the deadline, -1 when the kernel ended. */
static int py_wait(int64_t deadline, struct capture *out, struct capture *err, uint8_t *b)
{
    for (;;) {
        int64_t left = deadline - now_ms();
        if (left <= 0)
            return 0;
        struct pollfd pf[3] = {{py.st, POLLIN, 0}, {py.out, POLLIN, 0}, {py.err, POLLIN, 0}};
        if (poll(pf, 3, (int)(left > 1000 ? 1000 : left)) < 0 && errno != EINTR)
            return -1;
        if (pf[1].revents)
            drain(py.out, out);
        if (pf[2].revents)
            drain(py.err, err);
        if (pf[0].revents) {
            ssize_t k = read(py.st, b, 1);
            if (k == 1)
                return 1;
            if (k == 0 || (errno != EINTR && errno != EAGAIN))
                return -1;
        }
    }
}

static void py_cell(uint64_t seq, uint32_t timeout, const uint8_t *code, uint32_t len, bool *ended)
{
    static uint8_t obuf[LIM_OUTPUT_MAX], ebuf[LIM_OUTPUT_MAX];
    struct capture out = {obuf, 0, false}, err = {ebuf, 0, false}, none = {NULL, 0, false};
    uint8_t b = 0;
    if (py.pid <= 0 && py_start() < 0) {
        send_text_result(seq, 1, QF_RES_ENDED, "the Python interpreter could not be started\n");
        return;
    }
    if (!py.ready) { /* its start is not the cell's time: start output is dropped */
        if (py_wait(now_ms() + PY_START_MS, &none, &none, &b) != 1 || b != 'R') {
            int st = kernel_end(&py);
            *ended = true;
            char msg[96];
            snprintf(msg, sizeof msg, "python3 did not start (exit %d)\n", exit_of(st));
            send_text_result(seq, 1, QF_RES_ENDED, msg);
            return;
        }
        py.ready = true;
    }
    uint8_t h[4];
    f16_put_u32(h, len);
    int r = -1;
    if (plm_write_exact(py.in, h, sizeof h) == 0 && plm_write_exact(py.in, code, len) == 0) {
        r = py_wait(now_ms() + timeout, &out, &err, &b);
        if (r == 0) { /* the deadline: interrupt, then kill */
            kill(py.pid, SIGINT);
            r = py_wait(now_ms() + PY_INT_GRACE_MS, &out, &err, &b);
            if (r == 1)
                b = 2;
            else
                r = 0;
        }
    }
    drain(py.out, &out);
    drain(py.err, &err);
    uint8_t flags = (uint8_t)((out.truncated ? QF_RES_OUT_TRUNC : 0) | (err.truncated ? QF_RES_ERR_TRUNC : 0));
    int32_t exit_code;
    if (r == 1) {
        exit_code = b == 0 ? 0 : b == 2 ? 124 : 1;
        if (b == 2)
            flags |= QF_RES_TIMED_OUT;
    } else {
        int st = kernel_end(&py);
        *ended = true;
        flags |= QF_RES_ENDED;
        exit_code = r == 0 ? 124 : exit_of(st);
        if (r == 0)
            flags |= QF_RES_TIMED_OUT;
    }
    send_result(seq, exit_code, flags, out.p, out.len, err.p, err.len);
}

/* ---- after every request ---- */

static uid_t uid_of(pid_t pid)
{
    char path[64], line[128];
    snprintf(path, sizeof path, "/proc/%d/status", (int)pid);
    FILE *f = fopen(path, "re");
    if (!f)
        return 0;
    unsigned long uid = 0;
    while (fgets(line, sizeof line, f))
        if (sscanf(line, "Uid: %lu", &uid) == 1)
            break;
    fclose(f);
    return (uid_t)uid;
}

/* No process of the session's code outlives its request but the live kernels; every orphan
 * (re-parented to PID 1) is reaped. A kernel found dead here is forgotten (the next cell starts
 * a fresh one and says so). */
static void sweep(void)
{
    DIR *d = opendir("/proc");
    struct dirent *e;
    while (d && (e = readdir(d))) {
        pid_t pid = (pid_t)atoi(e->d_name);
        if (pid > 1 && pid != js.pid && pid != py.pid && uid_of(pid) == GS_RUN_UID)
            kill(pid, SIGKILL);
    }
    if (d)
        closedir(d);
    int st;
    pid_t w;
    while ((w = waitpid(-1, &st, WNOHANG)) > 0) {
        if (w == js.pid) {
            js.pid = -1;
            kernel_end(&js);
        } else if (w == py.pid) {
            py.pid = -1;
            kernel_end(&py);
        }
    }
}

/* ---- a cell's files, and the disk after every request ---- */

/* The bytes the session's code holds on its tmpfs mounts (/work, and /tmp which it can write too). */
static uint64_t used_bytes(const char *dir)
{
    struct statfs f;
    if (statfs(dir, &f) < 0 || f.f_blocks < f.f_bfree)
        return 0;
    return (uint64_t)(f.f_blocks - f.f_bfree) * (uint64_t)f.f_bsize;
}

/* SESSION_STATUS: file 0 (all written, or no files), or the failed file (1-based) with its errno. */
static void send_status(uint64_t seq, uint32_t file, uint32_t errnum)
{
    uint8_t p[MVC_SESSION_STATUS_LEN];
    if (file == 0 || errnum == 0 || errnum > MVC_ERRNO_MAX)
        file = 0, errnum = 0;
    f16_put_u64(p, used_bytes("/work") + used_bytes("/tmp"));
    f16_put_u32(p + 8, file);
    f16_put_u32(p + 12, errnum);
    gs_send(MVC_SESSION_STATUS, seq, p, sizeof p);
}

/* One file, in /work, as the session's uid: its parents made; never written through a symlink at
 * its last component, nor into a FIFO, socket or device a cell left there (O_NONBLOCK, then only a
 * regular file is truncated and written). A symlinked parent leads where the uid may write anyway. */
static int put_file(char *path, const uint8_t *c, uint32_t n)
{
    for (char *s = strchr(path, '/'); s; s = strchr(s + 1, '/')) {
        *s = 0;
        int r = mkdir(path, 0755);
        *s = '/';
        if (r < 0 && errno != EEXIST)
            return -1;
    }
    cleanup_close int fd = open(path, O_WRONLY | O_CREAT | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC, 0644);
    if (fd < 0)
        return -1;
    struct stat st;
    int e = 0;
    if (fstat(fd, &st) < 0)
        e = errno;
    else if (!S_ISREG(st.st_mode))
        e = EINVAL;
    else if (ftruncate(fd, 0) < 0 || plm_write_exact(fd, c, n) < 0)
        e = errno ? errno : EIO;
    errno = e;
    return e ? -1 : 0;
}

/* The files child: before each file its 1-based index on the pipe, and on a failure the errno. */
__attribute__((noreturn)) static void files_child(int rep, const uint8_t *p, uint32_t len)
{
    alarm(FILES_ALARM_S);
    if (gs_drop_privileges() < 0 || chdir("/work") < 0)
        _exit(GS_EXIT_CONFINE);
    struct f16_reader r;
    f16_reader_init(&r, p, len);
    uint32_t n = f16_get_u32(&r);
    static char path[MVC_PATH_MAX + 1];
    for (uint32_t i = 1; i <= n && n <= MVC_FILES_MAX; i++) {
        uint8_t b[4];
        f16_put_u32(b, i);
        if (plm_write_exact(rep, b, 4) < 0)
            _exit(GS_EXIT_IO);
        uint32_t pl = f16_get_u32(&r);
        const uint8_t *pp = f16_get_bytes(&r, pl);
        uint32_t cl = f16_get_u32(&r);
        const uint8_t *cp = f16_get_bytes(&r, cl);
        if (r.bad || !gs_path_ok(pp, pl))
            _exit(GS_EXIT_PROTOCOL); /* the host checked the rule: a bad path is its mistake */
        memcpy(path, pp, pl);
        path[pl] = 0;
        if (put_file(path, cp, cl) < 0) {
            f16_put_u32(b, (uint32_t)errno);
            plm_write_exact(rep, b, 4);
            _exit(1);
        }
    }
    _exit(f16_reader_finish(&r) < 0 || n > MVC_FILES_MAX ? GS_EXIT_PROTOCOL : 0);
}

/* FILES: written by a child of the session's uid (so cells own them), answered by one STATUS. */
static void files(uint64_t seq, const uint8_t *p, uint32_t len)
{
    int pp[2];
    if (pipe2(pp, O_CLOEXEC) < 0) {
        send_status(seq, 1, EMFILE);
        return;
    }
    cleanup_close int rd = pp[0], wr = pp[1];
    pid_t pid = fork();
    if (pid == 0)
        files_child(wr, p, len);
    int st = 0;
    if (pid > 0)
        while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
            ;
    /* What the child said (read once it is gone, so non-blocking): the last index is the file it
     * was at; a 4-byte pair is its errno. */
    static uint8_t said[4 * (MVC_FILES_MAX + 2)];
    size_t got = 0;
    fcntl(rd, F_SETFL, O_NONBLOCK);
    for (ssize_t k; got < sizeof said && (k = read(rd, said + got, sizeof said - got)) > 0;)
        got += (size_t)k;
    if (pid > 0 && WIFEXITED(st) && WEXITSTATUS(st) == 0) {
        send_status(seq, 0, 0);
        return;
    }
    uint32_t file = 1, errnum = pid < 0 ? EAGAIN : WIFSIGNALED(st) && WTERMSIG(st) == SIGALRM ? ETIMEDOUT : EIO;
    size_t words = got / 4;
    if (words >= 1) {
        uint32_t last = be32(said + 4 * (words - 1)), prev = words >= 2 ? be32(said + 4 * (words - 2)) : 0;
        bool has_errno = WIFEXITED(st) && WEXITSTATUS(st) == 1 && words >= 2;
        file = has_errno ? prev : last;
        if (has_errno)
            errnum = last;
    }
    send_status(seq, file ? file : 1, errnum ? errnum : EIO);
}

void gs_session(struct jsrt *e, uint64_t s, uint64_t seq, const uint8_t *p, uint32_t len)
{
    engine = e;
    seed = s;
    if (len != MVC_SESSION_LEN)
        gs_idle_forever();
    uint32_t disk_mb = be32(p), langs = be32(p + 4);
    char opt[64];
    snprintf(opt, sizeof opt, "size=%um,mode=1777", disk_mb ? disk_mb : 16);
    if (mount("tmpfs", "/work", "tmpfs", MS_NOSUID | MS_NODEV, opt) < 0)
        gs_idle_forever(); /* no /work: the host's open times out and fails */
    /* The hinted interpreters start now, so a first cell usually finds them warm. */
    if ((langs & MVC_LANG_PY) && access("/usr/bin/python3", X_OK) == 0)
        py_start();
    if (langs & MVC_LANG_JS)
        js_start();
    if (gs_send(MVC_SESSION_READY, seq, NULL, 0) < 0)
        gs_idle_forever();
    for (;;) {
        uint8_t hb[F16_HDR_LEN];
        struct f16_hdr h;
        if (plm_read_exact(gs_port(), hb, sizeof hb) < 0 || mvc_hdr_decode(hb, &h) < 0)
            gs_idle_forever();
        uint8_t *q = malloc((size_t)h.len + 1);
        if (!q || plm_read_exact(gs_port(), q, h.len) < 0)
            gs_idle_forever();
        q[h.len] = 0;
        bool ended = false;
        if (h.type == MVC_FILES) {
            files(h.seq, q, h.len); /* before a cell: the STATUS is its answer */
        } else if (h.type == MVC_CELL) {
            uint32_t timeout = be32(q), lang = be32(q + 4);
            if (timeout == 0 || timeout > 3600000u || (lang != MVC_LANG_JS && lang != MVC_LANG_PY))
                gs_idle_forever(); /* a malformed request: the host times the call out */
            if (lang == MVC_LANG_JS)
                js_cell(h.seq, timeout, q + MVC_CELL_FIXED, h.len - MVC_CELL_FIXED, &ended);
            else
                py_cell(h.seq, timeout, q + MVC_CELL_FIXED, h.len - MVC_CELL_FIXED, &ended);
        } else if (h.type == MVC_RUN) {
            gs_serve_run(engine, seed ^ h.seq, h.seq, MVC_RUN, q, h.len);
        } else {
            gs_idle_forever();
        }
        if (h.type != MVC_FILES) {
            sweep();
            send_status(h.seq, 0, 0); /* the disk as the request left it, measured after the sweep */
        }
        free(q);
    }
}
