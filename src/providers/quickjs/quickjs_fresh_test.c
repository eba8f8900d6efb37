/* quickjs_fresh_test.c: every run gets an engine no other run touched (called from
 * quickjs_test.c's main, with its provider). The engine is built once in the zygote and each
 * worker inherits a copy-on-write copy (docs/quickjs.md), so what one run does to globals,
 * builtins or Math.random's generator must never show in another, and nothing per-process
 * (Math.random's seed, performance.timeOrigin) may be the zygote's. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../core/provider.h"

/* Returns the number of failed checks; quickjs_test.c's main CHECKs that it is 0 (unit.h's
 * counters are per translation unit, so this file reports through its return value). */
int qjs_fresh_tests(struct plm_provider *p);

static int failed;

#define CHECK(cond)                                                                    \
    do {                                                                               \
        if (!(cond)) {                                                                 \
            failed++;                                                                  \
            printf("# fresh: not ok - %s (%s:%d)\n", #cond, __FILE__, __LINE__);       \
        }                                                                              \
    } while (0)

#define CHECK_STR(a, b)                                                                \
    do {                                                                               \
        if (strcmp((a), (b)) != 0) {                                                   \
            failed++;                                                                  \
            printf("# fresh: not ok - \"%s\" vs \"%s\" (%s:%d)\n", (a), (b), __FILE__, __LINE__); \
        }                                                                              \
    } while (0)

/* Runs code (exit 0 expected) and returns its stdout, malloc'd. */
static char *run_out(struct plm_provider *p, const char *code)
{
    struct plm_request req = {.protocol = 3, .kind = PLM_KIND_JAVASCRIPT};
    req.js.code = code;
    struct plm_run_ctx ctx = {.caller = "", .timeout_ms = 5000, .floor = PLM_TIER_UNKNOWN};
    struct plm_result res;
    struct plm_err err = {0};
    memset(&res, 0, sizeof res);
    int rc = p->ops->run_javascript(p, &ctx, &req, &res, &err);
    CHECK(rc == 0 && res.js.exit_code == 0);
    size_t n = rc == 0 ? res.js.out.len : 0;
    char *s = malloc(n + 1);
    if (!s)
        abort();
    memcpy(s, n ? (const char *)res.js.out.data : "", n);
    s[n] = 0;
    if (rc == 0)
        plm_result_done(&res);
    return s;
}

static void expect(struct plm_provider *p, const char *code, const char *want)
{
    char *got = run_out(p, code);
    CHECK_STR(got, want);
    free(got);
}

/* What run 1 leaves behind (globals, bindings, patched builtins and prelude objects, pending
 * timers) is absent in run 2, which sees the pristine engine. */
static void test_no_shared_state(struct plm_provider *p)
{
    expect(p,
           "setTimeout(() => {}, 1e6).unref(); globalThis.leak = 42; var leakVar = 1; let leakLet = 2;"
           "process.stdout.write(typeof leak + ' ' + leakVar + ' ' + leakLet + '\\n');"
           "Object.prototype.polluted = 'yes'; Array.prototype.push = null; JSON.stringify = () => 'hacked';"
           "console.log = () => {};",
           "number 1 2\n");
    expect(p,
           "console.log(typeof leak, typeof leakVar, typeof leakLet, ({}).polluted,"
           " typeof [].push, JSON.stringify({a: 1}))",
           "undefined undefined undefined undefined function {\"a\":1}\n");
}

/* Math.random is seeded per worker: two runs in a row, and twenty runs, never repeat a sequence
 * (the engine every worker inherits has one generator state). It still looks like the builtin. */
static void test_random_per_run(struct plm_provider *p)
{
    const char *code = "console.log(Array.from({length: 4}, () => Math.random()).join(','))";
    char *a = run_out(p, code), *b = run_out(p, code);
    CHECK(strlen(a) > 10 && strcmp(a, b) != 0);
    free(a);
    free(b);

    char *first[20];
    for (int i = 0; i < 20; i++)
        first[i] = run_out(p, "console.log(Math.random())");
    int repeats = 0;
    for (int i = 0; i < 20; i++)
        for (int j = i + 1; j < 20; j++)
            repeats += strcmp(first[i], first[j]) == 0;
    CHECK(repeats == 0);
    for (int i = 0; i < 20; i++)
        free(first[i]);

    expect(p,
           "const d = Object.getOwnPropertyDescriptor(Math, 'random'); let ok = true;"
           "for (let i = 0; i < 10000; i++) { const x = Math.random(); if (!(x >= 0 && x < 1)) ok = false; }"
           "console.log(Math.random.name, Math.random.length, d.writable, d.enumerable, d.configurable, ok,"
           " String(Math.random).includes('[native code]'))",
           "random 0 true false true true true\n");
}

/* performance.timeOrigin is this run's, not the zygote's (which evaluated the prelude seconds
 * earlier): origin + now() is the wall clock. */
static void test_time_origin(struct plm_provider *p)
{
    expect(p, "console.log(Math.abs(performance.timeOrigin + performance.now() - Date.now()) < 250)", "true\n");
}

int qjs_fresh_tests(struct plm_provider *p)
{
    failed = 0;
    test_no_shared_state(p);
    test_random_per_run(p);
    test_time_origin(p);
    return failed;
}
