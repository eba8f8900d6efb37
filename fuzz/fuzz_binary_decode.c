/* fuzz_binary_decode.c: libFuzzer target for application/proto bodies: protobuf-c unpacks the
 * input (first byte picks RunRequest, RunResponse or DescribeResponse) and wire_json_encode must
 * turn whatever protobuf-c accepts, including strings that are not UTF-8, into valid JSON that
 * our decoder reads back to the same text. The one permitted refusal is U+0000 in a string,
 * which binary protobuf carries and our JSON decoder refuses. Any other outcome aborts. */
#include <jansson.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../src/wire/json_codec.h"
#include "sandbox.pb-c.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static const ProtobufCMessageDescriptor *const descs[] = {
        &plimsoll__v1__run_request__descriptor,
        &plimsoll__v1__run_response__descriptor,
        &plimsoll__v1__describe_response__descriptor,
    };
    if (size < 1)
        return 0;
    const ProtobufCMessageDescriptor *desc = descs[data[0] % 3];
    ProtobufCMessage *m = protobuf_c_message_unpack(desc, NULL, size - 1, data + 1);
    if (!m)
        return 0;
    size_t len = 0;
    char *s = wire_json_encode(m, &len);
    if (!s || strlen(s) != len)
        abort();
    /* strict UTF-8 and well-formed, whatever bytes the strings held */
    json_error_t jerr;
    json_t *j = json_loadb(s, len, JSON_REJECT_DUPLICATES | JSON_ALLOW_NUL, &jerr);
    if (!j) {
        fprintf(stderr, "encoder wrote invalid JSON (%s):\n%s\n", jerr.text, s);
        abort();
    }
    json_decref(j);
    struct plm_err err = { 0 };
    ProtobufCMessage *m2 = wire_json_decode(desc, s, len, &err);
    if (m2) {
        size_t len2 = 0;
        char *s2 = wire_json_encode(m2, &len2);
        if (!s2 || len2 != len || memcmp(s, s2, len) != 0) {
            fprintf(stderr, "not a fixed point:\n%s\n%s\n", s, s2 ? s2 : "(null)");
            abort();
        }
        free(s2);
        protobuf_c_message_free_unpacked(m2, NULL);
    } else if (!strstr(s, "\\u0000")) {
        fprintf(stderr, "own output refused: %s\n%s\n", err.msg, s);
        abort();
    }
    free(s);
    protobuf_c_message_free_unpacked(m, NULL);
    return 0;
}
