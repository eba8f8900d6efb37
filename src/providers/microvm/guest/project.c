/* project.c: a project inside the guest (providers.md §3.5's runner, over the port): files under
 * /work, steps as `sh -c` (busybox; node on /usr/bin in project VMs) in /work with the project's whole timeout as each step's,
 * stopping at the first failure, then artifacts; one PROJECT_RESULT frame (chan.h).
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

#include "../chan.h"
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
    qf_put_u32(x, v);
    return put(b, x, 4);
}

static int64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
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

static void run_step(const char *cmd, int64_t deadline, struct step_out *so)
{
    int po[2], pe[2];
    int64_t t0 = now_ms();
    so->exit_code = -1;
    if (pipe2(po, O_CLOEXEC) < 0 || pipe2(pe, O_CLOEXEC) < 0)
        return;
    pid_t c = fork();
    if (c == 0) {
        setpgid(0, 0);
        dup2(po[1], 1);
        dup2(pe[1], 2);
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
    close(po[1]);
    close(pe[1]);
    if (c < 0) {
        close(po[0]);
        close(pe[0]);
        return;
    }
    setpgid(c, c);
    struct pollfd pf[2] = {{.fd = po[0], .events = POLLIN}, {.fd = pe[0], .events = POLLIN}};
    bool kill_it = false;
    uint8_t chunk[16384];
    while (pf[0].fd >= 0 || pf[1].fd >= 0) {
        int64_t left = deadline - now_ms();
        if (left <= 0) {
            so->timed_out = true;
            break;
        }
        if (poll(pf, 2, (int)(left > 1000 ? 1000 : left)) <= 0)
            continue;
        for (int i = 0; i < 2; i++) {
            if (pf[i].fd < 0 || !pf[i].revents)
                continue;
            ssize_t k = read(pf[i].fd, chunk, sizeof chunk);
            if (k <= 0) {
                close(pf[i].fd);
                pf[i].fd = -1;
                continue;
            }
            struct buf *b = i ? &so->err : &so->out;
            bool *tr = i ? &so->err_trunc : &so->out_trunc;
            size_t room = MVC_STEP_OUT_MAX - b->len;
            if (room > out_budget)
                room = out_budget;
            if ((size_t)k > room) {
                k = (ssize_t)room;
                *tr = true;
                kill_it = true; /* an overflow ends the step (providers.md §3.5) */
            }
            if (put(b, chunk, (size_t)k) < 0)
                kill_it = true;
            out_budget -= (size_t)k;
        }
        if (kill_it)
            break;
    }
    if (so->timed_out || kill_it)
        kill(-c, SIGKILL);
    for (int i = 0; i < 2; i++)
        if (pf[i].fd >= 0)
            close(pf[i].fd);
    int st = 0;
    while (waitpid(c, &st, 0) < 0 && errno == EINTR)
        ;
    kill(-c, SIGKILL); /* whatever the step left behind in its group */
    so->exit_code = so->timed_out ? 124 : WIFEXITED(st) ? WEXITSTATUS(st) : -1;
    so->ms = (uint32_t)(now_ms() - t0);
}

static const uint8_t *take(struct qf_reader *r, uint32_t *n)
{
    *n = qf_get_u32(r);
    return qf_get_bytes(r, *n);
}

__attribute__((noreturn)) void gs_project(uint64_t seq, const uint8_t *p, uint32_t len)
{
    struct qf_reader r;
    qf_reader_init(&r, p, len);
    uint32_t timeout_ms = qf_get_u32(&r);
    int64_t deadline = now_ms() + timeout_ms;
    char error[MVC_PATH_MAX + 64] = "";
    struct buf steps = {0}, arts = {0};
    uint32_t n_steps_run = 0;

    uint32_t n_files = qf_get_u32(&r);
    for (uint32_t i = 0; i < n_files && !r.bad && n_files <= MVC_FILES_MAX; i++) {
        uint32_t pl, cl;
        const uint8_t *path = take(&r, &pl), *content = take(&r, &cl);
        if (r.bad)
            break;
        if (error[0])
            continue;
        char full[PATH_MAX];
        if (!gs_path_ok(path, pl)) {
            snprintf(error, sizeof error, "illegal file path: %.*s", (int)pl, (const char *)path);
            continue;
        }
        snprintf(full, sizeof full, "/work/%.*s", (int)pl, (const char *)path);
        if (write_file(full, content, cl) < 0)
            snprintf(error, sizeof error, "could not write %.*s: %s", (int)pl, (const char *)path, strerror(errno));
    }
    uint32_t n_steps = qf_get_u32(&r);
    const uint8_t *step_at = r.p + r.off;
    for (uint32_t i = 0; i < n_steps && !r.bad && n_steps <= MVC_STEPS_MAX; i++) {
        uint32_t n;
        take(&r, &n);
    }
    uint32_t n_arts = qf_get_u32(&r);
    const uint8_t *art_at = r.p + r.off;
    for (uint32_t i = 0; i < n_arts && !r.bad && n_arts <= MVC_ARTIFACTS_MAX; i++) {
        uint32_t n;
        take(&r, &n);
    }
    if (qf_reader_finish(&r) < 0 || n_files > MVC_FILES_MAX || n_steps > MVC_STEPS_MAX || n_arts > MVC_ARTIFACTS_MAX)
        _exit(GS_EXIT_PROTOCOL);

    if (!error[0]) {
        struct qf_reader sr;
        qf_reader_init(&sr, step_at, (size_t)(p + len - step_at));
        for (uint32_t i = 0; i < n_steps; i++) {
            uint32_t n;
            const uint8_t *c = take(&sr, &n);
            char *cmd = malloc((size_t)n + 1);
            if (!cmd)
                _exit(GS_EXIT_MEMORY);
            memcpy(cmd, c, n);
            cmd[n] = 0;
            struct step_out so = {0};
            run_step(cmd, deadline, &so);
            free(cmd);
            uint8_t fixed[MVC_STEP_FIXED];
            qf_put_u32(fixed, (uint32_t)so.exit_code);
            fixed[4] = (uint8_t)((so.timed_out ? 1 : 0) | (so.out_trunc ? 2 : 0) | (so.err_trunc ? 4 : 0));
            fixed[5] = fixed[6] = fixed[7] = 0;
            qf_put_u32(fixed + 8, so.ms);
            qf_put_u32(fixed + 12, (uint32_t)so.out.len);
            qf_put_u32(fixed + 16, (uint32_t)so.err.len);
            if (put(&steps, fixed, sizeof fixed) < 0 || put(&steps, so.out.p, so.out.len) < 0 ||
                put(&steps, so.err.p, so.err.len) < 0)
                _exit(GS_EXIT_MEMORY);
            free(so.out.p);
            free(so.err.p);
            n_steps_run++;
            if (so.timed_out || so.exit_code != 0)
                break;
        }
    }
    /* Artifacts, even after a failed step: regular files under /work, at most 8 MiB in all. */
    uint32_t n_kept = 0, total = 0;
    bool arts_trunc = false;
    struct qf_reader ar;
    qf_reader_init(&ar, art_at, (size_t)(p + len - art_at));
    for (uint32_t i = 0; i < n_arts && !arts_trunc; i++) {
        uint32_t n;
        const uint8_t *path = take(&ar, &n);
        char full[PATH_MAX], real[PATH_MAX];
        if (!gs_path_ok(path, n))
            continue;
        snprintf(full, sizeof full, "/work/%.*s", (int)n, (const char *)path);
        if (!realpath(full, real) || strncmp(real, "/work/", 6) != 0)
            continue;
        int fd = open(full, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
        struct stat sb;
        if (fd < 0)
            continue;
        if (fstat(fd, &sb) < 0 || !S_ISREG(sb.st_mode)) {
            close(fd);
            continue;
        }
        if ((uint64_t)total + (uint64_t)sb.st_size > MVC_ARTIFACTS_TOTAL_MAX) {
            arts_trunc = true;
            close(fd);
            break;
        }
        uint8_t *content = malloc(sb.st_size ? (size_t)sb.st_size : 1);
        ssize_t got = content ? read(fd, content, (size_t)sb.st_size) : -1;
        close(fd);
        if (got != (ssize_t)sb.st_size) {
            free(content);
            continue;
        }
        if (put_u32(&arts, n) < 0 || put_u32(&arts, (uint32_t)got) < 0 || put(&arts, path, n) < 0 ||
            put(&arts, content, (size_t)got) < 0)
            _exit(GS_EXIT_MEMORY);
        free(content);
        total += (uint32_t)got;
        n_kept++;
    }
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
