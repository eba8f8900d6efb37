/* chan.c: encoding and decoding of host <-> guest frames (chan.h).
 * Trusts: nothing. The host decodes what a guest wrote, and the guest kernel runs the code of
 * whoever sent the snippet: every field is range-checked before anyone uses it.
 * Invariant: a frame is accepted only when its payload decoder consumed exactly len bytes, and
 * every length is compared with its cap before the caller allocates or waits for more. */
#include "chan.h"

#include <string.h>

#include "../../core/limits.h"

uint32_t mvc_max_len(uint16_t type)
{
    switch (type) {
    case MVC_SEED: return MVC_SEED_LEN;
    case MVC_RUN: return QF_RUN_FIXED + QF_CLIENT_MAX + LIM_CODE_MAX;
    case MVC_HOST_REPLY: return QF_HOST_REPLY_FIXED + QF_HOST_REPLY_MAX;
    case MVC_PROBE: return 0;
    case MVC_READY: return MVC_READY_MAX;
    case MVC_RESULT: return QF_RESULT_FIXED + 2 * LIM_OUTPUT_MAX;
    case MVC_PROBE_RESULT: return MVC_PROBE_RESULT_MAX;
    case MVC_HOST_CALL: return QF_HOST_CALL_FIXED + QF_HOST_METHOD_MAX + QF_HOST_PATH_MAX + QF_HOST_BODY_MAX;
    case MVC_DIED: return 4;
    case MVC_SEEDED: return 0;
    }
    return 0;
}

static uint32_t min_len(uint16_t type)
{
    switch (type) {
    case MVC_SEED: return MVC_SEED_LEN;
    case MVC_RUN: return QF_RUN_FIXED + 1;
    case MVC_HOST_REPLY: return QF_HOST_REPLY_FIXED;
    case MVC_RESULT: return QF_RESULT_FIXED;
    case MVC_HOST_CALL: return QF_HOST_CALL_FIXED + 2;
    case MVC_DIED: return 4;
    }
    return 0;
}

static bool known(uint16_t t)
{
    return (t >= MVC_SEED && t <= MVC_PROBE) || (t >= MVC_READY && t <= MVC_SEEDED);
}

static uint32_t be32(const uint8_t *p)
{
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | (uint32_t)p[3];
}

void mvc_hdr_encode(uint8_t out[MVC_HDR_LEN], const struct mvc_hdr *h)
{
    qf_put_u32(out, h->len);
    out[4] = (uint8_t)(h->type >> 8);
    out[5] = (uint8_t)h->type;
    out[6] = (uint8_t)(h->flags >> 8);
    out[7] = (uint8_t)h->flags;
    qf_put_u64(out + 8, h->seq);
}

int mvc_hdr_decode(const uint8_t in[MVC_HDR_LEN], struct mvc_hdr *h)
{
    h->len = be32(in);
    h->type = (uint16_t)(in[4] << 8 | in[5]);
    h->flags = (uint16_t)(in[6] << 8 | in[7]);
    h->seq = (uint64_t)be32(in + 8) << 32 | be32(in + 12);
    if (!known(h->type) || h->flags != 0)
        return -1;
    if (h->len > mvc_max_len(h->type) || h->len < min_len(h->type))
        return -1;
    return 0;
}

bool mvc_text_ok(const uint8_t *p, size_t len)
{
    for (size_t i = 0; i < len; i++)
        if (p[i] != '\n' && (p[i] < 0x20 || p[i] > 0x7e))
            return false;
    return true;
}

enum mvc_decode_status mvc_decode_guest(const uint8_t *buf, size_t len, struct mvc_frame *out, size_t *used)
{
    if (len < MVC_HDR_LEN)
        return MVC_NEED_MORE;
    struct mvc_hdr h;
    if (mvc_hdr_decode(buf, &h) < 0 || h.type < MVC_READY)
        return MVC_BAD; /* unknown, reserved flags, out of bounds, or a host->guest type */
    if (len - MVC_HDR_LEN < h.len)
        return MVC_NEED_MORE;
    const uint8_t *p = buf + MVC_HDR_LEN;
    memset(out, 0, sizeof *out);
    out->hdr = h;
    switch (h.type) {
    case MVC_READY:
    case MVC_PROBE_RESULT:
        if (!mvc_text_ok(p, h.len))
            return MVC_BAD;
        out->u.text.p = p;
        out->u.text.len = h.len;
        break;
    case MVC_RESULT:
        if (qf_result_decode(p, h.len, &out->u.result) < 0)
            return MVC_BAD;
        break;
    case MVC_HOST_CALL:
        if (qf_host_call_decode(p, h.len, &out->u.host_call) < 0)
            return MVC_BAD;
        break;
    case MVC_DIED:
        out->u.died_status = (int32_t)be32(p);
        break;
    case MVC_SEEDED:
        break;
    default:
        return MVC_BAD;
    }
    *used = MVC_HDR_LEN + h.len;
    return MVC_FRAME;
}
