/* json_codec_test.c: wire.md §6 against the codec: golden round trips, both spellings, the
 * number, bytes and enum rules, and every refusal the header promises. Leaks are ASan's job. */
#include "json_codec.h"

#include <jansson.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "../core/limits.h"
#include "sandbox.pb-c.h"
#include "unit.h"

#define RUN_REQ (&plimsoll__v1__run_request__descriptor)
#define RUN_RESP (&plimsoll__v1__run_response__descriptor)
#define SESSION_REQ (&plimsoll__v1__session_run_request__descriptor)
#define RECORD (&plimsoll__v1__run_record__descriptor)
#define DESCRIBE (&plimsoll__v1__describe_response__descriptor)

static struct plm_err err;

static ProtobufCMessage *dec(const ProtobufCMessageDescriptor *d, const char *s)
{
    plm_err_clear(&err);
    return wire_json_decode(d, s, strlen(s), &err);
}

/* Decodes s and returns the encoding (malloc'd), or NULL when decoding failed. */
static char *reencode(const ProtobufCMessageDescriptor *d, const char *s)
{
    ProtobufCMessage *m = dec(d, s);
    if (!m)
        return NULL;
    char *out = wire_json_encode(m, NULL);
    protobuf_c_message_free_unpacked(m, NULL);
    return out;
}

/* True when decoding fails as INVALID with a message containing want. */
static int refused(const ProtobufCMessageDescriptor *d, const char *s, const char *want)
{
    ProtobufCMessage *m = dec(d, s);
    if (m) {
        protobuf_c_message_free_unpacked(m, NULL);
        printf("# accepted: %s\n", s);
        return 0;
    }
    if (err.kind != PLM_E_INVALID || err.refusal != PLM_REFUSAL_NONE || !strstr(err.msg, want)) {
        printf("# %s -> kind %d \"%s\", wanted \"%s\"\n", s, err.kind, err.msg, want);
        return 0;
    }
    return 1;
}

static int reencodes_to(const ProtobufCMessageDescriptor *d, const char *in, const char *want)
{
    char *out = reencode(d, in);
    int ok = out && strcmp(out, want) == 0;
    if (!ok)
        printf("# %s -> %s (%s), wanted %s\n", in, out ? out : "(null)", err.msg, want);
    free(out);
    return ok;
}

/* Golden inputs may carry zero values (record v3 has "resultSha256": ""), which the encoder
 * omits; drop them from the expectation. */
static void drop_zero_strings(json_t *v)
{
    const char *k;
    json_t *e;
    void *tmp;
    size_t i;
    if (json_is_object(v)) {
        json_object_foreach_safe(v, tmp, k, e)
        {
            if (json_is_string(e) && json_string_length(e) == 0)
                json_object_del(v, k);
            else
                drop_zero_strings(e);
        }
    } else if (json_is_array(v)) {
        json_array_foreach(v, i, e) drop_zero_strings(e);
    }
}

/* Encodes, parses, and compares with the original; then re-spells every key in snake_case,
 * which must decode to the same message. */
static int golden_round_trip(const ProtobufCMessageDescriptor *d, json_t *orig)
{
    char *text = json_dumps(orig, JSON_COMPACT);
    char *out = reencode(d, text);
    int ok = 0;
    if (out) {
        json_t *want = json_deep_copy(orig), *got = json_loads(out, 0, NULL);
        drop_zero_strings(want);
        ok = got && json_equal(want, got);
        if (!ok)
            printf("# golden mismatch:\n#  in  %s\n#  out %s\n", text, out);
        json_decref(want);
        json_decref(got);
    } else {
        printf("# golden refused: %s: %s\n", text, err.msg);
    }
    free(text);
    free(out);
    return ok;
}

static void snake_keys(json_t *v, json_t **out)
{
    const char *k;
    json_t *e;
    size_t i;
    if (json_is_object(v)) {
        *out = json_object();
        json_object_foreach(v, k, e)
        {
            char buf[128];
            size_t n = 0;
            for (const char *p = k; *p && n + 2 < sizeof buf; p++) {
                if (*p >= 'A' && *p <= 'Z') {
                    buf[n++] = '_';
                    buf[n++] = (char)(*p - 'A' + 'a');
                } else {
                    buf[n++] = *p;
                }
            }
            buf[n] = '\0';
            json_t *c;
            snake_keys(e, &c);
            json_object_set_new(*out, buf, c);
        }
    } else if (json_is_array(v)) {
        *out = json_array();
        json_array_foreach(v, i, e)
        {
            json_t *c;
            snake_keys(e, &c);
            json_array_append_new(*out, c);
        }
    } else {
        *out = json_incref(v);
    }
}

static int snake_same(const ProtobufCMessageDescriptor *d, json_t *orig)
{
    json_t *snake;
    snake_keys(orig, &snake);
    char *a_text = json_dumps(orig, JSON_COMPACT), *b_text = json_dumps(snake, JSON_COMPACT);
    char *a = reencode(d, a_text), *b = reencode(d, b_text);
    int ok = a && b && strcmp(a, b) == 0;
    if (!ok)
        printf("# snake_case differs: %s vs %s\n", a_text, b_text);
    free(a);
    free(b);
    free(a_text);
    free(b_text);
    json_decref(snake);
    return ok;
}

static void test_golden(void)
{
    const char *path = getenv("GOLDEN_JSON");
    if (!path)
        path = "tests/data/golden.json";
    json_t *g = json_load_file(path, JSON_REJECT_DUPLICATES, NULL);
    CHECK(g != NULL);
    if (!g)
        return;
    size_t i, n = 0;
    json_t *e;
    json_array_foreach(json_object_get(g, "requests"), i, e)
    {
        json_t *req = json_object_get(e, "request");
        /* vector 7 is a SessionRunRequest (wire.md §14) */
        const ProtobufCMessageDescriptor *d =
            json_object_get(req, "sessionId") ? SESSION_REQ : RUN_REQ;
        CHECK(golden_round_trip(d, req));
        CHECK(snake_same(d, req));
        n++;
    }
    json_array_foreach(json_object_get(g, "results"), i, e)
    {
        CHECK(golden_round_trip(RUN_RESP, json_object_get(e, "response")));
        CHECK(snake_same(RUN_RESP, json_object_get(e, "response")));
        n++;
    }
    json_array_foreach(json_object_get(g, "records"), i, e)
    {
        CHECK(golden_round_trip(RECORD, json_object_get(e, "record")));
        CHECK(snake_same(RECORD, json_object_get(e, "record")));
        n++;
    }
    CHECK(n == 13);
    json_decref(g);
}

static void test_names(void)
{
    Plimsoll__V1__RunRequest *r =
        (void *)dec(RUN_REQ, "{\"minimum_isolation\":\"kernel\",\"trace_id\":\"t\"}");
    CHECK(r && strcmp(r->minimum_isolation, "kernel") == 0 && strcmp(r->trace_id, "t") == 0);
    protobuf_c_message_free_unpacked((void *)r, NULL);
    CHECK(reencodes_to(RUN_REQ, "{\"minimum_isolation\":\"kernel\",\"timeout_ms\":5}",
                       "{\"minimumIsolation\":\"kernel\",\"timeoutMs\":5}"));
    CHECK(refused(RUN_REQ, "{\"minimum_isolation\":\"a\",\"minimumIsolation\":\"b\"}",
                  "field \"minimum_isolation\": given twice"));
    CHECK(refused(RUN_REQ, "{\"timeoutMs\":null,\"timeout_ms\":1}", "given twice"));
    CHECK(refused(RUN_REQ, "{\"protocol\":1,\"protocol\":2}", "duplicate key"));
    CHECK(refused(RUN_REQ, "{\"module\":{\"end_time\":1,\"endTime\":1}}",
                  "field \"module.end_time\": given twice"));
    /* unknown keys, however nested (within the depth limit), are ignored */
    CHECK(reencodes_to(RUN_REQ,
                       "{\"protocol\":3,\"bogus\":{\"x\":[1,{\"y\":null}]},\"Protocol\":9}",
                       "{\"protocol\":3}"));
}

static void test_zero_and_null(void)
{
    CHECK(reencodes_to(RUN_REQ,
                       "{\"protocol\":0,\"minimumIsolation\":\"\",\"timeoutMs\":null,"
                       "\"softwareRule\":null,\"javascript\":null}",
                       "{}"));
    /* a set oneof member and a present sub-message are emitted even when empty */
    CHECK(reencodes_to(RUN_REQ, "{\"javascript\":{},\"softwareRule\":{}}",
                       "{\"softwareRule\":{},\"javascript\":{}}"));
    CHECK(reencodes_to(RUN_REQ, "{\"javascript\":{},\"project\":null}", "{\"javascript\":{}}"));
    CHECK(reencodes_to(RUN_REQ, "{\"project\":{\"steps\":[],\"files\":null}}", "{\"project\":{}}"));
    /* empty strings inside repeated fields are elements, kept and freed like any other */
    CHECK(reencodes_to(RUN_REQ,
                       "{\"project\":{\"steps\":[\"\",\"a\",\"\"],\"files\":[{},{\"path\":\"\"}]}}",
                       "{\"project\":{\"files\":[{},{}],\"steps\":[\"\",\"a\",\"\"]}}"));
    CHECK(refused(RUN_REQ, "{\"javascript\":{},\"module\":{}}",
                  "field \"module\": a second member of a oneof (\"javascript\" is already set)"));
    CHECK(refused(RUN_REQ, "{\"project\":{\"steps\":[\"a\",null]}}",
                  "field \"project.steps[1]\": null element"));
    CHECK(refused(RUN_REQ, "{\"project\":{\"files\":[{\"path\":\"a\"},{\"path\":1}]}}",
                  "field \"project.files[1].path\": expected a string"));
    CHECK(refused(RUN_REQ, "{\"project\":{\"steps\":\"a\"}}",
                  "field \"project.steps\": expected an array"));
    CHECK(refused(RUN_REQ, "{\"javascript\":[]}", "field \"javascript\": expected an object"));
    CHECK(refused(RUN_REQ, "{\"traceId\":5}", "field \"trace_id\": expected a string"));
    CHECK(refused(RUN_RESP, "{\"cell\":{\"timedOut\":1}}",
                  "field \"cell.timed_out\": expected true or false"));
}

static void test_integers(void)
{
    CHECK(reencodes_to(RUN_RESP, "{\"durationMs\":812}", "{\"durationMs\":\"812\"}"));
    CHECK(reencodes_to(RUN_RESP, "{\"durationMs\":\"-9223372036854775808\"}",
                       "{\"durationMs\":\"-9223372036854775808\"}"));
    CHECK(reencodes_to(RUN_RESP, "{\"durationMs\":9223372036854775807}",
                       "{\"durationMs\":\"9223372036854775807\"}"));
    CHECK(reencodes_to(RECORD, "{\"sequence\":\"18446744073709551615\"}",
                       "{\"sequence\":\"18446744073709551615\"}"));
    CHECK(reencodes_to(RECORD, "{\"sequence\":\"1e3\",\"version\":2.0}",
                       "{\"version\":2,\"sequence\":\"1000\"}"));
    CHECK(reencodes_to(RUN_REQ, "{\"timeoutMs\":\"-5000\",\"protocol\":\"3\"}",
                       "{\"protocol\":3,\"timeoutMs\":-5000}"));
    CHECK(reencodes_to(RUN_REQ, "{\"timeoutMs\":-2147483648,\"protocol\":4294967295}",
                       "{\"protocol\":4294967295,\"timeoutMs\":-2147483648}"));
    CHECK(reencodes_to(RUN_REQ, "{\"timeoutMs\":1e3,\"protocol\":-0}", "{\"timeoutMs\":1000}"));
    CHECK(reencodes_to(RUN_REQ, "{\"timeoutMs\":\"-0\"}", "{}"));
    CHECK(refused(RECORD, "{\"sequence\":\"18446744073709551616\"}",
                  "field \"sequence\": integer out of range"));
    CHECK(refused(RECORD, "{\"sequence\":-1}", "integer out of range"));
    CHECK(refused(RECORD, "{\"sequence\":\"-1\"}", "integer out of range"));
    CHECK(refused(RUN_RESP, "{\"durationMs\":\"9223372036854775808\"}",
                  "field \"duration_ms\": integer out of range"));
    CHECK(refused(RUN_RESP, "{\"durationMs\":\"-9223372036854775809\"}", "integer out of range"));
    CHECK(refused(RUN_RESP, "{\"durationMs\":9.3e18}", "integer out of range"));
    CHECK(refused(RUN_REQ, "{\"timeoutMs\":2147483648}",
                  "field \"timeout_ms\": integer out of range"));
    CHECK(refused(RUN_REQ, "{\"timeoutMs\":-2147483649}", "integer out of range"));
    CHECK(
        refused(RUN_REQ, "{\"protocol\":4294967296}", "field \"protocol\": integer out of range"));
    CHECK(refused(RUN_REQ, "{\"protocol\":-1}", "integer out of range"));
    CHECK(refused(RUN_REQ, "{\"timeoutMs\":1.5}", "field \"timeout_ms\": not an integer"));
    CHECK(refused(RUN_REQ, "{\"timeoutMs\":\"1.5\"}", "not an integer"));
    CHECK(refused(RUN_REQ, "{\"timeoutMs\":1e300}", "integer out of range"));
    CHECK(refused(RUN_REQ, "{\"timeoutMs\":\" 5\"}", "expected an integer"));
    CHECK(refused(RUN_REQ, "{\"timeoutMs\":\"+5\"}", "expected an integer"));
    CHECK(refused(RUN_REQ, "{\"timeoutMs\":\"05\"}", "expected an integer"));
    CHECK(refused(RUN_REQ, "{\"timeoutMs\":\"0x10\"}", "expected an integer"));
    CHECK(refused(RUN_REQ, "{\"timeoutMs\":\"\"}", "expected an integer"));
    CHECK(refused(RUN_REQ, "{\"timeoutMs\":true}", "expected an integer"));
    /* huge numbers: jansson refuses them as text, anywhere, even under an unknown key */
    CHECK(refused(RUN_REQ, "{\"timeoutMs\":99999999999999999999}", "number out of range"));
    CHECK(refused(RUN_REQ, "{\"x\":1e400}", "number out of range"));
    CHECK(refused(RUN_REQ, "{\"timeoutMs\":\"99999999999999999999999999999\"}",
                  "integer out of range"));
}

static void test_doubles(void)
{
    const char *in =
        "{\"module\":{\"rows\":[{\"values\":[\"NaN\",\"Infinity\",\"-Infinity\",-0,-0.0,0.1,"
        "1e300,5e-324,\"-0\",\"2.5\",-0e0,1.7976931348623157e308,123456789012345678]}]}}";
    Plimsoll__V1__RunRequest *r = (void *)dec(RUN_REQ, in);
    CHECK(r && r->module && r->module->n_rows == 1 && r->module->rows[0]->n_values == 13);
    if (r && r->module && r->module->n_rows == 1 && r->module->rows[0]->n_values == 13) {
        const double *v = r->module->rows[0]->values;
        uint64_t nan_bits;
        memcpy(&nan_bits, &v[0], sizeof nan_bits);
        CHECK(nan_bits == 0x7ff8000000000000ull);
        CHECK(isinf(v[1]) && v[1] > 0 && isinf(v[2]) && v[2] < 0);
        CHECK(v[3] == 0 && signbit(v[3]) && signbit(v[4]) && signbit(v[8]) && signbit(v[10]));
        CHECK(v[5] == 0.1 && v[7] == 5e-324 && v[9] == 2.5);
    }
    protobuf_c_message_free_unpacked((void *)r, NULL);
    CHECK(reencodes_to(
        RUN_REQ, in,
        "{\"module\":{\"rows\":[{\"values\":[\"NaN\",\"Infinity\",\"-Infinity\",-0,-0,0.1,"
        "1e+300,5e-324,-0,2.5,-0,1.7976931348623157e+308,"
        "1.2345678901234568e+17]}]}}"));
    CHECK(reencodes_to(RUN_REQ, "{\"module\":{\"endTime\":-0,\"step\":0}}",
                       "{\"module\":{\"endTime\":-0}}"));
    CHECK(reencodes_to(RUN_REQ, "{\"module\":{\"endTime\":1e-0,\"step\":\"1E-0\"}}",
                       "{\"module\":{\"endTime\":1,\"step\":1}}"));
    /* "-0" inside strings and keys is text, not a number */
    CHECK(reencodes_to(RUN_REQ, "{\"traceId\":\"-0\",\"-0\":-0,\"module\":{\"model\":\"a\\\"-0\"}}",
                       "{\"traceId\":\"-0\",\"module\":{\"model\":\"a\\\"-0\"}}"));
    CHECK(reencodes_to(RUN_REQ, "{\"module\":{\"step\":0.30000000000000004,\"endTime\":100}}",
                       "{\"module\":{\"endTime\":100,\"step\":0.30000000000000004}}"));
    CHECK(refused(RUN_REQ, "{\"module\":{\"step\":\"nan\"}}",
                  "field \"module.step\": expected a number"));
    CHECK(refused(RUN_REQ, "{\"module\":{\"step\":\"inf\"}}", "expected a number"));
    CHECK(refused(RUN_REQ, "{\"module\":{\"step\":\"1e400\"}}", "number out of range"));
    CHECK(refused(RUN_REQ, "{\"module\":{\"step\":NaN}}", "invalid JSON"));
    CHECK(refused(RUN_REQ, "{\"module\":{\"step\":Infinity}}", "invalid JSON"));
    CHECK(refused(RUN_REQ, "{\"module\":{\"step\":-01}}", "invalid JSON"));
    CHECK(refused(RUN_REQ, "{\"module\":{\"rows\":[{\"values\":[1,\"x\"]}]}}",
                  "field \"module.rows[0].values[1]\": expected a number"));
}

static void test_bytes_and_enums(void)
{
    CHECK(reencodes_to(RUN_RESP, "{\"javascript\":{\"stdout\":\"Mgo\",\"stderr\":\"_3g\"}}",
                       "{\"javascript\":{\"stdout\":\"Mgo=\",\"stderr\":\"/3g=\"}}"));
    CHECK(reencodes_to(RUN_RESP, "{\"javascript\":{\"stdout\":\"-_8=\",\"stderr\":\"+/8\"}}",
                       "{\"javascript\":{\"stdout\":\"+/8=\",\"stderr\":\"+/8=\"}}"));
    CHECK(reencodes_to(RUN_RESP, "{\"cell\":{\"stdout\":\"cm93cz0yCg\",\"stderr\":\"\"}}",
                       "{\"cell\":{\"stdout\":\"cm93cz0yCg==\"}}"));
    CHECK(reencodes_to(RUN_RESP, "{\"cell\":{\"stdout\":\"AAECAwQF\"}}",
                       "{\"cell\":{\"stdout\":\"AAECAwQF\"}}"));
    Plimsoll__V1__RunResponse *r = (void *)dec(RUN_RESP, "{\"javascript\":{\"stderr\":\"_3g\"}}");
    CHECK(r && r->javascript && r->javascript->stderr.len == 2 &&
          r->javascript->stderr.data[0] == 0xff && r->javascript->stderr.data[1] == 0x78);
    protobuf_c_message_free_unpacked((void *)r, NULL);
    CHECK(refused(RUN_RESP, "{\"javascript\":{\"stdout\":\"M\"}}",
                  "field \"javascript.stdout\": invalid base64 length"));
    CHECK(refused(RUN_RESP, "{\"javascript\":{\"stdout\":\"Mg=\"}}", "invalid base64 length"));
    CHECK(refused(RUN_RESP, "{\"javascript\":{\"stdout\":\"Mgo==\"}}", "invalid base64"));
    CHECK(refused(RUN_RESP, "{\"javascript\":{\"stdout\":\"M=go\"}}", "invalid base64 character"));
    CHECK(refused(RUN_RESP, "{\"javascript\":{\"stdout\":\"Mg o\"}}", "invalid base64 character"));
    CHECK(refused(RUN_RESP, "{\"javascript\":{\"stdout\":\"Mg\\no=\"}}", "invalid base64"));
    CHECK(refused(RUN_RESP, "{\"javascript\":{\"stdout\":\"+-8=\"}}", "invalid base64 character"));
    CHECK(refused(RUN_RESP, "{\"javascript\":{\"stdout\":\"Mg*=\"}}", "invalid base64 character"));
    CHECK(refused(RUN_RESP, "{\"javascript\":{\"stdout\":5}}", "expected a base64 string"));

    CHECK(reencodes_to(RUN_RESP, "{\"project\":{\"outcome\":2}}",
                       "{\"project\":{\"outcome\":\"PROJECT_OUTCOME_SETUP_FAILED\"}}"));
    CHECK(reencodes_to(RUN_RESP, "{\"project\":{\"outcome\":\"PROJECT_OUTCOME_COMPLETED\"}}",
                       "{\"project\":{\"outcome\":\"PROJECT_OUTCOME_COMPLETED\"}}"));
    CHECK(
        reencodes_to(RUN_RESP, "{\"project\":{\"outcome\":99}}", "{\"project\":{\"outcome\":99}}"));
    CHECK(reencodes_to(RUN_RESP, "{\"project\":{\"outcome\":\"PROJECT_OUTCOME_UNSPECIFIED\"}}",
                       "{\"project\":{}}"));
    CHECK(refused(RUN_RESP, "{\"project\":{\"outcome\":\"COMPLETED\"}}",
                  "field \"project.outcome\": unknown enum name"));
    CHECK(refused(RUN_RESP, "{\"project\":{\"outcome\":\"1\"}}", "unknown enum name"));
    CHECK(refused(RUN_RESP, "{\"project\":{\"outcome\":2147483648}}", "integer out of range"));
    CHECK(refused(RUN_RESP, "{\"project\":{\"outcome\":true}}", "expected an integer"));
}

static void test_text_rules(void)
{
    static const char nul[] = "{\"traceId\":\"a\\u0000b\"}";
    CHECK(refused(RUN_REQ, nul, "U+0000"));
    CHECK(refused(RUN_REQ, "{\"a\\u0000\":1}", "U+0000"));
    CHECK(refused(RUN_REQ, "{\"traceId\":\"\xff\"}", "invalid UTF-8"));
    CHECK(refused(RUN_REQ, "{\"traceId\":\"\xc0\x80\"}", "invalid UTF-8"));
    CHECK(refused(RUN_REQ, "{\"traceId\":\"\xed\xa0\x80\"}", "invalid UTF-8"));
    CHECK(refused(RUN_REQ, "{\"traceId\":\"\\ud800\"}", "invalid JSON"));
    CHECK(refused(RUN_REQ, "{\"traceId\":\"\\udc00\\ud800\"}", "invalid JSON"));
    CHECK(reencodes_to(RUN_REQ, "{\"traceId\":\"\\ud83d\\ude00\\u00e9\"}",
                       "{\"traceId\":\"\xf0\x9f\x98\x80\xc3\xa9\"}"));
    CHECK(refused(RUN_REQ, "[]", "top level is not an object"));
    CHECK(refused(RUN_REQ, "1", "invalid JSON"));
    CHECK(refused(RUN_REQ, "\"x\"", "invalid JSON"));
    CHECK(refused(RUN_REQ, "null", "invalid JSON"));
    CHECK(refused(RUN_REQ, "", "invalid JSON"));
    CHECK(refused(RUN_REQ, "{} {}", "trailing data"));
    CHECK(refused(RUN_REQ, "{\"protocol\":1", "unexpected end"));
    CHECK(refused(RUN_REQ, "\xef\xbb\xbf{}", "invalid JSON"));
    ProtobufCMessage *m = wire_json_decode(RUN_REQ, "{}x", 2, &err); /* len bounds the text */
    CHECK(m != NULL);
    protobuf_c_message_free_unpacked(m, NULL);
    /* jansson's own messages quote input; ours never do */
    CHECK(refused(RUN_REQ, "{\"protocol\":SECRET}", "invalid JSON at byte") &&
          !strstr(err.msg, "SECRET"));
    CHECK(refused(RUN_RESP, "{\"project\":{\"outcome\":\"SECRET\"}}", "unknown enum") &&
          !strstr(err.msg, "SECRET"));

    /* depth: LIM_JSON_DEPTH levels at most, anywhere, before jansson recurses */
    char bomb[8192];
    size_t n = 0;
    bomb[n++] = '{';
    memcpy(bomb + n, "\"x\":", 4);
    n += 4;
    for (int i = 0; i < 4000; i++)
        bomb[n++] = '[';
    bomb[n] = '\0';
    CHECK(refused(RUN_REQ, bomb, "nested deeper than"));
    char ok_depth[256], deep[256];
    strcpy(ok_depth, "{\"x\":");
    strcpy(deep, "{\"x\":");
    for (int i = 0; i < LIM_JSON_DEPTH - 1; i++)
        strcat(ok_depth, "[");
    for (int i = 0; i < LIM_JSON_DEPTH; i++)
        strcat(deep, "[");
    for (int i = 0; i < LIM_JSON_DEPTH - 1; i++)
        strcat(ok_depth, "]");
    for (int i = 0; i < LIM_JSON_DEPTH; i++)
        strcat(deep, "]");
    strcat(ok_depth, "}");
    strcat(deep, "}");
    m = dec(RUN_REQ, ok_depth);
    CHECK(m != NULL);
    protobuf_c_message_free_unpacked(m, NULL);
    CHECK(refused(RUN_REQ, deep, "nested deeper than"));
    CHECK(reencodes_to(RUN_REQ, "{\"x\":\"[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[\"}", "{}"));
}

static void test_encode_only(void)
{
    /* strings from binary protobuf are not validated: the writer escapes and repairs them */
    Plimsoll__V1__RunResponse r = PLIMSOLL__V1__RUN_RESPONSE__INIT;
    r.sandbox = "q\"\\/\n\r\t\b\f\x01\x1f\x7f";
    r.isolation = "a\xff"
                  "b\xe2\x82"
                  "c\xed\xa0\x80"
                  "d\xf4\x90\x80\x80"
                  "e\xc3";
    r.environment = "\xe2\x82\xac\xf0\x9f\x98\x80";
    r.duration_ms = -1;
    size_t len = 0;
    char *s = wire_json_encode(&r.base, &len);
    CHECK_STR(s, "{\"sandbox\":\"q\\\"\\\\/\\n\\r\\t\\b\\f\\u0001\\u001f\x7f\","
                 "\"isolation\":\"a\xef\xbf\xbd"
                 "b\xef\xbf\xbd"
                 "c\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd"
                 "d\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd"
                 "e\xef\xbf\xbd\","
                 "\"durationMs\":\"-1\",\"environment\":\"\xe2\x82\xac\xf0\x9f\x98\x80\"}");
    CHECK(s && len == strlen(s));
    json_t *j = s ? json_loadb(s, len, 0, NULL) : NULL;
    CHECK(j != NULL);
    json_decref(j);
    free(s);

    Plimsoll__V1__ModuleRowResult row = PLIMSOLL__V1__MODULE_ROW_RESULT__INIT;
    double outs[] = { 1, 1.5, -0.0, 1e21, 1e-7, 0.1 + 0.2 };
    row.outputs = outs;
    row.n_outputs = sizeof outs / sizeof outs[0];
    s = wire_json_encode(&row.base, NULL);
    CHECK_STR(s, "{\"outputs\":[1,1.5,-0,1e+21,1e-07,0.30000000000000004]}");
    free(s);

    Plimsoll__V1__DescribeResponse d = PLIMSOLL__V1__DESCRIBE_RESPONSE__INIT;
    Plimsoll__V1__RunResources res = PLIMSOLL__V1__RUN_RESOURCES__INIT;
    d.supports_project = 1;
    d.protocol = 3;
    d.resources = &res;
    res.cpus = 0.5;
    s = wire_json_encode(&d.base, NULL);
    CHECK_STR(s, "{\"supportsProject\":true,\"protocol\":3,\"resources\":{\"cpus\":0.5}}");
    free(s);
    CHECK(wire_json_encode(NULL, NULL) == NULL);
}

/* A request decoded as the daemon decodes one, refusing unknown keys. */
static ProtobufCMessage *dec_strict(const ProtobufCMessageDescriptor *d, const char *s)
{
    plm_err_clear(&err);
    return wire_json_decode_with(d, s, strlen(s), NULL, WIRE_JSON_REFUSE_UNKNOWN, &err);
}

/* True when the strict decode refuses s as an unknown field with exactly the message want. */
static int unknown_refused(const ProtobufCMessageDescriptor *d, const char *s, const char *want)
{
    ProtobufCMessage *m = dec_strict(d, s);
    if (m) {
        protobuf_c_message_free_unpacked(m, NULL);
        printf("# accepted: %s\n", s);
        return 0;
    }
    if (err.kind != PLM_E_INVALID || err.refusal != PLM_REFUSAL_REQUEST || strcmp(err.msg, want) != 0) {
        printf("# %s -> kind %d refusal %d \"%s\", wanted \"%s\"\n", s, err.kind, err.refusal, err.msg, want);
        return 0;
    }
    return 1;
}

static int strict_accepts(const ProtobufCMessageDescriptor *d, const char *s)
{
    ProtobufCMessage *m = dec_strict(d, s);
    if (!m)
        printf("# refused: %s: %s\n", s, err.msg);
    protobuf_c_message_free_unpacked(m, NULL);
    return m != NULL;
}

static void test_unknown_keys(void)
{
    /* the case, and the same typo under other spellings */
    CHECK(unknown_refused(RUN_REQ, "{\"protocol\":3,\"minimumIsolaton\":\"vm\",\"javascript\":{\"code\":\"1\"}}",
                          "unknown field minimumIsolaton (did you mean minimumIsolation?)"));
    CHECK(unknown_refused(RUN_REQ, "{\"minimum_isolaton\":\"vm\"}",
                          "unknown field minimum_isolaton (did you mean minimumIsolation?)"));
    CHECK(unknown_refused(RUN_REQ, "{\"MinimumIsolation\":\"vm\"}",
                          "unknown field MinimumIsolation (did you mean minimumIsolation?)"));
    CHECK(unknown_refused(RUN_REQ, "{\"TIMEOUT_MS\":5}", "unknown field TIMEOUT_MS (did you mean timeoutMs?)"));
    CHECK(unknown_refused(RUN_REQ, "{\"miniumumIsolaiton\":\"vm\"}",
                          "unknown field miniumumIsolaiton (did you mean minimumIsolation?)"));
    /* every nesting level, named by its path */
    CHECK(unknown_refused(RUN_REQ, "{\"project\":{\"files\":[{\"path\":\"a\"},{\"pth\":\"b\"}]}}",
                          "unknown field project.files[1].pth (did you mean path?)"));
    CHECK(unknown_refused(RUN_REQ, "{\"javascript\":{\"code\":\"1\",\"grant_profil\":\"x\"}}",
                          "unknown field javascript.grant_profil (did you mean grantProfile?)"));
    CHECK(unknown_refused(RUN_REQ, "{\"module\":{\"rows\":[{\"value\":[1]}]}}",
                          "unknown field module.rows[0].value (did you mean values?)"));
    CHECK(unknown_refused(RUN_REQ, "{\"cell\":{\"cod\":\"x\"}}", "unknown field cell.cod (did you mean code?)"));
    CHECK(unknown_refused(SESSION_REQ, "{\"sessionID\":\"s\"}", "unknown field sessionID (did you mean sessionId?)"));
    /* too far from any field: no guess */
    CHECK(unknown_refused(RUN_REQ, "{\"softwareRule\":{\"mode\":\"\",\"identity\":[]}}",
                          "unknown field software_rule.identity"));
    CHECK(unknown_refused(RUN_REQ, "{\"protocol\":3,\"bogus\":{\"x\":[1]}}", "unknown field bogus"));
    CHECK(unknown_refused(RUN_REQ, "{\"cell\":{\"cx\":1}}", "unknown field cell.cx"));
    CHECK(unknown_refused(RUN_REQ, "{\"\":1}", "unknown field "));
    /* a null value is still a key the caller meant to set */
    CHECK(unknown_refused(RUN_REQ, "{\"timeoutMS\":null}", "unknown field timeoutMS (did you mean timeoutMs?)"));
    /* key bytes are escaped and cut in the message */
    CHECK(unknown_refused(RUN_REQ, "{\"a\\\"b\\\\\\u00e9\\n \":1}", "unknown field a\\x22b\\x5c\\xc3\\xa9\\x0a\\x20"));
    CHECK(unknown_refused(RUN_REQ,
                          "{\"0123456789012345678901234567890123456789012345678901234567890123456789\":1}",
                          "unknown field 012345678901234567890123456789012345678901234567..."));
    /* known keys pass in both spellings at every level; binary-equal to the lenient decode */
    CHECK(strict_accepts(RUN_REQ, "{\"protocol\":3,\"minimum_isolation\":\"vm\",\"traceId\":\"t\",\"timeout_ms\":5,"
                                  "\"software_rule\":{\"mode\":\"\",\"identities\":[\"a\"]},"
                                  "\"project\":{\"files\":[{\"path\":\"a\",\"content\":\"b\"}],\"steps\":[\"s\"],"
                                  "\"artifacts\":[\"x\"],\"grant_profile\":\"g\"}}"));
    CHECK(strict_accepts(SESSION_REQ, "{\"session_id\":\"s\",\"cell\":{\"language\":\"python\",\"code\":\"1\","
                                      "\"files\":[{\"path\":\"p\"}]},\"softwareRule\":null}"));
    CHECK(strict_accepts(RUN_REQ, "{}"));
    /* a known field under both spellings is still "given twice", not unknown */
    CHECK(!strict_accepts(RUN_REQ, "{\"timeoutMs\":1,\"timeout_ms\":1}") && err.refusal == PLM_REFUSAL_NONE &&
          strstr(err.msg, "given twice"));
    /* malformed JSON stays a plain decode error */
    CHECK(!strict_accepts(RUN_REQ, "{\"bogus\":") && err.refusal == PLM_REFUSAL_NONE);
    /* answers are read leniently: a newer daemon may add fields */
    CHECK(reencodes_to(RUN_RESP, "{\"sandbox\":\"q\",\"newField\":1}", "{\"sandbox\":\"q\"}"));
}

int main(void)
{
    test_golden();
    test_names();
    test_zero_and_null();
    test_integers();
    test_doubles();
    test_bytes_and_enums();
    test_text_rules();
    test_encode_only();
    test_unknown_keys();
    return unit_done();
}
