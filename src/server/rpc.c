/* rpc.c: what every procedure shares (decoding either content type, encoding, Connect errors).
 * Describe is in describe.c, Run's pipeline in run.c.
 * Trusts: nothing in the body. */
#include "rpc.h"
#include "rpc_int.h"

#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../core/limits.h"
#include "../core/validate.h"
#include "../wire/connect_error.h"
#include "../wire/convert.h"
#include "../wire/arena_alloc.h"
#include "../wire/json_codec.h"
#include "../wire/limits_scan.h"
#include "grant.h"
#include "log.h"
#include "session_rpc.h"
#include "ui_ring.h"

void rpc_error(struct rpc_answer *ans, const struct plm_err *err, const char *request_id)
{
    const char *code = wire_connect_code(err->kind);
    char msg[600];
    enum plm_refusal refusal = err->refusal;
    if (strcmp(code, "internal") == 0) {
        char id[17];
        log_internal_error(request_id, err->msg, id);
        snprintf(msg, sizeof msg, "internal error %s; the daemon's log holds its detail", id);
        refusal = PLM_REFUSAL_NONE; /* an infrastructure fault never claims that nothing ran */
    } else {
        snprintf(msg, sizeof msg, "%s", err->msg);
    }
    free(ans->body);
    ans->body = wire_connect_error_json(code, msg, refusal, &ans->len);
    ans->status = wire_connect_status(code);
    ans->fmt = RPC_JSON;
    if (!ans->body) {
        ans->status = 500;
        ans->len = 0;
    }
}

/* A JSON request refused for an unknown key, read again with unknown keys dropped: when it states
 * another protocol, its unknown keys are that protocol's fields, and the handler's protocol check
 * (wire.md §10, step 7) answers it better than "unknown field" would. Returns that message, or
 * NULL (err untouched) to keep the refusal. */
static ProtobufCMessage *other_protocol(const ProtobufCMessageDescriptor *d, const char *body, size_t len,
                                        ProtobufCAllocator *ap)
{
    const ProtobufCFieldDescriptor *f = protobuf_c_message_descriptor_get_field_by_name(d, "protocol");
    if (!f || f->type != PROTOBUF_C_TYPE_UINT32 || f->label != PROTOBUF_C_LABEL_NONE)
        return NULL;
    struct plm_err ignored;
    ProtobufCMessage *m = wire_json_decode_with(d, body, len, ap, 0, &ignored);
    if (!m)
        return NULL;
    uint32_t p = *(const uint32_t *)((const char *)m + f->offset);
    if (p != 0 && p != PLM_PROTOCOL)
        return m;
    protobuf_c_message_free_unpacked(m, ap);
    return NULL;
}

/* Decodes either content type. Binary input is re-measured after unpacking: protobuf-c stores
 * strings NUL-terminated, so a string with an embedded NUL would otherwise shrink silently and
 * change what is digested; such input (and any non-canonical encoding) is refused as malformed. */
ProtobufCMessage *rpc_decode(const ProtobufCMessageDescriptor *d, enum rpc_fmt fmt, const char *body,
                             size_t len, struct plm_arena *arena, struct plm_err *err)
{
    ProtobufCAllocator alloc;
    ProtobufCAllocator *ap = NULL;
    if (arena) {
        alloc = wire_arena_allocator(arena);
        ap = &alloc;
    }
    ProtobufCMessage *m = NULL;
    /* Counts first, on the raw bytes: neither decoder may build more than the limits allow. */
    int scan = fmt == RPC_JSON ? wire_scan_json(d, body, len, err) : wire_scan_binary(d, (const uint8_t *)body, len, err);
    if (scan < 0)
        return NULL;
    if (fmt == RPC_JSON) {
        m = wire_json_decode_with(d, body, len, ap, WIRE_JSON_REFUSE_UNKNOWN, err);
        if (!m && err->refusal == PLM_REFUSAL_REQUEST)
            m = other_protocol(d, body, len, ap);
    } else {
        m = protobuf_c_message_unpack(d, ap, len, (const uint8_t *)body);
        if (!m)
            plm_fail(err, 0, PLM_E_INVALID, "malformed binary %s", d->name);
        else if (protobuf_c_message_get_packed_size(m) != len) {
            protobuf_c_message_free_unpacked(m, ap);
            m = NULL;
            plm_fail(err, 0, PLM_E_INVALID, "binary %s is not in canonical form (or holds a string with a NUL byte)", d->name);
        }
    }
    /* What the arena refused is the request's size, not the machine's memory. Decode errors carry
     * no detail in the body (connect-go's own decoding, §11.1 step 5); the header marks them. */
    if (!m && arena && plm_arena_over_limit(arena))
        plm_fail(err, 0, PLM_E_INVALID, "decoded %s exceeds %u bytes", d->name,
                    LIM_DECODE_ARENA_MAX);
    return m;
}

void rpc_encode(struct rpc_answer *ans, const ProtobufCMessage *m, enum rpc_fmt fmt, const char *request_id)
{
    if (fmt == RPC_JSON) {
        ans->body = wire_json_encode(m, &ans->len);
    } else {
        ans->len = protobuf_c_message_get_packed_size(m);
        ans->body = malloc(ans->len ? ans->len : 1);
        if (ans->body)
            protobuf_c_message_pack(m, (uint8_t *)ans->body);
    }
    if (!ans->body) {
        struct plm_err e;
        plm_fail(&e, ENOMEM, PLM_E_INTERNAL, "out of memory encoding %s", m->descriptor->name);
        rpc_error(ans, &e, request_id);
        return;
    }
    ans->status = 200;
    ans->fmt = fmt;
}

void rpc_decode_failed(struct rpc_answer *ans, const struct plm_err *err, const char *request_id)
{
    rpc_error(ans, err, request_id);
    ans->pre_handler = true; /* Connect's own decoding precedes the handler (§11.1 step 5) */
    ans->header_reason = PLM_REFUSAL_REQUEST;
}
