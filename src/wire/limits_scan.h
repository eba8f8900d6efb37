/* limits_scan.h: the count limits of a request, enforced on the raw bytes before any decoder
 * builds anything (issue 12 finding 1). Both decoders allocate per element (jansson about 100
 * bytes per JSON value, protobuf-c a scan record and a message per occurrence), so a body of
 * tiny elements (`{},` or `0a 00`, 2-3 bytes each) would otherwise become a few hundred MiB.
 * The scans walk the text with the message's descriptors, allocate nothing, and refuse:
 *   - a repeated field with more elements than its limit (files 200, steps 20, artifacts 100,
 *     identities 32, rows 100000, values per row 1024; any other repeated field 1024);
 *   - more than LIM_DECODE_VALUES_MAX repeated elements in the whole request (module rows and
 *     values count against LIM_MODULE_ELEMENTS_MAX instead);
 *   - JSON: more than LIM_JSON_IGNORED_MAX values under unknown keys, or under a known key but
 *     of the wrong shape (the decoder refuses those anyway); nesting deeper than LIM_JSON_DEPTH;
 *   - binary: more than LIM_UNKNOWN_FIELDS_MAX unknown fields, a singular field twice (which
 *     is not canonical and was refused after decoding anyway), groups, truncated values.
 * What survives holds at most about LIM_DECODE_VALUES_MAX + LIM_JSON_IGNORED_MAX elements, so
 * the decoders' per-element cost is a constant, and their copies of strings add at most the
 * body's size. A count over a limit is a refusal (PLM_E_INVALID, `request`), as payload validation
 * is; every other error is a decode error (PLM_E_INVALID, no refusal, so no detail). */
#pragma once
#include <protobuf-c/protobuf-c.h>
#include <stddef.h>
#include <stdint.h>

#include "../core/err.h"

int wire_scan_json(const ProtobufCMessageDescriptor *desc, const char *text, size_t len, struct plm_err *err);
int wire_scan_binary(const ProtobufCMessageDescriptor *desc, const uint8_t *data, size_t len, struct plm_err *err);
/* The element limit of a repeated field of message m (by the names in sandbox.proto). */
size_t wire_repeat_limit(const ProtobufCMessageDescriptor *m, const ProtobufCFieldDescriptor *f);
