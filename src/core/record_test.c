/* record_test.c: every golden vector of shared/spec/golden.json, reproduced from the core types.
 * The JSON is read here with jansson directly (not the wire codec), so a codec bug and a digest
 * bug cannot cancel out; tests/ and the wire tests cover the codec path separately. */
#include <jansson.h>
#include <math.h>
#include <openssl/evp.h>
#include <stdint.h>

#include "record.h"
#include "unit.h"

static const char *str(json_t *o, const char *k)
{
    const char *s = json_string_value(json_object_get(o, k));
    return s ? s : "";
}

static int64_t num(json_t *o, const char *k)
{
    json_t *v = json_object_get(o, k);
    if (json_is_string(v))
        return strtoll(json_string_value(v), NULL, 10);
    return v ? (int64_t)json_number_value(v) : 0;
}

static struct plm_bytes b64(json_t *o, const char *k)
{
    struct plm_bytes b = {0};
    const char *s = str(o, k);
    size_t n = strlen(s);
    b.data = calloc(1, n + 1);
    int len = EVP_DecodeBlock(b.data, (const unsigned char *)s, (int)n);
    size_t pad = (n && s[n - 1] == '=') + (n > 1 && s[n - 2] == '=');
    b.len = len > 0 ? (size_t)len - pad : 0;
    return b;
}

/* Strings and arrays built here are leaked deliberately into a per-test arena. */
static const char **strings(json_t *a, size_t *n)
{
    *n = json_array_size(a);
    const char **v = calloc(*n + 1, sizeof *v);
    for (size_t i = 0; i < *n; i++)
        v[i] = json_string_value(json_array_get(a, i));
    return v;
}

static struct plm_file *files(json_t *a, size_t *n)
{
    *n = json_array_size(a);
    struct plm_file *f = calloc(*n + 1, sizeof *f);
    for (size_t i = 0; i < *n; i++) {
        f[i].path = str(json_array_get(a, i), "path");
        f[i].content = str(json_array_get(a, i), "content");
    }
    return f;
}

static void request_from_json(json_t *j, struct plm_request *r)
{
    memset(r, 0, sizeof *r);
    r->protocol = (uint32_t)num(j, "protocol");
    r->minimum_isolation = str(j, "minimumIsolation");
    r->timeout_ms = (int32_t)num(j, "timeoutMs");
    json_t *rule = json_object_get(j, "softwareRule");
    r->software_mode = str(rule, "mode");
    r->software_identities = strings(json_object_get(rule, "identities"), &r->n_software_identities);
    json_t *p;
    if ((p = json_object_get(j, "javascript"))) {
        r->kind = PLM_KIND_JAVASCRIPT;
        r->js.code = str(p, "code");
        r->js.grant_profile = str(p, "grantProfile");
    } else if ((p = json_object_get(j, "project"))) {
        r->kind = PLM_KIND_PROJECT;
        r->project.files = files(json_object_get(p, "files"), &r->project.n_files);
        r->project.steps = strings(json_object_get(p, "steps"), &r->project.n_steps);
        r->project.artifacts = strings(json_object_get(p, "artifacts"), &r->project.n_artifacts);
        r->project.grant_profile = str(p, "grantProfile");
    } else if ((p = json_object_get(j, "module"))) {
        r->kind = PLM_KIND_MODULE;
        r->module.model = str(p, "model");
        r->module.end_time = json_number_value(json_object_get(p, "endTime"));
        r->module.step = json_number_value(json_object_get(p, "step"));
        json_t *rows = json_object_get(p, "rows");
        r->module.n_rows = json_array_size(rows);
        struct plm_row *rv = calloc(r->module.n_rows + 1, sizeof *rv);
        for (size_t i = 0; i < r->module.n_rows; i++) {
            json_t *vals = json_object_get(json_array_get(rows, i), "values");
            double *d = calloc(json_array_size(vals) + 1, sizeof *d);
            for (size_t k = 0; k < json_array_size(vals); k++)
                d[k] = json_number_value(json_array_get(vals, k));
            rv[i].values = d;
            rv[i].n_values = json_array_size(vals);
        }
        r->module.rows = rv;
    } else if ((p = json_object_get(j, "cell"))) {
        r->kind = PLM_KIND_CELL;
        r->cell.language = str(p, "language");
        r->cell.code = str(p, "code");
        r->cell.files = files(json_object_get(p, "files"), &r->cell.n_files);
    }
}

static void result_from_json(json_t *j, struct plm_result *r)
{
    memset(r, 0, sizeof *r);
    json_t *p;
    if ((p = json_object_get(j, "javascript"))) {
        r->kind = PLM_KIND_JAVASCRIPT;
        r->js.out = b64(p, "stdout");
        r->js.err = b64(p, "stderr");
        r->js.exit_code = (int32_t)num(p, "exitCode");
        r->js.timed_out = json_is_true(json_object_get(p, "timedOut"));
    } else if ((p = json_object_get(j, "project"))) {
        r->kind = PLM_KIND_PROJECT;
        r->project.outcome = strcmp(str(p, "outcome"), "PROJECT_OUTCOME_COMPLETED") == 0 ? 1 : 0;
        json_t *steps = json_object_get(p, "steps");
        r->project.n_steps = json_array_size(steps);
        r->project.steps = calloc(r->project.n_steps + 1, sizeof *r->project.steps);
        for (size_t i = 0; i < r->project.n_steps; i++) {
            json_t *s = json_array_get(steps, i);
            r->project.steps[i].command = (char *)str(s, "command");
            r->project.steps[i].out = b64(s, "stdout");
            r->project.steps[i].err = b64(s, "stderr");
            r->project.steps[i].exit_code = (int32_t)num(s, "exitCode");
        }
        json_t *arts = json_object_get(p, "artifacts");
        r->project.n_artifacts = json_array_size(arts);
        r->project.artifacts = calloc(r->project.n_artifacts + 1, sizeof *r->project.artifacts);
        for (size_t i = 0; i < r->project.n_artifacts; i++) {
            r->project.artifacts[i].path = (char *)str(json_array_get(arts, i), "path");
            r->project.artifacts[i].content = b64(json_array_get(arts, i), "content");
        }
    } else if ((p = json_object_get(j, "module"))) {
        r->kind = PLM_KIND_MODULE;
        r->module.outcome = strcmp(str(p, "outcome"), "PROJECT_OUTCOME_COMPLETED") == 0 ? 1 : 0;
        r->module.width = (int32_t)num(p, "width");
        r->module.out = b64(p, "stdout");
        r->module.err = b64(p, "stderr");
        json_t *runs = json_object_get(p, "runs");
        r->module.n_runs = json_array_size(runs);
        r->module.runs = calloc(r->module.n_runs + 1, sizeof *r->module.runs);
        for (size_t i = 0; i < r->module.n_runs; i++) {
            json_t *run = json_array_get(runs, i);
            json_t *outs = json_object_get(run, "outputs");
            r->module.runs[i].status = (int32_t)num(run, "status");
            r->module.runs[i].n_outputs = json_array_size(outs);
            r->module.runs[i].outputs = calloc(json_array_size(outs) + 1, sizeof(double));
            for (size_t k = 0; k < json_array_size(outs); k++)
                r->module.runs[i].outputs[k] = json_number_value(json_array_get(outs, k));
        }
    } else if ((p = json_object_get(j, "cell"))) {
        r->kind = PLM_KIND_CELL;
        r->cell.out = b64(p, "stdout");
        r->cell.err = b64(p, "stderr");
        r->cell.interpreter_started = json_is_true(json_object_get(p, "interpreterStarted"));
    }
}

int main(void)
{
    const char *path = getenv("GOLDEN_JSON");
    json_error_t jerr;
    json_t *g = json_load_file(path ? path : "tests/data/golden.json", 0, &jerr);
    CHECK(g != NULL);
    if (!g)
        return unit_done();

    size_t i;
    json_t *v;
    size_t n_req = 0, n_res = 0, n_rec = 0, n_fp = 0;
    json_array_foreach(json_object_get(g, "requests"), i, v) {
        struct plm_request r;
        request_from_json(json_object_get(v, "request"), &r);
        char hex[PLM_HEX_SHA256];
        rec_request_digest(&r, hex);
        printf("# request %s\n", str(v, "name"));
        CHECK_STR(hex, str(v, "sha256"));
        n_req++;
    }
    json_array_foreach(json_object_get(g, "results"), i, v) {
        struct plm_result r;
        result_from_json(json_object_get(v, "response"), &r);
        char hex[PLM_HEX_SHA256];
        rec_result_digest(&r, hex);
        printf("# result %s\n", str(v, "name"));
        CHECK_STR(hex, str(v, "sha256"));
        n_res++;
    }
    json_array_foreach(json_object_get(g, "records"), i, v) {
        json_t *j = json_object_get(v, "record");
        struct plm_record rec = {0};
        rec.version = (uint32_t)num(j, "version");
        snprintf(rec.request_sha256, sizeof rec.request_sha256, "%s", str(j, "requestSha256"));
        snprintf(rec.result_sha256, sizeof rec.result_sha256, "%s", str(j, "resultSha256"));
        rec.provider = str(j, "provider");
        rec.isolation = str(j, "isolation");
        rec.environment = str(j, "environment");
        rec.policy = str(j, "policy");
        rec.started_unix_ms = num(j, "startedUnixMs");
        rec.ended_unix_ms = num(j, "endedUnixMs");
        rec.session = str(j, "session");
        rec.sequence = (uint64_t)num(j, "sequence");
        rec.previous_sha256 = str(j, "previousSha256");
        rec.software_identity = str(j, "softwareIdentity");
        rec.software_rule_id = str(j, "softwareRuleId");
        rec.unanswered = str(j, "unanswered");
        char hex[PLM_HEX_SHA256];
        rec_record_digest(&rec, hex);
        printf("# record %s\n", str(v, "name"));
        CHECK_STR(hex, str(v, "sha256"));
        n_rec++;
    }
    json_array_foreach(json_object_get(g, "sessionFingerprints"), i, v) {
        char hex[PLM_HEX_SHA256];
        rec_session_fingerprint(str(v, "sessionId"), hex);
        CHECK_STR(hex, str(v, "sha256"));
        n_fp++;
    }
    /* wire.md §14 counts: 7 requests, 4 results, 2 records, 1 fingerprint */
    CHECK(n_req == 7 && n_res == 4 && n_rec == 2 && n_fp == 1);

    /* §13.6: the approved rule ID of the two golden identities (order and duplicates ignored) */
    char a[100], b[100];
    snprintf(a, sizeof a, "oci-manifest:linux/amd64@sha256:%064d", 0);
    memset(a + 32, 'a', 64);
    snprintf(b, sizeof b, "%s", a);
    memset(b + 32, 'b', 64);
    const char *ids[] = {b, a, b};
    char *id = rec_rule_id("approved", ids, 3);
    CHECK_STR(id, "approved:sha256:def36ca56c26169c32c1690b9f8df85526c919015dc46db52662b58d98ad7a10");
    free(id);
    id = rec_rule_id("exact", ids, 1);
    CHECK(strncmp(id, "exact:oci-manifest:", 19) == 0);
    free(id);
    id = rec_rule_id("", NULL, 0);
    CHECK_STR(id, "");
    free(id);

    /* -0 and +0 differ in the digest; NaN bit patterns differ too (hence canonicalisation). */
    double zp = 0.0, zn = -0.0;
    struct plm_module_run r1 = {.status = 1, .outputs = &zp, .n_outputs = 1};
    struct plm_module_run r2 = {.status = 1, .outputs = &zn, .n_outputs = 1};
    struct plm_result m1 = {.kind = PLM_KIND_MODULE, .module = {.runs = &r1, .n_runs = 1}};
    struct plm_result m2 = {.kind = PLM_KIND_MODULE, .module = {.runs = &r2, .n_runs = 1}};
    char h1[PLM_HEX_SHA256], h2[PLM_HEX_SHA256];
    rec_result_digest(&m1, h1);
    rec_result_digest(&m2, h2);
    CHECK(strcmp(h1, h2) != 0);
    json_decref(g);
    return unit_done();
}
