/* convert_test.c: the codec path end to end: golden JSON -> wire_json_decode -> views -> digests,
 * plus error bodies, detail bytes and UTF-8 repair. */
#include <jansson.h>

#include "connect_error.h"
#include "convert.h"
#include "json_codec.h"
#include "unit.h"

static void *decode(const ProtobufCMessageDescriptor *d, json_t *j)
{
    char *s = json_dumps(j, JSON_COMPACT);
    struct plm_err err = {0};
    void *m = wire_json_decode(d, s, strlen(s), &err);
    if (!m)
        printf("# decode: %s\n", err.msg);
    free(s);
    return m;
}

int main(void)
{
    json_error_t jerr;
    json_t *g = json_load_file(getenv("GOLDEN_JSON"), 0, &jerr);
    CHECK(g != NULL);
    if (!g)
        return unit_done();
    size_t i;
    json_t *v;
    json_array_foreach(json_object_get(g, "requests"), i, v) {
        json_t *rj = json_object_get(v, "request");
        bool session = json_object_get(rj, "sessionId") != NULL;
        ProtobufCMessage *m = decode(session ? &plimsoll__v1__session_run_request__descriptor
                                             : &plimsoll__v1__run_request__descriptor, rj);
        CHECK(m != NULL);
        if (!m)
            continue;
        struct wire_request_view view;
        struct plm_err err = {0};
        int rc = session ? wire_session_request_view((void *)m, &view, &err) : wire_request_view((void *)m, &view, &err);
        CHECK(rc == 0);
        char hex[PLM_HEX_SHA256];
        rec_request_digest(&view.req, hex);
        CHECK_STR(hex, json_string_value(json_object_get(v, "sha256")));
        wire_request_view_done(&view);
        protobuf_c_message_free_unpacked(m, NULL);
    }
    json_array_foreach(json_object_get(g, "results"), i, v) {
        Plimsoll__V1__RunResponse *m = decode(&plimsoll__v1__run_response__descriptor, json_object_get(v, "response"));
        CHECK(m != NULL);
        if (!m)
            continue;
        struct wire_result_view view;
        struct plm_err err = {0};
        CHECK(wire_result_view(m, &view, &err) == 0);
        char hex[PLM_HEX_SHA256];
        rec_result_digest(&view.res, hex);
        CHECK_STR(hex, json_string_value(json_object_get(v, "sha256")));
        /* rebuild through wire_response_to_pb and the digest must not change */
        Plimsoll__V1__RunResponse *again = wire_response_to_pb(&view.res, NULL);
        if (view.res.kind == PLM_KIND_JAVASCRIPT || view.res.kind == PLM_KIND_PROJECT) {
            CHECK(again != NULL);
            struct wire_result_view v2;
            CHECK(wire_result_view(again, &v2, &err) == 0);
            char hex2[PLM_HEX_SHA256];
            rec_result_digest(&v2.res, hex2);
            CHECK_STR(hex2, hex);
            wire_result_view_done(&v2);
        }
        if (again)
            protobuf_c_message_free_unpacked(&again->base, NULL);
        wire_result_view_done(&view);
        protobuf_c_message_free_unpacked(&m->base, NULL);
    }
    json_array_foreach(json_object_get(g, "records"), i, v) {
        Plimsoll__V1__RunRecord *m = decode(&plimsoll__v1__run_record__descriptor, json_object_get(v, "record"));
        CHECK(m != NULL);
        if (!m)
            continue;
        struct plm_record rec;
        wire_record_view(m, &rec);
        char hex[PLM_HEX_SHA256];
        rec_record_digest(&rec, hex);
        CHECK_STR(hex, json_string_value(json_object_get(v, "sha256")));
        protobuf_c_message_free_unpacked(&m->base, NULL);
    }
    json_decref(g);

    /* wire.md §7.4 detail bytes, unpadded */
    const char *want[] = {"", "CAE", "CAI", "CAM", "CAQ", "CAU", "CAY", "CAc"};
    for (int r = 1; r <= 7; r++) {
        char *body = wire_connect_error_json("failed_precondition", "x", (enum plm_refusal)r, NULL);
        char expect[160];
        snprintf(expect, sizeof expect,
                 "{\"code\":\"failed_precondition\",\"message\":\"x\",\"details\":[{\"type\":\"plimsoll.v1.NotDispatched\",\"value\":\"%s\"}]}",
                 want[r]);
        CHECK_STR(body, expect);
        free(body);
    }
    char *body = wire_connect_error_json("internal", "boom", PLM_REFUSAL_NONE, NULL);
    CHECK_STR(body, "{\"code\":\"internal\",\"message\":\"boom\"}");
    free(body);
    CHECK(wire_connect_status("resource_exhausted") == 429);
    CHECK(wire_connect_status("failed_precondition") == 400);
    CHECK(wire_connect_status("unimplemented") == 501);
    CHECK(wire_connect_status("nonsense") == 500);
    CHECK_STR(wire_connect_code(PLM_E_ISOLATION), "failed_precondition");
    CHECK_STR(wire_connect_code(PLM_E_PROTOCOL), "unimplemented");

    char *fixed = wire_utf8_repair("ok\xff\xc3(\xe2\x82\xac");
    CHECK_STR(fixed, "ok\xef\xbf\xbd\xef\xbf\xbd(\xe2\x82\xac");
    free(fixed);
    return unit_done();
}
