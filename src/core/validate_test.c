/* validate_test.c: providers.md §1.4 limits and §8 items 8-11. */
#include <math.h>

#include "limits.h"
#include "validate.h"
#include "unit.h"

static int js(const char *code)
{
    struct plm_request r = {.kind = PLM_KIND_JAVASCRIPT, .js = {.code = code}};
    struct plm_err err = {0};
    int rc = plm_validate_payload(&r, &err);
    if (rc < 0 && (err.kind != PLM_E_INVALID || err.refusal != PLM_REFUSAL_REQUEST))
        return 99;
    return rc;
}

static int project(const struct plm_file *f, size_t nf, const char *const *steps, size_t ns,
                   const char *const *arts, size_t na)
{
    struct plm_request r = {.kind = PLM_KIND_PROJECT,
                            .project = {.files = f, .n_files = nf, .steps = steps, .n_steps = ns,
                                        .artifacts = arts, .n_artifacts = na}};
    struct plm_err err = {0};
    return plm_validate_payload(&r, &err);
}

int main(void)
{
    CHECK(js("console.log(1)") == 0);
    CHECK(js("") == -1);
    CHECK(js("\xff\xfe") == -1);
    CHECK(js("\xc0\x80") == -1);       /* overlong NUL */
    CHECK(js("\xed\xa0\x80") == -1);   /* surrogate */
    CHECK(js("\xf4\x90\x80\x80") == -1); /* > U+10FFFF */
    CHECK(js("caf\xc3\xa9") == 0);
    char *big = malloc(LIM_CODE_MAX + 2);
    memset(big, 'a', LIM_CODE_MAX + 1);
    big[LIM_CODE_MAX + 1] = 0;
    CHECK(js(big) == -1);
    big[LIM_CODE_MAX] = 0;
    CHECK(js(big) == 0);
    free(big);

    struct plm_request none = {0};
    struct plm_err err = {0};
    CHECK(plm_validate_payload(&none, &err) < 0);
    CHECK_STR(err.msg, "payload must be exactly one of javascript, project, or module");
    struct plm_request cell = {.kind = PLM_KIND_CELL};
    CHECK(plm_validate_payload(&cell, &err) < 0 && strstr(err.msg, "a cell runs only in a session (SessionRun)"));

    CHECK(plm_path_ok("a/b.txt"));
    CHECK(plm_path_ok("..a"));
    const char *bad[] = {"", ".", "..", "../escape.ts", "/abs", "a//b", "a/", "a/./b", "a/../b", "a\\b",
                         "a\nb", "a/..", "./a"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++)
        CHECK(!plm_path_ok(bad[i]));
    char longp[LIM_PATH_MAX + 2];
    memset(longp, 'p', sizeof longp);
    longp[LIM_PATH_MAX + 1] = 0;
    CHECK(!plm_path_ok(longp));

    const char *steps1[] = {"echo hi"};
    struct plm_file f1[] = {{"main.js", "x"}, {"lib.js", "y"}};
    struct plm_file fdup[] = {{"main.js", "x"}, {"main.js", "y"}};
    struct plm_file fesc[] = {{"../escape.ts", "x"}};
    const char *arts[] = {"out.txt"};
    const char *artdup[] = {"out.txt", "out.txt"};
    CHECK(project(f1, 2, steps1, 1, arts, 1) == 0);
    CHECK(project(f1, 2, steps1, 0, arts, 1) == -1);
    CHECK(project(fdup, 2, steps1, 1, NULL, 0) == -1);
    CHECK(project(fesc, 1, steps1, 1, NULL, 0) == -1);
    CHECK(project(f1, 2, steps1, 1, artdup, 2) == -1);
    const char *steps21[21];
    for (int i = 0; i < 21; i++)
        steps21[i] = "true";
    CHECK(project(NULL, 0, steps21, 20, NULL, 0) == 0);
    CHECK(project(NULL, 0, steps21, 21, NULL, 0) == -1);
    char *longstep = malloc(LIM_STEP_MAX + 2);
    memset(longstep, 's', LIM_STEP_MAX + 1);
    longstep[LIM_STEP_MAX + 1] = 0;
    const char *ls[] = {longstep};
    CHECK(project(NULL, 0, ls, 1, NULL, 0) == -1);
    free(longstep);
    struct plm_file *many = calloc(201, sizeof *many);
    char (*names)[8] = calloc(201, 8);
    for (int i = 0; i < 201; i++) {
        snprintf(names[i], 8, "f%d", i);
        many[i].path = names[i];
        many[i].content = "";
    }
    CHECK(project(many, 200, steps1, 1, NULL, 0) == 0);
    CHECK(project(many, 201, steps1, 1, NULL, 0) == -1);
    char *half = malloc(2u * 1024 * 1024 + 1);
    memset(half, 'c', 2u * 1024 * 1024);
    half[2u * 1024 * 1024] = 0;
    many[0].content = half;
    many[1].content = half;
    CHECK(project(many, 2, steps1, 1, NULL, 0) == 0);
    many[2].content = "z";
    CHECK(project(many, 3, steps1, 1, NULL, 0) == -1);
    free(half);
    free(many);
    free(names);
    const char *arts101[101];
    char (*an)[8] = calloc(101, 8);
    for (int i = 0; i < 101; i++) {
        snprintf(an[i], 8, "a%d", i);
        arts101[i] = an[i];
    }
    CHECK(project(NULL, 0, steps1, 1, arts101, 100) == 0);
    CHECK(project(NULL, 0, steps1, 1, arts101, 101) == -1);
    free(an);

    double vals[] = {1, 2};
    struct plm_row rows[] = {{vals, 2}};
    struct plm_request m = {.kind = PLM_KIND_MODULE,
                            .module = {.model = "VanDerPol", .end_time = 1, .step = 0.1, .rows = rows, .n_rows = 1}};
    CHECK(plm_validate_payload(&m, &err) == 0);
    m.module.step = NAN;
    CHECK(plm_validate_payload(&m, &err) < 0);
    m.module.step = 0.1;
    m.module.model = "-bad";
    CHECK(plm_validate_payload(&m, &err) < 0);

    const char *ids[] = {"oci-manifest:x"};
    struct plm_request rule = {.software_mode = "exact", .software_identities = ids, .n_software_identities = 1};
    CHECK(plm_validate_rule(&rule, &err) == 0);
    rule.software_mode = "fuzzy";
    CHECK(plm_validate_rule(&rule, &err) < 0);
    rule.software_mode = "";
    CHECK(plm_validate_rule(&rule, &err) < 0);
    rule.n_software_identities = 0;
    CHECK(plm_validate_rule(&rule, &err) == 0);
    return unit_done();
}
