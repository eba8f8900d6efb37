/* quickjs_grants_test.c: the quickjs grant transport (issue 6, item 4) against a fake host API
 * with the broker's real JS client: JSON on 200, the client's rejection wording, forbidden routes
 * never reaching call(), body passthrough and caps, 300 calls in one run, the deadline passing
 * during a call, a HOST_CALL without a grant, and a run without a grant after one with. Called
 * from quickjs_test.c's main with its provider; reports its failed checks through the return
 * value (unit.h's counters are per translation unit). */
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../broker/broker.h"
#include "../../broker/client_js.h"
#include "../../broker/route.h"
#include "frame.h"
#include "qjs_int.h"
#include "quickjs.h"
#include "quickjs_test_util.h"
#include "unit.h"

int qjs_grant_tests(struct plm_provider *p);

static struct plm_provider *prov;

/* Without a grant neither the client nor the transport exists. */
#define CODE_NO_HOST "console.log(typeof host, typeof __plimsoll_host_send)"

/* The transport's caps are the broker's (frame.h says why each is what it is). */
_Static_assert(QF_HOST_METHOD_MAX == BRK_METHOD_MAX, "method cap");
_Static_assert(QF_HOST_PATH_MAX == BRK_TARGET_MAX, "target cap");
_Static_assert(QF_HOST_BODY_MAX == BRK_BODY_MAX + 1, "body: the broker's cap plus the one byte that says 413");
_Static_assert(QF_HOST_REPLY_MAX == BRK_RESPONSE_MAX, "reply cap");

static void run(const char *code, uint32_t timeout_ms, struct run *r)
{
    run_on(prov, code, timeout_ms, PLM_TIER_UNKNOWN, r);
}

/* ---- grants: the quickjs transport against a fake host API (the broker's contract, without
 * the network) ---- */

struct fake_api {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int calls, inflight;
    bool ended; /* fake_end ran: later and blocked calls answer "grant has ended" */
    /* The last call, as call() received it: */
    char method[64], target[QF_HOST_PATH_MAX + 64];
    uint8_t *body;
    size_t body_len;
    bool body_null;
    /* The script: */
    int status; /* fixed answer... */
    const char *reply;
    size_t reply_len;
    bool echo;  /* ...or 200 {"m": method, "t": target, "n": body bytes} */
    bool block; /* an upstream that never answers (until fake_end) */
};

static void fake_init(struct fake_api *f)
{
    memset(f, 0, sizeof *f);
    pthread_mutex_init(&f->mu, NULL);
    pthread_cond_init(&f->cv, NULL);
}

static void fake_answer(struct fake_api *f, int status, const char *body)
{
    f->status = status;
    f->reply = body;
    f->reply_len = strlen(body);
    f->echo = f->block = false;
}

static void fake_call(void *cb, const char *method, const char *target, const uint8_t *body, size_t len,
                      struct plm_host_reply *out)
{
    struct fake_api *f = cb;
    pthread_mutex_lock(&f->mu);
    f->calls++;
    f->inflight++;
    snprintf(f->method, sizeof f->method, "%s", method);
    snprintf(f->target, sizeof f->target, "%s", target);
    free(f->body);
    f->body = NULL;
    f->body_len = len;
    f->body_null = body == NULL;
    if (len) {
        f->body = malloc(len);
        memcpy(f->body, body, len);
    }
    char tmp[QF_HOST_PATH_MAX + 128];
    const char *txt = f->reply;
    size_t n = f->reply_len;
    int status = f->status;
    if (f->block) {
        /* Like brk_call with an upstream that never answers: it returns when the grant ends
         * (brk_run_end cancels it), answering 502. */
        int64_t until = now_ms() + 20000;
        while (!f->ended && now_ms() < until) {
            struct timespec ts;
            clock_gettime(CLOCK_REALTIME, &ts);
            ts.tv_nsec += 20 * 1000000;
            if (ts.tv_nsec >= 1000000000) {
                ts.tv_sec++;
                ts.tv_nsec -= 1000000000;
            }
            pthread_cond_timedwait(&f->cv, &f->mu, &ts);
        }
        status = 502;
        txt = "host api unavailable\n";
        n = strlen(txt);
    } else if (f->ended) {
        status = 503;
        txt = "host api grant has ended\n";
        n = strlen(txt);
    } else if (f->echo) {
        n = (size_t)snprintf(tmp, sizeof tmp, "{\"m\":\"%s\",\"t\":\"%s\",\"n\":%zu}", method, target, len);
        txt = tmp;
        status = 200;
    }
    out->status = status;
    out->len = n;
    out->body = n ? malloc(n) : NULL;
    if (n)
        memcpy(out->body, txt, n);
    f->inflight--;
    pthread_cond_broadcast(&f->cv);
    pthread_mutex_unlock(&f->mu);
}

/* What grant_end does after run_javascript: refuse later calls, let blocked ones go, wait. */
static void fake_end(struct fake_api *f)
{
    pthread_mutex_lock(&f->mu);
    f->ended = true;
    pthread_cond_broadcast(&f->cv);
    while (f->inflight > 0)
        pthread_cond_wait(&f->cv, &f->mu);
    pthread_mutex_unlock(&f->mu);
}

static void fake_done(struct fake_api *f)
{
    fake_end(f);
    free(f->body);
    pthread_mutex_destroy(&f->mu);
    pthread_cond_destroy(&f->cv);
}

static int fake_calls(struct fake_api *f)
{
    pthread_mutex_lock(&f->mu);
    int n = f->calls;
    pthread_mutex_unlock(&f->mu);
    return n;
}

/* The real client (src/broker/client_js.c) for a few routes, with an optional preamble. */
static char *make_client(const char *preamble)
{
    static const char *specs[] = {"GET /v1/items/*", "POST /v1/items/*", "PUT /v1/items/*", "DELETE /v1/items/*",
                                  "GET /v1/text"};
    struct brk_route routes[5];
    struct plm_err err = {0};
    for (size_t i = 0; i < 5; i++)
        if (brk_route_parse(specs[i], strlen(specs[i]), true, &routes[i], &err) < 0)
            printf("# route %s: %s\n", specs[i], err.msg);
    char *js = brk_client_js_parts("host", routes, 5, preamble);
    for (size_t i = 0; i < 5; i++)
        brk_route_done(&routes[i]);
    return js;
}

static void run_grant(const char *code, uint32_t timeout_ms, struct fake_api *f, const char *client, struct run *r)
{
    memset(r, 0, sizeof *r);
    struct plm_host_api api = {
        .profile = "test", .client_js = client, .node_preload = "", .call = fake_call, .cb_ctx = f};
    struct plm_request req = {.protocol = 3, .kind = PLM_KIND_JAVASCRIPT};
    req.js.code = code;
    req.js.grant_profile = "test";
    struct plm_run_ctx ctx = {.caller = "alice", .timeout_ms = timeout_ms, .floor = PLM_TIER_UNKNOWN, .host_api = &api};
    int64_t t0 = now_ms();
    r->rc = prov->ops->run_javascript(prov, &ctx, &req, &r->res, &r->err);
    r->ms = now_ms() - t0;
    if (r->rc < 0)
        printf("# grant run: %s\n", r->err.msg);
    else if (r->res.js.err.len)
        printf("# grant run stderr: %.*s\n", (int)(r->res.js.err.len < 300 ? r->res.js.err.len : 300),
               (const char *)r->res.js.err.data);
}

static void test_grants(void)
{
    char *client = make_client(NULL);
    CHECK(client != NULL && strlen(client) < QF_CLIENT_MAX);
    if (!client)
        return;
    struct fake_api f;
    struct run r;
    fake_init(&f);

    /* What the guest sees: the frozen client, not the transport. */
    run_grant("console.log(typeof host, typeof __plimsoll_host_send, Object.isFrozen(host), typeof host.get)", 5000, &f,
              client, &r);
    CHECK(r.rc == 0 && r.res.js.exit_code == 0);
    CHECK_STR(out_of(&r), "object undefined true function\n");
    plm_result_done(&r.res);

    /* 200: host.get resolves with the parsed JSON; call() sees the method and target as sent. */
    fake_answer(&f, 200, "{\"id\":\"42\",\"ok\":true}");
    run_grant("host.get('/v1/items/42').then(v => console.log(typeof v, v.id, v.ok))", 5000, &f, client, &r);
    CHECK(r.rc == 0 && r.res.js.exit_code == 0);
    CHECK_STR(out_of(&r), "object 42 true\n");
    CHECK(f.calls == 1);
    CHECK_STR(f.method, "GET");
    CHECK_STR(f.target, "/v1/items/42");
    CHECK(f.body_len == 0 && f.body_null);
    plm_result_done(&r.res);

    /* Not JSON: the text itself; invalid UTF-8 from upstream becomes U+FFFD. */
    fake_answer(&f, 200, "plain \xff text");
    run_grant("host.get('/v1/text').then(v => console.log(v === 'plain \\ufffd text', v.length))", 5000, &f, client,
              &r);
    CHECK_STR(out_of(&r), "true 12\n");
    plm_result_done(&r.res);

    /* 403: rejects with the client's wording. */
    fake_answer(&f, 403, "forbidden by sandbox capability allowlist\n");
    run_grant("host.get('/v1/items/1').then(() => console.log('resolved'),"
              " e => console.log(e instanceof Error, JSON.stringify(e.message)))",
              5000, &f, client, &r);
    CHECK(r.rc == 0 && r.res.js.exit_code == 0);
    CHECK_STR(out_of(&r), "true \"host api 403: forbidden by sandbox capability allowlist\\n\"\n");
    plm_result_done(&r.res);
    /* Unhandled, the rejection ends the run like any other. */
    run_grant("await host.get('/v1/items/1')", 5000, &f, client, &r);
    CHECK(r.rc == 0 && r.res.js.exit_code == 1 && strstr(err_of(&r), "host api 403: forbidden") != NULL);
    plm_result_done(&r.res);

    /* Routes the allowlist forbids never reach call(): the client refuses first. */
    int before = fake_calls(&f);
    run_grant("const m = e => console.log(e.message);"
              "host.get('/v1/admin').catch(m); host.get('/v1/items/%2e%2e').catch(m);"
              "host.get('/v1/items/a/b').catch(m); host.call('PATCH', '/v1/items/1').catch(m)",
              5000, &f, client, &r);
    CHECK(r.rc == 0 && r.res.js.exit_code == 0);
    CHECK_STR(out_of(&r), "host api call not permitted by sandbox capability: GET /v1/admin\n"
                          "host api call not permitted by sandbox capability: GET /v1/items/%2e%2e\n"
                          "host api call not permitted by sandbox capability: GET /v1/items/a/b\n"
                          "host api call not permitted by sandbox capability: PATCH /v1/items/1\n");
    CHECK(fake_calls(&f) == before);
    plm_result_done(&r.res);
    /* A target the client lets through but a frame cannot carry (over 8 KiB) is answered 403
     * by the worker itself, as the broker would: still nothing reaches call(). */
    run_grant("host.get('/v1/items/' + 'a'.repeat(9000)).catch(e => console.log(e.message))", 5000, &f, client, &r);
    CHECK_STR(out_of(&r), "host api 403: forbidden by sandbox capability allowlist\n\n");
    CHECK(fake_calls(&f) == before);
    plm_result_done(&r.res);

    /* Body passthrough: JSON.stringify's bytes exactly, UTF-8; none for an undefined body. */
    f.echo = true;
    run_grant("host.post('/v1/items/7', {a: 1, s: '\\u00e9\\u{1F600}', n: null}).then(v => console.log(v.m, v.t, v.n))",
              5000, &f, client, &r);
    CHECK_STR(out_of(&r), "POST /v1/items/7 29\n");
    CHECK_STR(f.method, "POST");
    CHECK(f.body_len == 29 && f.body &&
          memcmp(f.body, "{\"a\":1,\"s\":\"\xc3\xa9\xf0\x9f\x98\x80\",\"n\":null}", 29) == 0);
    plm_result_done(&r.res);
    run_grant("host.put('/v1/items/7').then(v => console.log(v.m, v.n))", 5000, &f, client, &r);
    CHECK_STR(out_of(&r), "PUT 0\n");
    CHECK(f.body_len == 0 && f.body_null);
    plm_result_done(&r.res);
    /* Over 1 MiB: 1 MiB + 1 bytes are carried, so the broker can answer 413 itself. */
    run_grant("host.post('/v1/items/1', 'x'.repeat((1 << 20) + 50)).then(v => console.log(v.n))", 10000, &f, client,
              &r);
    CHECK_STR(out_of(&r), "1048577\n");
    CHECK(f.body_len == QF_HOST_BODY_MAX && f.body && f.body[0] == '"' && f.body[QF_HOST_BODY_MAX - 1] == 'x');
    plm_result_done(&r.res);
    /* A large answer (4 MiB, the cap) arrives whole. */
    {
        size_t big = QF_HOST_REPLY_MAX;
        char *txt = malloc(big + 1);
        memset(txt, 'y', big);
        txt[0] = '"';
        txt[big - 1] = '"';
        txt[big] = 0;
        fake_answer(&f, 200, txt);
        run_grant("host.get('/v1/text').then(v => console.log(v.length))", 10000, &f, client, &r);
        CHECK_STR(out_of(&r), "4194302\n");
        plm_result_done(&r.res);
        /* Over the cap, or a status outside 100..599, breaks provider.h's contract: 502. */
        txt[big - 1] = 'y';
        f.reply_len = big + 1;
        txt[big] = '"';
        run_grant("host.get('/v1/text').catch(e => console.log(e.message))", 10000, &f, client, &r);
        CHECK_STR(out_of(&r), "host api 502: host api unavailable\n\n");
        plm_result_done(&r.res);
        free(txt);
        fake_answer(&f, 700, "{}");
        run_grant("host.get('/v1/text').catch(e => console.log(e.message))", 5000, &f, client, &r);
        CHECK_STR(out_of(&r), "host api 502: host api unavailable\n\n");
        plm_result_done(&r.res);
    }

    /* 300 calls in one run: every one reaches call(), in order. */
    f.echo = true;
    before = fake_calls(&f);
    int64_t t0 = now_ms();
    run_grant("let ok = 0; for (let i = 0; i < 300; i++) { const v = await host.get('/v1/items/' + i);"
              " if (v.t === '/v1/items/' + i) ok++ } console.log(ok)",
              20000, &f, client, &r);
    printf("# 300 host calls in one run: %lld ms\n", (long long)(now_ms() - t0));
    CHECK(r.rc == 0 && r.res.js.exit_code == 0);
    CHECK_STR(out_of(&r), "300\n");
    CHECK(fake_calls(&f) - before == 300);
    plm_result_done(&r.res);

    /* Host calls on the virtual clock: a timer still fires, the call inside it still answers. */
    run_grant("setTimeout(async () => { const v = await host.get('/v1/items/t');"
              " console.log(v.t, performance.now() >= 2000) }, 2000)",
              5000, &f, client, &r);
    CHECK(r.rc == 0 && r.res.js.exit_code == 0 && r.ms < 1500);
    CHECK_STR(out_of(&r), "/v1/items/t true\n");
    plm_result_done(&r.res);

    /* The preamble runs after the client, at global scope; a throwing one is the run's error. */
    char *pre = make_client("var fromPreamble = typeof host;");
    run_grant("console.log(fromPreamble)", 5000, &f, pre, &r);
    CHECK_STR(out_of(&r), "object\n");
    plm_result_done(&r.res);
    free(pre);
    pre = make_client("throw new Error('bad preamble')");
    run_grant("console.log('never')", 5000, &f, pre, &r);
    CHECK(r.rc == 0 && r.res.js.exit_code == 1 && strncmp(err_of(&r), "Uncaught Error: bad preamble", 28) == 0);
    CHECK(r.res.js.out.len == 0);
    plm_result_done(&r.res);
    free(pre);

    /* A run with a grant, then one without: no host, no transport. */
    run(CODE_NO_HOST, 5000, &r);
    CHECK(r.rc == 0);
    CHECK_STR(out_of(&r), "undefined undefined\n");
    plm_result_done(&r.res);
    fake_done(&f);

    /* The deadline passes while call() is blocked upstream: a timed-out result with the output
     * so far, at the deadline (the broker is not waited for), and the call is let go when the
     * grant ends, as grant_end does after the run. */
    fake_init(&f);
    f.block = true;
    run_grant("console.log('before'); host.get('/v1/items/slow').then(() => console.log('answered'))", 500, &f, client,
              &r);
    printf("# deadline during a host call: %lld ms\n", (long long)r.ms);
    CHECK(r.rc == 0 && r.res.js.timed_out && r.res.js.exit_code == 124);
    CHECK_STR(out_of(&r), "before\n");
    CHECK(r.ms >= 450 && r.ms < 1000);
    CHECK(fake_calls(&f) == 1);
    plm_result_done(&r.res);
    fake_done(&f);

    /* A grant name without the capability is a daemon bug: fail closed, nothing runs. */
    {
        struct plm_request req = {.protocol = 3, .kind = PLM_KIND_JAVASCRIPT};
        req.js.code = "console.log(1)";
        req.js.grant_profile = "test";
        struct plm_run_ctx ctx = {.caller = "alice", .timeout_ms = 5000};
        memset(&r, 0, sizeof r);
        r.rc = prov->ops->run_javascript(prov, &ctx, &req, &r.res, &r.err);
        CHECK(r.rc < 0 && r.err.kind == PLM_E_INTERNAL && r.res.js.out.len == 0);
    }
    free(client);
}

struct grant_conc {
    struct fake_api *f;
    const char *client;
    int ok;
};

static void *grant_conc_main(void *arg)
{
    struct grant_conc *g = arg;
    for (int i = 0; i < 10; i++) {
        struct run r;
        run_grant("let n = 0; for (let i = 0; i < 5; i++) n += (await host.get('/v1/items/' + i)).t.length;"
                  " console.log(n)",
                  10000, g->f, g->client, &r);
        g->ok += r.rc == 0 && strcmp(out_of_copy(&r), "55\n") == 0;
        plm_result_done(&r.res);
    }
    return NULL;
}

/* Grant runs from 4 threads at once: each run's calls stay its own. */
static void test_grants_concurrent(void)
{
    char *client = make_client(NULL);
    struct fake_api f;
    fake_init(&f);
    f.echo = true;
    struct grant_conc g[4];
    pthread_t t[4];
    for (int i = 0; i < 4; i++) {
        g[i] = (struct grant_conc){.f = &f, .client = client};
        pthread_create(&t[i], NULL, grant_conc_main, &g[i]);
    }
    int ok = 0;
    for (int i = 0; i < 4; i++) {
        pthread_join(t[i], NULL);
        ok += g[i].ok;
    }
    CHECK(ok == 40 && fake_calls(&f) == 200);
    fake_done(&f);
    free(client);
}

/* A worker that calls the host without a grant (offered the transport, but the run has no
 * api) breaks the protocol: killed at once, an infrastructure error, not a hang. */
static void test_host_call_without_grant(void)
{
    struct qjs_pool *pool = qjs_provider_pool(prov);
    struct plm_js_result res;
    struct plm_err err = {0};
    int64_t ms = 0, t0 = now_ms();
    const char *code = "console.log('x'); __plimsoll_host_send('GET', '/v1/items/1'); console.log('answered')";
    int rc = mon_run_js(pool, code, strlen(code), "", NULL, 5000, &res, &ms, &err);
    printf("# host call without a grant: %s (%lld ms)\n", err.msg, (long long)(now_ms() - t0));
    CHECK(rc < 0 && err.kind == PLM_E_UNAVAILABLE && err.refusal == PLM_REFUSAL_NONE);
    CHECK(strstr(err.msg, "broke the protocol") != NULL);
    CHECK(res.out.len == 0 && now_ms() - t0 < 2000);
    /* A transport offered with an over-cap client is refused before any worker is taken. */
    char *big = malloc(QF_CLIENT_MAX + 2);
    memset(big, ' ', QF_CLIENT_MAX + 1);
    big[QF_CLIENT_MAX + 1] = 0;
    rc = mon_run_js(pool, "1", 1, big, NULL, 5000, &res, &ms, &err);
    CHECK(rc < 0 && err.refusal == PLM_REFUSAL_UNSUPPORTED);
    free(big);
}


int qjs_grant_tests(struct plm_provider *p)
{
    prov = p;
    test_grants();
    test_host_call_without_grant();
    test_grants_concurrent();
    return unit_failed;
}
