/* modes_test.c: the guestio helper's guard mode (the e2b guard) and stream mode (a microvm's
 * channel) with the real plimsoll-guestio, and helpers that break either protocol
 * (evil_helper_test.c): each is killed or refused, its guest answered 503 (guard) or the read in
 * flight failed cleanly (stream), nothing it sent reaches a handler, and the next request or
 * stream gets a fresh helper. argv[1]: the directory of the evil helpers. */
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "../../tests/unit.h"
#include "../core/clock.h"
#include "vmchan.h"
#include "guestio.h"

static const char *build_dir;
static char sock_path[108];

static int64_t now_ms(void)
{
    return (int64_t)clock_mono_ms();
}

static void sleep_ms(int ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

/* ---- guard mode ------------------------------------------------------------------------------ */

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static int g_calls, g_verdict, g_method, g_status = 200;
static char g_cred[GIO_CRED_MAX + 1], g_path[256], g_why[GIO_WHY_MAX + 1];
static size_t g_body_len;
static atomic_bool g_block, g_inside;

static void on_guard(void *ctx, const struct gio_gcall *g, struct plm_host_reply *out)
{
    (void)ctx;
    pthread_mutex_lock(&mu);
    g_calls++;
    g_verdict = g->verdict;
    g_method = g->method;
    snprintf(g_cred, sizeof g_cred, "%.*s", (int)g->cred_len, (const char *)g->cred);
    snprintf(g_path, sizeof g_path, "%.*s", (int)g->path_len, g->path ? (const char *)g->path : "");
    snprintf(g_why, sizeof g_why, "%.*s", (int)g->why_len, g->why ? (const char *)g->why : "");
    g_body_len = g->body_len;
    int status = g_status;
    pthread_mutex_unlock(&mu);
    atomic_store(&g_inside, true);
    while (atomic_load(&g_block))
        sleep_ms(5);
    out->status = status;
    out->body = (uint8_t *)strdup("{}");
    out->len = 2;
    out->content_type = strdup("application/json");
}

static const struct gio_handler GH = {.guard = on_guard};
static const struct gio_limits GLIM = {.conn_max = 16, .head_max = 16384, .body_max = GIO_GBODY_MAX, .head_ms = 5000,
                                       .read_ms = 10000, .write_ms = 10000, .guard_path = "/v1/e2b/guard",
                                       .restart_window_ms = 60000};

static int listener(void)
{
    unlink(sock_path);
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    snprintf(sa.sun_path, sizeof sa.sun_path, "%s", sock_path);
    if (fd < 0 || bind(fd, (struct sockaddr *)&sa, sizeof sa) < 0 || listen(fd, 16) < 0) {
        if (fd >= 0)
            close(fd);
        return -1;
    }
    return fd;
}

static struct gio_server *start_guard(const char *evil)
{
    char path[512];
    if (evil)
        snprintf(path, sizeof path, "%s/gio_evil_%s", build_dir, evil);
    struct gio_server *s = NULL;
    struct plm_err e = {0};
    if (gio_server_start(listener(), &GLIM, &GH, evil ? path : NULL, &s, &e) < 0)
        printf("# start: %s\n", e.msg);
    return s;
}

static char resp[8192];

static int exchange(const char *req, size_t len)
{
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    snprintf(sa.sun_path, sizeof sa.sun_path, "%s", sock_path);
    resp[0] = 0;
    if (fd < 0 || connect(fd, (struct sockaddr *)&sa, sizeof sa) < 0) {
        if (fd >= 0)
            close(fd);
        return -1;
    }
    size_t off = 0;
    while (off < len) {
        ssize_t n = send(fd, req + off, len - off, MSG_NOSIGNAL);
        if (n <= 0)
            break;
        off += (size_t)n;
    }
    size_t have = 0;
    int64_t until = now_ms() + 5000;
    for (;;) {
        struct pollfd p = {fd, POLLIN, 0};
        int64_t left = until - now_ms();
        if (left <= 0 || poll(&p, 1, (int)left) <= 0)
            break;
        ssize_t n = recv(fd, resp + have, sizeof resp - 1 - have, 0);
        if (n <= 0)
            break;
        have += (size_t)n;
    }
    resp[have] = 0;
    close(fd);
    int status = 0;
    sscanf(resp, "HTTP/1.1 %d", &status);
    return status;
}

#define TOKEN "crg_0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"

static int post(const char *target, const char *extra_headers, const char *body)
{
    char req[4096];
    int n = snprintf(req, sizeof req, "POST %s HTTP/1.1\r\nHost: g\r\n%sContent-Length: %zu\r\n\r\n%s", target,
                     extra_headers, strlen(body), body);
    return exchange(req, (size_t)n);
}

static int calls(void)
{
    pthread_mutex_lock(&mu);
    int c = g_calls;
    pthread_mutex_unlock(&mu);
    return c;
}

static void test_guard_mode(void)
{
    struct gio_server *s = start_guard(NULL);
    CHECK(s != NULL);
    if (!s)
        return;
    const char *cred = "X-Plimsoll-E2B-Guard: " TOKEN "\r\n";
    CHECK(post("/v1/e2b/guard", cred, "{\"method\":\"patch\",\"path\":\"/v1/x?y=1\",\"body\":\"{\\\"a\\\":1}\"}") == 200);
    CHECK(calls() == 1 && g_verdict == GIO_V_CALL && g_method == GIO_GM_PATCH && !strcmp(g_path, "/v1/x?y=1"));
    CHECK(!strcmp(g_cred, TOKEN) && g_body_len == 7);
    /* answered by the helper itself, the handler never called */
    CHECK(post("/v1/e2b/guardx", cred, "{}") == 404 && strstr(resp, "{\"error\":\"not found\"}"));
    CHECK(post("/v1/e2b/guard?", cred, "{}") == 404);
    CHECK(exchange("GET /v1/e2b/guard HTTP/1.1\r\n\r\n", 31) == 404);
    CHECK(post("/v1/e2b/guard", "", "{}") == 401 && strstr(resp, "missing egress guard credential"));
    CHECK(post("/v1/e2b/guard", "X-Plimsoll-E2B-Guard: a\r\nX-Plimsoll-E2B-Guard: b\r\n", "{}") == 400);
    CHECK(calls() == 1);
    /* the verdicts travel to the daemon, which checks the token first */
    CHECK(post("/v1/e2b/guard", cred, "{\"method\":\"GET\"") == 200 && calls() == 2 && g_verdict == GIO_V_BAD &&
          strstr(g_why, "expected a JSON object"));
    CHECK(post("/v1/e2b/guard", cred, "{\"method\":\"GET\",\"path\":\"/x\",\"extra\":1}") == 200 &&
          g_verdict == GIO_V_BAD);
    char big[256];
    int bn = snprintf(big, sizeof big, "POST /v1/e2b/guard HTTP/1.1\r\n%sContent-Length: %u\r\n\r\n", cred,
                      GIO_GBODY_MAX + 1);
    int bst = exchange(big, (size_t)bn);
    CHECK(bst == 200 && calls() == 4 && g_verdict == GIO_V_TOO_LARGE);
    /* a 2 MiB body is carried whole */
    size_t blen = 2u * 1024 * 1024 - 64;
    char *huge = malloc(blen + 512);
    int hn = snprintf(huge, 512, "POST /v1/e2b/guard HTTP/1.1\r\n%sContent-Length: %zu\r\n\r\n", cred, blen);
    int bo = snprintf(huge + hn, 64, "{\"method\":\"POST\",\"path\":\"/p\",\"body\":\"");
    memset(huge + hn + bo, 'a', blen - (size_t)bo - 2);
    memcpy(huge + hn + blen - 2, "\"}", 2);
    CHECK(exchange(huge, (size_t)hn + blen) == 200 && g_verdict == GIO_V_CALL && g_body_len == blen - (size_t)bo - 2);
    free(huge);
    /* the daemon's 503 carries Retry-After */
    g_status = 503;
    CHECK(post("/v1/e2b/guard", cred, "{\"method\":\"GET\",\"path\":\"/x\"}") == 503 && strstr(resp, "Retry-After: 1\r\n"));
    g_status = 200;

    /* SIGKILL of the helper during a call: the guest gets 503, the next request a new helper */
    struct gio_stats st;
    gio_server_stats(s, &st);
    pid_t first = st.helper_pid;
    atomic_store(&g_block, true);
    atomic_store(&g_inside, false);
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    snprintf(sa.sun_path, sizeof sa.sun_path, "%s", sock_path);
    CHECK(connect(fd, (struct sockaddr *)&sa, sizeof sa) == 0);
    char req[512];
    int rn = snprintf(req, sizeof req, "POST /v1/e2b/guard HTTP/1.1\r\n%sContent-Length: 27\r\n\r\n"
                      "{\"method\":\"GET\",\"path\":\"/\"}", cred);
    CHECK(send(fd, req, (size_t)rn, MSG_NOSIGNAL) == rn);
    for (int i = 0; i < 400 && !atomic_load(&g_inside); i++)
        sleep_ms(5);
    CHECK(atomic_load(&g_inside));
    kill(first, SIGKILL);
    int64_t t0 = now_ms();
    size_t have = 0;
    for (;;) {
        struct pollfd p = {fd, POLLIN, 0};
        if (poll(&p, 1, 3000) <= 0)
            break;
        ssize_t n = recv(fd, resp + have, sizeof resp - 1 - have, 0);
        if (n <= 0)
            break;
        have += (size_t)n;
    }
    resp[have] = 0;
    close(fd);
    CHECK(!strncmp(resp, "HTTP/1.1 503", 12) && now_ms() - t0 < 2000);
    atomic_store(&g_block, false);
    CHECK(post("/v1/e2b/guard", cred, "{\"method\":\"GET\",\"path\":\"/again\"}") == 200 && !strcmp(g_path, "/again"));
    gio_server_stats(s, &st);
    CHECK(st.helpers == 2 && st.failures == 1 && st.helper_pid != first && st.helper_pid > 0);
    gio_server_stop(s);
    CHECK(gio_quiesce(5000));
}

/* A guard-mode helper that breaks the protocol: killed, the guest gets 503, no call. */
static void guard_evil(const char *mode)
{
    struct gio_server *s = start_guard(mode);
    CHECK(s != NULL);
    if (!s)
        return;
    int before = calls();
    CHECK(post("/v1/e2b/guard", "X-Plimsoll-E2B-Guard: " TOKEN "\r\n", "{}") == 503);
    CHECK(calls() == before);
    struct gio_stats st;
    gio_server_stats(s, &st);
    CHECK(st.violations == 1);
    gio_server_stop(s);
}

/* ---- stream mode ------------------------------------------------------------------------------- */

static size_t guest_frame(uint8_t *buf, uint16_t type, uint64_t seq, const void *p, uint32_t len)
{
    f16_hdr_encode(buf, &(struct f16_hdr){.len = len, .type = type, .seq = seq});
    if (len)
        memcpy(buf + F16_HDR_LEN, p, len);
    return F16_HDR_LEN + len;
}

/* A "VM": a socketpair; [0] is the daemon's channel, [1] the guest's side. The helper gets a
 * dup of [0]. */
static struct gio_stream *open_stream(int sv[2], const char *evil)
{
    char path[512];
    if (evil)
        snprintf(path, sizeof path, "%s/gio_evil_%s", build_dir, evil);
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0)
        return NULL;
    struct gio_stream *gs = NULL;
    struct plm_err e = {0};
    if (gio_stream_open(dup(sv[0]), evil ? path : NULL, &gs, &e) < 0)
        printf("# stream: %s\n", e.msg);
    return gs;
}

static int next(struct gio_stream *gs, int ms, struct mvc_frame *f, int *why, struct plm_err *e)
{
    const uint8_t *p;
    size_t len;
    int k = gio_stream_next(gs, now_ms() + ms, &p, &len, why, e);
    if (k == 1 && mvc_canon_decode(p, len, f) < 0)
        return 2; /* what the daemon's decoder refuses */
    return k;
}

static void test_stream_mode(void)
{
    int sv[2];
    struct gio_stream *gs = open_stream(sv, NULL);
    CHECK(gs != NULL);
    if (!gs)
        return;
    pid_t pid = gio_stream_pid(gs);
    char line[256], p[64];
    snprintf(p, sizeof p, "/proc/%d/status", (int)pid);
    FILE *fp = fopen(p, "r");
    bool seccomp = false, nnp = false;
    while (fp && fgets(line, sizeof line, fp)) {
        seccomp |= !strcmp(line, "Seccomp:\t2\n");
        nnp |= !strcmp(line, "NoNewPrivs:\t1\n");
    }
    if (fp)
        fclose(fp);
    CHECK(seccomp && nnp);
    uint8_t buf[512];
    struct mvc_frame f;
    struct plm_err e = {0};
    int why = 0;
    /* READY and a HOST_CALL, the second written one byte at a time */
    size_t n = guest_frame(buf, MVC_READY, 0, "6.1.0\ncpu\n", 10);
    CHECK(write(sv[1], buf, n) == (ssize_t)n);
    CHECK(next(gs, 2000, &f, &why, &e) == 1 && f.hdr.type == MVC_READY && f.u.text.len == 10 &&
          !memcmp(f.u.text.p, "6.1.0\ncpu\n", 10));
    uint8_t pl[64];
    qf_host_call_encode_fixed(pl, 1, 3, 3, 2);
    memcpy(pl + QF_HOST_CALL_FIXED, "GET/abhi", 8);
    n = guest_frame(buf, MVC_HOST_CALL, 5, pl, QF_HOST_CALL_FIXED + 8);
    for (size_t i = 0; i < n; i++)
        CHECK(write(sv[1], buf + i, 1) == 1);
    CHECK(next(gs, 2000, &f, &why, &e) == 1 && f.hdr.type == MVC_HOST_CALL && f.hdr.seq == 5 &&
          f.u.host_call.body_len == 2 && !memcmp(f.u.host_call.path, "/ab", 3));
    /* the deadline passes with nothing sent: ETIMEDOUT, and the stream still works */
    int64_t t0 = now_ms();
    CHECK(next(gs, 100, &f, &why, &e) == -1 && e.errnum == ETIMEDOUT && now_ms() - t0 < 1500);
    n = guest_frame(buf, MVC_SEEDED, 6, NULL, 0);
    CHECK(write(sv[1], buf, n) == (ssize_t)n);
    CHECK(next(gs, 2000, &f, &why, &e) == 1 && f.hdr.type == MVC_SEEDED && f.hdr.seq == 6);
    /* the guest closes: END closed, and again on every later call */
    close(sv[1]);
    CHECK(next(gs, 2000, &f, &why, &e) == 0 && why == GIO_END_CLOSED);
    CHECK(next(gs, 2000, &f, &why, &e) == 0 && why == GIO_END_CLOSED);
    CHECK(gio_stream_pid(gs) == -1);
    gio_stream_close(gs);
    close(sv[0]);

    /* garbage from the guest: END protocol, the helper gone */
    gs = open_stream(sv, NULL);
    CHECK(gs != NULL);
    if (!gs)
        return;
    pid = gio_stream_pid(gs);
    n = guest_frame(buf, MVC_RUN, 1, "x", 1); /* a host->guest type */
    CHECK(write(sv[1], buf, n) == (ssize_t)n);
    CHECK(next(gs, 2000, &f, &why, &e) == 0 && why == GIO_END_PROTOCOL);
    CHECK(kill(pid, 0) < 0 && errno == ESRCH);
    gio_stream_close(gs);
    close(sv[0]);
    close(sv[1]);

    /* the helper SIGKILLed while a read waits: a clean EPIPE at once, never a hang */
    gs = open_stream(sv, NULL);
    CHECK(gs != NULL);
    if (!gs)
        return;
    kill(gio_stream_pid(gs), SIGKILL);
    t0 = now_ms();
    CHECK(next(gs, 5000, &f, &why, &e) == -1 && e.errnum == EPIPE && now_ms() - t0 < 1500);
    CHECK(next(gs, 5000, &f, &why, &e) == -1 && e.errnum == EPIPE);
    gio_stream_close(gs);
    close(sv[0]);
    close(sv[1]);

    /* a guest that writes and writes while nobody reads: the helper holds one frame, the rest
     * waits in the socket (its memory stays bounded) */
    gs = open_stream(sv, NULL);
    CHECK(gs != NULL);
    if (!gs)
        return;
    n = guest_frame(buf, MVC_SEEDED, 1, NULL, 0);
    int sent = 0;
    for (int i = 0; i < 200000; i++) {
        if (send(sv[1], buf, n, MSG_DONTWAIT | MSG_NOSIGNAL) != (ssize_t)n)
            break;
        sent++;
    }
    CHECK(sent > 0 && sent < 200000); /* the pipe filled: back-pressure reached the guest */
    int got = 0;
    while (got < sent && next(gs, 2000, &f, &why, &e) == 1)
        got++;
    CHECK(got == sent);
    gio_stream_close(gs);
    close(sv[0]);
    close(sv[1]);
}

/* Stream-mode helpers that break the protocol: what the first read returns (-1 with errnum, or
 * 2 for a frame the daemon's decoder refuses), and whether the helper is then gone. */
static void stream_evil(const char *mode, int want, int want_errnum, bool reaped)
{
    int sv[2];
    struct mvc_frame f;
    struct plm_err e = {0};
    int why = 0;
    struct gio_stream *gs = open_stream(sv, mode);
    CHECK(gs != NULL);
    if (!gs)
        return;
    pid_t pid = gio_stream_pid(gs);
    CHECK(next(gs, 2000, &f, &why, &e) == want && (!want_errnum || e.errnum == want_errnum));
    if (reaped)
        CHECK(kill(pid, 0) < 0 && errno == ESRCH);
    gio_stream_close(gs);
    close(sv[0]);
    close(sv[1]);
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        printf("not ok - the directory of the evil helpers (argv[1]) is required\n");
        return 1;
    }
    build_dir = argv[1];
    signal(SIGPIPE, SIG_IGN);
    snprintf(sock_path, sizeof sock_path, "/tmp/plimsoll-gio-modes-%d.sock", (int)getpid());
    test_guard_mode();
    guard_evil("gcall_badpath");
    guard_evil("wrong_mode");
    test_stream_mode();
    stream_evil("stream_badtype", -1, EPIPE, true); /* a DONE in stream mode: killed and reaped */
    stream_evil("stream_garbage", 2, 0, false);     /* carried, and refused by mvc_canon_decode */
    unlink(sock_path);
    return unit_done();
}
