/* fuzz_json_decode.c: libFuzzer target for wire_json_decode, the daemon's first parser of a
 * request body. Each input is decoded as RunRequest, RunResponse and DescribeResponse; whatever
 * decodes must re-encode, re-decode, and reach a fixed point: the second encoding equals the
 * first and both messages pack to the same binary. The same input is also decoded as a request
 * is (WIRE_JSON_REFUSE_UNKNOWN): that decode may only add refusals of unknown fields, marked
 * `request`, and what it accepts is the lenient decode's message bit for bit. Any other outcome
 * aborts. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../src/wire/json_codec.h"
#include "sandbox.pb-c.h"

static void check_packs_equal(const ProtobufCMessage *a, const ProtobufCMessage *b)
{
    size_t na = protobuf_c_message_get_packed_size(a), nb = protobuf_c_message_get_packed_size(b);
    uint8_t *pa = malloc(na ? na : 1), *pb = malloc(nb ? nb : 1);
    if (!pa || !pb)
        abort();
    if (na != nb || protobuf_c_message_pack(a, pa) != na || protobuf_c_message_pack(b, pb) != nb ||
        memcmp(pa, pb, na) != 0) {
        fprintf(stderr, "decode(encode(m)) differs from m in binary\n");
        abort();
    }
    free(pa);
    free(pb);
}

/* The strict decode against the lenient one (m, NULL when it refused). */
static void check_strict(const ProtobufCMessageDescriptor *d, const uint8_t *data, size_t size,
                         const ProtobufCMessage *m)
{
    struct plm_err err = { 0 };
    ProtobufCMessage *s = wire_json_decode_with(d, (const char *)data, size, NULL, WIRE_JSON_REFUSE_UNKNOWN, &err);
    if (s) {
        if (!m) {
            fprintf(stderr, "strict decode accepted what the lenient one refused\n");
            abort();
        }
        check_packs_equal(m, s);
        protobuf_c_message_free_unpacked(s, NULL);
        return;
    }
    if (err.kind != PLM_E_INVALID || err.msg[0] == '\0')
        abort();
    /* a refusal the lenient decode did not make is an unknown field, and says so */
    if (m && (err.refusal != PLM_REFUSAL_REQUEST || strncmp(err.msg, "unknown field ", 14) != 0)) {
        fprintf(stderr, "strict decode refused a decodable message: %s\n", err.msg);
        abort();
    }
    for (const char *p = err.msg; *p; p++)
        if ((unsigned char)*p < 0x20 || (unsigned char)*p >= 0x7f)
            abort(); /* key bytes reach the message escaped */
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static const ProtobufCMessageDescriptor *const descs[] = {
        &plimsoll__v1__run_request__descriptor,
        &plimsoll__v1__run_response__descriptor,
        &plimsoll__v1__describe_response__descriptor,
    };
    for (size_t i = 0; i < sizeof descs / sizeof descs[0]; i++) {
        struct plm_err err = { 0 };
        ProtobufCMessage *m = wire_json_decode(descs[i], (const char *)data, size, &err);
        check_strict(descs[i], data, size, m);
        if (!m) {
            if (err.kind != PLM_E_INVALID || err.msg[0] == '\0')
                abort(); /* a refusal must say why, and is never anything but INVALID here */
            continue;
        }
        size_t len1 = 0, len2 = 0;
        char *a = wire_json_encode(m, &len1);
        if (!a || strlen(a) != len1)
            abort();
        ProtobufCMessage *m2 = wire_json_decode(descs[i], a, len1, &err);
        if (!m2) {
            fprintf(stderr, "own output refused: %s\n%s\n", err.msg, a);
            abort();
        }
        char *b = wire_json_encode(m2, &len2);
        if (!b || len1 != len2 || memcmp(a, b, len1) != 0) {
            fprintf(stderr, "not a fixed point:\n%s\n%s\n", a, b ? b : "(null)");
            abort();
        }
        check_packs_equal(m, m2);
        free(a);
        free(b);
        protobuf_c_message_free_unpacked(m, NULL);
        protobuf_c_message_free_unpacked(m2, NULL);
    }
    return 0;
}
