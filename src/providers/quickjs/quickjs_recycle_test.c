/* quickjs_recycle_test.c: the zygote is replaced after its fork budget or its age (issue 12,
 * finding 4), with runs going on meanwhile, and the two variables that set the bounds refuse
 * malformed values by name. Tests only. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "qjs_int.h"
#include "quickjs.h"
#include "quickjs_test_util.h"
#include "unit.h"

int qjs_recycle_tests(const char *worker);

static const char *fake_env[2][2];

static char *fake_get(const char *name)
{
    for (int i = 0; i < 2; i++)
        if (fake_env[i][0] && strcmp(fake_env[i][0], name) == 0)
            return (char *)fake_env[i][1];
    return NULL;
}

static int parse(const char *forks, const char *age, struct qjs_config *c, struct plm_err *err)
{
    fake_env[0][0] = "SANDBOX_QUICKJS_ZYGOTE_FORKS", fake_env[0][1] = forks;
    fake_env[1][0] = "SANDBOX_QUICKJS_ZYGOTE_AGE_S", fake_env[1][1] = age;
    memset(c, 0, sizeof *c);
    memset(err, 0, sizeof *err);
    return qjs_config_from_env(c, fake_get, err);
}

static void test_env(void)
{
    struct qjs_config c;
    struct plm_err err;
    CHECK(parse(NULL, NULL, &c, &err) == 0 && c.zygote_forks == 0 && c.zygote_age_s == 0); /* defaults */
    CHECK(parse("", "", &c, &err) == 0 && c.zygote_forks == 0 && c.zygote_age_s == 0);
    CHECK(parse("7", "30", &c, &err) == 0 && c.zygote_forks == 7 && c.zygote_age_s == 30);
    CHECK(parse("1000000", "86400", &c, &err) == 0 && c.zygote_forks == 1000000 && c.zygote_age_s == 86400);
    const char *bad[] = {"0", "-1", "abc", "1e3", " 5", "5 ", "1000001", "99999999999", "0x10", "+3"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        CHECK(parse(bad[i], NULL, &c, &err) < 0 && err.kind == PLM_E_INVALID &&
              strstr(err.msg, "SANDBOX_QUICKJS_ZYGOTE_FORKS") != NULL);
        CHECK(parse(NULL, bad[i], &c, &err) < 0 && strstr(err.msg, "SANDBOX_QUICKJS_ZYGOTE_AGE_S") != NULL);
    }
    CHECK(parse(NULL, "86401", &c, &err) < 0);
    printf("# malformed: %s\n", err.msg);
}

struct burst {
    struct plm_provider *p;
    int ok, bad;
};

static void *burst_main(void *arg)
{
    struct burst *b = arg;
    for (int i = 0; i < 15; i++) {
        struct run r;
        char code[64];
        snprintf(code, sizeof code, "console.log(%d * 2)", i);
        run_on(b->p, code, 5000, PLM_TIER_NONE, &r);
        char want[16];
        snprintf(want, sizeof want, "%d\n", i * 2);
        if (r.rc == 0 && r.res.js.exit_code == 0 && strcmp(out_of_copy(&r), want) == 0)
            b->ok++;
        else
            b->bad++;
        if (r.rc == 0)
            plm_result_done(&r.res);
    }
    return NULL;
}

/* Fork budget 3: sequential and concurrent runs all succeed across many zygotes. */
static void test_forks(const char *worker)
{
    struct plm_err err = {0};
    struct qjs_config cfg = {.pool_size = 2, .worker_path = worker, .zygote_forks = 3};
    struct plm_provider *p = qjs_provider_new(&cfg, &err);
    CHECK(p != NULL && p->ops->smoke_test(p, &err) == 0);
    if (!p)
        return;
    struct qjs_pool *pool = qjs_provider_pool(p);
    pid_t z0 = qjs_pool_zygote_pid(pool);
    uint64_t r0 = qjs_pool_recycled(pool);
    int ok = 0;
    for (int i = 0; i < 12; i++) {
        struct run r;
        run_on(p, "console.log('r')", 5000, PLM_TIER_NONE, &r);
        ok += r.rc == 0 && r.res.js.exit_code == 0 && strcmp(out_of(&r), "r\n") == 0;
        if (r.rc == 0)
            plm_result_done(&r.res);
    }
    CHECK(ok == 12);
    CHECK(qjs_pool_recycled(pool) >= r0 + 3 && qjs_pool_zygote_pid(pool) != z0);
    /* Runs in flight while zygotes come and go: none is dropped. */
    struct burst b[4];
    pthread_t t[4];
    for (int i = 0; i < 4; i++) {
        b[i] = (struct burst){.p = p};
        pthread_create(&t[i], NULL, burst_main, &b[i]);
    }
    int total_ok = 0, total_bad = 0;
    for (int i = 0; i < 4; i++) {
        pthread_join(t[i], NULL);
        total_ok += b[i].ok;
        total_bad += b[i].bad;
    }
    CHECK(total_ok == 60 && total_bad == 0);
    printf("# fork budget 3: %llu zygotes retired, concurrent runs %d ok %d failed\n",
           (unsigned long long)(qjs_pool_recycled(pool) - r0), total_ok, total_bad);
    CHECK(p->ops->preflight(p, &err) == 0);
    plm_provider_free(p);
}

/* Age 1 s: an idle pool replaces its zygote (and its ready workers) on time. */
static void test_age(const char *worker)
{
    struct plm_err err = {0};
    struct qjs_config cfg = {.pool_size = 2, .worker_path = worker, .zygote_age_s = 1};
    struct plm_provider *p = qjs_provider_new(&cfg, &err);
    CHECK(p != NULL && p->ops->smoke_test(p, &err) == 0); /* a card proven across recycles */
    if (!p)
        return;
    struct qjs_pool *pool = qjs_provider_pool(p);
    pid_t z0 = qjs_pool_zygote_pid(pool);
    uint64_t r0 = qjs_pool_recycled(pool);
    usleep(2600 * 1000);
    CHECK(qjs_pool_recycled(pool) >= r0 + 2 && qjs_pool_zygote_pid(pool) != z0 && qjs_pool_zygote_pid(pool) > 0);
    struct run r;
    run_on(p, "console.log('aged')", 5000, PLM_TIER_NONE, &r);
    CHECK(r.rc == 0 && strcmp(out_of(&r), "aged\n") == 0);
    if (r.rc != 0)
        printf("# run after ageing: %s\n", r.err.msg);
    if (r.rc == 0)
        plm_result_done(&r.res);
    printf("# age 1 s: %llu zygotes retired in 2.6 s idle\n", (unsigned long long)(qjs_pool_recycled(pool) - r0));
    plm_provider_free(p);
}

int qjs_recycle_tests(const char *worker)
{
    test_env();
    test_forks(worker);
    test_age(worker);
    return unit_failed;
}
