/* rpc_int.h: what rpc.c (Describe, shared codec steps) and run.c (Run's pipeline) share.
 * Private to src/server. */
#pragma once
#include <protobuf-c/protobuf-c.h>

#include "../core/arena.h"
#include "rpc.h"

/* Decodes either content type into arena (NULL: the heap, freed with free_unpacked(m, NULL)).
 * Every count and size limit is enforced while decoding (src/wire/limits_scan.h), so memory is
 * bounded by a small multiple of len whatever the body holds. */
ProtobufCMessage *rpc_decode(const ProtobufCMessageDescriptor *d, enum rpc_fmt fmt, const char *body, size_t len,
                             struct plm_arena *arena, struct plm_err *err);
/* Fills ans with m encoded as fmt (or an internal error out of memory). */
void rpc_encode(struct rpc_answer *ans, const ProtobufCMessage *m, enum rpc_fmt fmt, const char *request_id);
/* A decode error: Connect's own decoding precedes the handler, so the answer is marked `request`
 * by header (§11.1 step 5). */
void rpc_decode_failed(struct rpc_answer *ans, const struct plm_err *err, const char *request_id);
