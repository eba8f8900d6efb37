/* broker_test.c: the per-run broker against a real loopback upstream (providers.md §5.3, §5.6;
 * §8 items 59-71 plus the attacks of issue 6): what reaches the upstream, what the guest gets
 * back, budgets, concurrency, the breaker, timeouts, End, and the trace. */
#include <jansson.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "broker.h"
#include "test_upstream.h"
#include "unit.h"

static struct tu up;
static const char *TOKEN = "tok-static-5b1e0c9d";
static const char *JWT_KEY = "jwt-signing-key-0123456789abcdef0123";

static const char *fake_getenv(const char *name)
{
    if (strcmp(name, "ACME_TOKEN") == 0)
        return TOKEN;
    if (strcmp(name, "ACME_JWT_KEY") == 0)
        return JWT_KEY;
    return NULL;
}

static uint64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

static void sleep_ms(unsigned ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

/* One profile "acme" on the fake upstream; `fields` follow base_url. */
static struct brk_profiles *load(const char *fields)
{
    char buf[4096];
    snprintf(buf, sizeof buf, "{\"profiles\": {\"acme\": {\"base_url\": \"%s\", %s}}}", up.origin, fields);
    struct plm_err err = {0};
    struct brk_profiles *ps = brk_profiles_parse(buf, strlen(buf), fake_getenv, &err);
    if (!ps)
        printf("# load: %s\n", err.msg);
    return ps;
}

#define STD_FIELDS                                                                                                     \
    "\"allow\": [\"GET /v1/*\", \"GET /v1/items/*\", \"POST /v1/items/*\", \"PUT /v1/items/*\", "                      \
    "\"DELETE /v1/items/*\", \"PATCH /v1/items/*\"], \"allowed_callers\": [\"alice\"], "                               \
    "\"token\": {\"type\": \"static\", \"env\": \"ACME_TOKEN\"}"

static struct brk_profiles *ps_keep; /* the profiles of the current run (freed by done_run) */

static struct brk_run *new_run(const char *fields)
{
    tu_reset(&up);
    ps_keep = load(fields);
    if (!ps_keep)
        return NULL;
    struct plm_err err = {0};
    struct brk_run *r = brk_run_new(&ps_keep->v[0], "alice", 30000, &err);
    if (!r)
        printf("# run: %s\n", err.msg);
    return r;
}

static void done_run(struct brk_run *r)
{
    brk_run_free(r);
    brk_profiles_free(ps_keep);
    ps_keep = NULL;
}

/* A call; returns the status and keeps the last reply for inspection. */
static struct brk_reply last;
static int call(struct brk_run *r, const char *method, const char *target, const char *body)
{
    brk_reply_done(&last);
    brk_call(r, method, target, (const uint8_t *)body, body ? strlen(body) : 0, &last);
    return last.status;
}

static bool body_is(const char *want)
{
    return last.len == strlen(want) && memcmp(last.body, want, last.len) == 0;
}

static bool has_header(const struct tu_req *q, const char *line)
{
    const char *p = q->headers;
    size_t n = strlen(line);
    while (*p) {
        const char *e = strchr(p, '\n');
        size_t l = e ? (size_t)(e - p) : strlen(p);
        if (l == n && memcmp(p, line, n) == 0)
            return true;
        p += l + (e ? 1 : 0);
    }
    return false;
}

static bool has_header_name(const struct tu_req *q, const char *name)
{
    char pre[64];
    snprintf(pre, sizeof pre, "%s:", name);
    const char *p = q->headers;
    while (*p) {
        if (strncmp(p, pre, strlen(pre)) == 0)
            return true;
        const char *e = strchr(p, '\n');
        if (!e)
            break;
        p = e + 1;
    }
    return false;
}

/* Only Host, Accept, Content-Type, Content-Length and Authorization ever reach the upstream. */
static bool only_allowed_headers(const struct tu_req *q)
{
    static const char *ok[] = {"host:", "accept:", "content-type:", "content-length:", "authorization:"};
    const char *p = q->headers;
    while (*p) {
        bool found = false;
        for (size_t i = 0; i < 5; i++)
            found |= strncmp(p, ok[i], strlen(ok[i])) == 0;
        if (!found) {
            printf("# unexpected header: %.40s\n", p);
            return false;
        }
        const char *e = strchr(p, '\n');
        if (!e)
            break;
        p = e + 1;
    }
    return true;
}

static struct brk_trace trace_of(struct brk_run *r)
{
    struct brk_trace t;
    struct plm_err err = {0};
    if (brk_run_trace(r, &t, &err) < 0)
        printf("# trace: %s\n", err.msg);
    return t;
}

static char bearer[256];

/* item 59 and the header contract */
static void t_forwarding(void)
{
    struct brk_run *r = new_run(STD_FIELDS);
    CHECK(r != NULL);
    CHECK(call(r, "post", "/v1/items/42", "{\"a\":1}") == 200);
    CHECK(body_is("{\"ok\":true}"));
    CHECK_STR(last.content_type, "application/json");
    CHECK(tu_count(&up, NULL) == 1);
    const struct tu_req *q = &up.reqs[0];
    CHECK_STR(q->method, "POST");
    CHECK_STR(q->target, "/v1/items/42");
    snprintf(bearer, sizeof bearer, "authorization: Bearer %s", TOKEN);
    CHECK(has_header(q, bearer));
    CHECK(has_header(q, "accept: application/json"));
    CHECK(has_header(q, "content-type: application/json"));
    CHECK(has_header(q, "content-length: 7"));
    CHECK(!has_header_name(q, "cookie") && !has_header_name(q, "expect") && !has_header_name(q, "user-agent"));
    CHECK(only_allowed_headers(q));
    CHECK(q->body_len == 7 && memcmp(q->body, "{\"a\":1}", 7) == 0);
    /* no upstream header reaches the guest: the reply has only status, body and type */
    CHECK(last.body && !memmem(last.body, last.len, "upstream-secret", 15));

    /* GET: no body, no Content-Type */
    CHECK(call(r, "GET", "/v1/items/7", NULL) == 200);
    q = &up.reqs[1];
    CHECK_STR(q->method, "GET");
    CHECK(has_header(q, bearer) && !has_header_name(q, "content-type") && only_allowed_headers(q));
    CHECK(q->body_len == 0);
    /* POST with an empty body: Content-Length 0 and no form Content-Type */
    CHECK(call(r, "POST", "/v1/items/8", NULL) == 200);
    q = &up.reqs[2];
    CHECK(has_header(q, "content-length: 0") && !has_header_name(q, "content-type") && only_allowed_headers(q));
    /* the other methods */
    CHECK(call(r, "put", "/v1/items/9", "[1]") == 200);
    CHECK(call(r, "Patch", "/v1/items/9", "{}") == 200);
    CHECK(call(r, "DELETE", "/v1/items/9", NULL) == 200);
    CHECK_STR(up.reqs[3].method, "PUT");
    CHECK_STR(up.reqs[4].method, "PATCH");
    CHECK_STR(up.reqs[5].method, "DELETE");
    CHECK(up.reqs[5].body_len == 0 && !has_header_name(&up.reqs[5], "content-type"));
    /* a method outside the five, or not allowlisted */
    CHECK(call(r, "TRACE", "/v1/items/9", NULL) == 403);
    CHECK(call(r, "HEAD", "/v1/items/9", NULL) == 403);
    CHECK(call(r, "OPTIONS", "/v1/items/9", NULL) == 403);
    CHECK(call(r, NULL, "/v1/items/9", NULL) == 403);
    CHECK(call(r, "GET", NULL, NULL) == 403);
    CHECK(tu_count(&up, NULL) == 6);

    struct brk_trace t = trace_of(r);
    CHECK(t.n_rows == 6 && t.allowed == 6 && t.denied == 5 && t.shed == 0 && t.dropped == 0);
    if (t.n_rows == 6) {
        CHECK_STR(t.rows[0].route, "/v1/items/*");
        CHECK_STR(t.rows[0].method, "POST");
        CHECK(t.rows[0].seq == 1 && t.rows[0].status == 200 && t.rows[0].delivered);
        CHECK(t.rows[0].req_bytes == 7 && t.rows[0].resp_bytes == 11);
        CHECK_STR(t.rows[1].route, "/v1/items/*"); /* the 2-segment wildcard does not match */
        CHECK_STR(t.rows[1].method, "GET");
        CHECK(t.rows[5].seq == 6);
    }
    brk_trace_done(&t);
    CHECK_STR(brk_run_profile_name(r), "acme");
    done_run(r);
}

/* item 60 and the attacks: nothing malformed reaches the upstream */
static void t_denied_targets(void)
{
    struct brk_run *r = new_run(STD_FIELDS ", \"max_calls\": 1000");
    const char *ten[] = {"/v1/items/a?b", "/v1/items/a#b",  "/v1/items/%78", "/v1/items/%2e%2e",      "/v1/items/..",
                         "/v1//items",    "/v1/items/a\\b", "/v1/items/a b", "/v1/items/caf\xc3\xa9", "/v1/items/[x]"};
    for (int i = 0; i < 10; i++) {
        CHECK(call(r, "GET", ten[i], NULL) == 403);
        CHECK(body_is("forbidden by sandbox capability allowlist\n"));
        CHECK_STR(last.content_type, BRK_CT_TEXT);
    }
    CHECK(tu_count(&up, NULL) == 0);
    struct brk_trace t = trace_of(r);
    CHECK(t.denied == 10 && t.n_rows == 0 && t.allowed == 0 && !brk_trace_empty(&t));
    brk_trace_done(&t);
    const char *more[] = {"/v1/items/%2f",
                          "%2fv1/items/x",
                          "/v1/items/%zz",
                          "/v1/items/..;",
                          "/v1/items/abc;x=1",
                          "/v1/items/...",
                          "/v1/items/a\nb",
                          "/v1/items/a/b",
                          "/v1/items/",
                          "http://127.0.0.1/v1/items/x",
                          "//evil/v1/x",
                          "/v1/items/x\r\nX-Injected: 1",
                          "*",
                          "",
                          "/v1/items/\x7f"};
    for (size_t i = 0; i < sizeof more / sizeof *more; i++)
        CHECK(call(r, "GET", more[i], NULL) == 403);
    CHECK(tu_count(&up, NULL) == 0);
    done_run(r);

    /* item 54: an empty allowlist denies everything */
    r = new_run("\"allow\": [], \"allowed_callers\": [\"alice\"]");
    CHECK(call(r, "GET", "/v1/items/1", NULL) == 403);
    CHECK(tu_count(&up, NULL) == 0);
    done_run(r);
}

/* item 61: a redirect goes back as it is, after one round trip */
static void t_redirect(void)
{
    struct brk_run *r = new_run(STD_FIELDS);
    CHECK(call(r, "GET", "/v1/redirect", NULL) == 302);
    CHECK(body_is("moved"));
    CHECK(tu_count(&up, NULL) == 1);
    done_run(r);
}

/* item 62: the run keeps its own frozen copy of the grant */
static void t_frozen(void)
{
    tu_reset(&up);
    struct brk_profiles *ps1 = load("\"allow\": [\"GET /v1/items/*\"], \"allowed_callers\": [\"alice\"]");
    struct plm_err err = {0};
    struct brk_run *r = brk_run_new(&ps1->v[0], "alice", 5000, &err);
    CHECK(r != NULL);
    brk_profiles_free(ps1); /* the run must not depend on it */
    struct brk_profiles *ps2 = load("\"allow\": [\"GET /v1/items/*\", \"GET /v1/other/*\"], "
                                    "\"allowed_callers\": [\"alice\"]");
    CHECK(call(r, "GET", "/v1/items/1", NULL) == 200);
    CHECK(call(r, "GET", "/v1/other/1", NULL) == 403);
    CHECK(tu_count(&up, NULL) == 1);
    brk_run_free(r);
    brk_profiles_free(ps2);
}

/* items 63 and 65: oversized and endless bodies */
static void t_oversized(void)
{
    struct brk_run *r = new_run(STD_FIELDS);
    CHECK(call(r, "GET", "/v1/big", NULL) == 502);
    CHECK(body_is("host api unavailable\n"));
    CHECK_STR(last.content_type, BRK_CT_TEXT);
    CHECK(call(r, "GET", "/v1/endless", NULL) == 502);
    CHECK(body_is("host api unavailable\n"));
    struct brk_trace t = trace_of(r);
    CHECK(t.n_rows == 2);
    if (t.n_rows == 2) {
        CHECK(t.rows[0].status == 200 && !t.rows[0].delivered && t.rows[0].resp_bytes == 0);
        CHECK(t.rows[1].status == 200 && !t.rows[1].delivered && t.rows[1].resp_bytes == 0);
    }
    brk_trace_done(&t);
    /* a status outside 100..599 */
    CHECK(call(r, "GET", "/v1/status-999", NULL) == 502);
    done_run(r);
}

/* item 64: budgets */
static void t_budget(void)
{
    struct brk_run *r = new_run(STD_FIELDS);
    int ok = 0;
    for (int i = 0; i < 256; i++)
        ok += call(r, "GET", "/v1/items/1", NULL) == 200;
    CHECK(ok == 256);
    CHECK(call(r, "GET", "/v1/items/1", NULL) == 429);
    CHECK(body_is("host api call budget for this run is exhausted\n"));
    CHECK(call(r, "GET", "/v1/items/1?x", NULL) == 429); /* budget before route */
    CHECK(tu_count(&up, NULL) == 256);
    struct brk_trace t = trace_of(r);
    CHECK(t.allowed == 256 && t.denied == 2 && t.n_rows == 256 && t.dropped == 0);
    brk_trace_done(&t);
    done_run(r);

    r = new_run(STD_FIELDS ", \"max_calls\": 5");
    ok = 0;
    CHECK(call(r, "GET", "/v1/items/%2e", NULL) == 403); /* a denied attempt spends budget too */
    for (int i = 0; i < 4; i++)
        ok += call(r, "GET", "/v1/items/1", NULL) == 200;
    CHECK(ok == 4);
    CHECK(call(r, "GET", "/v1/items/1", NULL) == 429);
    CHECK(call(r, "GET", "/v1/items/1", NULL) == 429);
    CHECK(tu_count(&up, NULL) == 4);
    done_run(r);
}

/* item 66: 256 rows, the rest counted */
static void t_trace_cap(void)
{
    struct brk_run *r = new_run(STD_FIELDS ", \"max_calls\": 300");
    for (int i = 0; i < 259; i++)
        call(r, "GET", "/v1/items/1", NULL);
    struct brk_trace t = trace_of(r);
    CHECK(t.n_rows == 256 && t.dropped == 3 && t.allowed == 259);
    if (t.n_rows == 256)
        CHECK(t.rows[0].seq == 1 && t.rows[255].seq == 256);
    brk_trace_done(&t);
    done_run(r);
    /* nothing recorded: an empty trace */
    r = new_run(STD_FIELDS);
    t = trace_of(r);
    CHECK(brk_trace_empty(&t) && t.rows == NULL);
    brk_trace_done(&t);
    done_run(r);
}

/* items 67-70: the circuit breaker */
static void t_breaker(void)
{
    /* 67: no health check; a 503 opens the breaker for its Retry-After */
    struct brk_run *r = new_run(STD_FIELDS);
    CHECK(call(r, "GET", "/v1/busy", NULL) == 503);
    CHECK(body_is("try later"));
    for (int i = 0; i < 3; i++) {
        CHECK(call(r, "GET", "/v1/items/1", NULL) == 503);
        CHECK(body_is("host api is shedding load: upstream reported degraded\n"));
    }
    CHECK(tu_count(&up, NULL) == 1);
    struct brk_trace t = trace_of(r);
    CHECK(t.n_rows == 1 && t.shed == 3 && t.denied == 0);
    if (t.n_rows == 1)
        CHECK(t.rows[0].status == 503 && t.rows[0].delivered);
    brk_trace_done(&t);
    done_run(r);

    /* 68: a healthy probe closes the breaker and the call goes ahead */
    r = new_run(STD_FIELDS ", \"health_check\": \"GET /health\"");
    CHECK(call(r, "GET", "/v1/busy", NULL) == 503);
    CHECK(call(r, "GET", "/v1/items/1", NULL) == 200);
    CHECK(tu_count(&up, "/health") == 1);
    CHECK(tu_count(&up, "/v1/items/1") == 1);
    snprintf(bearer, sizeof bearer, "authorization: Bearer %s", TOKEN);
    CHECK(up.n_reqs >= 2 && has_header(&up.reqs[1], bearer)); /* the probe carries the token */
    t = trace_of(r);
    CHECK(t.n_rows == 2 && t.shed == 0); /* no probe row */
    brk_trace_done(&t);
    done_run(r);

    /* 69: an unhealthy probe: the call is shed, one probe per second at most */
    r = new_run(STD_FIELDS ", \"health_check\": \"GET /health\"");
    up.health_status = 503;
    CHECK(call(r, "GET", "/v1/busy", NULL) == 503);
    CHECK(call(r, "GET", "/v1/items/1", NULL) == 503);
    CHECK(body_is("host api is shedding load: upstream reported degraded\n"));
    CHECK(call(r, "GET", "/v1/items/1", NULL) == 503);
    CHECK(tu_count(&up, "/health") == 1);
    CHECK(tu_count(&up, "/v1/items/1") == 0);
    t = trace_of(r);
    CHECK(t.n_rows == 1 && t.shed == 2);
    brk_trace_done(&t);
    done_run(r);

    /* 70: a 429 is a quota: shed, and never probed even with a healthy check */
    r = new_run(STD_FIELDS ", \"health_check\": \"GET /health\"");
    CHECK(call(r, "GET", "/v1/quota", NULL) == 429);
    CHECK(call(r, "GET", "/v1/items/1", NULL) == 503);
    CHECK(call(r, "GET", "/v1/items/1", NULL) == 503);
    CHECK(tu_count(&up, "/health") == 0);
    CHECK(tu_count(&up, NULL) == 1);
    done_run(r);

    /* Retry-After below 1 s is clamped to 1 s: shed at once, through after the window */
    r = new_run(STD_FIELDS);
    snprintf(up.retry_after, sizeof up.retry_after, "0");
    CHECK(call(r, "GET", "/v1/busy", NULL) == 503);
    uint64_t t0 = now_ms();
    CHECK(call(r, "GET", "/v1/items/1", NULL) == 503);
    CHECK(tu_count(&up, NULL) == 1);
    uint64_t el = now_ms() - t0;
    sleep_ms(el < 1100 ? (unsigned)(1100 - el) : 0);
    CHECK(call(r, "GET", "/v1/items/1", NULL) == 200);
    done_run(r);
}

struct thr {
    struct brk_run *r;
    const char *method, *target;
    int status, late_status;
    atomic_int *done;
    pthread_barrier_t *go;
};

static void *thr_main(void *arg)
{
    struct thr *t = arg;
    if (t->go)
        pthread_barrier_wait(t->go);
    struct brk_reply rep;
    brk_call(t->r, t->method, t->target, NULL, 0, &rep);
    t->status = rep.status;
    brk_reply_done(&rep);
    if (t->done)
        atomic_fetch_add(t->done, 1);
    return NULL;
}

/* item 71: route caps, whatever the order of the allow entries; and under concurrency */
static void t_route_caps(void)
{
    const char *orders[] = {
        "\"allow\": [\"PUT /v1/lights/*\", \"PUT /v1/lights/abc\"], ",
        "\"allow\": [\"PUT /v1/lights/abc\", \"PUT /v1/lights/*\"], ",
    };
    for (int o = 0; o < 2; o++) {
        char f[512];
        snprintf(f, sizeof f, "%s\"route_max_calls\": {\"PUT /v1/lights/abc\": 1}, \"allowed_callers\": [\"alice\"]",
                 orders[o]);
        struct brk_run *r = new_run(f);
        CHECK(call(r, "PUT", "/v1/lights/abc", "{}") == 200);
        CHECK(call(r, "PUT", "/v1/lights/abc", "{}") == 429);
        CHECK(body_is("host api call budget for this route is exhausted\n"));
        CHECK(call(r, "PUT", "/v1/lights/abc", "{}") == 429);
        CHECK(call(r, "PUT", "/v1/lights/xyz", "{}") == 200);
        CHECK(tu_count(&up, "/v1/lights/abc") == 1 && tu_count(&up, NULL) == 2);
        done_run(r);
    }
    /* 16 concurrent calls, cap 5: exactly 5 reach the upstream */
    struct brk_run *r = new_run("\"allow\": [\"PUT /v1/lights/*\"], \"route_max_calls\": {\"PUT /v1/lights/*\": 5}, "
                                "\"allowed_callers\": [\"alice\"]");
    pthread_barrier_t go;
    pthread_barrier_init(&go, NULL, 16);
    struct thr th[16];
    pthread_t tid[16];
    for (int i = 0; i < 16; i++) {
        th[i] = (struct thr){.r = r, .method = "PUT", .target = "/v1/lights/abc", .go = &go};
        pthread_create(&tid[i], NULL, thr_main, &th[i]);
    }
    int n200 = 0, n429 = 0;
    for (int i = 0; i < 16; i++) {
        pthread_join(tid[i], NULL);
        n200 += th[i].status == 200;
        n429 += th[i].status == 429;
    }
    pthread_barrier_destroy(&go);
    CHECK(n200 == 5 && n429 == 11);
    CHECK(tu_count(&up, NULL) == 5);
    done_run(r);
}

/* 64 concurrent calls: 16 slots, the rest refused at once; capacity refusals spend no budget */
static void t_concurrency(void)
{
    struct brk_run *r = new_run(STD_FIELDS ", \"max_calls\": 20");
    tu_set_hold(&up, true);
    atomic_int done = 0;
    struct thr th[64];
    pthread_t tid[64];
    for (int i = 0; i < 64; i++) {
        th[i] = (struct thr){.r = r, .method = "GET", .target = "/v1/slow", .done = &done};
        pthread_create(&tid[i], NULL, thr_main, &th[i]);
    }
    bool sixteen = tu_wait_count(&up, "/v1/slow", 16, 5000);
    for (int w = 0; w < 500 && atomic_load(&done) < 48; w++)
        sleep_ms(10);
    CHECK(sixteen && atomic_load(&done) == 48);
    CHECK(tu_count(&up, "/v1/slow") == 16);
    tu_set_hold(&up, false);
    int n200 = 0, n429 = 0;
    for (int i = 0; i < 64; i++) {
        pthread_join(tid[i], NULL);
        n200 += th[i].status == 200;
        n429 += th[i].status == 429;
    }
    CHECK(n200 == 16 && n429 == 48);
    /* 16 of 20 calls spent: 4 more, then the budget */
    int more = 0;
    for (int i = 0; i < 4; i++)
        more += call(r, "GET", "/v1/items/1", NULL) == 200;
    CHECK(more == 4);
    CHECK(call(r, "GET", "/v1/items/1", NULL) == 429);
    CHECK(body_is("host api call budget for this run is exhausted\n"));
    struct brk_trace t = trace_of(r);
    CHECK(t.allowed == 20 && t.denied == 49);
    brk_trace_done(&t);
    done_run(r);
}

/* an upstream that never answers: the call timeout (shortened here) gives 502 and a status-0 row */
static void t_timeout(void)
{
    struct brk_run *r = new_run(STD_FIELDS);
    brk_run_set_timeouts_for_test(r, 300, 300);
    uint64_t t0 = now_ms();
    CHECK(call(r, "GET", "/v1/hang", NULL) == 502);
    uint64_t el = now_ms() - t0;
    CHECK(el >= 250 && el < 3000);
    CHECK(body_is("host api unavailable\n"));
    struct brk_trace t = trace_of(r);
    CHECK(t.n_rows == 1 && t.rows && t.rows[0].status == 0 && !t.rows[0].delivered);
    brk_trace_done(&t);
    done_run(r);

    /* an unreachable upstream (nothing listens): a transport error, 502 */
    tu_reset(&up);
    struct plm_err err = {0};
    const char *doc = "{\"profiles\": {\"x\": {\"base_url\": \"http://127.0.0.1:1\", "
                      "\"allow\": [\"GET /a\"], \"allowed_callers\": [\"alice\"]}}}";
    struct brk_profiles *ps = brk_profiles_parse(doc, strlen(doc), fake_getenv, &err);
    r = ps ? brk_run_new(&ps->v[0], "alice", 1000, &err) : NULL;
    CHECK(r && call(r, "GET", "/a", NULL) == 502);
    brk_run_free(r);
    brk_profiles_free(ps);
}

/* End refuses later calls and cancels calls in flight */
static void t_end(void)
{
    struct brk_run *r = new_run(STD_FIELDS);
    struct thr th = {.r = r, .method = "GET", .target = "/v1/hang"};
    pthread_t tid;
    pthread_create(&tid, NULL, thr_main, &th);
    CHECK(tu_wait_count(&up, "/v1/hang", 1, 5000));
    uint64_t t0 = now_ms();
    brk_run_end(r);
    uint64_t el = now_ms() - t0;
    pthread_join(tid, NULL);
    CHECK(el <= BRK_END_WAIT_MS + 500);
    CHECK(th.status == 502);
    CHECK(call(r, "GET", "/v1/items/1", NULL) == 503);
    CHECK(body_is("host api grant has ended\n"));
    brk_run_end(r); /* idempotent */
    CHECK(call(r, "GET", "/v1/items/1", NULL) == 503);
    CHECK(tu_count(&up, NULL) == 1);
    struct brk_trace t = trace_of(r);
    CHECK(t.n_rows == 1 && t.denied == 2); /* the trace is complete after End */
    brk_trace_done(&t);
    done_run(r);

    /* no broker at all */
    struct brk_reply rep;
    brk_call(NULL, "GET", "/v1/items/1", NULL, 0, &rep);
    CHECK(rep.status == 503 && rep.len == strlen("host api broker unavailable\n") &&
          memcmp(rep.body, "host api broker unavailable\n", rep.len) == 0);
    brk_reply_done(&rep);
    brk_run_end(NULL);
    brk_run_free(NULL);
}

/* request body limit */
static void t_body_limit(void)
{
    struct brk_run *r = new_run(STD_FIELDS);
    uint8_t *big = malloc(BRK_BODY_MAX + 1);
    memset(big, '7', BRK_BODY_MAX + 1);
    brk_reply_done(&last);
    brk_call(r, "POST", "/v1/items/1", big, BRK_BODY_MAX + 1, &last);
    CHECK(last.status == 413 && body_is("host api request body too large\n"));
    CHECK(tu_count(&up, NULL) == 0);
    brk_reply_done(&last);
    brk_call(r, "POST", "/v1/items/1", big, BRK_BODY_MAX, &last);
    CHECK(last.status == 200);
    CHECK(tu_count(&up, NULL) == 1 && up.reqs[0].body_len == BRK_BODY_MAX);
    CHECK(!has_header_name(&up.reqs[0], "expect"));
    brk_reply_done(&last);
    brk_call(r, "POST", "/v1/items/1", NULL, 5, &last); /* misuse: fails closed */
    CHECK(last.status == 502 && tu_count(&up, NULL) == 1);
    free(big);
    done_run(r);
}

/* the Content-Type the guest sees */
static void t_content_type(void)
{
    struct brk_run *r = new_run(STD_FIELDS);
    CHECK(call(r, "GET", "/v1/ctype-bad", NULL) == 200);
    CHECK_STR(last.content_type, BRK_CT_OCTET);
    CHECK(call(r, "GET", "/v1/no-ctype", NULL) == 200);
    CHECK_STR(last.content_type, BRK_CT_OCTET);
    CHECK(body_is("bare"));
    CHECK(call(r, "GET", "/v1/text", NULL) == 200);
    CHECK_STR(last.content_type, "text/plain");
    CHECK(call(r, "GET", "/v1/nothing-here-404", NULL) == 200); /* /v1/ catch-all */
    done_run(r);
}

static size_t b64url_decode(const char *in, size_t n, unsigned char *out)
{
    size_t o = 0;
    uint32_t acc = 0;
    int bits = 0;
    for (size_t i = 0; i < n; i++) {
        const char *al = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
        const char *p = strchr(al, in[i]);
        if (!p || !in[i])
            return 0;
        acc = acc << 6 | (uint32_t)(p - al);
        bits += 6;
        if (bits >= 8) {
            bits -= 8;
            out[o++] = (unsigned char)(acc >> bits);
        }
    }
    return o;
}

/* credentials: a per-run JWT, no token at all, and refusals at brk_run_new */
static void t_credentials(void)
{
    struct brk_run *r = new_run("\"allow\": [\"GET /v1/items/*\"], \"allowed_callers\": [\"alice\"], "
                                "\"scopes\": [\"items:read\"], \"token\": {\"type\": \"jwt\", "
                                "\"secret_env\": \"ACME_JWT_KEY\", \"issuer\": \"plimsoll\", \"audience\": \"acme\"}");
    CHECK(r != NULL);
    CHECK(call(r, "GET", "/v1/items/1", NULL) == 200);
    CHECK(up.n_reqs == 1);
    const char *auth = up.n_reqs ? strstr(up.reqs[0].headers, "authorization: Bearer ") : NULL;
    CHECK(auth != NULL);
    if (auth) {
        char jwt[2048];
        const char *s = auth + strlen("authorization: Bearer ");
        size_t n = strcspn(s, "\n");
        snprintf(jwt, sizeof jwt, "%.*s", (int)n, s);
        char *d1 = strchr(jwt, '.'), *d2 = strrchr(jwt, '.');
        CHECK(d1 && d2 && d1 != d2);
        if (d1 && d2 && d1 != d2) {
            unsigned char claims[1024], sig[64], mac[EVP_MAX_MD_SIZE];
            size_t cl = b64url_decode(d1 + 1, (size_t)(d2 - d1 - 1), claims);
            json_t *c = json_loadb((const char *)claims, cl, 0, NULL);
            CHECK_STR(json_string_value(json_object_get(c, "sub")), "alice");
            CHECK_STR(json_string_value(json_object_get(c, "scope")), "items:read");
            json_int_t iat = json_integer_value(json_object_get(c, "iat"));
            CHECK(json_integer_value(json_object_get(c, "exp")) == iat + 30); /* the run budget */
            json_decref(c);
            unsigned int ml = 0;
            HMAC(EVP_sha256(), JWT_KEY, (int)strlen(JWT_KEY), (const unsigned char *)jwt, (size_t)(d2 - jwt), mac, &ml);
            CHECK(b64url_decode(d2 + 1, strlen(d2 + 1), sig) == 32 && memcmp(sig, mac, 32) == 0);
        }
    }
    struct plm_err err = {0};
    /* item 55: a subject-bound minter refuses a bad subject before anything else */
    const char *bad[] = {"", "  ", "a\nb"};
    for (int i = 0; i < 3; i++) {
        memset(&err, 0, sizeof err);
        CHECK(brk_run_new(&ps_keep->v[0], bad[i], 1000, &err) == NULL);
        CHECK(err.kind == PLM_E_PERMISSION && err.refusal == PLM_REFUSAL_PERMISSION);
        CHECK(strstr(err.msg, "requires a stable authenticated subject") != NULL);
    }
    CHECK(brk_run_new(&ps_keep->v[0], "mallory", 1000, &err) == NULL);
    CHECK_STR(err.msg, "grant_profile \"acme\" is not available to this caller");
    CHECK(brk_run_new(&ps_keep->v[0], "alice", 0, &err) == NULL && err.kind == PLM_E_INVALID);
    CHECK(brk_run_new(&ps_keep->v[0], "alice", BRK_BUDGET_MS_MAX + 1, &err) == NULL);
    done_run(r);

    /* no token: no Authorization header */
    r = new_run("\"allow\": [\"GET /v1/items/*\"], \"allowed_callers\": [\"alice\"]");
    CHECK(call(r, "GET", "/v1/items/1", NULL) == 200);
    CHECK(up.n_reqs == 1 && !has_header_name(&up.reqs[0], "authorization") && only_allowed_headers(&up.reqs[0]));
    done_run(r);
}

/* A transport thread's hold outlives the owner's free: its call in flight is cancelled, a later
 * call is refused as ended, and the memory goes with the last release (ASan checks the rest). */
static void *held_main(void *arg)
{
    struct thr *th = arg;
    thr_main(th);
    struct brk_reply rep;
    brk_call(th->r, "GET", "/v1/items/1", NULL, 0, &rep);
    th->late_status = rep.status;
    brk_reply_done(&rep);
    brk_run_release(th->r);
    return NULL;
}

static void t_hold(void)
{
    struct brk_run *r = new_run(STD_FIELDS);
    struct thr th = {.r = r, .method = "GET", .target = "/v1/hang"};
    brk_run_hold(r);
    pthread_t tid;
    pthread_create(&tid, NULL, held_main, &th);
    CHECK(tu_wait_count(&up, "/v1/hang", 1, 5000));
    done_run(r); /* the owner lets go while the call hangs upstream */
    pthread_join(tid, NULL);
    CHECK(th.status == 502);
    CHECK(th.late_status == 503);
    CHECK(tu_count(&up, NULL) == 1);
}

int main(void)
{
    /* Proxy variables must be ignored: if they were used, every call would fail. */
    setenv("http_proxy", "http://127.0.0.1:1", 1);
    setenv("HTTP_PROXY", "http://127.0.0.1:1", 1);
    setenv("https_proxy", "http://127.0.0.1:1", 1);
    setenv("ALL_PROXY", "http://127.0.0.1:1", 1);
    setenv("NO_PROXY", "", 1);
    if (tu_start(&up) < 0)
        UNIT_SKIP("cannot listen on 127.0.0.1");
    void (*tests[])(void) = {t_forwarding, t_denied_targets, t_redirect,   t_frozen,      t_oversized, t_budget,
                             t_trace_cap,  t_breaker,        t_route_caps, t_concurrency, t_timeout,   t_end,
                             t_body_limit, t_content_type,   t_credentials, t_hold};
    for (size_t i = 0; i < sizeof tests / sizeof *tests; i++) {
        uint64_t t0 = now_ms();
        tests[i]();
        printf("# test %zu took %llu ms\n", i, (unsigned long long)(now_ms() - t0));
    }
    brk_reply_done(&last);
    tu_stop(&up);
    return unit_done();
}
