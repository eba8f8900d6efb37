/* runner.c: plimsoll-runner, PID 1 of a project container (providers.md §3.5; format in wire.h).
 * Owns: the plan read from stdin, /work, every process the steps start, the report on stdout.
 * Trusts: the plan's framing (it comes from the host), but re-checks every path; nothing a step
 * does or prints.
 * Invariant: the process is non-dumpable before the first read, so a step running under the same
 * uid can open neither /proc/1/mem nor /proc/1/fd/N; the key is read first and lives only in
 * g_key (wiped in every forked child before exec and after signing); a step gets /dev/null as
 * stdin and two pipes as stdout/stderr, never one of our descriptors, so the only way into the
 * report is through the runner's own encoding, which the host authenticates with the key. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "../../../core/clock.h"
#include "sha256.h"
#include "wire.h"

#define WORK_DIR "/work"

extern char **environ;

static uint8_t g_key[RW_KEY_LEN];

/* A growable byte buffer with a hard cap. */
struct buf {
    uint8_t *p;
    size_t len, cap, max;
};

static int buf_reserve(struct buf *b, size_t extra)
{
    size_t need;
    if (__builtin_add_overflow(b->len, extra, &need) || need > b->max)
        return -1;
    if (need <= b->cap)
        return 0;
    size_t cap = b->cap ? b->cap : 4096;
    while (cap < need)
        cap = cap > b->max / 2 ? b->max : cap * 2;
    uint8_t *q = realloc(b->p, cap);
    if (!q)
        return -1;
    b->p = q;
    b->cap = cap;
    return 0;
}

static int buf_put(struct buf *b, const void *p, size_t n)
{
    if (buf_reserve(b, n) < 0)
        return -1;
    if (n)
        memcpy(b->p + b->len, p, n);
    b->len += n;
    return 0;
}

static int buf_u32(struct buf *b, uint32_t v)
{
    uint8_t x[4];
    rw_put_u32(x, v);
    return buf_put(b, x, 4);
}

static int buf_field(struct buf *b, const void *p, size_t n)
{
    if (n > UINT32_MAX)
        return -1;
    return buf_u32(b, (uint32_t)n) < 0 ? -1 : buf_put(b, p, n);
}

/* Signed, for this file's deadline arithmetic; the reading is core/clock.h's. */
static int64_t mono_ms(void)
{
    return (int64_t)clock_mono_ms();
}

static int write_all(int fd, const void *p, size_t n)
{
    const uint8_t *q = p;
    while (n) {
        ssize_t w = write(fd, q, n);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return -1;
        q += w, n -= (size_t)w;
    }
    return 0;
}

/* Reads exactly n bytes; -1 on a short read. */
static int read_exact(int fd, void *p, size_t n)
{
    uint8_t *q = p;
    while (n) {
        ssize_t r = read(fd, q, n);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            return -1;
        q += r, n -= (size_t)r;
    }
    return 0;
}

/* The path rule of providers.md §1.4, re-checked here: the host validated it already. */
static int path_ok(const char *p)
{
    size_t n = strlen(p);
    if (n == 0 || n > RW_PATH_MAX || p[0] == '/')
        return 0;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)p[i];
        if (c < 0x20 || c == 0x7f || c == '\\')
            return 0;
    }
    const char *s = p;
    for (;;) {
        const char *e = strchr(s, '/');
        size_t len = e ? (size_t)(e - s) : strlen(s);
        if (len == 0 || (len == 1 && s[0] == '.') || (len == 2 && s[0] == '.' && s[1] == '.'))
            return 0;
        if (!e)
            return 1;
        s = e + 1;
    }
}

/* Opens the directory holding `path` beneath `root` one component at a time, never following a
 * symlink (O_NOFOLLOW on every component), creating directories when `create`. On success *base
 * points into path at the last component. */
static int open_parent(int root, const char *path, int create, const char **base)
{
    int dir = fcntl(root, F_DUPFD_CLOEXEC, 3);
    if (dir < 0)
        return -1;
    const char *s = path;
    for (;;) {
        const char *e = strchr(s, '/');
        if (!e) {
            *base = s;
            return dir;
        }
        char seg[RW_PATH_MAX + 1];
        size_t len = (size_t)(e - s);
        memcpy(seg, s, len);
        seg[len] = 0;
        /* a failed mkdirat leaves next at -1 with its errno: one close of dir either way */
        int next = create && mkdirat(dir, seg, 0755) < 0 && errno != EEXIST
                       ? -1
                       : openat(dir, seg, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        int saved = errno;
        close(dir);
        if (next < 0) {
            errno = saved;
            return -1;
        }
        dir = next;
        s = e + 1;
    }
}

struct plan {
    uint32_t step_timeout_ms;
    uint32_t n_files, n_steps, n_artifacts;
    char *file_path[RW_FILES_MAX];
    const uint8_t *file_data[RW_FILES_MAX];
    uint32_t file_len[RW_FILES_MAX];
    char *step[RW_STEPS_MAX];
    char *artifact[RW_ARTIFACTS_MAX];
};

/* A NUL-terminated copy of a field that must not itself hold a NUL. */
static char *field_str(struct rw_reader *r, size_t max)
{
    uint32_t n;
    const uint8_t *p = rw_field(r, max, &n);
    if (!p || memchr(p, 0, n)) {
        r->bad = true;
        return NULL;
    }
    char *s = malloc((size_t)n + 1);
    if (!s) {
        r->bad = true;
        return NULL;
    }
    memcpy(s, p, n);
    s[n] = 0;
    return s;
}

static int plan_decode(const uint8_t *p, size_t len, struct plan *pl)
{
    struct rw_reader r;
    rw_reader_init(&r, p, len);
    if (!rw_magic(&r, RW_PLAN_MAGIC))
        return -1;
    pl->step_timeout_ms = rw_u32(&r);
    pl->n_files = rw_u32(&r);
    if (r.bad || pl->n_files > RW_FILES_MAX)
        return -1;
    for (uint32_t i = 0; i < pl->n_files && !r.bad; i++) {
        pl->file_path[i] = field_str(&r, RW_PATH_MAX);
        pl->file_data[i] = rw_field(&r, RW_PLAN_MAX, &pl->file_len[i]);
    }
    pl->n_steps = rw_u32(&r);
    if (r.bad || pl->n_steps == 0 || pl->n_steps > RW_STEPS_MAX)
        return -1;
    for (uint32_t i = 0; i < pl->n_steps && !r.bad; i++)
        pl->step[i] = field_str(&r, RW_COMMAND_MAX);
    pl->n_artifacts = rw_u32(&r);
    if (r.bad || pl->n_artifacts > RW_ARTIFACTS_MAX)
        return -1;
    for (uint32_t i = 0; i < pl->n_artifacts && !r.bad; i++)
        pl->artifact[i] = field_str(&r, RW_PATH_MAX);
    return rw_done(&r) && pl->step_timeout_ms > 0 ? 0 : -1;
}

static void __attribute__((format(printf, 2, 3))) set_error(char *err, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, RW_ERROR_MAX, fmt, ap);
    va_end(ap);
}

static int write_files(int root, const struct plan *pl, char *err)
{
    for (uint32_t i = 0; i < pl->n_files; i++) {
        const char *path = pl->file_path[i];
        if (!path_ok(path)) {
            set_error(err, "illegal file path: %s", path);
            return -1;
        }
        const char *base;
        int dir = open_parent(root, path, 1, &base);
        if (dir < 0) {
            /* A symlink or a file in the way of a parent resolves outside the plan's tree. */
            if (errno == ELOOP || errno == ENOTDIR)
                set_error(err, "illegal file path: %s", path);
            else
                set_error(err, "write file %s: %s", path, strerror(errno));
            return -1;
        }
        int fd = openat(dir, base, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0644);
        int saved = errno;
        close(dir);
        if (fd < 0) {
            set_error(err, "write file %s: %s", path, strerror(saved));
            return -1;
        }
        if (write_all(fd, pl->file_data[i], pl->file_len[i]) < 0) {
            saved = errno;
            close(fd);
            set_error(err, "write file %s: %s", path, strerror(saved ? saved : EIO));
            return -1;
        }
        if (close(fd) < 0) {
            set_error(err, "write file %s: %s", path, strerror(errno));
            return -1;
        }
    }
    return 0;
}

struct step_res {
    struct buf out, err;
    int32_t exit_code;
    uint8_t flags;
    uint64_t duration_ms;
};

/* Kills everything a step left behind. As PID 1 of the container's pid namespace, kill(-1)
 * reaches every other process in it (including ones that left the step's process group);
 * outside a container it would reach every process of this uid, so only the group is killed. */
static void kill_leftovers(pid_t pgid)
{
    kill(-pgid, SIGKILL);
    if (getpid() == 1)
        kill(-1, SIGKILL);
}

static void reap_all(void)
{
    while (waitpid(-1, NULL, WNOHANG) > 0)
        ;
}

static void child_exec(const char *cmd, int out_w, int err_w)
{
    explicit_bzero(g_key, sizeof g_key);
    setpgid(0, 0);
    signal(SIGPIPE, SIG_DFL);
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, NULL);
    int nul = open("/dev/null", O_RDONLY);
    if (nul < 0 || dup2(nul, 0) < 0 || dup2(out_w, 1) < 0 || dup2(err_w, 2) < 0)
        _exit(127);
    if (chdir(WORK_DIR) < 0)
        _exit(127);
    char *argv[] = {"sh", "-c", (char *)cmd, NULL};
    execve("/bin/sh", argv, environ);
    _exit(127);
}

/* Reads what is available on fd into b, dropping bytes past the cap. Returns 1 at EOF, 0 when it
 * would block, and sets *over when the cap was exceeded. */
static int drain(int fd, struct buf *b, int *over)
{
    uint8_t tmp[65536];
    for (;;) {
        ssize_t n = read(fd, tmp, sizeof tmp);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            return errno == EAGAIN ? 0 : 1;
        if (n == 0)
            return 1;
        size_t room = b->max - b->len;
        size_t take = (size_t)n < room ? (size_t)n : room;
        if (take && buf_put(b, tmp, take) < 0)
            *over = 1;
        if ((size_t)n > take)
            *over = 1;
    }
}

static void run_step(const char *cmd, uint32_t timeout_ms, struct step_res *r)
{
    memset(r, 0, sizeof *r);
    r->out.max = r->err.max = RW_STEP_STREAM_MAX;
    int64_t t0 = mono_ms(), deadline = t0 + timeout_ms;
    int po[2], pe[2];
    if (pipe2(po, O_CLOEXEC) < 0)
        goto fail;
    if (pipe2(pe, O_CLOEXEC) < 0) {
        close(po[0]), close(po[1]);
        goto fail;
    }
    pid_t pid = fork();
    if (pid == 0)
        child_exec(cmd, po[1], pe[1]);
    close(po[1]), close(pe[1]);
    if (pid < 0) {
        close(po[0]), close(pe[0]);
        goto fail;
    }
    setpgid(pid, pid); /* also in the child: whichever runs first wins the race */
    fcntl(po[0], F_SETFL, O_NONBLOCK);
    fcntl(pe[0], F_SETFL, O_NONBLOCK);
    int out_eof = 0, err_eof = 0, out_over = 0, err_over = 0, exited = 0, timed_out = 0, status = 0;
    while (!exited || !out_eof || !err_eof) {
        int64_t now = mono_ms();
        if (!exited && now >= deadline) {
            timed_out = 1;
            kill_leftovers(pid);
        }
        struct pollfd fds[2] = {{out_eof ? -1 : po[0], POLLIN, 0}, {err_eof ? -1 : pe[0], POLLIN, 0}};
        /* Short waits while the child runs (its exit is noticed by waitpid); after it exited the
         * leftovers are dead, so the pipes reach EOF at once, bounded by the deadline anyway. */
        int wait = exited ? 100 : 10;
        if (!exited && deadline - now < wait)
            wait = (int)(deadline - now > 0 ? deadline - now : 0);
        if (poll(fds, 2, wait) < 0 && errno != EINTR)
            break;
        if (!out_eof && drain(po[0], &r->out, &out_over))
            out_eof = 1;
        if (!err_eof && drain(pe[0], &r->err, &err_over))
            err_eof = 1;
        if ((out_over || err_over) && !exited)
            kill_leftovers(pid); /* (spec) an overflow kills the child */
        if (!exited) {
            pid_t w = waitpid(pid, &status, WNOHANG);
            if (w == pid) {
                exited = 1;
                kill_leftovers(pid); /* background processes must not outlive their step */
            }
        } else if (mono_ms() > deadline + 2000) {
            break; /* a leftover stuck in the kernel holds a pipe; give up on its output */
        }
        if (timed_out && !exited) {
            waitpid(pid, &status, 0);
            exited = 1;
        }
    }
    close(po[0]), close(pe[0]);
    reap_all();
    r->duration_ms = (uint64_t)(mono_ms() - t0);
    if (out_over)
        r->flags |= RW_F_OUT_TRUNC;
    if (err_over)
        r->flags |= RW_F_ERR_TRUNC;
    if (timed_out) {
        r->flags |= RW_F_TIMED_OUT;
        r->exit_code = 124;
    } else if (WIFEXITED(status)) {
        r->exit_code = WEXITSTATUS(status);
    } else {
        r->exit_code = -1; /* killed by a signal: there is no exit status */
    }
    return;
fail:
    r->exit_code = -1;
    r->duration_ms = (uint64_t)(mono_ms() - t0);
}

static int encode_step(struct buf *b, const char *cmd, const struct step_res *s)
{
    size_t clen = strlen(cmd);
    if (clen > RW_COMMAND_MAX)
        clen = RW_COMMAND_MAX;
    uint8_t tail[13];
    rw_put_u32(tail, (uint32_t)s->exit_code);
    tail[4] = s->flags;
    rw_put_u64(tail + 5, s->duration_ms);
    return buf_field(b, cmd, clen) < 0 || buf_field(b, s->out.p, s->out.len) < 0 ||
                   buf_field(b, s->err.p, s->err.len) < 0 || buf_put(b, tail, sizeof tail) < 0
               ? -1
               : 0;
}

struct artifact {
    const char *path;
    uint8_t *data;
    size_t len;
};

/* Regular files under /work only, opened component by component with O_NOFOLLOW; a missing,
 * linked or special file is skipped silently; capture stops at the first file past the budget. */
/* A regular file's bytes, if they fit in room: 0 read, 1 over the budget, -1 not a readable
 * regular file (skipped). Closes nothing: fd stays the caller's. */
static int read_artifact(int fd, size_t room, uint8_t **data, size_t *size)
{
    struct stat st;
    if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) || st.st_size < 0)
        return -1;
    *size = (size_t)st.st_size;
    if (*size > room)
        return 1;
    *data = malloc(*size ? *size : 1);
    if (!*data || (*size && read_exact(fd, *data, *size) < 0)) {
        free(*data);
        *data = NULL;
        return -1;
    }
    return 0;
}

static size_t collect_artifacts(int root, const struct plan *pl, struct artifact *out, int *truncated)
{
    size_t n = 0, total = 0;
    for (uint32_t i = 0; i < pl->n_artifacts; i++) {
        const char *path = pl->artifact[i];
        if (!path_ok(path))
            continue;
        const char *base;
        int dir = open_parent(root, path, 0, &base);
        if (dir < 0)
            continue;
        int fd = openat(dir, base, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
        close(dir);
        if (fd < 0)
            continue;
        uint8_t *data = NULL;
        size_t size = 0;
        int r = read_artifact(fd, RW_ARTIFACT_TOTAL_MAX - total, &data, &size);
        close(fd);
        if (r > 0) {
            *truncated = 1;
            break;
        }
        if (r < 0)
            continue;
        total += size;
        out[n++] = (struct artifact){path, data, size};
    }
    return n;
}

/* The report body; an error report carries no steps and no artifacts. */
static int encode_report(struct buf *body, const char *error, const struct buf *steps, uint32_t n_steps,
                         const struct artifact *arts, size_t n_arts, int arts_truncated)
{
    body->max = RW_REPORT_BODY_MAX;
    if (buf_put(body, RW_REPORT_MAGIC, RW_MAGIC_LEN) < 0 || buf_field(body, error, strlen(error)) < 0)
        return -1;
    if (*error) {
        uint8_t z[5] = {0};
        return buf_put(body, z, 4) < 0 || buf_put(body, z, 1) < 0 || buf_put(body, z, 4) < 0 ? -1 : 0;
    }
    if (buf_u32(body, n_steps) < 0 || buf_put(body, steps->p, steps->len) < 0)
        return -1;
    uint8_t t = arts_truncated ? 1 : 0;
    if (buf_put(body, &t, 1) < 0 || buf_u32(body, (uint32_t)n_arts) < 0)
        return -1;
    for (size_t i = 0; i < n_arts; i++)
        if (buf_field(body, arts[i].path, strlen(arts[i].path)) < 0 || buf_field(body, arts[i].data, arts[i].len) < 0)
            return -1;
    return 0;
}

static int emit(const struct buf *body)
{
    uint8_t mac[RS_SHA256_LEN];
    struct rs_hmac h;
    rs_hmac_init(&h, g_key, sizeof g_key);
    rs_hmac_update(&h, body->p, body->len);
    rs_hmac_final(&h, mac);
    explicit_bzero(g_key, sizeof g_key);
    char head[RW_FRAME_HEADER_MAX + 2];
    int n = snprintf(head, sizeof head, "\n%s %zu ", RW_FRAME_TAG, body->len);
    static const char hex[] = "0123456789abcdef";
    for (size_t i = 0; i < sizeof mac && n > 0 && (size_t)n + 3 < sizeof head; i++) {
        head[n++] = hex[mac[i] >> 4];
        head[n++] = hex[mac[i] & 15];
    }
    head[n++] = '\n';
    return write_all(1, head, (size_t)n) < 0 || write_all(1, body->p, body->len) < 0 ? -1 : 0;
}

static int report_error(const char *msg)
{
    struct buf body = {0}, none = {0};
    int r = encode_report(&body, msg, &none, 0, NULL, 0, 0) < 0 ? -1 : emit(&body);
    free(body.p);
    return r;
}

/* Reads the plan that follows the key on stdin to its end, then points stdin at /dev/null so that
 * no step inherits the key's channel. NULL, or why the plan could not be read. */
static const char *read_plan(struct buf *plan_buf)
{
    for (;;) {
        if (buf_reserve(plan_buf, 65536) < 0 && buf_reserve(plan_buf, 1) < 0)
            return "the plan exceeds its size limit";
        size_t room = plan_buf->cap - plan_buf->len;
        ssize_t r = read(0, plan_buf->p + plan_buf->len, room);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0)
            return "could not read the plan";
        if (r == 0)
            break;
        plan_buf->len += (size_t)r;
    }
    int nul = open("/dev/null", O_RDONLY | O_CLOEXEC);
    if (nul >= 0) {
        dup2(nul, 0);
        close(nul);
    }
    return NULL;
}

int main(void)
{
    /* Before anything else: a same-uid step must not reach our memory or descriptors. */
    if (prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) < 0) {
        fprintf(stderr, "plimsoll-runner: cannot make the runner non-dumpable\n");
        return 3;
    }
    prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0);
    signal(SIGPIPE, SIG_IGN);
    if (syscall(SYS_close_range, 3, ~0U, 0) < 0)
        for (int fd = 3; fd < 4096; fd++)
            close(fd);
    if (read_exact(0, g_key, sizeof g_key) < 0) {
        fprintf(stderr, "plimsoll-runner: no report key on stdin\n");
        return 2;
    }
    struct buf plan_buf = {.max = RW_PLAN_MAX};
    const char *why = read_plan(&plan_buf);
    if (why)
        return report_error(why) < 0 ? 4 : 0;
    struct plan pl = {0};
    if (plan_decode(plan_buf.p, plan_buf.len, &pl) < 0)
        return report_error("could not decode the plan") < 0 ? 4 : 0;

    char err[RW_ERROR_MAX] = "";
    int root = open(WORK_DIR, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (root < 0)
        set_error(err, "open %s: %s", WORK_DIR, strerror(errno));
    else
        write_files(root, &pl, err);
    if (*err)
        return report_error(err) < 0 ? 4 : 0;

    struct buf steps = {.max = RW_REPORT_BODY_MAX};
    uint32_t n_done = 0;
    for (uint32_t i = 0; i < pl.n_steps; i++) {
        struct step_res s;
        run_step(pl.step[i], pl.step_timeout_ms, &s);
        int r = encode_step(&steps, pl.step[i], &s);
        free(s.out.p);
        free(s.err.p);
        if (r < 0)
            return report_error("sandbox result exceeds the encoded response budget") < 0 ? 4 : 0;
        n_done++;
        if ((s.flags & RW_F_TIMED_OUT) || s.exit_code != 0)
            break; /* (spec) stop at the first step that timed out or exited non-zero */
    }

    static struct artifact arts[RW_ARTIFACTS_MAX];
    int truncated = 0;
    size_t n_arts = collect_artifacts(root, &pl, arts, &truncated);
    /* (spec) keep the whole result within its budget, dropping artifacts from the end. */
    size_t fixed = RW_MAGIC_LEN + 4 + 4 + steps.len + 1 + 4, arts_bytes = 0;
    for (size_t i = 0; i < n_arts; i++)
        arts_bytes += 8 + strlen(arts[i].path) + arts[i].len;
    while (n_arts && fixed + arts_bytes > RW_RESULT_BUDGET) {
        n_arts--;
        arts_bytes -= 8 + strlen(arts[n_arts].path) + arts[n_arts].len;
        truncated = 1;
    }
    if (fixed + arts_bytes > RW_RESULT_BUDGET)
        return report_error("sandbox result exceeds the encoded response budget") < 0 ? 4 : 0;
    struct buf body = {0};
    if (encode_report(&body, "", &steps, n_done, arts, n_arts, truncated) < 0)
        return report_error("sandbox result exceeds the encoded response budget") < 0 ? 4 : 0;
    return emit(&body) < 0 ? 4 : 0;
}
