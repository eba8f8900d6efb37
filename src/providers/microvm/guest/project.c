/* project.c: a project inside the guest (providers.md §3.5's runner, over the port): files under
 * /work, steps as `sh -c` (busybox; node on /usr/bin in project VMs) in /work with the project's whole timeout as each step's,
 * stopping at the first failure, then artifacts; one PROJECT_RESULT frame (vmchan.h).
 * Runs in the run process (uid 65534), never in PID 1. Every step runs in its own process group,
 * killed whole at its deadline or when its output overflows its cap. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "../../../core/clock.h"
#include "../../../guestio/vmchan.h"
#include "guest.h"

static size_t out_budget = MVC_STEPS_OUT_BUDGET; /* all steps' output together */

struct buf {
    uint8_t *p;
    size_t len, cap;
};

static int put(struct buf *b, const void *p, size_t n)
{
    if (b->len + n > b->cap) {
        size_t c = b->cap ? b->cap : 65536;
        while (c < b->len + n)
            c *= 2;
        uint8_t *q = realloc(b->p, c);
        if (!q)
            return -1;
        b->p = q;
        b->cap = c;
    }
    memcpy(b->p + b->len, p, n);
    b->len += n;
    return 0;
}

static int put_u32(struct buf *b, uint32_t v)
{
    uint8_t x[4];
    f16_put_u32(x, v);
    return put(b, x, 4);
}

/* The host checked the path rule; this re-check keeps a path inside /work whatever it says. */
bool gs_path_ok(const uint8_t *p, uint32_t n)
{
    if (n == 0 || n > MVC_PATH_MAX || p[0] == '/' || memchr(p, 0, n))
        return false;
    for (uint32_t i = 0; i < n; i++) {
        bool seg_start = i == 0 || p[i - 1] == '/';
        if (seg_start && p[i] == '.' && (i + 1 == n || p[i + 1] == '/' ||
                                         (p[i + 1] == '.' && (i + 2 == n || p[i + 2] == '/'))))
            return false;
    }
    return true;
}

static int write_file(const char *full, const uint8_t *content, uint32_t n)
{
    char dir[PATH_MAX];
    snprintf(dir, sizeof dir, "%s", full);
    for (char *s = strchr(dir + 6, '/'); s; s = strchr(s + 1, '/')) {
        *s = 0;
        if (mkdir(dir, 0755) < 0 && errno != EEXIST)
            return -1;
        *s = '/';
    }
    int fd = open(full, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0644);
    if (fd < 0)
        return -1;
    for (uint32_t off = 0; off < n;) {
        ssize_t k = write(fd, content + off, n - off);
        if (k <= 0) {
            close(fd);
            return -1;
        }
        off += (uint32_t)k;
    }
    return close(fd);
}

struct step_out {
    struct buf out, err;
    bool out_trunc, err_trunc, timed_out;
    int32_t exit_code;
    uint32_t ms;
};

/* The step's process: its own group, stdout and stderr into the pipes, /dev/null as stdin, in
 * /work, under /bin/sh with the fixed environment. Never returns. */
__attribute__((noreturn)) static void exec_step(const char *cmd, int out_fd, int err_fd)
{
    setpgid(0, 0);
    dup2(out_fd, 1);
    dup2(err_fd, 2);
    int dn = open("/dev/null", O_RDONLY);
    if (dn >= 0)
        dup2(dn, 0);
    if (chdir("/work") < 0)
        _exit(127);
    /* The thread and cache settings of the docker images' ENV (docs/python.md): one BLAS
     * thread, matplotlib drawing with Agg and caching under the writable /tmp. */
    char *const envp[] = {"PATH=/bin:/usr/bin",           "HOME=/work",
                          "OPENBLAS_NUM_THREADS=1",       "OMP_NUM_THREADS=1",
                          "MKL_NUM_THREADS=1",            "MPLBACKEND=Agg",
                          "MPLCONFIGDIR=/tmp/.matplotlib", "XDG_CACHE_HOME=/tmp/.cache",
                          "PYTHONDONTWRITEBYTECODE=1",
                          /* Debian's matplotlib looks for its rc file only in /etc, which
                           * the guest lacks; the disk carries it here */
                          "MATPLOTLIBRC=/usr/share/matplotlib/mpl-data/matplotlibrc", NULL};
    execle("/bin/sh", "sh", "-c", cmd, (char *)NULL, envp);
    _exit(127);
}

/* One read from stream i into its buffer, within the per-stream cap and the steps' budget.
 * Returns false when the step must end (an overflow ends it, providers.md §3.5). */
static bool take_output(struct pollfd *pf, int i, struct step_out *so)
{
    uint8_t chunk[16384];
    ssize_t k = read(pf->fd, chunk, sizeof chunk);
    if (k <= 0) {
        close(pf->fd);
        pf->fd = -1;
        return true;
    }
    struct buf *b = i ? &so->err : &so->out;
    bool *tr = i ? &so->err_trunc : &so->out_trunc;
    bool keep_going = true;
    size_t room = MVC_STEP_OUT_MAX - b->len;
    if (room > out_budget)
        room = out_budget;
    if ((size_t)k > room) {
        k = (ssize_t)room;
        *tr = true;
        keep_going = false;
    }
    if (put(b, chunk, (size_t)k) < 0)
        keep_going = false;
    out_budget -= (size_t)k;
    return keep_going;
}

/* Reads both streams until they close, the deadline passes or an overflow; returns whether the
 * step's group must be killed. The pipes are closed either way. */
static bool drain_step(struct pollfd pf[2], int64_t deadline, struct step_out *so)
{
    bool kill_it = false;
    while (!kill_it && (pf[0].fd >= 0 || pf[1].fd >= 0)) {
        int64_t left = deadline - (int64_t)clock_mono_ms();
        if (left <= 0) {
            so->timed_out = true;
            break;
        }
        if (poll(pf, 2, (int)(left > 1000 ? 1000 : left)) <= 0)
            continue;
        for (int i = 0; i < 2; i++)
            if (pf[i].fd >= 0 && pf[i].revents && !take_output(&pf[i], i, so))
                kill_it = true;
    }
    for (int i = 0; i < 2; i++)
        if (pf[i].fd >= 0)
            close(pf[i].fd);
    return kill_it || so->timed_out;
}

static void run_step(const char *cmd, int64_t deadline, struct step_out *so)
{
    int po[2], pe[2];
    int64_t t0 = (int64_t)clock_mono_ms();
    so->exit_code = -1;
    if (pipe2(po, O_CLOEXEC) < 0 || pipe2(pe, O_CLOEXEC) < 0)
        return;
    pid_t c = fork();
    if (c == 0)
        exec_step(cmd, po[1], pe[1]);
    close(po[1]);
    close(pe[1]);
    if (c < 0) {
        close(po[0]);
        close(pe[0]);
        return;
    }
    setpgid(c, c);
    struct pollfd pf[2] = {{.fd = po[0], .events = POLLIN}, {.fd = pe[0], .events = POLLIN}};
    if (drain_step(pf, deadline, so))
        kill(-c, SIGKILL);
    int st = 0;
    while (waitpid(c, &st, 0) < 0 && errno == EINTR)
        ;
    kill(-c, SIGKILL); /* whatever the step left behind in its group */
    so->exit_code = so->timed_out ? 124 : WIFEXITED(st) ? WEXITSTATUS(st) : -1;
    so->ms = (uint32_t)((int64_t)clock_mono_ms() - t0);
}

static const uint8_t *take(struct f16_reader *r, uint32_t *n)
{
    *n = f16_get_u32(r);
    return f16_get_bytes(r, *n);
}

/* Stage 1: the files, written under /work; the first bad path or failed write is the report's
 * error (the rest are still read, so the plan is checked whole). */
static void write_files(struct f16_reader *r, uint32_t n_files, char *error, size_t cap)
{
    for (uint32_t i = 0; i < n_files && !r->bad && n_files <= MVC_FILES_MAX; i++) {
        uint32_t pl, cl;
        const uint8_t *path = take(r, &pl), *content = take(r, &cl);
        if (r->bad || error[0])
            continue;
        char full[PATH_MAX];
        if (!gs_path_ok(path, pl)) {
            snprintf(error, cap, "illegal file path: %.*s", (int)pl, (const char *)path);
            continue;
        }
        snprintf(full, sizeof full, "/work/%.*s", (int)pl, (const char *)path);
        if (write_file(full, content, cl) < 0)
            snprintf(error, cap, "could not write %.*s: %s", (int)pl, (const char *)path, strerror(errno));
    }
}

/* Steps past n length-prefixed entries; returns where they start. */
static const uint8_t *skip_entries(struct f16_reader *r, uint32_t n, uint32_t max)
{
    const uint8_t *at = r->p + r->off;
    for (uint32_t i = 0; i < n && !r->bad && n <= max; i++) {
        uint32_t k;
        take(r, &k);
    }
    return at;
}

/* One step's report entry: the fixed part, then its stdout and stderr. */
static void report_step(struct buf *steps, struct step_out *so)
{
    uint8_t fixed[MVC_STEP_FIXED];
    f16_put_u32(fixed, (uint32_t)so->exit_code);
    fixed[4] = (uint8_t)((so->timed_out ? 1 : 0) | (so->out_trunc ? 2 : 0) | (so->err_trunc ? 4 : 0));
    fixed[5] = fixed[6] = fixed[7] = 0;
    f16_put_u32(fixed + 8, so->ms);
    f16_put_u32(fixed + 12, (uint32_t)so->out.len);
    f16_put_u32(fixed + 16, (uint32_t)so->err.len);
    if (put(steps, fixed, sizeof fixed) < 0 || put(steps, so->out.p, so->out.len) < 0 ||
        put(steps, so->err.p, so->err.len) < 0)
        _exit(GS_EXIT_MEMORY);
    free(so->out.p);
    free(so->err.p);
}

/* Stage 2: the steps in order, until one fails or times out; returns how many ran. */
static uint32_t run_steps(struct f16_reader *sr, uint32_t n_steps, int64_t deadline, struct buf *steps)
{
    uint32_t ran = 0;
    for (uint32_t i = 0; i < n_steps; i++) {
        uint32_t n;
        const uint8_t *c = take(sr, &n);
        char *cmd = malloc((size_t)n + 1);
        if (!cmd)
            _exit(GS_EXIT_MEMORY);
        memcpy(cmd, c, n);
        cmd[n] = 0;
        struct step_out so = {0};
        run_step(cmd, deadline, &so);
        free(cmd);
        report_step(steps, &so);
        ran++;
        if (so.timed_out || so.exit_code != 0)
            break;
    }
    return ran;
}

/* One artifact's content, when it is a regular file under /work (no link out of it); NULL to
 * skip it. *trunc when it would pass the total cap. */
static uint8_t *read_artifact(const uint8_t *path, uint32_t n, uint32_t total, bool *trunc, ssize_t *got)
{
    char full[PATH_MAX], real[PATH_MAX];
    if (!gs_path_ok(path, n))
        return NULL;
    snprintf(full, sizeof full, "/work/%.*s", (int)n, (const char *)path);
    if (!realpath(full, real) || strncmp(real, "/work/", 6) != 0)
        return NULL;
    int fd = open(full, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
    struct stat sb;
    if (fd < 0)
        return NULL;
    if (fstat(fd, &sb) < 0 || !S_ISREG(sb.st_mode)) {
        close(fd);
        return NULL;
    }
    if ((uint64_t)total + (uint64_t)sb.st_size > MVC_ARTIFACTS_TOTAL_MAX) {
        *trunc = true; /* the caller stops here: nothing after it is kept either */
        close(fd);
        return NULL;
    }
    uint8_t *content = malloc(sb.st_size ? (size_t)sb.st_size : 1);
    *got = content ? read(fd, content, (size_t)sb.st_size) : -1;
    close(fd);
    if (*got != (ssize_t)sb.st_size) {
        free(content);
        return NULL;
    }
    return content;
}

/* Stage 3: artifacts, even after a failed step: regular files under /work, at most 8 MiB in all.
 * Returns how many were kept. */
static uint32_t collect_artifacts(struct f16_reader *ar, uint32_t n_arts, struct buf *arts, bool *arts_trunc)
{
    uint32_t n_kept = 0, total = 0;
    for (uint32_t i = 0; i < n_arts && !*arts_trunc; i++) {
        uint32_t n;
        const uint8_t *path = take(ar, &n);
        ssize_t got = 0;
        uint8_t *content = read_artifact(path, n, total, arts_trunc, &got);
        if (!content)
            continue;
        if (put_u32(arts, n) < 0 || put_u32(arts, (uint32_t)got) < 0 || put(arts, path, n) < 0 ||
            put(arts, content, (size_t)got) < 0)
            _exit(GS_EXIT_MEMORY);
        free(content);
        total += (uint32_t)got;
        n_kept++;
    }
    return n_kept;
}

__attribute__((noreturn)) void gs_project(uint64_t seq, const uint8_t *p, uint32_t len)
{
    struct f16_reader r;
    f16_reader_init(&r, p, len);
    uint32_t timeout_ms = f16_get_u32(&r);
    int64_t deadline = (int64_t)clock_mono_ms() + timeout_ms;
    char error[MVC_PATH_MAX + 64] = "";
    struct buf steps = {0}, arts = {0};

    uint32_t n_files = f16_get_u32(&r);
    write_files(&r, n_files, error, sizeof error);
    uint32_t n_steps = f16_get_u32(&r);
    const uint8_t *step_at = skip_entries(&r, n_steps, MVC_STEPS_MAX);
    uint32_t n_arts = f16_get_u32(&r);
    const uint8_t *art_at = skip_entries(&r, n_arts, MVC_ARTIFACTS_MAX);
    if (f16_reader_finish(&r) < 0 || n_files > MVC_FILES_MAX || n_steps > MVC_STEPS_MAX || n_arts > MVC_ARTIFACTS_MAX)
        _exit(GS_EXIT_PROTOCOL);

    uint32_t n_steps_run = 0;
    if (!error[0]) {
        struct f16_reader sr;
        f16_reader_init(&sr, step_at, (size_t)(p + len - step_at));
        n_steps_run = run_steps(&sr, n_steps, deadline, &steps);
    }
    bool arts_trunc = false;
    struct f16_reader ar;
    f16_reader_init(&ar, art_at, (size_t)(p + len - art_at));
    uint32_t n_kept = collect_artifacts(&ar, n_arts, &arts, &arts_trunc);

    struct buf msg = {0};
    uint32_t elen = (uint32_t)strlen(error);
    if (put_u32(&msg, n_steps_run) < 0 || put(&msg, steps.p, steps.len) < 0 || put_u32(&msg, arts_trunc) < 0 ||
        put_u32(&msg, n_kept) < 0 || put(&msg, arts.p, arts.len) < 0 || put_u32(&msg, elen) < 0 ||
        put(&msg, error, elen) < 0)
        _exit(GS_EXIT_MEMORY);
    if (gs_send(MVC_PROJECT_RESULT, seq, msg.p, (uint32_t)msg.len) < 0)
        _exit(GS_EXIT_IO);
    _exit(0);
}
