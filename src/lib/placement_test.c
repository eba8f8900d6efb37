/* placement_test.c: placement over fake daemons (placement_fake.c), the cases of the reference's
 * placement tests in this library's terms: filtering by Describe, the retry matrix, a credential
 * per backend, prefer, the floor stamped on the wire, sessions placed once, Describe refreshed
 * after the TTL (an injected clock). */
#include <stdlib.h>
#include <string.h>

#include "placement_fake.h"
#include "unit.h"

static double clock_now;
static double fake_clock(void *ctx)
{
    (void)ctx;
    return clock_now;
}

static struct fake_net net;

/* A pool over fakes f[0..n), each with the token "token-<url>". */
static void pool_of(struct plc_pool *p, struct fake *f, size_t n)
{
    fake_net_init(&net, f, n);
    plc_pool_init(p);
    p->transport = &net.t;
    p->now = fake_clock;
    for (size_t i = 0; i < n; i++) {
        char tok[64];
        snprintf(tok, sizeof tok, "token-%s", f[i].url + 7);
        struct plm_err err = {0};
        int r = plc_pool_add(p, f[i].url + 7, f[i].url, tok, NULL, &err);
        if (r < 0)
            printf("# add: %s\n", err.msg);
    }
}

static int send_js(const struct cli_conn *conn, const char *floor, void *ctx, struct cli_run_call *call)
{
    const char *grant = ctx;
    return cli_run_javascript(conn, "1", grant, floor, 0, call);
}

static int send_project(const struct cli_conn *conn, const char *floor, void *ctx, struct cli_run_call *call)
{
    (void)ctx;
    Plimsoll__V1__ProjectRun pr = PLIMSOLL__V1__PROJECT_RUN__INIT;
    char *steps[1] = {"true"};
    pr.steps = steps;
    pr.n_steps = 1;
    return cli_run_project(conn, &pr, floor, 0, call);
}

static int send_module(const struct cli_conn *conn, const char *floor, void *ctx, struct cli_run_call *call)
{
    (void)ctx;
    Plimsoll__V1__ModuleRun mr = PLIMSOLL__V1__MODULE_RUN__INIT;
    mr.model = "m";
    return cli_run_module(conn, &mr, floor, 0, call);
}

/* One snippet through the pool: the verdict, the backend that answered in *on. */
static enum cli_verdict run_js(struct plc_pool *p, const char *floor, const struct plc_requirement *req,
                               struct plc_choice *c)
{
    struct cli_run_call call;
    plc_run(p, PLC_JAVASCRIPT, floor, req, send_js, NULL, &call, c);
    enum cli_verdict v = call.o.verdict;
    cli_run_call_done(&call);
    return v;
}

static void test_filter(void)
{
    struct fake f[] = {{.url = "http://container", .provider = "docker", .isolation = "container"},
                       {.url = "http://vm", .provider = "microvm", .isolation = "vm"}};
    struct plc_pool p;
    pool_of(&p, f, 2);
    struct plc_choice c;
    CHECK(run_js(&p, "vm", &(struct plc_requirement){.min_isolation = "vm"}, &c) == CLI_V_RAN);
    CHECK_STR(c.backend, "vm");
    CHECK(f[0].runs == 0); /* a vm floor never sends to the container backend */
    CHECK(c.n_skipped == 1 && strstr(c.skipped[0].why, "below the floor vm"));
    CHECK(run_js(&p, "", &(struct plc_requirement){.provider = "microvm"}, &c) == CLI_V_RAN);
    CHECK_STR(c.backend, "vm");
    /* A named backend that cannot take the request is refused here, not replaced. */
    struct cli_run_call call;
    int r = plc_run(&p, PLC_JAVASCRIPT, "", &(struct plc_requirement){.backend = "container", .min_isolation = "vm"},
                    send_js, NULL, &call, &c);
    CHECK(r == -1 && call.o.verdict == CLI_V_REFUSED && call.o.refusal == PLM_REFUSAL_ISOLATION);
    CHECK(strstr(call.o.message, "container: isolation container is below the floor vm") != NULL);
    CHECK(f[1].runs == 2 && f[0].runs == 0);
    cli_run_call_done(&call);
    r = plc_run(&p, PLC_JAVASCRIPT, "", &(struct plc_requirement){.backend = "nosuch"}, send_js, NULL, &call, &c);
    CHECK(r == -1 && call.o.verdict == CLI_V_REFUSED && strstr(call.o.message, "no backend is named nosuch"));
    plc_pool_done(&p);
}

static void test_support_and_environment(void)
{
    struct fake f[] = {{.url = "http://wasm", .provider = "quickjs", .isolation = "process", .js_grants = true,
                        .env_identity = "quickjs:1"},
                       {.url = "http://docker", .provider = "docker", .isolation = "container", .project = true,
                        .module = true, .project_grants = true, .env_identity = "docker-image:1"}};
    struct plc_pool p;
    pool_of(&p, f, 2);
    struct plc_choice c;
    struct cli_run_call call;
    plc_run(&p, PLC_PROJECT, "", &(struct plc_requirement){0}, send_project, NULL, &call, &c);
    CHECK(call.o.verdict == CLI_V_RAN);
    CHECK_STR(c.backend, "docker");
    cli_run_call_done(&call);
    plc_run(&p, PLC_MODULE, "", &(struct plc_requirement){0}, send_module, NULL, &call, &c);
    CHECK(call.o.verdict == CLI_V_RAN);
    CHECK_STR(c.backend, "docker");
    cli_run_call_done(&call);
    /* A module run never carries a grant, whatever a backend states. */
    CHECK(plc_run(&p, PLC_MODULE, "", &(struct plc_requirement){.grant_profile = true}, send_module, NULL, &call,
                  &c) == -1);
    cli_run_call_done(&call);
    /* Snippet grants: only the backend that states them. */
    CHECK(run_js(&p, "", &(struct plc_requirement){.grant_profile = true}, &c) == CLI_V_RAN);
    CHECK_STR(c.backend, "wasm");
    /* An environment nobody states keeps none. */
    CHECK(run_js(&p, "", &(struct plc_requirement){.environment = "other:9"}, &c) == CLI_V_REFUSED);
    CHECK(c.backend[0] == '\0');
    CHECK(run_js(&p, "", &(struct plc_requirement){.environment = "docker-image:1"}, &c) == CLI_V_RAN);
    CHECK_STR(c.backend, "docker");
    plc_pool_done(&p);
}

static void retry_case(enum fake_answer first, int reason, bool retried)
{
    struct fake f[] = {{.url = "http://first", .provider = "docker", .isolation = "vm", .answer = first, .reason = reason},
                       {.url = "http://second", .provider = "e2b", .isolation = "vm"}};
    struct plc_pool p;
    pool_of(&p, f, 2);
    struct plc_choice c;
    enum cli_verdict v = run_js(&p, "", &(struct plc_requirement){0}, &c);
    printf("# answer %d reason %d: verdict %s on %s\n", (int)first, reason, cli_verdict_name(v), c.backend);
    CHECK(f[1].runs == (retried ? 1 : 0));
    CHECK_STR(c.backend, retried ? "second" : "first");
    if (retried)
        CHECK(v == CLI_V_RAN && c.n_refused == 1 && strcmp(c.refused[0].backend, "first") == 0);
    else
        CHECK(v != CLI_V_RAN && c.n_refused == 0);
    plc_pool_done(&p);
}

static void test_retry_matrix(void)
{
    retry_case(FAKE_REFUSE, PLM_REFUSAL_CAPACITY, true);
    retry_case(FAKE_REFUSE, PLM_REFUSAL_UNSUPPORTED, true);
    retry_case(FAKE_REFUSE, PLM_REFUSAL_ISOLATION, true);
    retry_case(FAKE_REFUSE, PLM_REFUSAL_PERMISSION, false);
    retry_case(FAKE_REFUSE, PLM_REFUSAL_REQUEST, false);
    retry_case(FAKE_REFUSE, PLM_REFUSAL_PROTOCOL, false);
    retry_case(FAKE_UNMARKED, 0, false);
    retry_case(FAKE_LOST, 0, false); /* the request went out: it may have run */
}

/* A daemon that stopped after its Describe: the connection is refused before any byte of the
 * request, so the next backend is safe; its description is dropped. */
static void test_connection_refused(void)
{
    struct fake f[] = {{.url = "http://first", .provider = "docker", .isolation = "vm"},
                       {.url = "http://second", .provider = "e2b", .isolation = "vm"}};
    struct plc_pool p;
    pool_of(&p, f, 2);
    plc_refresh(&p);
    f[0].answer = FAKE_DOWN;
    struct plc_choice c;
    CHECK(run_js(&p, "", &(struct plc_requirement){0}, &c) == CLI_V_RAN);
    CHECK_STR(c.backend, "second");
    CHECK(c.n_refused == 1 && !c.refused[0].sent && strstr(c.refused[0].why, "not reached"));
    /* The next request describes it again, fails, and skips it without sending. */
    CHECK(run_js(&p, "", &(struct plc_requirement){0}, &c) == CLI_V_RAN);
    CHECK(c.n_refused == 0 && c.n_skipped == 1 && strstr(c.skipped[0].why, "Describe failed"));
    /* Back up: described again (missing description) and used first. */
    f[0].answer = FAKE_OK;
    CHECK(run_js(&p, "", &(struct plc_requirement){0}, &c) == CLI_V_RAN);
    CHECK_STR(c.backend, "first");
    plc_pool_done(&p);
}

static void test_every_backend_refusing(void)
{
    struct fake f[] = {{.url = "http://a", .provider = "docker", .isolation = "vm", .answer = FAKE_REFUSE,
                        .reason = PLM_REFUSAL_CAPACITY},
                       {.url = "http://b", .provider = "e2b", .isolation = "vm", .answer = FAKE_REFUSE,
                        .reason = PLM_REFUSAL_CAPACITY}};
    struct plc_pool p;
    pool_of(&p, f, 2);
    struct plc_choice c;
    struct cli_run_call call;
    CHECK(plc_run(&p, PLC_JAVASCRIPT, "", &(struct plc_requirement){0}, send_js, NULL, &call, &c) == 0);
    CHECK(call.o.verdict == CLI_V_REFUSED && call.o.refusal == PLM_REFUSAL_CAPACITY);
    CHECK_STR(c.backend, "b");
    CHECK(c.n_refused == 1 && strcmp(c.refused[0].backend, "a") == 0);
    cli_run_call_done(&call);
    plc_pool_done(&p);
}

static void test_credential_per_backend(void)
{
    struct fake f[] = {{.url = "http://a", .provider = "docker", .isolation = "vm", .answer = FAKE_REFUSE,
                        .reason = PLM_REFUSAL_CAPACITY},
                       {.url = "http://b", .provider = "e2b", .isolation = "vm"}};
    struct plc_pool p;
    pool_of(&p, f, 2);
    struct plc_choice c;
    CHECK(run_js(&p, "", &(struct plc_requirement){0}, &c) == CLI_V_RAN);
    CHECK_STR(f[0].last_token, "token-a");
    CHECK_STR(f[1].last_token, "token-b");
    plc_pool_done(&p);
}

static int strongest_first(const Plimsoll__V1__DescribeResponse *a, const Plimsoll__V1__DescribeResponse *b, void *ctx)
{
    (void)ctx;
    return (int)tier_parse(b->isolation) - (int)tier_parse(a->isolation);
}

static void test_prefer(void)
{
    struct fake f[] = {{.url = "http://cheap", .provider = "docker", .isolation = "container"},
                       {.url = "http://strong", .provider = "microvm", .isolation = "vm"}};
    struct plc_pool p;
    pool_of(&p, f, 2);
    struct plc_choice c;
    CHECK(run_js(&p, "", &(struct plc_requirement){.prefer = strongest_first}, &c) == CLI_V_RAN);
    CHECK_STR(c.backend, "strong");
    CHECK(run_js(&p, "", &(struct plc_requirement){0}, &c) == CLI_V_RAN);
    CHECK_STR(c.backend, "cheap");
    plc_pool_done(&p);
}

static int open_on(struct plc_pool *p, const char *req_floor, struct cli_session *s, struct plc_choice *c)
{
    FILE *null = fopen("/dev/null", "w");
    *s = (struct cli_session){.language = "javascript", .floor = "", .out = null, .err = null};
    int r = plc_session_open(p, &(struct plc_requirement){.min_isolation = req_floor}, s, NULL, c);
    fclose(null);
    s->out = s->err = NULL;
    return r;
}

static void test_session_placed_once(void)
{
    struct fake f[] = {{.url = "http://plain", .provider = "docker", .isolation = "container"},
                       {.url = "http://sessions", .provider = "docker", .isolation = "container", .sessions = true}};
    struct plc_pool p;
    pool_of(&p, f, 2);
    struct plc_choice c;
    struct cli_session s;
    CHECK(open_on(&p, NULL, &s, &c) == 0);
    CHECK_STR(c.backend, "sessions");
    CHECK_STR(s.conn.url, "http://sessions"); /* every later call goes to this daemon */
    CHECK(f[0].opens == 0 && f[1].opens == 1);
    plc_pool_done(&p);
    pool_of(&p, f, 1);
    CHECK(open_on(&p, NULL, &s, &c) == CLI_EXIT_REFUSED);
    CHECK(f[0].opens == 0 && strstr(s.opened.message, "does not support sessions"));
    plc_pool_done(&p);
}

static void test_floor_on_the_wire(void)
{
    struct fake f[] = {{.url = "http://was-vm", .provider = "microvm", .isolation = "vm", .project = true,
                        .module = true, .sessions = true, .answer = FAKE_DOWNGRADE}};
    struct plc_pool p;
    pool_of(&p, f, 1);
    struct plc_requirement vm = {.min_isolation = "vm"};
    struct plc_choice c;
    struct cli_run_call call;
    CHECK(run_js(&p, "", &vm, &c) == CLI_V_EVIDENCE_MISMATCH);
    plc_run(&p, PLC_PROJECT, "", &vm, send_project, NULL, &call, &c);
    CHECK(call.o.verdict == CLI_V_EVIDENCE_MISMATCH);
    cli_run_call_done(&call);
    plc_run(&p, PLC_MODULE, "", &vm, send_module, NULL, &call, &c);
    CHECK(call.o.verdict == CLI_V_EVIDENCE_MISMATCH);
    cli_run_call_done(&call);
    struct cli_session s;
    CHECK(open_on(&p, "vm", &s, &c) == 0);
    CHECK(f[0].n_floors == 4);
    for (size_t i = 0; i < f[0].n_floors; i++)
        CHECK_STR(f[0].floors[i], "vm");
    /* The stronger floor wins, whichever side states it. */
    f[0].n_floors = 0;
    f[0].answer = FAKE_OK;
    CHECK(run_js(&p, "vm", &(struct plc_requirement){.min_isolation = "container"}, &c) == CLI_V_RAN);
    CHECK(f[0].n_floors == 1);
    CHECK_STR(f[0].floors[0], "vm");
    CHECK_STR(c.floor, "vm");
    /* A floor that is not one is refused before anything is sent, not outvoted. */
    f[0].n_floors = 0;
    CHECK(plc_run(&p, PLC_JAVASCRIPT, "bogus", &vm, send_js, NULL, &call, &c) == -1);
    CHECK(call.o.verdict == CLI_V_REFUSED && call.o.refusal == PLM_REFUSAL_REQUEST && f[0].n_floors == 0);
    cli_run_call_done(&call);
    plc_pool_done(&p);
}

static void test_refresh_after_ttl(void)
{
    struct fake f[] = {{.url = "http://d", .provider = "docker", .isolation = "kernel"}};
    struct plc_pool p;
    pool_of(&p, f, 1);
    p.ttl_s = 60;
    clock_now = 1000;
    struct plc_choice c;
    struct plc_requirement kernel = {.min_isolation = "kernel"};
    CHECK(run_js(&p, "", &kernel, &c) == CLI_V_RAN && f[0].describes == 1);
    clock_now = 1059;
    CHECK(run_js(&p, "", &kernel, &c) == CLI_V_RAN && f[0].describes == 1); /* cached */
    /* Its tier drops; after the TTL the new Describe keeps kernel floors off it. */
    f[0].isolation = "container";
    clock_now = 1061;
    CHECK(run_js(&p, "", &kernel, &c) == CLI_V_REFUSED && f[0].describes == 2);
    CHECK(f[0].runs == 2);
    clock_now = 0;
    plc_pool_done(&p);
}

static void test_pool_add(void)
{
    struct plc_pool p;
    plc_pool_init(&p);
    struct plm_err err = {0};
    CHECK(plc_pool_add(&p, "a", "http://x", NULL, NULL, &err) == 0);
    CHECK(plc_pool_add(&p, "a", "http://y", NULL, NULL, &err) == -1 && strstr(err.msg, "named twice"));
    CHECK(plc_pool_add(&p, "b c", "http://y", NULL, NULL, &err) == -1);
    CHECK(plc_pool_add(&p, "b", "ftp://y", NULL, NULL, &err) == -1 && strstr(err.msg, "http"));
    CHECK(plc_retryable(PLM_REFUSAL_CAPACITY) && !plc_retryable(PLM_REFUSAL_ENVIRONMENT) && !plc_retryable(0));
    plc_pool_done(&p);
}

int main(void)
{
    test_filter();
    test_support_and_environment();
    test_retry_matrix();
    test_connection_refused();
    test_every_backend_refusing();
    test_credential_per_backend();
    test_prefer();
    test_session_placed_once();
    test_floor_on_the_wire();
    test_refresh_after_ttl();
    test_pool_add();
    return unit_done();
}
