/* hostsock_test.h: the fixture both grant-socket tests share (hostsock_test.c and
 * hostsock_stop_test.c): a fake plm_host_api that records what reached `call` (and can block
 * inside it), raw clients that send exactly the bytes a hostile guest would, and a run
 * directory under a temporary base. Header-only: each test program gets its own copy. */
#pragma once
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "../../../tests/unit.h"
#include "../../guestio/guestio.h"
#include "hostsock.h"
#include "session_grant.h"

static inline int64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static inline void sleep_ms(int ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

static inline int count_fds(void)
{
    DIR *d = opendir("/proc/self/fd");
    int n = 0;
    for (struct dirent *e; d && (e = readdir(d));)
        n += e->d_name[0] != '.';
    if (d)
        closedir(d);
    return n;
}

/* ---- the fake host api ------------------------------------------------------------------------ */

struct fake {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int calls, holds, releases, inside;
    bool block;
    int status;        /* the answer's status; 0 = 200 */
    const char *ctype; /* the answer's Content-Type; NULL = none */
    char method[40];
    char target[DOCK_HS_HEAD_MAX];
    size_t len;
    uint8_t first[8];
};
static struct fake F = {.mu = PTHREAD_MUTEX_INITIALIZER, .cv = PTHREAD_COND_INITIALIZER};

static inline void fake_reset(void)
{
    pthread_mutex_lock(&F.mu);
    F.calls = F.holds = F.releases = F.inside = 0;
    F.block = false;
    F.status = 0;
    F.ctype = NULL;
    F.method[0] = F.target[0] = 0;
    F.len = 0;
    pthread_mutex_unlock(&F.mu);
}

static inline void fake_call(void *cb, const char *method, const char *target, const uint8_t *body, size_t len,
                             struct plm_host_reply *out)
{
    struct fake *f = cb;
    pthread_mutex_lock(&f->mu);
    f->calls++;
    f->inside++;
    snprintf(f->method, sizeof f->method, "%s", method);
    snprintf(f->target, sizeof f->target, "%s", target);
    f->len = len;
    memset(f->first, 0, sizeof f->first);
    if (len)
        memcpy(f->first, body, len < sizeof f->first ? len : sizeof f->first);
    pthread_cond_broadcast(&f->cv);
    while (f->block)
        pthread_cond_wait(&f->cv, &f->mu);
    f->inside--;
    out->status = f->status ? f->status : 200;
    out->content_type = f->ctype ? strdup(f->ctype) : NULL;
    pthread_mutex_unlock(&f->mu);
    char *b = NULL;
    int n = asprintf(&b, "ok:%s", target);
    out->body = n > 0 ? (uint8_t *)b : NULL;
    out->len = n > 0 ? (size_t)n : 0;
}

static inline void fake_hold(void *cb)
{
    struct fake *f = cb;
    pthread_mutex_lock(&f->mu);
    f->holds++;
    pthread_mutex_unlock(&f->mu);
}

static inline void fake_release(void *cb)
{
    struct fake *f = cb;
    pthread_mutex_lock(&f->mu);
    f->releases++;
    pthread_cond_broadcast(&f->cv);
    pthread_mutex_unlock(&f->mu);
}

static const struct plm_host_api API = {.profile = "t",
                                        .client_js = "",
                                        .node_preload = "globalThis.x = 1;\n",
                                        .call = fake_call,
                                        .hold = fake_hold,
                                        .release = fake_release,
                                        .cb_ctx = &F};

static inline int fake_get(int *field)
{
    pthread_mutex_lock(&F.mu);
    int v = *field;
    pthread_mutex_unlock(&F.mu);
    return v;
}

/* waits up to ms for *field >= want */
static inline bool fake_wait(int *field, int want, int ms)
{
    int64_t until = now_ms() + ms;
    while (fake_get(field) < want && now_ms() < until)
        sleep_ms(5);
    return fake_get(field) >= want;
}

static inline void fake_unblock(void)
{
    pthread_mutex_lock(&F.mu);
    F.block = false;
    pthread_cond_broadcast(&F.cv);
    pthread_mutex_unlock(&F.mu);
}

/* ---- raw clients ------------------------------------------------------------------------------- */

static inline int dial(const char *path)
{
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    snprintf(sa.sun_path, sizeof sa.sun_path, "%s", path);
    if (fd >= 0 && connect(fd, (struct sockaddr *)&sa, sizeof sa) < 0) {
        close(fd);
        return -1;
    }
    return fd;
}

static inline void send_all(int fd, const void *p, size_t n)
{
    const char *q = p;
    while (n) {
        ssize_t w = send(fd, q, n, MSG_NOSIGNAL);
        if (w <= 0)
            return;
        q += w, n -= (size_t)w;
    }
}

/* Reads until EOF (or ms pass) into out (NUL-terminated, truncated at cap). */
static inline size_t read_to_end(int fd, char *out, size_t cap, int ms)
{
    size_t have = 0;
    int64_t until = now_ms() + ms;
    for (;;) {
        int64_t left = until - now_ms();
        struct pollfd p = {fd, POLLIN, 0};
        if (left <= 0 || poll(&p, 1, (int)left) <= 0)
            break;
        char tmp[4096];
        ssize_t n = recv(fd, tmp, sizeof tmp, 0);
        if (n <= 0)
            break;
        size_t take = (size_t)n < cap - 1 - have ? (size_t)n : cap - 1 - have;
        memcpy(out + have, tmp, take);
        have += take;
    }
    out[have] = 0;
    return have;
}

static char resp[1 << 16];

/* One exchange: send req (n bytes), return the response text in resp. */
static inline const char *xchg(const char *path, const void *req, size_t n)
{
    int fd = dial(path);
    resp[0] = 0;
    if (fd < 0)
        return "(connect failed)";
    send_all(fd, req, n);
    read_to_end(fd, resp, sizeof resp, 5000);
    close(fd);
    return resp;
}

static inline const char *xs(const char *path, const char *req)
{
    return xchg(path, req, strlen(req));
}

static inline bool starts(const char *s, const char *prefix)
{
    return !strncmp(s, prefix, strlen(prefix));
}

/* ---- tests ---------------------------------------------------------------------------------------- */

static char base[64];

static inline struct dock_hostsock *start(const struct plm_host_api *api, const struct dock_hs_limits *lim)
{
    struct dock_hostsock *hs = NULL;
    struct plm_err e = {0};
    if (dock_hostsock_start(base, api, lim, &hs, &e) < 0)
        printf("# start: %s\n", e.msg);
    return hs;
}

/* Both test programs run their cases between these two: a fresh base directory, then nothing
 * left behind (every listener, connection and eventfd closed; every run directory removed). */
static inline int hs_fixture_begin(void)
{
    snprintf(base, sizeof base, "/tmp/plimsoll-hs-test-XXXXXX");
    if (!mkdtemp(base)) {
        printf("not ok - mkdtemp: %s\n", strerror(errno));
        exit(1);
    }
    return count_fds();
}

static inline int hs_fixture_end(int fds0)
{
    CHECK(dock_hostsock_quiesce(3000));
    CHECK(count_fds() == fds0);
    DIR *d = opendir(base);
    int left = 0;
    for (struct dirent *e; d && (e = readdir(d));)
        left += e->d_name[0] != '.';
    if (d)
        closedir(d);
    CHECK(left == 0);
    rmdir(base);
    return unit_done();
}
