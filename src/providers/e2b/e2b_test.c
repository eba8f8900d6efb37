/* e2b_test.c: the e2b provider's pure pieces: the Connect stream parser, base64, the guard's
 * body parser and token format, the URL rules (providers.md §6, conformance items 75), project
 * paths; and the guard listener for real on loopback (404 / 401 / 400 / 413 / a call / 401 after
 * unregister). The end-to-end paths run through the daemon in tests/blackbox/test_e2b.py. */
#include <arpa/inet.h>
#include <pthread.h>
#include <stdatomic.h>
#include <time.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "../../../tests/unit.h"
#include "internal.h"

static size_t env_frame(uint8_t *out, uint8_t flags, const char *json)
{
    size_t n = strlen(json);
    out[0] = flags;
    out[1] = (uint8_t)(n >> 24), out[2] = (uint8_t)(n >> 16), out[3] = (uint8_t)(n >> 8), out[4] = (uint8_t)n;
    memcpy(out + 5, json, n);
    return n + 5;
}

static void test_stream(void)
{
    uint8_t buf[4096];
    size_t n = 0;
    n += env_frame(buf + n, 0, "{\"event\":{\"start\":{\"pid\":7}}}");
    n += env_frame(buf + n, 0, "{\"event\":{\"data\":{\"stdout\":\"aGkK\"}}}");
    n += env_frame(buf + n, 0, "{\"event\":{\"data\":{\"stderr\":\"ZXJy\"}}}");
    n += env_frame(buf + n, 0, "{\"event\":{\"end\":{\"exitCode\":3,\"status\":\"exit status 3\"}}}");
    n += env_frame(buf + n, 2, "{}");
    /* fed one byte at a time: framing must not depend on chunk boundaries */
    struct e2b_stream s;
    e2b_stream_init(&s, 1024);
    int r = 0;
    for (size_t i = 0; i < n && r == 0; i++)
        r = e2b_stream_feed(&s, buf + i, 1);
    CHECK(r == 1);
    CHECK(s.started && s.ended && s.trailer && s.pid == 7 && s.exit_code == 3);
    CHECK(s.out.len == 3 && !memcmp(s.out.data, "hi\n", 3));
    CHECK(s.err.len == 3 && !memcmp(s.err.data, "err", 3));
    CHECK(e2b_stream_finish(&s) == 0);
    e2b_stream_done(&s);

    /* exitCode absent = 0 (proto3 JSON) */
    n = env_frame(buf, 0, "{\"event\":{\"start\":{}}}");
    n += env_frame(buf + n, 0, "{\"event\":{\"end\":{}}}");
    e2b_stream_init(&s, 10);
    CHECK(e2b_stream_feed(&s, buf, n) == 0 && s.ended && s.exit_code == 0);
    e2b_stream_done(&s);

    /* a trailer error without an end event */
    n = env_frame(buf, 0, "{\"event\":{\"start\":{}}}");
    n += env_frame(buf + n, 2, "{\"error\":{\"code\":\"internal\",\"message\":\"boom\"}}");
    e2b_stream_init(&s, 10);
    CHECK(e2b_stream_feed(&s, buf, n) == 1 && !s.ended && !strcmp(s.trailer_code, "internal"));
    e2b_stream_done(&s);

    /* a frame over 8 MiB is refused from its header alone */
    uint8_t big[5] = {0, 0, 0x80, 0x00, 0x01};
    e2b_stream_init(&s, 10);
    CHECK(e2b_stream_feed(&s, big, 5) == -1 && s.failed);
    e2b_stream_done(&s);

    /* compressed frames, data before start, garbage JSON, bytes after the trailer */
    uint8_t comp[6] = {1, 0, 0, 0, 1, '{'};
    e2b_stream_init(&s, 10);
    CHECK(e2b_stream_feed(&s, comp, 6) == -1);
    e2b_stream_done(&s);
    n = env_frame(buf, 0, "{\"event\":{\"data\":{\"stdout\":\"aGkK\"}}}");
    e2b_stream_init(&s, 10);
    CHECK(e2b_stream_feed(&s, buf, n) == -1);
    e2b_stream_done(&s);
    n = env_frame(buf, 0, "nope");
    e2b_stream_init(&s, 10);
    CHECK(e2b_stream_feed(&s, buf, n) == -1);
    e2b_stream_done(&s);
    n = env_frame(buf, 2, "{}");
    buf[n++] = 0;
    e2b_stream_init(&s, 10);
    CHECK(e2b_stream_feed(&s, buf, n) == -1);
    e2b_stream_done(&s);

    /* a partial frame at the end of the transport */
    n = env_frame(buf, 0, "{\"event\":{\"start\":{}}}");
    e2b_stream_init(&s, 10);
    CHECK(e2b_stream_feed(&s, buf, n - 2) == 0 && e2b_stream_finish(&s) == -1);
    e2b_stream_done(&s);

    /* keep cap: output past it is flagged, not kept */
    n = env_frame(buf, 0, "{\"event\":{\"start\":{}}}");
    n += env_frame(buf + n, 0, "{\"event\":{\"data\":{\"stdout\":\"aGVsbG8gd29ybGQ=\"}}}");
    e2b_stream_init(&s, 4);
    CHECK(e2b_stream_feed(&s, buf, n) == 0 && s.out.len == 4 && s.out_truncated);
    e2b_stream_done(&s);

    /* the 32 MiB transfer budget: a frame that would cross it stops the parse */
    e2b_stream_init(&s, 10);
    s.total = E2B_STREAM_MAX - 10;
    n = env_frame(buf, 0, "{\"event\":{\"start\":{}}}");
    CHECK(e2b_stream_feed(&s, buf, n) == 1 && s.over_budget && s.out_truncated && s.err_truncated);
    e2b_stream_done(&s);

    uint8_t o[8];
    CHECK(e2b_b64_decode("aGk=", 4, o, sizeof o) == 2);
    CHECK(e2b_b64_decode("aG=k", 4, o, sizeof o) == -1);
    CHECK(e2b_b64_decode("aGk", 3, o, sizeof o) == -1);
    CHECK(e2b_b64_decode("a$k=", 4, o, sizeof o) == -1);
}

static void test_guard_parse(void)
{
    struct e2b_guard_call c;
    char why[128];
    const char *ok = "{\"method\":\"post\",\"path\":\"/v1/items/1\",\"body\":\"{\\\"a\\\":1}\"}";
    CHECK(e2b_guard_parse((const uint8_t *)ok, strlen(ok), &c, why, sizeof why) == 0);
    CHECK_STR(c.method, "POST");
    CHECK_STR(c.path, "/v1/items/1");
    CHECK(c.len == 7 && !memcmp(c.body, "{\"a\":1}", 7));
    e2b_guard_call_done(&c);
    const char *bad[] = {"", "[]", "{\"method\":\"\",\"path\":\"/x\"}", "{\"method\":\"GET\",\"path\":\"\"}",
                         "{\"method\":\"TRACE\",\"path\":\"/x\"}", "{\"method\":\"GET\",\"path\":\"/x\",\"x\":1}",
                         "{\"method\":\"GET\",\"path\":\"/x\",\"body\":{}}",
                         "{\"method\":\"GET\",\"path\":\"/x\\u0000y\"}", "{\"method\":\"GET\",\"method\":\"PUT\",\"path\":\"/x\"}"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++)
        CHECK(e2b_guard_parse((const uint8_t *)bad[i], strlen(bad[i]), &c, why, sizeof why) == 400);
    char tok[80] = "crg_";
    memset(tok + 4, 'a', 64);
    tok[68] = 0;
    CHECK(e2b_guard_token_ok(tok, 68));
    tok[10] = 'A';
    CHECK(!e2b_guard_token_ok(tok, 68));
    CHECK(!e2b_guard_token_ok("crg_00", 6));
}

static void test_urls(void)
{
    char out[512], host[256];
    struct plm_err err;
    CHECK(e2b_check_guard_url("https://Guard.Example", out, sizeof out, host, sizeof host, &err) == 0);
    CHECK_STR(out, "https://Guard.Example/v1/e2b/guard");
    CHECK_STR(host, "guard.example");
    CHECK(e2b_check_guard_url("https://g.example:443/hook", out, sizeof out, host, sizeof host, &err) == 0);
    CHECK_STR(out, "https://g.example/hook");
    const char *bad[] = {"http://guard.example", "https://localhost/x", "https://127.0.0.1/x", "https://g.example:8443",
                         "https://g.example/x?q=1", "https://g.example/a/../b", "https://u@g.example/",
                         "https://g.example/a%2f", "https://g.example/a#f", "https://[::1]/x", "https://g.example//x"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++)
        CHECK(e2b_check_guard_url(bad[i], out, sizeof out, host, sizeof host, &err) < 0);
    CHECK(e2b_check_base_url("E2B_API_URL", "http://127.0.0.1:9000/", false, out, sizeof out, &err) == 0);
    CHECK_STR(out, "http://127.0.0.1:9000");
    CHECK(e2b_check_base_url("E2B_API_URL", "http://api.example", false, out, sizeof out, &err) < 0);
    CHECK(strstr(err.msg, "E2B_API_URL") != NULL);
    CHECK(e2b_check_base_url("E2B_ENVD_URL", "http://127.0.0.1:9000/envd/{sandbox}", true, out, sizeof out, &err) == 0);
    CHECK(e2b_check_base_url("E2B_ENVD_URL", "https://49983-{sandbox}.e2b.app", true, out, sizeof out, &err) == 0);
    CHECK(e2b_check_base_url("E2B_ENVD_URL", "http://127.0.0.1:9000/envd", true, out, sizeof out, &err) < 0);
    CHECK(e2b_check_base_url("E2B_ENVD_URL", "http://127.0.0.1/{sandbox}/{sandbox}", true, out, sizeof out, &err) < 0);
    CHECK(e2b_check_base_url("E2B_API_URL", "https://api.e2b.app?x", false, out, sizeof out, &err) < 0);
    CHECK(e2b_host_is_loopback("127.9.0.1") && e2b_host_is_loopback("::1") && !e2b_host_is_loopback("10.0.0.1"));
}

static void test_paths(void)
{
    char out[256];
    CHECK(e2b_project_path("src/a.js", out, sizeof out) == 0);
    CHECK_STR(out, "/home/user/project/src/a.js");
    CHECK(e2b_project_path("../etc/passwd", out, sizeof out) < 0);
    CHECK(e2b_project_path("/etc/passwd", out, sizeof out) < 0);
    CHECK(e2b_project_path("a/./b", out, sizeof out) < 0);
    CHECK(e2b_project_path("a//b", out, sizeof out) < 0);
    CHECK(e2b_project_path("", out, sizeof out) < 0);
    char *m = e2b_host_module("https://g.example/v1/e2b/guard", "var x = \"</script>\";");
    CHECK(m && strstr(m, "https:\\/\\/g.example") && !strstr(m, "crg_"));
    free(m);
}

/* ---- the guard, for real ------------------------------------------------------------------- */
static int calls;
static void fake_call(void *ctx, const char *method, const char *target, const uint8_t *body, size_t len,
                      struct plm_host_reply *out)
{
    (void)ctx, (void)body;
    calls++;
    char *b = NULL;
    int n = asprintf(&b, "%s %s %zu", method, target, len);
    out->status = 200;
    out->body = (uint8_t *)b;
    out->len = n > 0 ? (size_t)n : 0;
    out->content_type = strdup("text/plain");
}

static int http(uint16_t port, const char *req, char *resp, size_t cap)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(port)};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (connect(fd, (struct sockaddr *)&a, sizeof a) < 0) {
        close(fd);
        return -1;
    }
    size_t n = strlen(req);
    if (write(fd, req, n) != (ssize_t)n) {
        close(fd);
        return -1;
    }
    size_t got = 0;
    ssize_t r;
    while (got + 1 < cap && (r = read(fd, resp + got, cap - 1 - got)) > 0)
        got += (size_t)r;
    resp[got] = 0;
    close(fd);
    int status = 0;
    sscanf(resp, "HTTP/1.%*d %d", &status);
    return status;
}

static void test_guard_listener(void)
{
    struct e2b_guard *g = NULL;
    struct plm_err err = {0};
    CHECK(e2b_guard_start("127.0.0.1:0", "/v1/e2b/guard", &g, &err) == 0);
    if (!g)
        return;
    uint16_t port = e2b_guard_port(g);
    struct plm_host_api api = {.profile = "t", .client_js = "", .node_preload = "", .call = fake_call};
    char tok[E2B_GUARD_TOKEN_LEN + 1], saved[E2B_GUARD_TOKEN_LEN + 1];
    CHECK(e2b_guard_register(g, &api, tok, &err) == 0);
    memcpy(saved, tok, sizeof tok);
    char req[4096], resp[4096];
    const char *body = "{\"method\":\"GET\",\"path\":\"/v1/items/1\"}";
    snprintf(req, sizeof req,
             "POST /v1/e2b/guard HTTP/1.1\r\nHost: x\r\n" E2B_GUARD_HEADER ": %s\r\nContent-Length: %zu\r\n"
             "Connection: close\r\n\r\n%s", saved, strlen(body), body);
    CHECK(http(port, req, resp, sizeof resp) == 200);
    CHECK(strstr(resp, "GET /v1/items/1 0") != NULL);
    CHECK(strstr(resp, saved) == NULL);
    snprintf(req, sizeof req, "POST /v1/e2b/guard?x=1 HTTP/1.1\r\nHost: x\r\n" E2B_GUARD_HEADER
             ": %s\r\nContent-Length: 2\r\nConnection: close\r\n\r\n{}", saved);
    CHECK(http(port, req, resp, sizeof resp) == 404);
    snprintf(req, sizeof req, "POST /v1/e2b/guard? HTTP/1.1\r\nHost: x\r\n" E2B_GUARD_HEADER
             ": %s\r\nContent-Length: 2\r\nConnection: close\r\n\r\n{}", saved);
    CHECK(http(port, req, resp, sizeof resp) == 404); /* even a bare '?' */
    CHECK(http(port, "GET /v1/e2b/guard HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n", resp, sizeof resp) == 404);
    CHECK(http(port, "POST /v1/e2b/guard HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\nConnection: close\r\n\r\n{}",
               resp, sizeof resp) == 401);
    CHECK(strstr(resp, "missing egress guard credential") != NULL);
    snprintf(req, sizeof req, "POST /v1/e2b/guard HTTP/1.1\r\nHost: x\r\n" E2B_GUARD_HEADER
             ": %s\r\nContent-Length: 5\r\nConnection: close\r\n\r\n{\"a\":", saved);
    CHECK(http(port, req, resp, sizeof resp) == 400);
    /* a head over the connection's memory: refused by the HTTP layer (no leak under LSan) */
    char *fat = malloc(200 * 1024);
    int fn = snprintf(fat, 256, "POST /v1/e2b/guard HTTP/1.1\r\nHost: x\r\nX-Fat: ");
    memset(fat + fn, 'f', 150 * 1024);
    strcpy(fat + fn + 150 * 1024, "\r\nContent-Length: 0\r\n\r\n");
    int fst = http(port, fat, resp, sizeof resp);
    CHECK(fst == 431 || fst == 413 || fst == 0 || fst == 400);
    free(fat);
    /* over 2 MiB: 413, and the broker is never called */
    int before = calls;
    size_t big = E2B_GUARD_BODY_MAX + 1;
    char *huge = malloc(big + 512);
    int hn = snprintf(huge, 512, "POST /v1/e2b/guard HTTP/1.1\r\nHost: x\r\n" E2B_GUARD_HEADER
                      ": %s\r\nContent-Length: %zu\r\nConnection: close\r\n\r\n", saved, big);
    memset(huge + hn, 'a', big);
    huge[hn + big] = 0;
    CHECK(http(port, huge, resp, sizeof resp) == 413);
    CHECK(calls == before);
    free(huge);
    e2b_guard_unregister(g, tok);
    snprintf(req, sizeof req,
             "POST /v1/e2b/guard HTTP/1.1\r\nHost: x\r\n" E2B_GUARD_HEADER ": %s\r\nContent-Length: %zu\r\n"
             "Connection: close\r\n\r\n%s", saved, strlen(body), body);
    CHECK(http(port, req, resp, sizeof resp) == 401);
    CHECK(strstr(resp, "unknown or expired egress guard credential") != NULL);
    CHECK(calls == before);
    e2b_guard_stop(g);
}

/* ---- a session's credential (E2B_SESSION_GRANTS=session): lent per call ---------------------- */
static void test_guard_lend(void)
{
    struct e2b_guard *g = NULL;
    struct plm_err err = {0};
    CHECK(e2b_guard_start("127.0.0.1:0", "/v1/e2b/guard", &g, &err) == 0);
    if (!g)
        return;
    uint16_t port = e2b_guard_port(g);
    struct plm_host_api api = {.profile = "t", .client_js = "", .node_preload = "", .call = fake_call};
    char tok[E2B_GUARD_TOKEN_LEN + 1], saved[E2B_GUARD_TOKEN_LEN + 1];
    CHECK(e2b_guard_register(g, NULL, tok, &err) == 0); /* the session's, no grant yet */
    memcpy(saved, tok, sizeof tok);
    char req[4096], resp[4096];
    const char *body = "{\"method\":\"GET\",\"path\":\"/v1/items/1\"}";
    snprintf(req, sizeof req,
             "POST /v1/e2b/guard HTTP/1.1\r\nHost: x\r\n" E2B_GUARD_HEADER ": %s\r\nContent-Length: %zu\r\n"
             "Connection: close\r\n\r\n%s",
             saved, strlen(body), body);
    int before = calls;
    CHECK(http(port, req, resp, sizeof resp) == 403); /* between calls */
    CHECK(strstr(resp, "no call of this session is in progress") != NULL);
    CHECK(e2b_guard_lend(g, saved, &api, &err) == 0);
    CHECK(e2b_guard_lend(g, saved, &api, &err) < 0); /* lent already */
    CHECK(http(port, req, resp, sizeof resp) == 200);
    CHECK(calls == before + 1);
    e2b_guard_unlend(g, saved);
    CHECK(http(port, req, resp, sizeof resp) == 403);
    CHECK(e2b_guard_lend(g, "crg_0000", &api, &err) < 0); /* unknown */
    e2b_guard_unregister(g, tok);
    CHECK(http(port, req, resp, sizeof resp) == 401);
    CHECK(calls == before + 1);
    e2b_guard_stop(g);
}

/* ---- the admission limit: 64 calls in flight, the 65th is 503 + Retry-After ----------------- */
static atomic_int inside;
static atomic_bool let_go;
static void slow_call(void *ctx, const char *method, const char *target, const uint8_t *body, size_t len,
                      struct plm_host_reply *out)
{
    (void)ctx, (void)method, (void)target, (void)body, (void)len;
    atomic_fetch_add(&inside, 1);
    while (!atomic_load(&let_go)) {
        struct timespec ts = {0, 5 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
    out->status = 204;
}

struct client {
    uint16_t port;
    char req[512];
    int status;
};

static void *client_thread(void *arg)
{
    struct client *c = arg;
    char resp[1024];
    c->status = http(c->port, c->req, resp, sizeof resp);
    return NULL;
}

static void test_guard_capacity(void)
{
    struct e2b_guard *g = NULL;
    struct plm_err err = {0};
    if (e2b_guard_start("127.0.0.1:0", "/g", &g, &err) < 0) {
        CHECK(!"guard start");
        return;
    }
    struct plm_host_api api = {.profile = "t", .client_js = "", .node_preload = "", .call = slow_call};
    char tok[E2B_GUARD_TOKEN_LEN + 1], saved[E2B_GUARD_TOKEN_LEN + 1];
    CHECK(e2b_guard_register(g, &api, tok, &err) == 0);
    memcpy(saved, tok, sizeof tok);
    static struct client cl[E2B_GUARD_INFLIGHT];
    pthread_t th[E2B_GUARD_INFLIGHT];
    const char *body = "{\"method\":\"GET\",\"path\":\"/x\"}";
    for (int i = 0; i < E2B_GUARD_INFLIGHT; i++) {
        cl[i].port = e2b_guard_port(g);
        snprintf(cl[i].req, sizeof cl[i].req, "POST /g HTTP/1.1\r\nHost: x\r\n" E2B_GUARD_HEADER
                 ": %s\r\nContent-Length: %zu\r\nConnection: close\r\n\r\n%s", saved, strlen(body), body);
        pthread_create(&th[i], NULL, client_thread, &cl[i]);
    }
    for (int i = 0; i < 2000 && atomic_load(&inside) < E2B_GUARD_INFLIGHT; i++) {
        struct timespec ts = {0, 5 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
    CHECK(atomic_load(&inside) == E2B_GUARD_INFLIGHT);
    char resp[1024];
    CHECK(http(e2b_guard_port(g), cl[0].req, resp, sizeof resp) == 503);
    CHECK(strstr(resp, "Retry-After: 1") != NULL);
    atomic_store(&let_go, true);
    int ok = 0;
    for (int i = 0; i < E2B_GUARD_INFLIGHT; i++) {
        pthread_join(th[i], NULL);
        ok += cl[i].status == 204;
    }
    CHECK(ok == E2B_GUARD_INFLIGHT);
    e2b_guard_unregister(g, tok);
    e2b_guard_stop(g);
}

/* The stream parser in sink mode hands decoded output over and has no total budget. */
struct got {
    size_t out, err;
    int64_t pid;
};
static void sink(void *ctx, int which, const uint8_t *p, size_t n)
{
    (void)p;
    struct got *g = ctx;
    *(which ? &g->err : &g->out) += n;
}
static void started(void *ctx, int64_t pid)
{
    ((struct got *)ctx)->pid = pid;
}
static void test_stream_sink(void)
{
    struct e2b_stream s;
    struct got g = {0, 0, -1};
    e2b_stream_init(&s, 0);
    s.sink = sink, s.on_start = started, s.sink_ctx = &g;
    uint8_t buf[512];
    size_t n = env_frame(buf, 0, "{\"event\":{\"start\":{\"pid\":42}}}");
    CHECK(e2b_stream_feed(&s, buf, n) == 0 && g.pid == 42);
    n = env_frame(buf, 0, "{\"event\":{\"data\":{\"stdout\":\"aGVsbG8=\"}}}");
    CHECK(e2b_stream_feed(&s, buf, n) == 0 && g.out == 5 && s.out.len == 0);
    n = env_frame(buf, 0, "{\"event\":{\"data\":{\"stderr\":\"eA==\"}}}");
    CHECK(e2b_stream_feed(&s, buf, n) == 0 && g.err == 1);
    s.total = E2B_STREAM_MAX; /* a long session: no total budget in sink mode */
    n = env_frame(buf, 0, "{\"event\":{\"keepalive\":{}}}");
    CHECK(e2b_stream_feed(&s, buf, n) == 0 && !s.over_budget);
    n = env_frame(buf, 0, "{\"event\":{\"end\":{\"exitCode\":137,\"status\":\"killed\"}}}");
    CHECK(e2b_stream_feed(&s, buf, n) == 0 && s.ended && s.exit_code == 137);
    e2b_stream_done(&s);
}

int main(void)
{
    test_stream();
    test_stream_sink();
    test_guard_parse();
    test_urls();
    test_paths();
    test_guard_listener();
    test_guard_lend();
    test_guard_capacity();
    return unit_done();
}
