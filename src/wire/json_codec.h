/* json_codec.h: one generic proto3 JSON codec driven by protobuf-c descriptors (wire.md §6).
 * Trusts: nothing in the input text. Invariant: decode either returns a complete message owned
 * by the caller (free with protobuf_c_message_free_unpacked(msg, NULL)) or NULL with a message in
 * err; it never aborts on any input. Encoding never fails except out of memory. */
#pragma once
#include <protobuf-c/protobuf-c.h>
#include <stddef.h>

#include "../core/err.h"

/* Parses len bytes of JSON into a new message of type desc.
 * Input rules: strict UTF-8, duplicate keys rejected, both lowerCamelCase and the proto field name
 * accepted (the same field under both spellings is a duplicate), null = zero value, unknown keys
 * ignored (answers: a newer daemon may add fields), int64/uint64 as number or decimal string (range checked), int32/uint32 likewise,
 * enums by name or number, bytes as standard or URL-safe base64 (padded or not), doubles as numbers
 * or "NaN"/"Infinity"/"-Infinity" (and -0 kept), nesting depth <= LIM_JSON_DEPTH, more than one
 * member of a oneof set is an error, strings containing U+0000 are an error.
 * Errors are PLM_E_INVALID with refusal PLM_REFUSAL_NONE (a decode error carries no detail), except
 * an unknown key under WIRE_JSON_REFUSE_UNKNOWN (below); running out of memory is PLM_E_INTERNAL
 * with errnum ENOMEM. */
ProtobufCMessage *wire_json_decode(const ProtobufCMessageDescriptor *desc, const char *json, size_t len,
                                   struct plm_err *err);

/* Flags of wire_json_decode_with. */
enum {
    /* A request: a key that names no field of its message, at any depth, is refused with
     * PLM_E_INVALID and refusal PLM_REFUSAL_REQUEST ("unknown field project.files[0].pth (did you
     * mean path?)"), before any field is decoded. Stricter than the reference, which drops it:
     * docs/decisions.md, Unknown JSON fields. */
    WIRE_JSON_REFUSE_UNKNOWN = 1u << 0,
};

/* The same, with every part of the message taken from alloc (NULL: the heap) and flags above.
 * With an arena's allocator the caller releases the message by releasing the arena. */
ProtobufCMessage *wire_json_decode_with(const ProtobufCMessageDescriptor *desc, const char *json, size_t len,
                                        ProtobufCAllocator *alloc, unsigned flags, struct plm_err *err);

/* Serialises msg as compact proto3 JSON: lowerCamelCase names, zero values omitted (oneof
 * members emitted when set even if zero-valued), int64/uint64 as decimal strings, enums by name
 * (unknown numbers as numbers), bytes as padded standard base64, doubles shortest round-trip with
 * "NaN"/"Infinity"/"-Infinity" strings and -0 as -0. Returns a malloc'd NUL-terminated string and
 * its length in *len_out, or NULL out of memory. */
char *wire_json_encode(const ProtobufCMessage *msg, size_t *len_out);
