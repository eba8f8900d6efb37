/* session_error.c: see session_error.h. The detail messages are packed by protobuf-c, so their
 * bytes follow wire.md §7.4 by construction rather than by hand-written tags. */
#include "session_error.h"

#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "../core/cleanup_json.h"
#include "convert.h"

char *wire_b64_unpadded(const uint8_t *p, size_t n)
{
    static const char t[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    char *o = malloc(n / 3 * 4 + 5);
    if (!o)
        return NULL;
    size_t k = 0, i = 0;
    for (; i + 2 < n; i += 3) {
        uint32_t v = (uint32_t)p[i] << 16 | (uint32_t)p[i + 1] << 8 | p[i + 2];
        o[k++] = t[v >> 18 & 63], o[k++] = t[v >> 12 & 63], o[k++] = t[v >> 6 & 63], o[k++] = t[v & 63];
    }
    if (n - i == 1) {
        uint32_t v = (uint32_t)p[i] << 16;
        o[k++] = t[v >> 18 & 63], o[k++] = t[v >> 12 & 63];
    } else if (n - i == 2) {
        uint32_t v = (uint32_t)p[i] << 16 | (uint32_t)p[i + 1] << 8;
        o[k++] = t[v >> 18 & 63], o[k++] = t[v >> 12 & 63], o[k++] = t[v >> 6 & 63];
    }
    o[k] = 0;
    return o;
}

static int add_detail(json_t *arr, const char *type, const ProtobufCMessage *m)
{
    size_t n = protobuf_c_message_get_packed_size(m);
    cleanup_free uint8_t *buf = malloc(n ? n : 1);
    if (!buf)
        return -1;
    protobuf_c_message_pack(m, buf);
    cleanup_free char *b64 = wire_b64_unpadded(buf, n);
    if (!b64)
        return -1;
    json_t *d = json_object();
    json_object_set_new(d, "type", json_string(type));
    json_object_set_new(d, "value", json_string(b64));
    return json_array_append_new(arr, d);
}

static int add_ended(json_t *arr, const struct wire_session_details *d)
{
    Plimsoll__V1__SessionEnded e = PLIMSOLL__V1__SESSION_ENDED__INIT;
    e.reason = (Plimsoll__V1__SessionEnd)d->ended;
    /* a detail text is daemon-written ASCII; an empty one is simply omitted by the packer */
    e.detail = (char *)(d->ended_detail ? d->ended_detail : "");
    return add_detail(arr, "plimsoll.v1.SessionEnded", &e.base);
}

static int add_mark(json_t *arr, enum plm_refusal refusal)
{
    Plimsoll__V1__NotDispatched nd = PLIMSOLL__V1__NOT_DISPATCHED__INIT;
    nd.reason = (Plimsoll__V1__NotDispatchedReason)refusal;
    return add_detail(arr, "plimsoll.v1.NotDispatched", &nd.base);
}

char *wire_session_error_json(const char *code, const char *message, enum plm_refusal refusal,
                              const struct wire_session_details *d, size_t *len_out)
{
    json_t *o cleanup_json = json_object();
    json_t *arr cleanup_json = json_array();
    if (!o || !arr)
        return NULL;
    json_object_set_new(o, "code", json_string(code));
    json_t *msg = json_string(message ? message : "");
    json_object_set_new(o, "message", msg ? msg : json_string("(message not valid UTF-8)"));
    int rc = 0;
    if (d && d->unanswered) {
        Plimsoll__V1__RunResponse *carrier = wire_response_to_pb(&(struct plm_result){0}, d->unanswered);
        if (!carrier || !carrier->record) {
            rc = -1;
        } else {
            Plimsoll__V1__UnansweredCall u = PLIMSOLL__V1__UNANSWERED_CALL__INIT;
            u.record = carrier->record;
            rc |= add_detail(arr, "plimsoll.v1.UnansweredCall", &u.base);
        }
        if (carrier)
            protobuf_c_message_free_unpacked(&carrier->base, NULL);
    }
    bool ended = d && d->ended != PLM_END_NONE;
    if (ended && d->ended_before_mark)
        rc |= add_ended(arr, d);
    if (refusal != PLM_REFUSAL_NONE)
        rc |= add_mark(arr, refusal);
    if (ended && !d->ended_before_mark)
        rc |= add_ended(arr, d);
    if (json_array_size(arr))
        json_object_set_new(o, "details", take_ptr(&arr));
    char *s = rc ? NULL : json_dumps(o, JSON_COMPACT);
    if (s && len_out)
        *len_out = strlen(s);
    return s;
}
