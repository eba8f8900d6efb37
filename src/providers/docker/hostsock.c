/* hostsock.c: the grant socket of one docker run (hostsock.h): its private directory, its
 * listener, one thread per connection, and the end of all of them.
 * Owns: <base>/plimsoll-broker-XXXXXX (0700) with host-api.sock and host-api.mjs, the listening
 * socket, every accepted connection and every thread serving one.
 * Trusts: nothing that arrives on a connection (guest code, or anything the guest started);
 * the copied plm_host_api to decide every call.
 * Invariants:
 *  - bounded: at most DOCK_HS_CONN_MAX connection threads, each holding at most
 *    DOCK_HS_HEAD_MAX + DOCK_HS_BODY_MAX + 1 bytes, each read and write under a deadline, so a
 *    slow or hostile guest costs a run at most those bytes and seconds and never blocks a
 *    daemon thread outside this server;
 *  - after dock_hostsock_stop returns, nothing of the server is left on the file system, no
 *    call begins, and every thread is joined except one inside `call` that took hold(cb_ctx)
 *    while the run was live (it releases when `call` returns, then exits on its own);
 *  - a connection's fd is closed only by whoever frees the connection (its joiner, or the
 *    thread itself once detached), so a shutdown() from the stopper never hits a reused fd. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "../../core/clock.h"
#include "../../core/io.h"
#include "hostsock.h"

#define SOCK_NAME "host-api.sock"
#define PRELOAD_NAME "host-api.mjs"
#define CT_TEXT "text/plain; charset=utf-8"
/* A reply without a Content-Type of its own (provider.h) is labelled as the bytes it is. */
#define CT_BODY "application/octet-stream"

struct conn {
    struct conn *next;
    struct dock_hostsock *hs;
    int fd;
    pthread_t th;
    int64_t accepted_ms;
    /* under hs->mu */
    bool in_call;  /* between the stopping check and the end of `call` */
    bool finished; /* the thread is done with everything but its exit */
    bool detached; /* the stopper let go: the thread frees itself and drops a server ref */
};

struct dock_hostsock {
    pthread_mutex_t mu;
    struct plm_host_api api; /* copy; the texts are not kept */
    struct dock_hs_limits lim;
    char dir[108], sock[108], preload[108];
    int lfd, wake; /* the listener; an eventfd that wakes the acceptor */
    pthread_t acceptor;
    bool acceptor_started;
    /* under mu */
    bool stopping;
    struct conn *conns; /* every connection not yet reaped or detached */
    unsigned n_live;    /* accepted connections whose thread has not finished (the 32 cap) */
    unsigned refs;      /* the owner's, plus one per detached thread */
};

static atomic_uint g_threads;

unsigned dock_hostsock_threads(void)
{
    return atomic_load(&g_threads);
}

bool dock_hostsock_quiesce(uint32_t timeout_ms)
{
    int64_t until = (int64_t)clock_mono_ms() + timeout_ms;
    while (atomic_load(&g_threads) && (int64_t)clock_mono_ms() < until) {
        struct timespec ts = {0, 10 * 1000000L};
        nanosleep(&ts, NULL);
    }
    return atomic_load(&g_threads) == 0;
}

const char *dock_hostsock_sock_path(const struct dock_hostsock *hs)
{
    return hs->sock;
}

const char *dock_hostsock_preload_path(const struct dock_hostsock *hs)
{
    return hs->preload;
}

/* ---- the base directory ---------------------------------------------------------------------- */

static int dir_ok(const char *p, bool own, struct plm_err *err)
{
    struct stat st;
    if (p[0] != '/')
        return plm_err_set(err, EINVAL, PLM_E_INTERNAL, PLM_REFUSAL_NONE, "\"%s\" is not an absolute path", p);
    /* the longest path we make below it must fit sun_path */
    if (strlen(p) + sizeof "/" DOCK_HS_DIR_PREFIX "XXXXXX/" SOCK_NAME > sizeof((struct sockaddr_un *)0)->sun_path)
        return plm_err_set(err, ENAMETOOLONG, PLM_E_INTERNAL, PLM_REFUSAL_NONE,
                           "\"%s\" is too long for a unix socket path", p);
    if (lstat(p, &st) < 0)
        return plm_err_set(err, errno, PLM_E_INTERNAL, PLM_REFUSAL_NONE, "\"%s\": %s", p, strerror(errno));
    if (!S_ISDIR(st.st_mode))
        return plm_err_set(err, ENOTDIR, PLM_E_INTERNAL, PLM_REFUSAL_NONE, "\"%s\" is not a directory", p);
    /* Another user who can write the parent could swap our run directory under dockerd. */
    if (own && (st.st_uid != geteuid() || (st.st_mode & 022)))
        return plm_err_set(err, EPERM, PLM_E_INTERNAL, PLM_REFUSAL_NONE,
                           "\"%s\" must belong to uid %u and be writable by no one else", p, (unsigned)geteuid());
    return 0;
}

int dock_hs_base_dir(const char *configured, char *out, size_t cap, struct plm_err *err)
{
    if (configured && *configured) {
        if (dir_ok(configured, true, err) < 0)
            return plm_err_wrap(err, "grant socket directory");
        snprintf(out, cap, "%s", configured);
        return 0;
    }
    struct plm_err ignored = {0};
    const char *rd = getenv("RUNTIME_DIRECTORY"); /* systemd's RuntimeDirectory=, ':'-separated */
    if (rd && *rd) {
        char first[256];
        snprintf(first, sizeof first, "%.*s", (int)strcspn(rd, ":"), rd);
        if (dir_ok(first, true, &ignored) == 0) {
            snprintf(out, cap, "%s", first);
            return 0;
        }
    }
    if ((mkdir("/run/plimsoll", 0700) == 0 || errno == EEXIST) && dir_ok("/run/plimsoll", true, &ignored) == 0) {
        snprintf(out, cap, "/run/plimsoll");
        return 0;
    }
    /* The sticky world-writable /tmp: mkdtemp's random 0700 directory is safe there. */
    if (dir_ok("/tmp", false, err) < 0)
        return plm_err_wrap(err, "grant socket directory");
    snprintf(out, cap, "/tmp");
    return 0;
}

/* A run directory nobody serves: its socket refuses (or is gone). A live server always listens
 * within milliseconds of making its directory, and min_age_s keeps that moment out of reach. */
static bool stale(const char *dir, time_t min_age_s)
{
    struct stat st;
    if (lstat(dir, &st) < 0 || !S_ISDIR(st.st_mode) || st.st_uid != geteuid() || time(NULL) - st.st_mtime < min_age_s)
        return false;
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    if ((size_t)snprintf(sa.sun_path, sizeof sa.sun_path, "%s/" SOCK_NAME, dir) >= sizeof sa.sun_path)
        return false;
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return false;
    int r = connect(fd, (struct sockaddr *)&sa, sizeof sa), e = errno;
    close(fd);
    return r < 0 && (e == ECONNREFUSED || e == ENOENT);
}

int dock_hs_sweep(const char *base, unsigned min_age_s)
{
    DIR *d = opendir(base);
    if (!d)
        return 0;
    int n = 0;
    for (struct dirent *e; (e = readdir(d));) {
        char dir[108], f[128];
        if (strncmp(e->d_name, DOCK_HS_DIR_PREFIX, sizeof DOCK_HS_DIR_PREFIX - 1) ||
            (size_t)snprintf(dir, sizeof dir, "%s/%s", base, e->d_name) >= sizeof dir || !stale(dir, (time_t)min_age_s))
            continue;
        snprintf(f, sizeof f, "%s/" SOCK_NAME, dir);
        unlink(f);
        snprintf(f, sizeof f, "%s/" PRELOAD_NAME, dir);
        unlink(f);
        n += rmdir(dir) == 0;
    }
    closedir(d);
    return n;
}

/* ---- socket I/O under deadlines -------------------------------------------------------------- */

/* > 0 bytes read, 0 at EOF (or after our own shutdown), -1 on an error or at the deadline. */
static ssize_t read_some(int fd, uint8_t *buf, size_t cap, int64_t deadline)
{
    for (;;) {
        int64_t left = deadline - (int64_t)clock_mono_ms();
        if (left <= 0)
            return -1;
        struct pollfd p = {fd, POLLIN, 0};
        int r = poll(&p, 1, left > 1000 ? 1000 : (int)left);
        if (r < 0 && errno != EINTR)
            return -1;
        if (r <= 0)
            continue;
        ssize_t n = recv(fd, buf, cap, MSG_DONTWAIT);
        if (n < 0 && (errno == EAGAIN || errno == EINTR))
            continue;
        return n;
    }
}

/* The broker sanitises the upstream's Content-Type; this re-check keeps the header line intact
 * whatever a future `call` returns: printable ASCII only, and short enough for the head. */
static const char *safe_ctype(const char *ct)
{
    if (!ct || !*ct || strlen(ct) > 160)
        return CT_BODY;
    for (const char *p = ct; *p; p++)
        if ((unsigned char)*p < 0x20 || (unsigned char)*p > 0x7e)
            return CT_BODY;
    return ct;
}

static int send_answer(struct conn *c, int status, const char *ctype, const uint8_t *body, size_t len, bool head_only)
{
    char head[320];
    size_t hn = dock_http_head(head, sizeof head, status, ctype, len);
    int64_t dl = (int64_t)clock_mono_ms() + c->hs->lim.write_ms;
    if (!hn || plm_write_all(c->fd, head, hn, (uint64_t)dl) < 0)
        return -1;
    if (head_only || status == 204 || status == 304 || !len)
        return 0;
    return plm_write_all(c->fd, body, len, (uint64_t)dl);
}

static void send_text(struct conn *c, int status, const char *text)
{
    send_answer(c, status, CT_TEXT, (const uint8_t *)text, strlen(text), false);
}

/* ---- one connection -------------------------------------------------------------------------- */

/* Reads the rest of a declared body we did not take, so the guest sees our answer and then a
 * clean end rather than a reset; bounded in bytes and time, the bytes are dropped. */
static void drain(struct conn *c, uint64_t left)
{
    uint8_t tmp[16384];
    int64_t dl = (int64_t)clock_mono_ms() + c->hs->lim.head_ms;
    if (left > DOCK_HS_DRAIN_MAX)
        left = DOCK_HS_DRAIN_MAX;
    while (left) {
        ssize_t n = read_some(c->fd, tmp, left < sizeof tmp ? (size_t)left : sizeof tmp, dl);
        if (n <= 0)
            return;
        left -= (uint64_t)n;
    }
}

/* The request head: read until the blank line, the cap, the deadline or the end. Returns the
 * head's length, 0 when the connection ends without one (nothing to answer), or -431. */
static long read_head(struct conn *c, uint8_t *buf, size_t *have)
{
    int64_t dl = c->accepted_ms + c->hs->lim.head_ms;
    size_t end = 0;
    while (!end) {
        if (*have == DOCK_HS_HEAD_MAX)
            return -431;
        size_t before = *have;
        ssize_t n = read_some(c->fd, buf + *have, DOCK_HS_HEAD_MAX - *have, dl);
        if (n <= 0)
            return 0;
        *have += (size_t)n;
        /* Only a blank line ending in the new bytes is new: rescanning from 0 on every byte a
         * slow guest trickles in would cost it nothing and us quadratic time. */
        size_t from = before > 2 ? before - 2 : 0, e = dock_http_head_end(buf + from, *have - from);
        if (e)
            end = from + e;
    }
    return (long)end;
}

static void serve(struct conn *c)
{
    struct dock_hostsock *hs = c->hs;
    uint8_t *head = malloc(DOCK_HS_HEAD_MAX), *body = NULL;
    if (!head) {
        send_text(c, 503, "host api socket out of memory\n");
        return;
    }
    size_t have = 0;
    long hend = read_head(c, head, &have);
    if (hend == -431) {
        send_text(c, 431, "request header section too large\n");
        goto out;
    }
    if (hend <= 0)
        goto out; /* ended, timed out or shut down before a complete head: no one to answer */
    struct dock_http_req req;
    int st = dock_http_parse(head, (size_t)hend, &req);
    if (st) {
        send_text(c, st,
                  st == 411   ? "Transfer-Encoding is not accepted; send Content-Length\n"
                  : st == 505 ? "HTTP version not supported\n"
                              : "malformed request\n");
        goto out;
    }
    /* (broker.h) pass at most one byte past the body cap: the broker answers 413 then. */
    uint64_t want = req.content_length;
    size_t take = want > DOCK_HS_BODY_MAX + 1ull ? DOCK_HS_BODY_MAX + 1u : (size_t)want, got = 0;
    if (take && !(body = malloc(take))) {
        send_text(c, 503, "host api socket out of memory\n");
        goto out;
    }
    size_t early = have - (size_t)hend;
    got = early < take ? early : take;
    if (got)
        memcpy(body, head + hend, got);
    if (req.expect_continue && got < take &&
        plm_write_all(c->fd, "HTTP/1.1 100 Continue\r\n\r\n", 25, clock_mono_ms() + hs->lim.write_ms) < 0)
        goto out;
    int64_t dl = c->accepted_ms + hs->lim.read_ms;
    while (got < take) {
        ssize_t n = read_some(c->fd, body + got, take - got, dl);
        if (n <= 0)
            goto out; /* the guest did not send what it declared: nothing is called */
        got += (size_t)n;
    }

    /* The run may have ended while we read: then nothing may enter `call`. Otherwise the hold is
     * taken while the run is certainly live (the stopper sets `stopping` before it returns), so
     * cb_ctx outlives this call even if the run returns meanwhile. */
    pthread_mutex_lock(&hs->mu);
    bool stopping = hs->stopping;
    if (!stopping) {
        c->in_call = true;
        if (hs->api.hold)
            hs->api.hold(hs->api.cb_ctx);
    }
    pthread_mutex_unlock(&hs->mu);
    if (stopping) {
        send_text(c, 503, "host api grant has ended\n");
        goto out;
    }
    struct plm_host_reply rep = {0};
    hs->api.call(hs->api.cb_ctx, req.method, req.target, body, got, &rep);
    if (hs->api.release)
        hs->api.release(hs->api.cb_ctx);
    pthread_mutex_lock(&hs->mu);
    c->in_call = false;
    pthread_mutex_unlock(&hs->mu);
    free(body);
    body = NULL;
    if (rep.status < 200 || rep.status > 599) {
        /* provider.h promises 100..599, but a 1xx cannot end an HTTP exchange */
        free(rep.body);
        free(rep.content_type);
        send_text(c, 502, "host api unavailable\n");
        goto out;
    }
    int w = send_answer(c, rep.status, safe_ctype(rep.content_type), rep.body, rep.len,
                        !strcmp(req.method, "HEAD"));
    free(rep.body);
    free(rep.content_type);
    size_t consumed = early > take ? early : take; /* body bytes read so far, dropped ones included */
    if (w == 0 && want > consumed)
        drain(c, want - consumed);
out:
    free(body);
    free(head);
}

static void server_free(struct dock_hostsock *hs)
{
    if (hs->wake >= 0)
        close(hs->wake);
    pthread_mutex_destroy(&hs->mu);
    free(hs);
}

static void wake_acceptor(struct dock_hostsock *hs)
{
    uint64_t one = 1;
    if (write(hs->wake, &one, sizeof one) < 0) {
        /* EAGAIN: a wake-up is already pending, which is all we need */
    }
}

static void *conn_main(void *arg)
{
    struct conn *c = arg;
    struct dock_hostsock *hs = c->hs;
    serve(c);
    bool last = false;
    pthread_mutex_lock(&hs->mu);
    if (c->detached) {
        /* the stopper let go of us: nobody else knows this connection any more */
        close(c->fd);
        free(c);
        last = --hs->refs == 0;
    } else {
        c->finished = true;
        hs->n_live--;
        wake_acceptor(hs); /* reap us; the eventfd lives until every joinable thread is joined */
    }
    pthread_mutex_unlock(&hs->mu);
    if (last)
        server_free(hs);
    atomic_fetch_sub(&g_threads, 1);
    return NULL;
}

static void conn_reap(struct conn *c)
{
    pthread_join(c->th, NULL);
    close(c->fd);
    free(c);
}

/* Answers a connection we cannot serve (out of memory or threads) and closes it, without
 * reading: one non-blocking send of a short answer, so the acceptor never waits on a guest. */
static void refuse(int fd, int status, const char *text)
{
    char buf[256];
    size_t hn = dock_http_head(buf, sizeof buf, status, CT_TEXT, strlen(text));
    if (hn && hn + strlen(text) < sizeof buf) {
        memcpy(buf + hn, text, strlen(text));
        if (send(fd, buf, hn + strlen(text), MSG_NOSIGNAL | MSG_DONTWAIT) < 0) {
            /* the guest is gone or not reading: closing is the answer */
        }
    }
    close(fd);
}

static void accept_one(struct dock_hostsock *hs)
{
    int fd = accept4(hs->lfd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
    if (fd < 0) {
        if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM) {
            /* the listener stays readable: back off instead of spinning */
            struct timespec ts = {0, 50 * 1000000L};
            nanosleep(&ts, NULL);
        }
        return;
    }
    struct conn *c = calloc(1, sizeof *c);
    if (c) {
        c->hs = hs;
        c->fd = fd;
        c->accepted_ms = (int64_t)clock_mono_ms();
        pthread_mutex_lock(&hs->mu);
        hs->n_live++;
        pthread_mutex_unlock(&hs->mu);
    }
    if (!c) {
        refuse(fd, 503, "host api socket out of memory\n");
        return;
    }
    pthread_attr_t a;
    pthread_attr_init(&a);
    /* Buffers are on the heap; `call` runs the broker (libcurl, TLS) on this stack, so it is
     * smaller than the default but not tight. Virtual until touched. */
    pthread_attr_setstacksize(&a, 1024 * 1024);
    atomic_fetch_add(&g_threads, 1);
    /* Listed only once the thread exists: the list holds joinable threads only. Nobody but this
     * thread reaps (the stopper joins us first), so the new thread cannot be reaped before it
     * is listed even if it finishes at once. */
    int r = pthread_create(&c->th, &a, conn_main, c);
    pthread_attr_destroy(&a);
    pthread_mutex_lock(&hs->mu);
    if (r == 0) {
        c->next = hs->conns;
        hs->conns = c;
    } else {
        hs->n_live--;
    }
    pthread_mutex_unlock(&hs->mu);
    if (r != 0) {
        atomic_fetch_sub(&g_threads, 1);
        free(c);
        refuse(fd, 503, "host api socket cannot take more connections\n");
    }
}

/* At DOCK_HS_CONN_MAX live connections the listener is not polled, as Go's LimitListener does
 * for the reference: further connections wait in the kernel's backlog (no thread, no buffer of
 * ours) until a slot frees, and past the backlog connect(2) fails, which the client reports as
 * "host api broker unavailable". Answering them 429 instead would cost an accept per attempt
 * and close with the request unread, which the guest sees as a reset rather than the 429. */
static void *accept_main(void *arg)
{
    struct dock_hostsock *hs = arg;
    for (;;) {
        struct conn *done = NULL;
        pthread_mutex_lock(&hs->mu);
        bool stopping = hs->stopping, full = hs->n_live >= DOCK_HS_CONN_MAX;
        for (struct conn **pp = &hs->conns; *pp;) {
            struct conn *c = *pp;
            if (c->finished) {
                *pp = c->next;
                c->next = done;
                done = c;
            } else {
                pp = &c->next;
            }
        }
        pthread_mutex_unlock(&hs->mu);
        while (done) {
            struct conn *c = done;
            done = c->next;
            conn_reap(c);
        }
        if (stopping)
            break;
        struct pollfd p[2] = {{full ? -1 : hs->lfd, POLLIN, 0}, {hs->wake, POLLIN, 0}};
        if (poll(p, 2, -1) < 0 && errno != EINTR)
            break; /* cannot happen with valid fds; the stopper still cleans up */
        uint64_t v;
        if ((p[1].revents & POLLIN) && read(hs->wake, &v, sizeof v) < 0) {
            /* EAGAIN: another wake-up consumed it */
        }
        if (p[0].revents & POLLIN)
            accept_one(hs);
    }
    atomic_fetch_sub(&g_threads, 1);
    return NULL;
}

/* ---- start and stop -------------------------------------------------------------------------- */

/* Removes what start made on the file system; each step tolerates the thing being absent. */
static void remove_files(struct dock_hostsock *hs)
{
    if (hs->sock[0])
        unlink(hs->sock);
    if (hs->preload[0])
        unlink(hs->preload);
    if (hs->dir[0])
        rmdir(hs->dir);
}

static int write_preload(const char *path, const char *text, struct plm_err *err)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0444);
    if (fd < 0)
        return plm_err_set(err, errno, PLM_E_INTERNAL, PLM_REFUSAL_NONE, "create \"%s\": %s", path, strerror(errno));
    size_t n = text ? strlen(text) : 0;
    const char *p = text;
    while (n) {
        ssize_t w = write(fd, p, n);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0) {
            int e = w < 0 ? errno : EIO;
            close(fd);
            return plm_err_set(err, e, PLM_E_INTERNAL, PLM_REFUSAL_NONE, "write \"%s\": %s", path, strerror(e));
        }
        p += w, n -= (size_t)w;
    }
    if (close(fd) < 0)
        return plm_err_set(err, errno, PLM_E_INTERNAL, PLM_REFUSAL_NONE, "write \"%s\": %s", path, strerror(errno));
    return 0;
}

static int listen_on(struct dock_hostsock *hs, struct plm_err *err)
{
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    snprintf(sa.sun_path, sizeof sa.sun_path, "%s", hs->sock);
    hs->lfd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (hs->lfd < 0)
        return plm_err_set(err, errno, PLM_E_INTERNAL, PLM_REFUSAL_NONE, "socket: %s", strerror(errno));
    if (bind(hs->lfd, (struct sockaddr *)&sa, sizeof sa) < 0)
        return plm_err_set(err, errno, PLM_E_INTERNAL, PLM_REFUSAL_NONE, "bind \"%s\": %s", hs->sock, strerror(errno));
    /* (spec) 0666: the guest uid is nobody on the host; the 0700 directory keeps host users out,
     * and the container reaches the socket only through its bind mount. */
    if (chmod(hs->sock, 0666) < 0 || listen(hs->lfd, DOCK_HS_BACKLOG) < 0)
        return plm_err_set(err, errno, PLM_E_INTERNAL, PLM_REFUSAL_NONE, "listen \"%s\": %s", hs->sock,
                           strerror(errno));
    return 0;
}

int dock_hostsock_start(const char *base, const struct plm_host_api *api, const struct dock_hs_limits *lim,
                        struct dock_hostsock **out, struct plm_err *err)
{
    *out = NULL;
    if (!api || !api->call)
        return plm_err_set(err, EINVAL, PLM_E_INTERNAL, PLM_REFUSAL_NONE, "grant socket: no host api to serve");
    struct dock_hostsock *hs = calloc(1, sizeof *hs);
    if (!hs)
        return plm_err_set(err, ENOMEM, PLM_E_INTERNAL, PLM_REFUSAL_NONE, "out of memory");
    pthread_mutex_init(&hs->mu, NULL);
    hs->lfd = hs->wake = -1;
    hs->refs = 1;
    hs->api = *api;
    hs->api.client_js = hs->api.node_preload = NULL; /* only needed here, at start */
    if (!hs->api.hold || !hs->api.release)
        hs->api.hold = hs->api.release = NULL; /* half a pair is no hold: stop then waits */
    hs->lim = lim ? *lim : (struct dock_hs_limits){DOCK_HS_HEAD_MS, DOCK_HS_READ_MS, DOCK_HS_WRITE_MS};
    /* sized so that the socket path below always fits sun_path */
    char tmpl[sizeof hs->sock - sizeof "/" SOCK_NAME + 1];
    int r = -1;
    if ((size_t)snprintf(tmpl, sizeof tmpl, "%s/" DOCK_HS_DIR_PREFIX "XXXXXX", base) >= sizeof tmpl) {
        plm_err_set(err, ENAMETOOLONG, PLM_E_INTERNAL, PLM_REFUSAL_NONE, "\"%s\" is too long for a socket path", base);
        goto fail;
    }
    if (!mkdtemp(tmpl)) {
        plm_err_set(err, errno, PLM_E_INTERNAL, PLM_REFUSAL_NONE, "mkdtemp under \"%s\": %s", base, strerror(errno));
        goto fail;
    }
    snprintf(hs->dir, sizeof hs->dir, "%s", tmpl);
    snprintf(hs->preload, sizeof hs->preload, "%s/" PRELOAD_NAME, tmpl);
    if (write_preload(hs->preload, api->node_preload, err) < 0)
        goto fail;
    snprintf(hs->sock, sizeof hs->sock, "%s/" SOCK_NAME, tmpl);
    if (listen_on(hs, err) < 0)
        goto fail;
    hs->wake = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    if (hs->wake < 0) {
        plm_err_set(err, errno, PLM_E_INTERNAL, PLM_REFUSAL_NONE, "eventfd: %s", strerror(errno));
        goto fail;
    }
    atomic_fetch_add(&g_threads, 1);
    if ((r = pthread_create(&hs->acceptor, NULL, accept_main, hs)) != 0) {
        atomic_fetch_sub(&g_threads, 1);
        plm_err_set(err, r, PLM_E_INTERNAL, PLM_REFUSAL_NONE, "grant socket thread: %s", strerror(r));
        goto fail;
    }
    hs->acceptor_started = true;
    *out = hs;
    return 0;
fail:
    if (hs->lfd >= 0)
        close(hs->lfd);
    remove_files(hs);
    server_free(hs);
    return plm_err_wrap(err, "grant socket");
}

void dock_hostsock_stop(struct dock_hostsock *hs)
{
    if (!hs)
        return;
    pthread_mutex_lock(&hs->mu);
    hs->stopping = true; /* from here no connection enters `call` */
    pthread_mutex_unlock(&hs->mu);
    wake_acceptor(hs);
    if (hs->acceptor_started)
        pthread_join(hs->acceptor, NULL);
    /* New connections are refused by the kernel from here; a leftover guest process that kept
     * the mounted socket sees ECONNREFUSED. */
    close(hs->lfd);
    hs->lfd = -1;
    remove_files(hs);

    struct conn *join = NULL;
    pthread_t detach[DOCK_HS_CONN_MAX];
    size_t n_detach = 0;
    pthread_mutex_lock(&hs->mu);
    while (hs->conns) {
        struct conn *c = hs->conns;
        hs->conns = c->next;
        shutdown(c->fd, SHUT_RDWR); /* wakes its reads and writes; the fd stays ours */
        if (!c->finished && c->in_call && hs->api.hold && n_detach < DOCK_HS_CONN_MAX) {
            /* It holds cb_ctx: let it finish `call` (the broker ends it once the run returns)
             * instead of holding the run's return up for as long as an upstream may take. */
            c->detached = true;
            hs->refs++;
            detach[n_detach++] = c->th;
        } else {
            c->next = join;
            join = c;
        }
    }
    pthread_mutex_unlock(&hs->mu);
    for (size_t i = 0; i < n_detach; i++)
        pthread_detach(detach[i]);
    while (join) {
        struct conn *c = join;
        join = c->next;
        conn_reap(c);
    }
    pthread_mutex_lock(&hs->mu);
    bool last = --hs->refs == 0;
    pthread_mutex_unlock(&hs->mu);
    if (last)
        server_free(hs);
}
