/* json_internal.h: what the JSON decoder and encoder share: field addressing and protoc's JSON
 * name rule. Private to src/wire. */
#pragma once
#include <stdbool.h>
#include <protobuf-c/protobuf-c.h>
#include <stddef.h>
#include <stdint.h>

#define FIELD_PTR(msg, off) ((void *)((char *)(msg) + (off)))
#define FIELD_CPTR(msg, off) ((const void *)((const char *)(msg) + (off)))

/* protoc's ToJsonName: each '_' is dropped and the letter after it upper-cased. Writes at most
 * cap bytes (no NUL) and returns the full length, which never exceeds strlen(name). */
static inline size_t camel_name(const char *name, char *buf, size_t cap)
{
    size_t n = 0;
    bool up = false;
    for (const char *p = name; *p; p++) {
        if (*p == '_') {
            up = true;
            continue;
        }
        char c = (up && *p >= 'a' && *p <= 'z') ? (char)(*p - 'a' + 'A') : *p;
        up = false;
        if (n < cap)
            buf[n] = c;
        n++;
    }
    return n;
}

/* The value classes both directions switch on. */
enum kind {
    K_I32, K_U32, K_I64, K_U64, K_DOUBLE, K_FLOAT, K_BOOL, K_ENUM, K_STRING, K_BYTES, K_MESSAGE
};

static inline enum kind kind_of(ProtobufCType t)
{
    switch (t) {
    case PROTOBUF_C_TYPE_INT32:
    case PROTOBUF_C_TYPE_SINT32:
    case PROTOBUF_C_TYPE_SFIXED32: return K_I32;
    case PROTOBUF_C_TYPE_UINT32:
    case PROTOBUF_C_TYPE_FIXED32: return K_U32;
    case PROTOBUF_C_TYPE_INT64:
    case PROTOBUF_C_TYPE_SINT64:
    case PROTOBUF_C_TYPE_SFIXED64: return K_I64;
    case PROTOBUF_C_TYPE_UINT64:
    case PROTOBUF_C_TYPE_FIXED64: return K_U64;
    case PROTOBUF_C_TYPE_DOUBLE: return K_DOUBLE;
    case PROTOBUF_C_TYPE_FLOAT: return K_FLOAT;
    case PROTOBUF_C_TYPE_BOOL: return K_BOOL;
    case PROTOBUF_C_TYPE_ENUM: return K_ENUM;
    case PROTOBUF_C_TYPE_STRING: return K_STRING;
    case PROTOBUF_C_TYPE_BYTES: return K_BYTES;
    case PROTOBUF_C_TYPE_MESSAGE: break;
    }
    return K_MESSAGE;
}

/* How protobuf-c stores each of the 17 field types; the switches below work on these. */

static const size_t kind_size[] __attribute__((unused)) = {
    [K_I32] = sizeof(int32_t), [K_U32] = sizeof(uint32_t), [K_I64] = sizeof(int64_t),
    [K_U64] = sizeof(uint64_t), [K_DOUBLE] = sizeof(double), [K_FLOAT] = sizeof(float),
    [K_BOOL] = sizeof(protobuf_c_boolean), [K_ENUM] = sizeof(int), [K_STRING] = sizeof(char *),
    [K_BYTES] = sizeof(ProtobufCBinaryData), [K_MESSAGE] = sizeof(ProtobufCMessage *),
};

/* json_unknown.c. The field key names in desc, under its proto name or its JSON (lowerCamel)
 * name, or NULL. */
const ProtobufCFieldDescriptor *wire_json_field_by_key(const ProtobufCMessageDescriptor *desc, const char *key,
                                                       size_t len);
/* The field an unknown key most likely meant, or NULL when none is near (the rule is in
 * json_unknown.c and docs/decisions.md). */
const ProtobufCFieldDescriptor *wire_json_nearest_field(const ProtobufCMessageDescriptor *desc, const char *key,
                                                        size_t len);
/* Writes key into out (cap bytes, NUL-terminated) as printable ASCII: other bytes, '"' and '\\'
 * as \xNN, at most 48 key bytes then "...". */
void wire_json_quote_key(const char *key, size_t len, char *out, size_t cap);
