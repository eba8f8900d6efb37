/* runframe.c: encoding and decoding of a snippet run's payloads (runframe.h).
 * Trusts: nothing; every field is range-checked before anyone uses it. The daemon decodes what
 * a possibly compromised worker or guest wrote, the worker and guest decode what the daemon wrote.
 * Invariant: a decoder accepts a payload only when it consumed exactly its length, and every
 * length is compared with its cap before the caller allocates or copies. */
#include "runframe.h"

#include <string.h>

#include "limits.h"

void qf_result_encode_fixed(uint8_t out[QF_RESULT_FIXED], int32_t exit_code, uint8_t flags,
                            uint32_t out_len, uint32_t err_len)
{
    f16_put_u32(out, (uint32_t)exit_code);
    out[4] = flags;
    out[5] = out[6] = out[7] = 0;
    f16_put_u32(out + 8, out_len);
    f16_put_u32(out + 12, err_len);
}

int qf_result_decode(const uint8_t *p, size_t len, struct qf_result *res)
{
    struct f16_reader r;
    f16_reader_init(&r, p, len);
    res->exit_code = f16_get_i32(&r);
    res->flags = f16_get_u8(&r);
    uint8_t z0 = f16_get_u8(&r), z1 = f16_get_u8(&r), z2 = f16_get_u8(&r);
    res->out_len = f16_get_u32(&r);
    res->err_len = f16_get_u32(&r);
    if (r.bad || (res->flags & ~QF_RES_FLAGS_ALL) || z0 || z1 || z2)
        return -1;
    /* Caps per stream before touching the bytes: a worker never gets to send more than it
     * was allowed to keep. */
    if (res->out_len > LIM_OUTPUT_MAX || res->err_len > LIM_OUTPUT_MAX)
        return -1;
    res->out = f16_get_bytes(&r, res->out_len);
    res->err = f16_get_bytes(&r, res->err_len);
    return f16_reader_finish(&r);
}

void qf_run_encode_fixed(uint8_t out[QF_RUN_FIXED], uint32_t timeout_ms, uint32_t flags, uint32_t client_len)
{
    f16_put_u32(out, timeout_ms);
    f16_put_u32(out + 4, flags);
    f16_put_u32(out + 8, client_len);
}

int qf_run_decode(const uint8_t *p, size_t len, struct qf_run *run)
{
    struct f16_reader r;
    f16_reader_init(&r, p, len);
    run->timeout_ms = f16_get_u32(&r);
    run->flags = f16_get_u32(&r);
    run->client_len = f16_get_u32(&r);
    if (r.bad || run->timeout_ms == 0 || run->timeout_ms > LIM_TIMEOUT_MS_MAX || (run->flags & ~QF_RUN_FLAGS_ALL))
        return -1;
    /* A client only with a grant, and never over its cap; the code is the rest (1..cap).
     * Compare before subtracting: r.off <= len. */
    if (run->client_len > QF_CLIENT_MAX || (run->client_len && !(run->flags & QF_RUN_GRANT)))
        return -1;
    run->client = f16_get_bytes(&r, run->client_len);
    if (r.bad || len - r.off == 0 || len - r.off > LIM_CODE_MAX)
        return -1;
    run->code_len = (uint32_t)(len - r.off);
    run->code = f16_get_bytes(&r, run->code_len);
    return f16_reader_finish(&r);
}

void qf_host_call_encode_fixed(uint8_t out[QF_HOST_CALL_FIXED], uint32_t call_no, uint32_t method_len,
                               uint32_t path_len, uint32_t body_len)
{
    f16_put_u32(out, call_no);
    f16_put_u32(out + 4, method_len);
    f16_put_u32(out + 8, path_len);
    f16_put_u32(out + 12, body_len);
}

int qf_host_call_decode(const uint8_t *p, size_t len, struct qf_host_call *c)
{
    struct f16_reader r;
    f16_reader_init(&r, p, len);
    c->call_no = f16_get_u32(&r);
    c->method_len = f16_get_u32(&r);
    c->path_len = f16_get_u32(&r);
    c->body_len = f16_get_u32(&r);
    /* Each length against its own cap before any is used, so their sum cannot wrap. */
    if (r.bad || c->call_no == 0 || c->method_len == 0 || c->method_len > QF_HOST_METHOD_MAX || c->path_len == 0 ||
        c->path_len > QF_HOST_PATH_MAX || c->body_len > QF_HOST_BODY_MAX)
        return -1;
    c->method = f16_get_bytes(&r, c->method_len);
    c->path = f16_get_bytes(&r, c->path_len);
    c->body = f16_get_bytes(&r, c->body_len);
    if (f16_reader_finish(&r) < 0)
        return -1;
    /* Text without NUL: the monitor hands both to the broker as C strings. */
    if (!qf_text_ok(c->method, c->method_len) || !qf_text_ok(c->path, c->path_len))
        return -1;
    return 0;
}

void qf_host_reply_encode_fixed(uint8_t out[QF_HOST_REPLY_FIXED], uint32_t call_no, uint32_t status, uint32_t flags,
                                uint32_t body_len)
{
    f16_put_u32(out, call_no);
    f16_put_u32(out + 4, status);
    f16_put_u32(out + 8, flags);
    f16_put_u32(out + 12, body_len);
}

int qf_host_reply_decode(const uint8_t *p, size_t len, struct qf_host_reply *rep)
{
    struct f16_reader r;
    f16_reader_init(&r, p, len);
    rep->call_no = f16_get_u32(&r);
    rep->status = f16_get_u32(&r);
    rep->flags = f16_get_u32(&r);
    rep->body_len = f16_get_u32(&r);
    if (r.bad || rep->call_no == 0 || (rep->flags & ~QF_HR_FLAGS_ALL) || rep->body_len > QF_HOST_REPLY_MAX)
        return -1;
    if (rep->flags & QF_HR_DEADLINE) {
        if (rep->status != 0 || rep->body_len != 0)
            return -1;
    } else if (rep->status < 100 || rep->status > 599) {
        return -1;
    }
    rep->body = f16_get_bytes(&r, rep->body_len);
    return f16_reader_finish(&r);
}

/* The WHATWG UTF-8 decoder (Encoding Standard §4.1.1) with replacement: a valid sequence is
 * copied as it is; each maximal invalid subpart becomes U+FFFD (EF BF BD). *bad counts the
 * replacements and *nul the NUL bytes. */
static size_t utf8_scan(const uint8_t *in, size_t len, uint8_t *out, size_t *bad, size_t *nul)
{
    static const uint8_t fffd[3] = {0xef, 0xbf, 0xbd};
    size_t o = 0, start = 0;
    unsigned needed = 0, seen = 0;
    uint8_t lower = 0x80, upper = 0xbf;
    *bad = *nul = 0;
    for (size_t i = 0; i < len;) {
        uint8_t b = in[i];
        if (needed == 0) {
            start = i++;
            if (b <= 0x7f) {
                *nul += b == 0;
                if (out)
                    out[o] = b;
                o++;
                continue;
            }
            if (b >= 0xc2 && b <= 0xdf) {
                needed = 1;
            } else if (b >= 0xe0 && b <= 0xef) {
                lower = b == 0xe0 ? 0xa0 : 0x80;
                upper = b == 0xed ? 0x9f : 0xbf;
                needed = 2;
            } else if (b >= 0xf0 && b <= 0xf4) {
                lower = b == 0xf0 ? 0x90 : 0x80;
                upper = b == 0xf4 ? 0x8f : 0xbf;
                needed = 3;
            } else {
                (*bad)++;
                if (out)
                    memcpy(out + o, fffd, 3);
                o += 3;
            }
            continue;
        }
        if (b < lower || b > upper) {
            /* The sequence so far is the maximal subpart: replace it and look at b afresh. */
            needed = seen = 0;
            lower = 0x80;
            upper = 0xbf;
            (*bad)++;
            if (out)
                memcpy(out + o, fffd, 3);
            o += 3;
            continue;
        }
        lower = 0x80;
        upper = 0xbf;
        i++;
        if (++seen == needed) {
            if (out)
                memcpy(out + o, in + start, needed + 1);
            o += needed + 1;
            needed = seen = 0;
        }
    }
    if (needed) {
        (*bad)++;
        if (out)
            memcpy(out + o, fffd, 3);
        o += 3;
    }
    return o;
}

bool qf_text_ok(const uint8_t *p, size_t len)
{
    size_t bad, nul;
    utf8_scan(p, len, NULL, &bad, &nul);
    return bad == 0 && nul == 0;
}

size_t qf_utf8_repair(const uint8_t *in, size_t len, uint8_t *out)
{
    size_t bad, nul;
    return utf8_scan(in, len, out, &bad, &nul);
}
