/* module_test.c: the module checks of providers.md §3.6 (issue 21), the params.txt form and the
 * PLSM decoder's refusals. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "module.h"
#include "validate.h"
#include "unit.h"

static struct plm_err err;

static int check(const char *model, const struct plm_row *rows, size_t n, double end, double step)
{
    struct plm_request r = {.kind = PLM_KIND_MODULE,
                            .module = {.model = model, .end_time = end, .step = step, .rows = rows, .n_rows = n}};
    memset(&err, 0, sizeof err);
    int rc = plm_validate_payload(&r, &err);
    if (rc < 0 && (err.kind != PLM_E_INVALID || err.refusal != PLM_REFUSAL_REQUEST))
        return 99; /* every refusal must be invalid_argument marked `request` */
    return rc;
}

static void test_checks(void)
{
    double v2[] = {1, 2}, v1[] = {1}, bad[] = {1, NAN}, inf[] = {INFINITY, 1};
    struct plm_row ok[] = {{v2, 2}, {v2, 2}};
    CHECK(check("VanDerPol", ok, 2, 1, 0.1) == 0);
    CHECK(check("a.b_c-1", ok, 1, 1, 0.1) == 0);
    /* model */
    CHECK(check("../x", ok, 1, 1, 0.1) < 0 && strstr(err.msg, "model"));
    CHECK(check("", ok, 1, 1, 0.1) < 0);
    CHECK(check("a/b", ok, 1, 1, 0.1) < 0);
    CHECK(check(".hidden", ok, 1, 1, 0.1) < 0);
    char m64[66];
    memset(m64, 'm', 64);
    m64[64] = 0;
    CHECK(check(m64, ok, 1, 1, 0.1) == 0);
    m64[64] = 'm', m64[65] = 0;
    CHECK(check(m64, ok, 1, 1, 0.1) < 0);
    /* rows: none, ragged, width 0 and 65, not finite */
    CHECK(check("M", ok, 0, 1, 0.1) < 0 && strstr(err.msg, "1 to 100000 rows"));
    struct plm_row ragged[] = {{v2, 2}, {v1, 1}};
    CHECK(check("M", ragged, 2, 1, 0.1) < 0 && strstr(err.msg, "row 2 has 1 values"));
    struct plm_row empty[] = {{v2, 0}};
    CHECK(check("M", empty, 1, 1, 0.1) < 0);
    double *wide = calloc(65, sizeof *wide);
    struct plm_row w64[] = {{wide, 64}}, w65[] = {{wide, 65}};
    CHECK(check("M", w64, 1, 1, 0.1) == 0);
    CHECK(check("M", w65, 1, 1, 0.1) < 0 && strstr(err.msg, "1 to 64"));
    free(wide);
    struct plm_row nan_row[] = {{v2, 2}, {bad, 2}}, inf_row[] = {{inf, 2}};
    CHECK(check("M", nan_row, 2, 1, 0.1) < 0 && strstr(err.msg, "row 2 value 2 is not finite"));
    CHECK(check("M", inf_row, 1, 1, 0.1) < 0);
    /* end_time and step */
    CHECK(check("M", ok, 1, 0, 0.1) < 0 && strstr(err.msg, "end_time"));
    CHECK(check("M", ok, 1, -1, 0.1) < 0);
    CHECK(check("M", ok, 1, INFINITY, 0.1) < 0);
    CHECK(check("M", ok, 1, NAN, 0.1) < 0);
    CHECK(check("M", ok, 1, 1, 0) < 0 && strstr(err.msg, "step"));
    CHECK(check("M", ok, 1, 1, -0.0) < 0);
    CHECK(check("M", ok, 1, 1, NAN) < 0);
    CHECK(check("M", ok, 1, 1e6, 1) == 0);
    CHECK(check("M", ok, 1, 1e6 + 1, 1) < 0 && strstr(err.msg, "at most 1000000"));
    CHECK(check("M", ok, 1, 1, 5e-324) < 0); /* the ratio overflows to inf */
    /* the result bound: 20 + rows x (4 + 8 x (floor(end/step) + 2)) <= 8388608 */
    CHECK(check("M", ok, 1, 1e6, 1) == 0); /* 20 + 4 + 8 x 1000002 = 8000040 */
    size_t n = 1000;
    struct plm_row *many = calloc(n, sizeof *many);
    for (size_t i = 0; i < n; i++)
        many[i] = (struct plm_row){v1, 1};
    /* 1000 rows: 20 + 1000 x (4 + 8 x s) <= 8388608  <=>  s <= 1048 (floor(end) <= 1046) */
    CHECK(check("M", many, n, 1046, 1) == 0);
    CHECK(check("M", many, n, 1047, 1) < 0 && strstr(err.msg, "8388608"));
    free(many);
    n = 100001;
    many = calloc(n, sizeof *many);
    for (size_t i = 0; i < n; i++)
        many[i] = (struct plm_row){v1, 1};
    CHECK(check("M", many, 100000, 1, 1) == 0); /* 20 + 1e5 x 28 = 2800020 */
    CHECK(check("M", many, 100001, 1, 1) < 0);
    free(many);
}

static void test_format(void)
{
    char b[32];
    double cases[] = {0.1, -0.0, 5e-324, 2.2250738585072009e-308, 1.7976931348623157e308, 0.30000000000000004,
                      1.0 / 3, 123456789012345680.0, -1e-300};
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        plm_module_fmt_double(cases[i], b);
        double back = strtod(b, NULL);
        CHECK(memcmp(&back, &cases[i], 8) == 0);
    }
    plm_module_fmt_double(-0.0, b);
    CHECK_STR(b, "-0");
    plm_module_fmt_double(0.1, b);
    CHECK_STR(b, "0.1");
    plm_module_fmt_double(5e-324, b);
    CHECK_STR(b, "4.94065645841247e-324");
    double v[] = {1.5, -0.0}, w[] = {0.1, 2};
    struct plm_row rows[] = {{v, 2}, {w, 2}};
    struct plm_request r = {.kind = PLM_KIND_MODULE, .module = {.model = "M", .rows = rows, .n_rows = 2}};
    char *t;
    size_t len;
    CHECK(plm_module_params_text(&r, &t, &len) == 0);
    CHECK_STR(t, "1.5 -0\n0.1 2\n");
    CHECK(len == strlen(t));
    free(t);
}

static size_t put32(uint8_t *p, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        p[i] = (uint8_t)(v >> (8 * i));
    return 4;
}

static size_t put64(uint8_t *p, double d)
{
    uint64_t u;
    memcpy(&u, &d, 8);
    put32(p, (uint32_t)u);
    put32(p + 4, (uint32_t)(u >> 32));
    return 8;
}

/* A record for 2 rows of width-1 parameters, end 1 step 0.5 (max steps 4): row 1 two steps of
 * width 2, row 2 failed with -2. */
static size_t good_record(uint8_t *b)
{
    size_t o = 0;
    memcpy(b, "PLSM", 4);
    o = 4;
    o += put32(b + o, 1);
    o += put32(b + o, 2);
    o += put32(b + o, 2);
    o += put32(b + o, 1);
    o += put32(b + o, 2);
    o += put64(b + o, -0.0);
    o += put64(b + o, 4.9e-324);
    uint64_t snan = 0x7ff0000000000001ull;
    double d;
    memcpy(&d, &snan, 8);
    o += put64(b + o, d);
    o += put64(b + o, 0.1);
    o += put32(b + o, (uint32_t)-2);
    return o;
}

static int decode(const uint8_t *b, size_t n, struct plm_module_result *m, const char **why)
{
    double v[] = {7};
    static struct plm_row rows[2];
    rows[0] = rows[1] = (struct plm_row){v, 1};
    struct plm_request r = {.kind = PLM_KIND_MODULE,
                            .module = {.model = "M", .rows = rows, .n_rows = 2, .end_time = 1, .step = 0.5}};
    memset(m, 0, sizeof *m);
    return plm_plsm_decode(b, n, &r, m, why);
}

static void test_plsm(void)
{
    uint8_t b[256];
    size_t n = good_record(b);
    struct plm_module_result m;
    const char *why = NULL;
    CHECK(decode(b, n, &m, &why) == 0);
    CHECK(m.width == 2 && m.n_runs == 2 && m.runs[0].status == 2 && m.runs[0].n_outputs == 4);
    CHECK(signbit(m.runs[0].outputs[0]) && m.runs[0].outputs[0] == 0);
    CHECK(m.runs[0].outputs[1] == 4.9e-324);
    uint64_t u;
    memcpy(&u, &m.runs[0].outputs[2], 8);
    CHECK(u == 0x7ff8000000000000ull);
    CHECK(m.runs[1].status == -2 && m.runs[1].n_outputs == 0 && !m.runs[1].outputs);
    plm_module_runs_free(&m);
    /* every truncation is refused */
    for (size_t k = 0; k < n; k++) {
        CHECK(decode(b, k, &m, &why) < 0);
        CHECK(m.runs == NULL && m.n_runs == 0);
    }
    /* trailing byte */
    CHECK(decode(b, n + 1, &m, &why) < 0 && strstr(why, "trailing"));
    uint8_t c[256];
    /* each header field wrong */
    struct {
        size_t off;
        uint32_t v;
        const char *want;
    } bad[] = {{0, 0x4d534c51, "PLSM"}, {4, 2, "version"}, {8, 3, "row count"}, {16, 2, "parameter"},
               {12, 0, "width"},       {12, 65537, "width"}, {20, 5, "more steps"}};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        memcpy(c, b, n);
        put32(c + bad[i].off, bad[i].v);
        CHECK(decode(c, n, &m, &why) < 0 && strstr(why, bad[i].want));
    }
    /* a huge status with no data, a huge row count with a short body */
    memcpy(c, b, n);
    put32(c + 20, 3);
    CHECK(decode(c, n, &m, &why) < 0);
    memcpy(c, b, n);
    put32(c + 8, 0xffffffffu);
    CHECK(decode(c, n, &m, &why) < 0);
}

/* The project a module run becomes (module_project.c), and the worker-exit table over it. */
static void test_plan_and_outcome(void)
{
    double v[] = {7};
    struct plm_row rows[2] = {{v, 1}, {v, 1}};
    struct plm_request r = {.protocol = 3, .kind = PLM_KIND_MODULE,
                            .module = {.model = "M", .rows = rows, .n_rows = 2, .end_time = 1, .step = 0.5}};
    struct plm_module_plan pl;
    memset(&err, 0, sizeof err);
    CHECK(plm_module_plan_make(&pl, &r, "/w", "/m", "ls", &err) == 0);
    CHECK(pl.project.kind == PLM_KIND_PROJECT && pl.project.project.n_steps == 2 && pl.worker_step == 1);
    CHECK(!strcmp(pl.project.project.steps[0], "ls"));
    CHECK(!strcmp(pl.project.project.steps[1], "exec /w --model /m/M params.txt results.bin 1 0.5 8388608"));
    CHECK(!strcmp(pl.project.project.files[0].path, "params.txt") && !strcmp(pl.params, "7\n7\n"));
    CHECK(pl.project.project.n_artifacts == 1 && !strcmp(pl.project.project.artifacts[0], "results.bin"));
    plm_module_plan_done(&pl);

    uint8_t rec[256];
    size_t n = good_record(rec);
    struct plm_step_result step = {0};
    struct plm_artifact art = {.path = "results.bin", .content = {rec, n}};
    struct plm_project_result pr = {.steps = &step, .n_steps = 1, .outcome = PLM_OUTCOME_COMPLETED,
                                    .artifacts = &art, .n_artifacts = 1};
    struct plm_module_result m = {0};
    /* exit 0 and a valid record: completed, the runs decoded */
    CHECK(plm_module_outcome(&r, &pr, 0, &m, &err) == 0 && m.outcome == PLM_OUTCOME_COMPLETED && m.n_runs == 2);
    char hex[65];
    plm_module_checksum(&m, hex);
    CHECK(strlen(hex) == 64);
    plm_module_result_free(&m);
    /* 1-3: setup_failed with the worker's message, its prefix cut */
    static const char msg[] = "plimsoll-sim-worker: model \"X\" is not installed\nmore";
    for (int code = 1; code <= 3; code++) {
        step.exit_code = code;
        step.err = (struct plm_bytes){(uint8_t *)strdup(msg), sizeof msg - 1};
        memset(&m, 0, sizeof m);
        CHECK(plm_module_outcome(&r, &pr, 0, &m, &err) == 0 && m.outcome == PLM_OUTCOME_SETUP_FAILED);
        CHECK(m.detail && !strcmp(m.detail, "the worker refused the request: model \"X\" is not installed"));
        CHECK(m.n_runs == 0);
        plm_module_result_free(&m);
    }
    /* 4: invalid_argument, no refusal mark (the worker ran) */
    step.exit_code = 4;
    memset(&m, 0, sizeof m);
    memset(&err, 0, sizeof err);
    CHECK(plm_module_outcome(&r, &pr, 0, &m, &err) < 0 && err.kind == PLM_E_INVALID && err.refusal == PLM_REFUSAL_NONE);
    plm_module_result_free(&m);
    /* anything else, a missing step, a missing, truncated or bad record: protocol_error */
    step.exit_code = 139;
    memset(&m, 0, sizeof m);
    CHECK(plm_module_outcome(&r, &pr, 0, &m, &err) == 0 && m.outcome == PLM_OUTCOME_PROTOCOL_ERROR);
    plm_module_result_free(&m);
    step.exit_code = 0;
    memset(&m, 0, sizeof m);
    CHECK(plm_module_outcome(&r, &pr, 1, &m, &err) == 0 && m.outcome == PLM_OUTCOME_PROTOCOL_ERROR);
    plm_module_result_free(&m);
    pr.n_artifacts = 0;
    memset(&m, 0, sizeof m);
    CHECK(plm_module_outcome(&r, &pr, 0, &m, &err) == 0 && m.outcome == PLM_OUTCOME_PROTOCOL_ERROR);
    plm_module_result_free(&m);
    pr.n_artifacts = 1;
    art.content.len = n - 1;
    memset(&m, 0, sizeof m);
    CHECK(plm_module_outcome(&r, &pr, 0, &m, &err) == 0 && m.outcome == PLM_OUTCOME_PROTOCOL_ERROR && m.n_runs == 0);
    plm_module_result_free(&m);
    /* the runner's own outcome passes through with its detail */
    pr.outcome = PLM_OUTCOME_TIMED_OUT;
    pr.detail = strdup("step 1 exceeded its time budget");
    memset(&m, 0, sizeof m);
    CHECK(plm_module_outcome(&r, &pr, 0, &m, &err) == 0 && m.outcome == PLM_OUTCOME_TIMED_OUT);
    CHECK(m.detail && !strcmp(m.detail, "step 1 exceeded its time budget") && !pr.detail);
    plm_module_result_free(&m);
}

int main(void)
{
    test_checks();
    test_format();
    test_plsm();
    test_plan_and_outcome();
    return unit_done();
}
