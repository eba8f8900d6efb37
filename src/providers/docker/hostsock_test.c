/* hostsock_test.c: the grant socket (hostsock.h) without docker: a real server on a real unix
 * socket in a temporary directory (served by the guestio helper, src/guestio), a fake
 * plm_host_api that records what reached `call` (and can block inside it), and raw clients
 * that send exactly the bytes a hostile guest would.
 * Covers the verbatim target, framing refusals (malformed lines, folded headers, chunked
 * uploads, oversized heads and bodies), the 33rd connection, slow clients, stop with a call in
 * flight (with and without hold/release), and that nothing leaks: fds, threads, files. */
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

static int64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void sleep_ms(int ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

static int count_fds(void)
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

static void fake_reset(void)
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

static void fake_call(void *cb, const char *method, const char *target, const uint8_t *body, size_t len,
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

static void fake_hold(void *cb)
{
    struct fake *f = cb;
    pthread_mutex_lock(&f->mu);
    f->holds++;
    pthread_mutex_unlock(&f->mu);
}

static void fake_release(void *cb)
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

static int fake_get(int *field)
{
    pthread_mutex_lock(&F.mu);
    int v = *field;
    pthread_mutex_unlock(&F.mu);
    return v;
}

/* waits up to ms for *field >= want */
static bool fake_wait(int *field, int want, int ms)
{
    int64_t until = now_ms() + ms;
    while (fake_get(field) < want && now_ms() < until)
        sleep_ms(5);
    return fake_get(field) >= want;
}

static void fake_unblock(void)
{
    pthread_mutex_lock(&F.mu);
    F.block = false;
    pthread_cond_broadcast(&F.cv);
    pthread_mutex_unlock(&F.mu);
}

/* ---- raw clients ------------------------------------------------------------------------------- */

static int dial(const char *path)
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

static void send_all(int fd, const void *p, size_t n)
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
static size_t read_to_end(int fd, char *out, size_t cap, int ms)
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
static const char *xchg(const char *path, const void *req, size_t n)
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

static const char *xs(const char *path, const char *req)
{
    return xchg(path, req, strlen(req));
}

static bool starts(const char *s, const char *prefix)
{
    return !strncmp(s, prefix, strlen(prefix));
}

/* ---- tests ---------------------------------------------------------------------------------------- */

static char base[64];

static struct dock_hostsock *start(const struct plm_host_api *api, const struct dock_hs_limits *lim)
{
    struct dock_hostsock *hs = NULL;
    struct plm_err e = {0};
    if (dock_hostsock_start(base, api, lim, &hs, &e) < 0)
        printf("# start: %s\n", e.msg);
    return hs;
}

static void test_base_dir(void)
{
    char out[128];
    struct plm_err e = {0};
    CHECK(dock_hs_base_dir(base, out, sizeof out, &e) == 0 && !strcmp(out, base));
    CHECK(dock_hs_base_dir("relative/dir", out, sizeof out, &e) < 0);
    CHECK(dock_hs_base_dir("/nonexistent/plimsoll", out, sizeof out, &e) < 0);
    char open_dir[80];
    snprintf(open_dir, sizeof open_dir, "%s/open", base);
    mkdir(open_dir, 0777);
    chmod(open_dir, 0777);
    CHECK(dock_hs_base_dir(open_dir, out, sizeof out, &e) < 0 && strstr(e.msg, "writable by no one else"));
    rmdir(open_dir);
    char longdir[200];
    memset(longdir, 'a', sizeof longdir);
    longdir[0] = '/';
    longdir[100] = 0;
    CHECK(dock_hs_base_dir(longdir, out, sizeof out, &e) < 0 && strstr(e.msg, "too long"));
}

static void test_files_and_verbatim(void)
{
    fake_reset();
    struct dock_hostsock *hs = start(&API, NULL);
    CHECK(hs != NULL);
    if (!hs)
        return;
    char sock[108], dir[108]; /* copies: the paths go with the server */
    snprintf(sock, sizeof sock, "%s", dock_hostsock_sock_path(hs));
    snprintf(dir, sizeof dir, "%s", sock);
    *strrchr(dir, '/') = 0;
    struct stat st;
    CHECK(stat(dir, &st) == 0 && (st.st_mode & 0777) == 0700);
    CHECK(stat(sock, &st) == 0 && S_ISSOCK(st.st_mode) && (st.st_mode & 0777) == 0666);
    CHECK(stat(dock_hostsock_preload_path(hs), &st) == 0 && (st.st_mode & 0777) == 0444);
    char text[64] = "";
    FILE *f = fopen(dock_hostsock_preload_path(hs), "r");
    if (f) {
        size_t n = fread(text, 1, sizeof text - 1, f);
        text[n] = 0;
        fclose(f);
    }
    CHECK_STR(text, "globalThis.x = 1;\n");

    /* the target reaches `call` exactly as sent: no decoding, no dot removal, query kept */
    static const char *const targets[] = {"/v1/items/%2e%2e",
                                          "/v1/items/../x",
                                          "/v1/items/1?q=2#frag",
                                          "//a/./b/",
                                          "*",
                                          "http://evil.example/v1/items/1"};
    for (size_t i = 0; i < sizeof targets / sizeof *targets; i++) {
        char req[256], want[256];
        snprintf(req, sizeof req, "GET %s HTTP/1.1\r\nHost: x\r\n\r\n", targets[i]);
        snprintf(want, sizeof want, "\r\n\r\nok:%s", targets[i]);
        const char *r = xs(sock, req);
        CHECK(starts(r, "HTTP/1.1 200 OK\r\n") && strstr(r, want) && strstr(r, "Connection: close\r\n"));
        CHECK_STR(F.target, targets[i]);
    }
    CHECK(F.calls == 6);

    /* the answer's Content-Type goes back as given; one that could break the head does not */
    CHECK(strstr(xs(sock, "GET /a HTTP/1.1\r\n\r\n"), "Content-Type: application/octet-stream\r\n"));
    F.ctype = "application/json; charset=utf-8";
    CHECK(strstr(xs(sock, "GET /a HTTP/1.1\r\n\r\n"), "Content-Type: application/json; charset=utf-8\r\n"));
    F.ctype = "text/x\r\nX-Injected: 1";
    const char *inj = xs(sock, "GET /a HTTP/1.1\r\n\r\n");
    CHECK(strstr(inj, "Content-Type: application/octet-stream\r\n") && !strstr(inj, "X-Injected"));
    F.ctype = NULL;

    /* a body in pieces; the method as sent */
    int fd = dial(sock);
    send_all(fd, "post /v1/items/7 HTTP/1.1\r\nContent-Length: 11\r\n\r\nhello", 54);
    sleep_ms(50);
    send_all(fd, " world", 6);
    read_to_end(fd, resp, sizeof resp, 5000);
    close(fd);
    CHECK(starts(resp, "HTTP/1.1 200 OK\r\n") && strstr(resp, "Content-Length: 14\r\n"));
    CHECK_STR(F.method, "post");
    CHECK(F.len == 11 && !memcmp(F.first, "hello wo", 8));

    /* HTTP/1.0 and bare LF line ends are accepted */
    CHECK(starts(xs(sock, "GET /a HTTP/1.0\n\n"), "HTTP/1.1 200 OK\r\n"));
    /* HEAD: the head without the body */
    const char *r = xs(sock, "HEAD /h HTTP/1.1\r\n\r\n");
    CHECK(starts(r, "HTTP/1.1 200 OK\r\n") && strstr(r, "Content-Length: 5\r\n") && !strstr(r, "ok:/h"));
    /* Expect: 100-continue gets its interim answer, then the final one */
    fd = dial(sock);
    send_all(fd, "PUT /e HTTP/1.1\r\nContent-Length: 3\r\nExpect: 100-continue\r\n\r\n", 61);
    char interim[64] = "";
    struct pollfd p = {fd, POLLIN, 0};
    if (poll(&p, 1, 2000) == 1) {
        ssize_t n = recv(fd, interim, 25, 0);
        interim[n > 0 ? n : 0] = 0;
    }
    CHECK_STR(interim, "HTTP/1.1 100 Continue\r\n\r\n");
    send_all(fd, "abc", 3);
    read_to_end(fd, resp, sizeof resp, 5000);
    close(fd);
    CHECK(starts(resp, "HTTP/1.1 200 OK\r\n") && F.len == 3);

    /* statuses: a 1xx or out-of-range answer becomes 502; 204 carries no length */
    F.status = 101;
    CHECK(starts(xs(sock, "GET /s HTTP/1.1\r\n\r\n"), "HTTP/1.1 502 Bad Gateway\r\n"));
    F.status = 204;
    r = xs(sock, "GET /s HTTP/1.1\r\n\r\n");
    CHECK(starts(r, "HTTP/1.1 204 No Content\r\n") && !strstr(r, "Content-Length") && !strstr(r, "ok:"));
    F.status = 0;
    CHECK(F.holds == F.calls && F.releases == F.calls && F.inside == 0);
    dock_hostsock_stop(hs);
    CHECK(access(sock, F_OK) < 0 && access(dir, F_OK) < 0); /* nothing left on the disk */
    CHECK(dial(sock) < 0);
}

static void test_refusals(void)
{
    fake_reset();
    struct dock_hostsock *hs = start(&API, NULL);
    if (!hs) {
        CHECK(hs != NULL);
        return;
    }
    const char *sock = dock_hostsock_sock_path(hs);
    static const struct {
        const char *req, *status;
    } bad[] = {
        {"GET\r\n\r\n", "400"},
        {"GET /x\r\n\r\n", "400"},
        {"GET  /x HTTP/1.1\r\n\r\n", "400"},
        {"GET /x  HTTP/1.1\r\n\r\n", "400"},
        {"GET /x HTTP/1.1 extra\r\n\r\n", "400"},
        {"G(T /x HTTP/1.1\r\n\r\n", "400"},
        {"GET /a\x01"
         "b HTTP/1.1\r\n\r\n",
         "400"},
        {"GET /a\tb HTTP/1.1\r\n\r\n", "400"},
        {"GET /x http/1.1\r\n\r\n", "400"},
        {"GET /x HTTP/2.0\r\n\r\n", "505"},
        {"GET /x HTTP/1.1\r\nX: a\r\n folded\r\n\r\n", "400"},
        {"GET /x HTTP/1.1\r\nNoColon\r\n\r\n", "400"},
        {"GET /x HTTP/1.1\r\nBad Name: 1\r\n\r\n", "400"},
        {"GET /x HTTP/1.1\r\nX: a\x01\r\n\r\n", "400"},
        {"POST /x HTTP/1.1\r\nContent-Length: 1, 1\r\n\r\nx", "400"},
        {"POST /x HTTP/1.1\r\nContent-Length: -1\r\n\r\n", "400"},
        {"POST /x HTTP/1.1\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\nxx", "400"},
        {"POST /x HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n", "411"},
        {"POST /x HTTP/1.1\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\nabc", "411"},
        {"AVERYLONGMETHODNAMETHATGOESONANDONFOREVER /x HTTP/1.1\r\n\r\n", "400"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        char want[32];
        snprintf(want, sizeof want, "HTTP/1.1 %s ", bad[i].status);
        const char *r = xs(sock, bad[i].req);
        CHECK(starts(r, want) && strstr(r, "Content-Type: text/plain; charset=utf-8\r\n"));
        if (!starts(r, want))
            printf("# case %zu: %.60s\n", i, r);
    }
    CHECK(F.calls == 0); /* none of them reached the broker */

    /* a NUL byte in the request line */
    static const char nul[] = "GET /a\0b HTTP/1.1\r\n\r\n";
    CHECK(starts(xchg(sock, nul, sizeof nul - 1), "HTTP/1.1 400 "));

    /* a head over 16 KiB: 431, whether or not it ever ends */
    size_t big = DOCK_HS_HEAD_MAX + 100;
    char *h = malloc(big + 8);
    memcpy(h, "GET /x HTTP/1.1\r\nX: ", 20);
    memset(h + 20, 'a', big - 20);
    memcpy(h + big, "\r\n\r\n", 4);
    CHECK(starts(xchg(sock, h, big + 4), "HTTP/1.1 431 "));
    CHECK(starts(xchg(sock, h, DOCK_HS_HEAD_MAX), "HTTP/1.1 431 ")); /* exactly at the cap, no end */
    free(h);
    CHECK(F.calls == 0);

    /* a body over the cap: the broker gets 1 MiB + 1 bytes and decides; the guest sees its answer */
    size_t over = DOCK_HS_BODY_MAX + 4096;
    char head[128];
    int hn = snprintf(head, sizeof head, "POST /big HTTP/1.1\r\nContent-Length: %zu\r\n\r\n", over);
    char *req = malloc((size_t)hn + over);
    memcpy(req, head, (size_t)hn);
    memset(req + hn, 'b', over);
    int fd = dial(sock);
    send_all(fd, req, (size_t)hn + over); /* blocks until the server drained it all */
    read_to_end(fd, resp, sizeof resp, 5000);
    close(fd);
    CHECK(starts(resp, "HTTP/1.1 200 OK\r\n"));
    CHECK(F.calls == 1 && F.len == DOCK_HS_BODY_MAX + 1);
    /* exactly at the cap: passed whole */
    hn = snprintf(head, sizeof head, "POST /big HTTP/1.1\r\nContent-Length: %u\r\n\r\n", DOCK_HS_BODY_MAX);
    memcpy(req, head, (size_t)hn);
    memset(req + hn, 'b', DOCK_HS_BODY_MAX);
    CHECK(starts(xchg(sock, req, (size_t)hn + DOCK_HS_BODY_MAX), "HTTP/1.1 200 OK\r\n"));
    CHECK(F.calls == 2 && F.len == DOCK_HS_BODY_MAX);
    free(req);
    dock_hostsock_stop(hs);
}

static void test_connection_limit(void)
{
    fake_reset();
    struct dock_hostsock *hs = start(&API, NULL);
    if (!hs) {
        CHECK(hs != NULL);
        return;
    }
    const char *sock = dock_hostsock_sock_path(hs);
    int fds[DOCK_HS_CONN_MAX];
    int opened = 0;
    for (int i = 0; i < DOCK_HS_CONN_MAX; i++) {
        fds[i] = dial(sock);
        opened += fds[i] >= 0;
        send_all(fds[i], "GET /x HTTP/1.1\r\n", 17); /* an unfinished head holds the slot */
    }
    CHECK(opened == DOCK_HS_CONN_MAX);
    sleep_ms(100);
    /* 32 connections held (by the guestio helper), one daemon thread: the monitor */
    struct gio_stats gs;
    gio_server_stats(dock_hostsock_gio(hs), &gs);
    CHECK(gs.live == DOCK_HS_CONN_MAX && dock_hostsock_threads() == 1);
    /* the 33rd waits unaccepted: no thread, no answer, nothing called */
    int waiting = dial(sock);
    CHECK(waiting >= 0);
    send_all(waiting, "GET /33 HTTP/1.1\r\n\r\n", 20);
    struct pollfd p = {waiting, POLLIN, 0};
    CHECK(poll(&p, 1, 300) == 0);
    gio_server_stats(dock_hostsock_gio(hs), &gs);
    CHECK(gs.live == DOCK_HS_CONN_MAX && dock_hostsock_threads() == 1 && F.calls == 0);
    /* finishing one of the 32 serves it, and its slot goes to the one waiting */
    send_all(fds[0], "\r\n", 2);
    read_to_end(fds[0], resp, sizeof resp, 5000);
    CHECK(starts(resp, "HTTP/1.1 200 OK\r\n") && strstr(resp, "ok:/x"));
    read_to_end(waiting, resp, sizeof resp, 5000);
    CHECK(starts(resp, "HTTP/1.1 200 OK\r\n") && strstr(resp, "ok:/33"));
    close(waiting);
    /* past the backlog the kernel refuses: the guest's connect fails, we spend nothing */
    int extra[DOCK_HS_BACKLOG + 8], n_extra = 0;
    bool refused = false;
    for (; n_extra < DOCK_HS_BACKLOG + 8 && !refused; n_extra++) {
        extra[n_extra] = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
        struct sockaddr_un sa = {.sun_family = AF_UNIX};
        snprintf(sa.sun_path, sizeof sa.sun_path, "%s", sock);
        refused = connect(extra[n_extra], (struct sockaddr *)&sa, sizeof sa) < 0 && errno == EAGAIN;
    }
    CHECK(refused);
    gio_server_stats(dock_hostsock_gio(hs), &gs);
    CHECK(gs.live <= DOCK_HS_CONN_MAX && dock_hostsock_threads() == 1);
    for (int i = 0; i < n_extra; i++)
        close(extra[i]);
    for (int i = 0; i < DOCK_HS_CONN_MAX; i++)
        close(fds[i]);
    /* once they are gone, a new connection is served again */
    bool served = false;
    for (int i = 0; i < 100 && !served; i++) {
        served = starts(xs(sock, "GET /again HTTP/1.1\r\n\r\n"), "HTTP/1.1 200 ");
        if (!served)
            sleep_ms(20);
    }
    CHECK(served);
    dock_hostsock_stop(hs);
}

static void test_slow_clients(void)
{
    fake_reset();
    struct dock_hs_limits lim = {.head_ms = 300, .read_ms = 600, .write_ms = 1000};
    struct dock_hostsock *hs = start(&API, &lim);
    if (!hs) {
        CHECK(hs != NULL);
        return;
    }
    const char *sock = dock_hostsock_sock_path(hs);
    /* a head that never ends: closed without an answer at the head deadline */
    int fd = dial(sock);
    send_all(fd, "GET /slow HTTP/1.1\r\n", 20);
    int64_t t0 = now_ms();
    size_t n = read_to_end(fd, resp, sizeof resp, 3000);
    int64_t took = now_ms() - t0;
    close(fd);
    CHECK(n == 0 && took >= 250 && took < 1500);
    /* a trickle does not extend the head deadline */
    fd = dial(sock);
    t0 = now_ms();
    bool cut = false;
    for (int i = 0; i < 60 && !cut; i++) {
        cut = send(fd, "X", 1, MSG_NOSIGNAL) < 0;
        struct pollfd p = {fd, POLLIN, 0};
        cut = cut || poll(&p, 1, 20) == 1;
    }
    took = now_ms() - t0;
    close(fd);
    CHECK(cut && took < 1500);
    /* a body that stops short: closed at the read deadline, nothing called */
    fd = dial(sock);
    t0 = now_ms();
    send_all(fd, "POST /b HTTP/1.1\r\nContent-Length: 10\r\n\r\nabc", 44);
    n = read_to_end(fd, resp, sizeof resp, 3000);
    took = now_ms() - t0;
    close(fd);
    CHECK(n == 0 && took >= 500 && took < 2000);
    /* a guest that closes mid-head, or connects and says nothing */
    fd = dial(sock);
    send_all(fd, "GET /x HT", 9);
    close(fd);
    fd = dial(sock);
    close(fd);
    CHECK(F.calls == 0);
    /* meanwhile others are served */
    int idle = dial(sock);
    CHECK(starts(xs(sock, "GET /fast HTTP/1.1\r\n\r\n"), "HTTP/1.1 200 "));
    /* stop does not wait for a connected guest that stays silent */
    int64_t t1 = now_ms();
    dock_hostsock_stop(hs); /* with `idle` still connected and silent */
    CHECK(now_ms() - t1 < 500);
    close(idle);
}

struct stopper {
    struct dock_hostsock *hs;
    volatile bool done;
};

static void *stop_thread(void *arg)
{
    struct stopper *s = arg;
    dock_hostsock_stop(s->hs);
    s->done = true;
    return NULL;
}

static void test_stop_in_flight(void)
{
    /* with hold/release: stop returns at once; the thread finishes `call` on its own */
    fake_reset();
    struct dock_hostsock *hs = start(&API, NULL);
    if (!hs) {
        CHECK(hs != NULL);
        return;
    }
    char sock[108];
    snprintf(sock, sizeof sock, "%s", dock_hostsock_sock_path(hs));
    F.block = true;
    int fd = dial(sock);
    send_all(fd, "GET /blocked HTTP/1.1\r\n\r\n", 25);
    int idle = dial(sock); /* and one connection that never sends */
    CHECK(fake_wait(&F.inside, 1, 2000));
    int64_t t0 = now_ms();
    dock_hostsock_stop(hs);
    CHECK(now_ms() - t0 < 500);
    CHECK(fake_get(&F.holds) == 1 && fake_get(&F.releases) == 0 && fake_get(&F.inside) == 1);
    CHECK(access(sock, F_OK) < 0);
    CHECK(dock_hostsock_threads() == 1); /* the one inside `call` */
    read_to_end(fd, resp, sizeof resp, 1000);
    CHECK(resp[0] == 0); /* its connection was shut down: no answer will come */
    fake_unblock();
    CHECK(fake_wait(&F.releases, 1, 2000));
    CHECK(dock_hostsock_quiesce(2000));
    close(fd);
    close(idle);

    /* without hold/release the stopper must wait for `call` to return */
    fake_reset();
    struct plm_host_api nohold = API;
    nohold.hold = nohold.release = NULL;
    hs = start(&nohold, NULL);
    if (!hs) {
        CHECK(hs != NULL);
        return;
    }
    F.block = true;
    fd = dial(dock_hostsock_sock_path(hs));
    send_all(fd, "GET /blocked HTTP/1.1\r\n\r\n", 25);
    CHECK(fake_wait(&F.inside, 1, 2000));
    struct stopper st = {.hs = hs};
    pthread_t th;
    pthread_create(&th, NULL, stop_thread, &st);
    sleep_ms(200);
    CHECK(!st.done);
    fake_unblock();
    pthread_join(th, NULL);
    CHECK(st.done && fake_get(&F.inside) == 0 && dock_hostsock_threads() == 0);
    close(fd);

    /* a request completed after stop began never reaches `call` */
    fake_reset();
    struct dock_hs_limits lim = {.head_ms = 2000, .read_ms = 2000, .write_ms = 1000};
    hs = start(&API, &lim);
    if (!hs) {
        CHECK(hs != NULL);
        return;
    }
    fd = dial(dock_hostsock_sock_path(hs));
    send_all(fd, "POST /late HTTP/1.1\r\nContent-Length: 4\r\n\r\nab", 45);
    sleep_ms(50);
    dock_hostsock_stop(hs);
    send_all(fd, "cd", 2);
    read_to_end(fd, resp, sizeof resp, 1000);
    close(fd);
    CHECK(F.calls == 0 && dock_hostsock_threads() == 0);
}

static void test_many_runs(void)
{
    /* servers come and go with calls in flight: nothing accumulates */
    fake_reset();
    for (int i = 0; i < 20; i++) {
        struct dock_hostsock *hs = start(&API, NULL);
        if (!hs) {
            CHECK(hs != NULL);
            return;
        }
        int fds[4];
        for (int k = 0; k < 4; k++) {
            fds[k] = dial(dock_hostsock_sock_path(hs));
            send_all(fds[k], "GET /m HTTP/1.1\r\n\r\n", 19);
        }
        dock_hostsock_stop(hs);
        for (int k = 0; k < 4; k++)
            close(fds[k]);
    }
    CHECK(dock_hostsock_quiesce(2000));
}

/* The guestio helper that parses the guest's HTTP dies mid-call: the guest gets 503, the run
 * and the daemon carry on, and the next connection is served by a new helper. */
static void test_helper_killed(void)
{
    fake_reset();
    struct dock_hostsock *hs = start(&API, NULL);
    if (!hs) {
        CHECK(hs != NULL);
        return;
    }
    const char *sock = dock_hostsock_sock_path(hs);
    struct gio_stats gs;
    gio_server_stats(dock_hostsock_gio(hs), &gs);
    pid_t first = gs.helper_pid;
    F.block = true;
    int fd = dial(sock);
    send_all(fd, "GET /v1/slow HTTP/1.1\r\n\r\n", 26);
    CHECK(fake_wait(&F.inside, 1, 2000));
    int64_t t0 = now_ms();
    kill(first, SIGKILL);
    read_to_end(fd, resp, sizeof resp, 3000);
    close(fd);
    CHECK(starts(resp, "HTTP/1.1 503 ") && now_ms() - t0 < 1000);
    fake_unblock();
    CHECK(fake_wait(&F.releases, 1, 2000));
    CHECK(starts(xs(sock, "GET /v1/next HTTP/1.1\r\n\r\n"), "HTTP/1.1 200 OK\r\n") && strstr(resp, "ok:/v1/next"));
    gio_server_stats(dock_hostsock_gio(hs), &gs);
    CHECK(gs.helper_pid > 0 && gs.helper_pid != first && gs.failures == 1);
    dock_hostsock_stop(hs);
}

static void test_sweep(void)
{
    fake_reset();
    struct dock_hostsock *live = start(&API, NULL);
    CHECK(live != NULL);
    /* a dead run's directory: an old socket nobody listens on, and its preload */
    char dead[96], f[128];
    snprintf(dead, sizeof dead, "%s/" DOCK_HS_DIR_PREFIX "dead01", base);
    mkdir(dead, 0700);
    snprintf(f, sizeof f, "%s/host-api.sock", dead);
    int fd = socket(AF_UNIX, SOCK_STREAM, 0);
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    CHECK(strlen(f) < sizeof sa.sun_path);
    memcpy(sa.sun_path, f, strlen(f) + 1 < sizeof sa.sun_path ? strlen(f) + 1 : sizeof sa.sun_path - 1);
    CHECK(bind(fd, (struct sockaddr *)&sa, sizeof sa) == 0);
    close(fd); /* bound, never listening again: ECONNREFUSED */
    snprintf(f, sizeof f, "%s/host-api.mjs", dead);
    close(open(f, O_WRONLY | O_CREAT, 0444));
    char young[128];
    snprintf(young, sizeof young, "%s/" DOCK_HS_DIR_PREFIX "young1", base);
    mkdir(young, 0700);
    char other[128];
    snprintf(other, sizeof other, "%s/not-ours", base);
    mkdir(other, 0700);
    CHECK(dock_hs_sweep(base, 60) == 0); /* too young, all of them */
    CHECK(dock_hs_sweep(base, 0) == 2);  /* dead and young go; the live one and not-ours stay */
    CHECK(access(dead, F_OK) < 0 && access(young, F_OK) < 0 && access(other, F_OK) == 0);
    CHECK(live && access(dock_hostsock_sock_path(live), F_OK) == 0);
    if (live)
        CHECK(starts(xs(dock_hostsock_sock_path(live), "GET /alive HTTP/1.1\r\n\r\n"), "HTTP/1.1 200 "));
    rmdir(other);
    dock_hostsock_stop(live);
}

/* A session's directory (session_grant.c): 0711, a socket per call under a fresh random name,
 * both of the call's files gone after it while the directory stays; the sweep removes the
 * directories of daemons that are gone and keeps a live one's. */
static void test_session_dir(void)
{
    fake_reset();
    char dir[108];
    struct plm_err e = {0};
    CHECK(dock_sg_dir_make(base, dir, sizeof dir, &e) == 0);
    struct stat st;
    CHECK(stat(dir, &st) == 0 && S_ISDIR(st.st_mode) && (st.st_mode & 0777) == 0711);
    struct dock_sg_call c1, c2;
    CHECK(dock_sg_begin(dir, &API, &c1, &e) == 0);
    char host1[300];
    snprintf(host1, sizeof host1, "%s/%s", dir, c1.sock_in + strlen(DOCK_SG_DIR_IN "/"));
    CHECK(!strncmp(c1.sock_in, DOCK_SG_DIR_IN "/", strlen(DOCK_SG_DIR_IN "/")) &&
          strlen(c1.sock_in) == strlen(DOCK_SG_DIR_IN "/") + 32 + strlen(".sock"));
    CHECK(stat(host1, &st) == 0 && S_ISSOCK(st.st_mode));
    CHECK(starts(xs(host1, "GET /v1/a HTTP/1.1\r\n\r\n"), "HTTP/1.1 200 "));
    dock_sg_end(&c1);
    CHECK(access(host1, F_OK) < 0 && access(dir, F_OK) == 0);
    CHECK(starts(xs(host1, "GET /v1/a HTTP/1.1\r\n\r\n"), "(connect failed)")); /* a leftover cannot call */
    CHECK(dock_sg_begin(dir, &API, &c2, &e) == 0);
    CHECK(strcmp(c1.sock_in, c2.sock_in) != 0); /* a fresh name per call */
    /* a name already taken is an error that removes nothing of the other's */
    struct dock_hostsock *dup = NULL;
    char stem[40];
    snprintf(stem, sizeof stem, "%.32s", c2.sock_in + strlen(DOCK_SG_DIR_IN "/"));
    CHECK(dock_hostsock_start_in(dir, stem, &API, NULL, &dup, &e) < 0 && dup == NULL);
    CHECK(dock_hostsock_start_in(dir, "../escape", &API, NULL, &dup, &e) < 0);
    char host2[300];
    snprintf(host2, sizeof host2, "%s/%s", dir, c2.sock_in + strlen(DOCK_SG_DIR_IN "/"));
    CHECK(starts(xs(host2, "GET /v1/b HTTP/1.1\r\n\r\n"), "HTTP/1.1 200 "));
    dock_sg_end(&c2);
    dock_sg_end(&c2); /* idempotent */
    /* the sweep: a dead daemon's directory goes, a live one's (pid 1) stays */
    char dead[128], live[128];
    snprintf(dead, sizeof dead, "%s/plimsoll-session-%d-dead01", base, 0x7ffffff0);
    snprintf(live, sizeof live, "%s/plimsoll-session-1-live01", base);
    mkdir(dead, 0711);
    mkdir(live, 0711);
    char junk[160];
    snprintf(junk, sizeof junk, "%s/0123.mjs", dead);
    close(open(junk, O_WRONLY | O_CREAT, 0444));
    int n = dock_sg_sweep(base);
    CHECK(access(dead, F_OK) < 0 && access(live, F_OK) == 0);
    CHECK(n >= 2 && access(dir, F_OK) < 0); /* ours too: at startup this daemon has no sessions */
    rmdir(live);
}

int main(void)
{
    snprintf(base, sizeof base, "/tmp/plimsoll-hs-test-XXXXXX");
    if (!mkdtemp(base)) {
        printf("not ok - mkdtemp: %s\n", strerror(errno));
        return 1;
    }
    int fds0 = count_fds();
    test_base_dir();
    test_files_and_verbatim();
    test_refusals();
    test_connection_limit();
    test_slow_clients();
    test_stop_in_flight();
    test_many_runs();
    test_helper_killed();
    test_sweep();
    test_session_dir();
    CHECK(dock_hostsock_quiesce(3000));
    CHECK(count_fds() == fds0); /* every listener, connection and eventfd closed */
    DIR *d = opendir(base);
    int left = 0;
    for (struct dirent *e; d && (e = readdir(d));)
        left += e->d_name[0] != '.';
    if (d)
        closedir(d);
    CHECK(left == 0); /* every run directory removed */
    rmdir(base);
    return unit_done();
}
