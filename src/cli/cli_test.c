/* cli_test.c: the client's trust decisions (check.c) and its escaping and JSON (card.c).
 * Record checks run against the golden vectors of tests/data/golden.json ($GOLDEN_JSON) and
 * against tampered copies: every record field altered must read as a mismatch. */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../wire/convert.h"
#include "../wire/json_codec.h"
#include "cli.h"
#include "unit.h"

#define ID_A "oci-manifest:linux/amd64@sha256:aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
#define ID_B "oci-manifest:linux/amd64@sha256:bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb"
#define RULE_AB "approved:sha256:def36ca56c26169c32c1690b9f8df85526c919015dc46db52662b58d98ad7a10"

static json_t *golden;

/* ---- helpers ---- */

static json_t *golden_entry(const char *list, size_t i, const char *key)
{
    return json_object_get(json_array_get(json_object_get(golden, list), i), key);
}

static ProtobufCMessage *decode(const ProtobufCMessageDescriptor *d, const json_t *j)
{
    char *text = json_dumps(j, JSON_COMPACT);
    if (!text)
        return NULL;
    struct plm_err err = {0};
    ProtobufCMessage *m = wire_json_decode(d, text, strlen(text), &err);
    if (!m)
        printf("# decode %s: %s\n", d->name, err.msg);
    free(text);
    return m;
}

/* Fills record.recordSha256 with the digest of the record's other fields. */
static void seal(json_t *resp)
{
    json_t *rec = json_object_get(resp, "record");
    Plimsoll__V1__RunRecord *m = (Plimsoll__V1__RunRecord *)decode(&plimsoll__v1__run_record__descriptor, rec);
    if (!m)
        return;
    struct plm_record pr;
    wire_record_view(m, &pr);
    char hex[PLM_HEX_SHA256];
    rec_record_digest(&pr, hex);
    json_object_set_new(rec, "recordSha256", json_string(hex));
    protobuf_c_message_free_unpacked(&m->base, NULL);
}

static char last_msg[512];

/* 0 when the pair checks, -1 on mismatch, -2 when the inputs did not decode. */
static int check_pair(const json_t *req_j, const json_t *resp_j)
{
    ProtobufCMessage *req = decode(&plimsoll__v1__run_request__descriptor, req_j);
    ProtobufCMessage *resp = decode(&plimsoll__v1__run_response__descriptor, resp_j);
    int r = -2;
    last_msg[0] = '\0';
    if (req && resp) {
        struct plm_err err = {0};
        r = cli_check_record((Plimsoll__V1__RunRequest *)req, (Plimsoll__V1__RunResponse *)resp, &err);
        snprintf(last_msg, sizeof last_msg, "%s", err.msg);
        if (r < 0 && err.kind != PLM_E_MISMATCH)
            r = -3;
    }
    if (req)
        protobuf_c_message_free_unpacked(req, NULL);
    if (resp)
        protobuf_c_message_free_unpacked(resp, NULL);
    return r;
}

static enum cli_verdict answer_verdict(const json_t *req_j, const json_t *resp_j, enum plm_tier floor)
{
    ProtobufCMessage *req = decode(&plimsoll__v1__run_request__descriptor, req_j);
    ProtobufCMessage *resp = decode(&plimsoll__v1__run_response__descriptor, resp_j);
    struct cli_outcome o = {0};
    o.verdict = CLI_V_TRANSPORT;
    if (req && resp)
        cli_check_answer((Plimsoll__V1__RunRequest *)req, (Plimsoll__V1__RunResponse *)resp, floor, &o);
    snprintf(last_msg, sizeof last_msg, "%s", o.message);
    if (req)
        protobuf_c_message_free_unpacked(req, NULL);
    if (resp)
        protobuf_c_message_free_unpacked(resp, NULL);
    return o.verdict;
}

/* A response for golden result `ri` stamped with a consistent record for golden request `qi`. */
static json_t *stamped(size_t qi, size_t ri, unsigned version, const char *software_identity, const char *rule_id)
{
    json_t *resp = json_deep_copy(golden_entry("results", ri, "response"));
    json_object_set_new(resp, "environment", json_string("docker-image:sha256:0123"));
    if (software_identity)
        json_object_set_new(resp, "softwareIdentity", json_string(software_identity));
    json_t *rec = json_object();
    json_object_set_new(rec, "version", json_integer(version));
    json_object_set(rec, "requestSha256", golden_entry("requests", qi, "sha256"));
    json_object_set(rec, "resultSha256", golden_entry("results", ri, "sha256"));
    json_object_set(rec, "provider", json_object_get(resp, "sandbox"));
    json_object_set(rec, "isolation", json_object_get(resp, "isolation"));
    if (version >= 2) {
        json_object_set(rec, "environment", json_object_get(resp, "environment"));
        if (software_identity)
            json_object_set_new(rec, "softwareIdentity", json_string(software_identity));
        if (rule_id)
            json_object_set_new(rec, "softwareRuleId", json_string(rule_id));
    }
    json_object_set_new(rec, "policy", json_string("plimsoll-evidence:sha256:ee"));
    json_object_set_new(rec, "startedUnixMs", json_string("1790000000000"));
    json_object_set_new(rec, "endedUnixMs", json_string("1790000000812"));
    json_object_set_new(resp, "record", rec);
    seal(resp);
    return resp;
}

static void flip_hex(json_t *obj, const char *key)
{
    char buf[PLM_HEX_SHA256];
    snprintf(buf, sizeof buf, "%s", json_string_value(json_object_get(obj, key)));
    buf[0] = buf[0] == '0' ? '1' : '0';
    json_object_set_new(obj, key, json_string(buf));
}

/* ---- base64, details, errors ---- */

static int b64_is(const char *in, const uint8_t *want, size_t want_len)
{
    uint8_t *out = NULL;
    size_t n = 0;
    int r = cli_b64_decode(in, strlen(in), &out, &n);
    int ok = r == 0 && n == want_len && (want_len == 0 || memcmp(out, want, n) == 0);
    free(out);
    return ok;
}

static int b64_fails(const char *in)
{
    uint8_t *out = NULL;
    size_t n = 0;
    int r = cli_b64_decode(in, strlen(in), &out, &n);
    free(out);
    return r < 0;
}

static void test_base64(void)
{
    static const uint8_t iso[] = {0x08, 0x05}, fb[] = {0xfb, 0xff}, ff78[] = {0xff, 0x78};
    CHECK(b64_is("CAU", iso, 2));
    CHECK(b64_is("CAU=", iso, 2));
    CHECK(b64_is("+/8", fb, 2));
    CHECK(b64_is("-_8", fb, 2));
    CHECK(b64_is("-_8=", fb, 2));
    CHECK(b64_is("/3g=", ff78, 2));
    CHECK(b64_is("", NULL, 0));
    CHECK(b64_fails("CAU=="));
    CHECK(b64_fails("CA="));
    CHECK(b64_fails("C"));
    CHECK(b64_fails("CAU==="));
    CHECK(b64_fails("C AU"));
    CHECK(b64_fails("CA*U"));
}

static int detail_reason(const char *type, const char *value)
{
    char body[512];
    snprintf(body, sizeof body,
             "{\"code\":\"failed_precondition\",\"message\":\"m\",\"details\":[{\"type\":\"%s\",\"value\":\"%s\","
             "\"debug\":{\"x\":1}}]}",
             type, value);
    struct cli_error_answer e;
    cli_parse_error(400, body, strlen(body), &e);
    return e.detail_reason;
}

static void test_details(void)
{
    CHECK(detail_reason("plimsoll.v1.NotDispatched", "CAU") == 5);                      /* unpadded */
    CHECK(detail_reason("plimsoll.v1.NotDispatched", "CAU=") == 5);                     /* padded */
    CHECK(detail_reason("type.googleapis.com/plimsoll.v1.NotDispatched", "CAY") == 6); /* prefixed */
    CHECK(detail_reason("type.googleapis.com/plimsoll.v1.NotDispatched", "CAc=") == 7);
    CHECK(detail_reason("plimsoll.v1.NotDispatched", "CAE") == 1);
    /* field 1 sent length-delimited (0a 01 05): wrong wire type, states nothing */
    CHECK(detail_reason("plimsoll.v1.NotDispatched", "CgEF") == 0);
    /* an unknown field (2, varint 7) before field 1 is skipped */
    CHECK(detail_reason("plimsoll.v1.NotDispatched", "EAcIBQ") == 5);
    /* reason 0 (empty message) is never attached: states nothing */
    CHECK(detail_reason("plimsoll.v1.NotDispatched", "") == 0);
    CHECK(detail_reason("plimsoll.v1.NotDispatched", "CAA") == 0);
    /* truncated varint, bad base64, other message types */
    CHECK(detail_reason("plimsoll.v1.NotDispatched", "CA") == 0);
    CHECK(detail_reason("plimsoll.v1.NotDispatched", "!!!") == 0);
    CHECK(detail_reason("plimsoll.v1.SessionEnded", "CAU") == 0);
    CHECK(detail_reason("plimsoll.v1.NotDispatchedX", "CAU") == 0);
    CHECK(detail_reason("x/plimsoll.v1.NotDispatched/", "CAU") == 0);

    struct cli_error_answer e;
    const char *two = "{\"code\":\"unimplemented\",\"message\":\"m\",\"details\":["
                      "{\"type\":\"plimsoll.v1.NotDispatched\",\"value\":\"CgEF\"},"
                      "{\"type\":\"plimsoll.v1.NotDispatched\",\"value\":\"CAM\"}]}";
    cli_parse_error(501, two, strlen(two), &e);
    CHECK(e.detail_reason == 3);
    CHECK_STR(e.code, "unimplemented");

    const char *bogus = "{\"code\":\"bogus\",\"message\":\"went wrong\"}";
    cli_parse_error(400, bogus, strlen(bogus), &e);
    CHECK_STR(e.code, "internal");
    CHECK_STR(e.message, "went wrong");
    CHECK(e.detail_reason == 0);

    cli_parse_error(503, "not json", 8, &e);
    CHECK_STR(e.code, "unavailable");
    CHECK_STR(e.message, "HTTP 503");
    cli_parse_error(418, NULL, 0, &e);
    CHECK_STR(e.code, "unknown");
    CHECK_STR(e.message, "HTTP 418");
    const char *dup = "{\"code\":\"internal\",\"code\":\"invalid_argument\"}";
    cli_parse_error(404, dup, strlen(dup), &e);
    CHECK_STR(e.code, "unimplemented"); /* duplicate keys: the body is malformed */

    CHECK(cli_not_dispatched_from_header("isolation") == 5);
    CHECK(cli_not_dispatched_from_header("request") == 1);
    CHECK(cli_not_dispatched_from_header("unknown") == 0);
    CHECK(cli_not_dispatched_from_header("Isolation") == 0);
    CHECK(cli_not_dispatched_from_header(NULL) == 0);
}

static void test_classify(void)
{
    struct cli_error_answer e = {.code = "failed_precondition", .message = "below", .detail_reason = 5};
    struct cli_outcome o = {0};
    cli_classify_error(&e, true, NULL, &o);
    CHECK(o.verdict == CLI_V_REFUSED && o.refusal == 5);
    CHECK(cli_exit_status(&o, NULL) == CLI_EXIT_REFUSED);

    memset(&o, 0, sizeof o);
    cli_classify_error(&e, false, "isolation", &o);
    CHECK(o.verdict == CLI_V_ERROR && o.detail_disregarded);
    CHECK(cli_exit_status(&o, NULL) == CLI_EXIT_SERVER);

    struct cli_error_answer nodetail = {.code = "invalid_argument", .message = "bad", .detail_reason = 0};
    memset(&o, 0, sizeof o);
    cli_classify_error(&nodetail, true, "request", &o);
    CHECK(o.verdict == CLI_V_REFUSED && o.refusal == 1);
    memset(&o, 0, sizeof o);
    cli_classify_error(&nodetail, true, "nonsense", &o);
    CHECK(o.verdict == CLI_V_ERROR);
    memset(&o, 0, sizeof o);
    cli_classify_error(&nodetail, true, NULL, &o);
    CHECK(o.verdict == CLI_V_ERROR && !o.detail_disregarded);
    /* the detail wins over the header */
    memset(&o, 0, sizeof o);
    cli_classify_error(&e, true, "capacity", &o);
    CHECK(o.refusal == 5);

    const char *rid = "0123456789abcdef0123456789abcdef";
    struct cli_http_answer a = {.status = 200, .content_type = "application/json; charset=utf-8",
                                .request_id_echo = (char *)rid, .request_id_n = 1, .body = "{}", .body_len = 2};
    CHECK(cli_classify_http(rid, &a, &o));
    a.request_id_n = 2;
    CHECK(!cli_classify_http(rid, &a, &o) && o.verdict == CLI_V_RECORD_MISMATCH);
    a.request_id_n = 0;
    a.request_id_echo = NULL;
    CHECK(!cli_classify_http(rid, &a, &o) && o.verdict == CLI_V_RECORD_MISMATCH);
    CHECK(cli_exit_status(&o, NULL) == CLI_EXIT_RECORD);
    a.request_id_n = 1;
    a.request_id_echo = "0123456789abcdef0123456789abcdeF";
    CHECK(!cli_classify_http(rid, &a, &o) && o.verdict == CLI_V_RECORD_MISMATCH);
    a.request_id_echo = (char *)rid;
    a.content_type = "text/plain";
    CHECK(!cli_classify_http(rid, &a, &o) && o.verdict == CLI_V_TRANSPORT);
    CHECK(cli_exit_status(&o, NULL) == CLI_EXIT_TRANSPORT);
    a.content_type = NULL;
    CHECK(!cli_classify_http(rid, &a, &o) && o.verdict == CLI_V_TRANSPORT);

    char refusal[] = "{\"code\":\"failed_precondition\",\"message\":\"m\",\"details\":"
                     "[{\"type\":\"plimsoll.v1.NotDispatched\",\"value\":\"CAQ\"}]}";
    struct cli_http_answer err_a = {.status = 400, .content_type = "application/json", .request_id_echo = (char *)rid,
                                    .request_id_n = 1, .body = refusal, .body_len = strlen(refusal)};
    CHECK(!cli_classify_http(rid, &err_a, &o) && o.verdict == CLI_V_REFUSED && o.refusal == 4);
    err_a.request_id_echo = NULL;
    err_a.request_id_n = 0;
    CHECK(!cli_classify_http(rid, &err_a, &o) && o.verdict == CLI_V_ERROR && o.detail_disregarded);

    CHECK(cli_content_type_is_json("application/json"));
    CHECK(cli_content_type_is_json("application/json;charset=utf-8"));
    CHECK(cli_content_type_is_json(" Application/JSON ; x=y"));
    CHECK(!cli_content_type_is_json("application/jsonx"));
    CHECK(!cli_content_type_is_json("application/proto"));
    CHECK(!cli_content_type_is_json(""));
    CHECK(!cli_content_type_is_json(NULL));
    CHECK(cli_answer_bound(rid, rid, 1));
    CHECK(!cli_answer_bound(rid, rid, 2));
    CHECK(!cli_answer_bound(rid, NULL, 0));
}

/* ---- record checks over the golden vectors ---- */

static void test_golden_record(void)
{
    /* Golden request 2, result 2 and record 1 belong together (a session call): every check up to
     * the session fields passes with the golden digests as they stand. */
    json_t *resp = json_deep_copy(golden_entry("results", 1, "response"));
    json_t *rec = json_deep_copy(golden_entry("records", 0, "record"));
    json_object_set_new(rec, "recordSha256", json_incref(golden_entry("records", 0, "sha256")));
    json_object_set(resp, "environment", json_object_get(rec, "environment"));
    json_object_set_new(resp, "record", rec);
    const json_t *req = golden_entry("requests", 1, "request");
    CHECK(check_pair(req, resp) == -1);
    CHECK(strstr(last_msg, "session fields") != NULL);
    printf("# golden session record: %s\n", last_msg);

    /* The same as a single run: session fields cleared and the record resealed. */
    json_object_del(rec, "session");
    json_object_del(rec, "sequence");
    json_object_del(rec, "previousSha256");
    seal(resp);
    CHECK(check_pair(req, resp) == 0);
    /* the version 2 request (protocol 2, approved rule) with that result: rule id must match */
    const json_t *req5 = golden_entry("requests", 4, "request");
    CHECK(check_pair(req5, resp) == -1);
    json_decref(resp);
}

static void tamper_case(const json_t *req, const json_t *base, const char *field, json_t *value, bool reseal,
                        bool expect_pass)
{
    json_t *resp = json_deep_copy(base);
    json_t *rec = json_object_get(resp, "record");
    if (strcmp(field, "recordSha256") == 0 || strcmp(field, "requestSha256") == 0 ||
        strcmp(field, "resultSha256") == 0)
        flip_hex(rec, field);
    else
        json_object_set(rec, field, value);
    if (reseal)
        seal(resp);
    int r = check_pair(req, resp);
    unit_n++;
    if ((r == 0) == expect_pass && r != -2 && r != -3) {
        printf("ok %d - record.%s tampered%s -> %s (%s)\n", unit_n, field, reseal ? " and resealed" : "",
               expect_pass ? "passes" : "mismatch", last_msg);
    } else {
        unit_failed++;
        printf("not ok %d - record.%s tampered%s: r=%d %s\n", unit_n, field, reseal ? " and resealed" : "", r,
               last_msg);
    }
    json_decref(resp);
}

static void test_tampering(void)
{
    const json_t *req4 = golden_entry("requests", 3, "request"); /* v2 javascript, approved rule */
    json_t *base = stamped(3, 0, 2, ID_A, RULE_AB);
    CHECK(check_pair(req4, base) == 0);

    struct {
        const char *field;
        json_t *value;
        bool caught_when_resealed; /* only the record digest covers policy and the times */
    } fields[] = {
        {"version", json_integer(1), true},
        {"version", json_integer(3), true},
        {"requestSha256", NULL, true},
        {"resultSha256", NULL, true},
        {"provider", json_string("quickjs"), true},
        {"isolation", json_string("vm"), true},
        {"environment", json_string("docker-image:sha256:9999"), true},
        {"policy", json_string("plimsoll-evidence:sha256:ff"), false},
        {"softwareIdentity", json_string(ID_B), true},
        {"softwareRuleId", json_string("exact:" ID_A), true},
        {"startedUnixMs", json_string("1790000000001"), false},
        {"endedUnixMs", json_string("1790000000813"), false},
        {"session", json_string("5947d7c33d783f94b3b4c1a96ebc8991ed28f1b069b71e03376cba8caa98a720"), true},
        {"sequence", json_string("1"), true},
        {"previousSha256", json_string("0000000000000000000000000000000000000000000000000000000000000001"), true},
        {"unanswered", json_string("unavailable"), true},
        {"recordSha256", NULL, true},
    };
    for (size_t i = 0; i < sizeof fields / sizeof fields[0]; i++) {
        tamper_case(req4, base, fields[i].field, fields[i].value, false, false);
        if (strcmp(fields[i].field, "recordSha256") != 0)
            tamper_case(req4, base, fields[i].field, fields[i].value, true, !fields[i].caught_when_resealed);
        json_decref(fields[i].value);
    }

    /* The answer's own evidence fields must match the record, and the result must be the one digested. */
    const char *resp_fields[][2] = {
        {"sandbox", "quickjs"}, {"isolation", "vm"}, {"environment", "x"}, {"softwareIdentity", ID_B},
    };
    for (size_t i = 0; i < sizeof resp_fields / sizeof resp_fields[0]; i++) {
        json_t *resp = json_deep_copy(base);
        json_object_set_new(resp, resp_fields[i][0], json_string(resp_fields[i][1]));
        CHECK(check_pair(req4, resp) == -1);
        json_decref(resp);
    }
    json_t *resp = json_deep_copy(base);
    json_object_set_new(json_object_get(resp, "javascript"), "stdout", json_string("Mwo=")); /* "3\n" */
    CHECK(check_pair(req4, resp) == -1);
    CHECK(strstr(last_msg, "result_sha256") != NULL);
    json_object_set_new(json_object_get(resp, "javascript"), "stdout", json_string("Mgo"));     /* same bytes */
    CHECK(check_pair(req4, resp) == 0);
    json_object_set_new(json_object_get(resp, "javascript"), "exitCode", json_integer(1));
    CHECK(check_pair(req4, resp) == -1);
    json_decref(resp);
    resp = json_deep_copy(base);
    json_object_set_new(resp, "durationMs", json_string("1")); /* durations are not digested */
    CHECK(check_pair(req4, resp) == 0);
    json_object_del(resp, "record");
    CHECK(check_pair(req4, resp) == -1);
    CHECK(strstr(last_msg, "no record") != NULL);
    json_decref(resp);

    /* What we sent is what must have been digested. */
    json_t *req = json_deep_copy(req4);
    json_object_set_new(json_object_get(req, "javascript"), "code", json_string("console.log(1+2)"));
    CHECK(check_pair(req, base) == -1);
    CHECK(strstr(last_msg, "request_sha256") != NULL);
    json_decref(req);
    req = json_deep_copy(req4);
    json_object_set_new(req, "timeoutMs", json_integer(5001));
    CHECK(check_pair(req, base) == -1);
    json_decref(req);
    req = json_deep_copy(req4);
    json_object_set_new(req, "traceId", json_string("other")); /* not digested */
    CHECK(check_pair(req, base) == 0);
    json_decref(req);

    /* A consistent record whose identity is outside the approved set still fails. */
    json_t *outside = stamped(3, 0, 2, "oci-manifest:linux/amd64@sha256:cc", RULE_AB);
    CHECK(check_pair(req4, outside) == -1);
    CHECK(strstr(last_msg, "does not satisfy") != NULL);
    json_decref(outside);
    json_t *noid = stamped(3, 0, 2, NULL, RULE_AB);
    CHECK(check_pair(req4, noid) == -1);
    json_decref(noid);
    /* Protocol 2 needs version 2. */
    json_t *v1 = stamped(3, 0, 1, NULL, NULL);
    CHECK(check_pair(req4, v1) == -1);
    CHECK(strstr(last_msg, "version") != NULL);
    json_decref(v1);

    /* Protocol 1 request, javascript: version 1 and version 2 records both check. */
    const json_t *req1 = golden_entry("requests", 0, "request");
    json_t *r1v1 = stamped(0, 0, 1, NULL, NULL);
    CHECK(check_pair(req1, r1v1) == 0);
    json_object_set_new(json_object_get(r1v1, "record"), "softwareIdentity", json_string(ID_A));
    seal(r1v1);
    CHECK(check_pair(req1, r1v1) == -1); /* a version 1 record has no software fields */
    json_decref(r1v1);
    json_t *r1v2 = stamped(0, 0, 2, NULL, NULL);
    CHECK(check_pair(req1, r1v2) == 0);
    json_decref(r1v2);

    /* The same request at protocol 3, as this client sends it. */
    json_t *req3 = json_deep_copy(req4);
    json_object_set_new(req3, "protocol", json_integer(3));
    CHECK(check_pair(req3, base) == -1); /* the golden digest is for protocol 2 */
    json_decref(req3);

    /* Result kind and the tier re-check (wire.md §11.4-11.5). */
    CHECK(answer_verdict(req4, base, PLM_TIER_UNKNOWN) == CLI_V_RAN);
    CHECK(answer_verdict(req4, base, PLM_TIER_PROCESS) == CLI_V_RAN);
    CHECK(answer_verdict(req4, base, PLM_TIER_CONTAINER) == CLI_V_RAN);
    CHECK(answer_verdict(req4, base, PLM_TIER_KERNEL) == CLI_V_EVIDENCE_MISMATCH);
    CHECK(strstr(last_msg, "below requested minimum kernel") != NULL);
    CHECK(answer_verdict(req4, base, PLM_TIER_VM) == CLI_V_EVIDENCE_MISMATCH);
    const char *weak[] = {"none", "", "unknown", "Container"};
    for (size_t i = 0; i < sizeof weak / sizeof weak[0]; i++) {
        json_t *w = json_deep_copy(base);
        json_object_set_new(w, "isolation", json_string(weak[i]));
        json_object_set_new(json_object_get(w, "record"), "isolation", json_string(weak[i]));
        seal(w);
        CHECK(answer_verdict(req4, w, PLM_TIER_UNKNOWN) == CLI_V_RAN);
        CHECK(answer_verdict(req4, w, PLM_TIER_PROCESS) == CLI_V_EVIDENCE_MISMATCH);
        json_decref(w);
    }
    /* a record mismatch is reported as such even when the tier would also fail */
    json_t *bad = json_deep_copy(base);
    flip_hex(json_object_get(bad, "record"), "recordSha256");
    CHECK(answer_verdict(req4, bad, PLM_TIER_VM) == CLI_V_RECORD_MISMATCH);
    json_decref(bad);
    /* result kind: a project request answered with a javascript result */
    const json_t *req5 = golden_entry("requests", 4, "request");
    CHECK(answer_verdict(req5, base, PLM_TIER_UNKNOWN) == CLI_V_RECORD_MISMATCH);
    CHECK(strstr(last_msg, "result kind") != NULL);
    json_t *nores = json_deep_copy(base);
    json_object_del(nores, "javascript");
    CHECK(answer_verdict(req4, nores, PLM_TIER_UNKNOWN) == CLI_V_RECORD_MISMATCH);
    json_decref(nores);

    json_decref(base);
}

/* ---- exit status, escaping, JSON ---- */

static void test_exit_status(void)
{
    struct cli_outcome o = {.verdict = CLI_V_RAN};
    Plimsoll__V1__JavaScriptResult js = PLIMSOLL__V1__JAVA_SCRIPT_RESULT__INIT;
    CHECK(cli_exit_status(&o, &js) == 0);
    js.exit_code = 3;
    CHECK(cli_exit_status(&o, &js) == 3);
    js.exit_code = 124;
    js.timed_out = 1;
    CHECK(cli_exit_status(&o, &js) == 124);
    js.exit_code = 0;
    CHECK(cli_exit_status(&o, &js) == 124);
    js.timed_out = 0;
    js.exit_code = 198;
    CHECK(cli_exit_status(&o, &js) == 198);
    js.exit_code = 200;
    CHECK(cli_exit_status(&o, &js) == CLI_EXIT_GUEST_OUT_OF_RANGE);
    js.exit_code = -1;
    CHECK(cli_exit_status(&o, &js) == CLI_EXIT_GUEST_OUT_OF_RANGE);
    o.verdict = CLI_V_EVIDENCE_MISMATCH;
    CHECK(cli_exit_status(&o, &js) == CLI_EXIT_EVIDENCE);
    o.verdict = CLI_V_RECORD_MISMATCH;
    CHECK(cli_exit_status(&o, &js) == CLI_EXIT_RECORD);
    o.verdict = CLI_V_TRANSPORT;
    CHECK(cli_exit_status(&o, NULL) == CLI_EXIT_TRANSPORT);
    o.verdict = CLI_V_ERROR;
    CHECK(cli_exit_status(&o, NULL) == CLI_EXIT_SERVER);
}

static char *safe(const char *s)
{
    char *buf = NULL;
    size_t n = 0;
    FILE *f = open_memstream(&buf, &n);
    cli_put_safe(f, s, "(empty)");
    fclose(f);
    return buf;
}

static void test_escaping(void)
{
    char *s;
    CHECK_STR(s = safe("plain text"), "plain text");
    free(s);
    CHECK_STR(s = safe("a\x1b[2Jb\n"), "a\\x1b[2Jb\\x0a");
    free(s);
    CHECK_STR(s = safe("caf\xc3\xa9"), "caf\xc3\xa9");
    free(s);
    CHECK_STR(s = safe("\xc2\x9b" "31m"), "\\xc2\\x9b31m"); /* C1 CSI */
    free(s);
    CHECK_STR(s = safe("\xff\xfe"), "\\xff\\xfe");
    free(s);
    CHECK_STR(s = safe(""), "(empty)");
    free(s);
    CHECK_STR(s = safe(NULL), "-");
    free(s);

    static const uint8_t bad[] = {0xed, 0xa0, 0x80}; /* a surrogate */
    CHECK(!cli_utf8_valid(bad, 3));
    static const uint8_t over[] = {0xc0, 0xaf};
    CHECK(!cli_utf8_valid(over, 2));
    CHECK(cli_utf8_valid((const uint8_t *)"\xf0\x9f\x98\x80", 4));
    CHECK(!cli_utf8_valid((const uint8_t *)"\xf4\x90\x80\x80", 4));
}

static void test_card_json(void)
{
    json_t *resp_j = stamped(0, 0, 2, NULL, NULL);
    Plimsoll__V1__RunResponse *resp =
        (Plimsoll__V1__RunResponse *)decode(&plimsoll__v1__run_response__descriptor, resp_j);
    CHECK(resp != NULL);
    if (!resp) {
        json_decref(resp_j);
        return;
    }
    struct cli_outcome o = {.verdict = CLI_V_RAN, .bound = true};
    struct cli_run_report rep = {.request_id = "0123456789abcdef0123456789abcdef", .floor = "container", .o = &o,
                                 .resp = resp, .elapsed_s = 0.01, .exit_status = 0};
    json_t *j = cli_card_json(&rep);
    CHECK(j != NULL);
    CHECK_STR(json_string_value(json_object_get(j, "verdict")), "ran");
    CHECK_STR(json_string_value(json_object_get(j, "code_ran")), "yes");
    CHECK_STR(json_string_value(json_object_get(j, "stdout")), "2\n");
    CHECK_STR(json_string_value(json_object_get(j, "stdout_encoding")), "utf-8");
    CHECK_STR(json_string_value(json_object_get(j, "stderr")), "/3g=");
    CHECK_STR(json_string_value(json_object_get(j, "stderr_encoding")), "base64");
    CHECK_STR(json_string_value(json_object_get(j, "isolation")), "container");
    CHECK(json_is_true(json_object_get(json_object_get(j, "record"), "verified")));
    json_decref(j);

    o.verdict = CLI_V_RECORD_MISMATCH;
    snprintf(o.message, sizeof o.message, "record mismatch: x");
    rep.output_withheld = true;
    rep.exit_status = CLI_EXIT_RECORD;
    j = cli_card_json(&rep);
    CHECK(j && json_object_get(j, "stdout") == NULL && json_is_true(json_object_get(j, "output_withheld")));
    CHECK(j && json_is_false(json_object_get(json_object_get(j, "record"), "verified")));
    CHECK_STR(json_string_value(json_object_get(j, "code_ran")), "unknown");
    json_decref(j);

    struct cli_outcome ref = {.verdict = CLI_V_REFUSED, .refusal = 5, .bound = true,
                              .code = "failed_precondition", .message = "below"};
    struct cli_run_report rr = {.request_id = "x", .floor = "vm", .o = &ref, .exit_status = CLI_EXIT_REFUSED};
    j = cli_card_json(&rr);
    CHECK_STR(json_string_value(json_object_get(j, "refusal_reason")), "isolation");
    CHECK_STR(json_string_value(json_object_get(j, "code_ran")), "no");
    CHECK(strstr(json_string_value(json_object_get(j, "verdict_text")), "no code ran") != NULL);
    json_decref(j);

    char *text = NULL;
    size_t n = 0;
    FILE *f = open_memstream(&text, &n);
    cli_card_print(f, &rr);
    fclose(f);
    CHECK(strstr(text, "refused before dispatch: isolation") && strstr(text, "no code ran"));
    free(text);

    protobuf_c_message_free_unpacked(&resp->base, NULL);
    json_decref(resp_j);
}

int main(void)
{
    const char *path = getenv("GOLDEN_JSON");
    if (!path)
        path = "tests/data/golden.json";
    json_error_t jerr;
    golden = json_load_file(path, 0, &jerr);
    if (!golden) {
        printf("not ok 1 - load %s: %s\n", path, jerr.text);
        return 1;
    }
    test_base64();
    test_details();
    test_classify();
    test_golden_record();
    test_tampering();
    test_exit_status();
    test_escaping();
    test_card_json();
    json_decref(golden);
    return unit_done();
}
