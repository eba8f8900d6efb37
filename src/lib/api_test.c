/* api_test.c: the public API (include/plimsoll.h) over the fake daemons of placement_fake.c: a pool
 * placing snippets, projects and modules (status, backend, refusals before the answer), the
 * distinct error kinds (a refusal, an evidence mismatch, an invalid argument that sends nothing),
 * Describe, and a session placed once whose cells chain and whose close checks. The pool's
 * transport is set through api.h, the one seam a test has that a user has not. */
#include <stdlib.h>
#include <string.h>

#include "api.h"
#include "placement_fake.h"
#include "unit.h"

static struct fake_net net;

static plimsoll_client *pool_over(struct fake *f, size_t n)
{
    fake_net_init(&net, f, n);
    plimsoll_client *c = plimsoll_pool_new();
    c->pool.transport = &net.t;
    char err[256];
    for (size_t i = 0; i < n; i++)
        if (plimsoll_pool_add(c, f[i].url + 7, f[i].url, "tok", NULL, err, sizeof err) < 0)
            printf("# add: %s\n", err);
    return c;
}

static void test_runs_and_kinds(void)
{
    struct fake f[] = {{.url = "http://busy", .provider = "docker", .isolation = "container", .project = true,
                        .answer = FAKE_REFUSE, .reason = PLM_REFUSAL_CAPACITY},
                       {.url = "http://vm", .provider = "microvm", .isolation = "vm", .project = true,
                        .module = true}};
    plimsoll_client *c = pool_over(f, 2);
    plimsoll_result *r = NULL;
    plimsoll_snippet s = {.code = "1", .minimum_isolation = "container"};
    CHECK(plimsoll_run_snippet(c, &s, NULL, &r) == PLIMSOLL_OK);
    CHECK_STR(plimsoll_result_backend(r), "vm");
    CHECK(plimsoll_result_refused_count(r) == 1);
    CHECK_STR(plimsoll_result_refused_backend(r, 0), "busy");
    CHECK_STR(plimsoll_result_refused_why(r, 0), "refused: capacity");
    CHECK(plimsoll_result_record_checked(r) == 1);
    CHECK_STR(plimsoll_result_isolation(r), "vm");
    size_t n = 0;
    const uint8_t *out = plimsoll_result_stdout(r, &n);
    CHECK(out && n == strlen("http://vm") && memcmp(out, "http://vm", n) == 0);
    char *json = plimsoll_result_json(r);
    CHECK(json && strstr(json, "\"record\""));
    plimsoll_free(json);
    plimsoll_result_free(r);

    CHECK(plimsoll_run_project(c, "{\"steps\":[\"true\"]}", NULL, 0, NULL, &r) == PLIMSOLL_OK);
    CHECK_STR(plimsoll_result_backend(r), "vm");
    plimsoll_result_free(r);
    CHECK(plimsoll_run_module(c, "{\"model\":\"m\"}", NULL, 0, NULL, &r) == PLIMSOLL_OK);
    plimsoll_result_free(r);

    /* A refusal (nothing ran) and an evidence mismatch (may have run) are distinct kinds. */
    f[1].answer = FAKE_DOWNGRADE;
    CHECK(plimsoll_run_snippet(c, &(plimsoll_snippet){.code = "1", .minimum_isolation = "vm"}, NULL, &r) ==
          PLIMSOLL_EVIDENCE_MISMATCH);
    CHECK(plimsoll_result_record_checked(r) == 1 && plimsoll_result_refusal(r) == NULL);
    CHECK(plimsoll_result_stdout(r, &n) != NULL); /* the record checked: the output is the daemon's */
    plimsoll_result_free(r);
    f[1].answer = FAKE_REFUSE;
    f[1].reason = PLM_REFUSAL_PERMISSION;
    CHECK(plimsoll_run_snippet(c, &s, NULL, &r) == PLIMSOLL_REFUSED);
    CHECK_STR(plimsoll_result_refusal(r), "permission");
    CHECK(plimsoll_result_stdout(r, &n) == NULL);
    plimsoll_result_free(r);

    /* Judged here, nothing sent. */
    int runs = f[0].runs + f[1].runs;
    CHECK(plimsoll_run_snippet(c, &(plimsoll_snippet){.code = "1", .minimum_isolation = "none"}, NULL, &r) ==
          PLIMSOLL_INVALID);
    CHECK(plimsoll_result_not_sent(r));
    plimsoll_result_free(r);
    CHECK(plimsoll_run_project(c, "{\"steps\":", NULL, 0, NULL, &r) == PLIMSOLL_INVALID);
    CHECK(strstr(plimsoll_result_message(r), "does not decode") != NULL);
    plimsoll_result_free(r);
    CHECK(plimsoll_run_snippet(c, &(plimsoll_snippet){.code = "1", .grant_profile = "bad name"}, NULL, NULL) ==
          PLIMSOLL_INVALID);
    /* A floor no backend states: the library's refusal, naming each backend. */
    CHECK(plimsoll_run_module(c, "{\"model\":\"m\"}", "vm", 0, &(plimsoll_requirement){.provider = "docker"}, &r) ==
          PLIMSOLL_REFUSED);
    CHECK(plimsoll_result_not_sent(r) && strstr(plimsoll_result_message(r), "busy:"));
    plimsoll_result_free(r);
    CHECK(f[0].runs + f[1].runs == runs);
    plimsoll_client_free(c);
}

static int strongest(const plimsoll_info *a, const plimsoll_info *b, void *ctx)
{
    (void)ctx;
    return (int)tier_parse(plimsoll_info_isolation(b)) - (int)tier_parse(plimsoll_info_isolation(a));
}

static void test_describe_prefer_and_session(void)
{
    struct fake f[] = {{.url = "http://plain", .provider = "quickjs", .isolation = "process"},
                       {.url = "http://box", .provider = "docker", .isolation = "container", .sessions = true}};
    plimsoll_client *c = pool_over(f, 2);
    CHECK(plimsoll_client_backends(c) == 2);
    CHECK_STR(plimsoll_client_backend_name(c, 1), "box");
    plimsoll_info *d = NULL;
    CHECK(plimsoll_describe(c, 1, &d, NULL) == PLIMSOLL_OK);
    CHECK_STR(plimsoll_info_provider(d), "docker");
    CHECK(plimsoll_info_supports(d, "session") && !plimsoll_info_supports(d, "module"));
    plimsoll_info_free(d);
    plimsoll_result *r = NULL;
    plimsoll_requirement pref = {.prefer = strongest};
    CHECK(plimsoll_run_snippet(c, &(plimsoll_snippet){.code = "1"}, &pref, &r) == PLIMSOLL_OK);
    CHECK_STR(plimsoll_result_backend(r), "box");
    plimsoll_result_free(r);

    plimsoll_session *s = NULL;
    plimsoll_result *opened = NULL;
    CHECK(plimsoll_session_open(c, "javascript", NULL, 0, NULL, &s, &opened) == PLIMSOLL_OK);
    CHECK_STR(plimsoll_result_backend(opened), "box");
    plimsoll_result_free(opened);
    CHECK_STR(plimsoll_session_backend(s), "box");
    char *out = NULL, *report = NULL;
    CHECK(plimsoll_session_cell(s, "console.log(1)", &out, &report) == PLIMSOLL_OK);
    CHECK_STR(out, "console.log(1)");
    CHECK(report && strstr(report, "chain ok"));
    plimsoll_free(out);
    plimsoll_free(report);
    CHECK(plimsoll_session_cell(s, "2", NULL, NULL) == PLIMSOLL_OK);
    CHECK(f[1].session_calls == 2 && f[0].opens == 0);
    CHECK(plimsoll_session_close(s, &report) == PLIMSOLL_OK);
    CHECK(report && strstr(report, "2 calls"));
    plimsoll_free(report);
    plimsoll_client_free(c);

    /* No backend with sessions: refused before anything is sent. */
    c = pool_over(f, 1);
    CHECK(plimsoll_session_open(c, "javascript", NULL, 0, NULL, &s, &opened) == PLIMSOLL_REFUSED);
    CHECK(s == NULL && strstr(plimsoll_result_message(opened), "does not support sessions"));
    plimsoll_result_free(opened);
    plimsoll_client_free(c);
}

static void test_one_daemon(void)
{
    char err[256];
    CHECK(plimsoll_client_new("ftp://x", NULL, NULL, err, sizeof err) == NULL && strstr(err, "http"));
    struct fake f[] = {{.url = "http://one", .provider = "docker", .isolation = "container"}};
    fake_net_init(&net, f, 1);
    plimsoll_client *c = plimsoll_client_new("http://one", "tok-1", NULL, err, sizeof err);
    /* A one-daemon client sends without describing first. */
    c->pool.b[0].conn.transport = &net.t;
    plimsoll_result *r = NULL;
    CHECK(plimsoll_run_snippet(c, &(plimsoll_snippet){.code = "1"}, NULL, &r) == PLIMSOLL_OK);
    CHECK(f[0].describes == 0 && f[0].runs == 1);
    CHECK_STR(f[0].last_token, "tok-1");
    CHECK_STR(plimsoll_status_name(plimsoll_result_status(r)), "ok");
    plimsoll_result_free(r);
    CHECK(plimsoll_pool_add(c, "x", "http://x", NULL, NULL, err, sizeof err) == -1);
    plimsoll_client_free(c);
}

int main(void)
{
    test_runs_and_kinds();
    test_describe_prefer_and_session();
    test_one_daemon();
    return unit_done();
}
