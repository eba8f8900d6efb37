/* frame.c: encoding and decoding of monitor/zygote/worker frames (see frame.h).
 * Trusts: nothing; every field is range-checked before anyone uses it. The monitor decodes what
 * a possibly compromised worker wrote, the worker decodes what the monitor wrote.
 * Invariant: a decoder accepts a payload only when it consumed exactly its length, and every
 * length is compared with its cap before the caller allocates or copies. */
#include "frame.h"

#include <string.h>

#include "../../core/limits.h"

/* Caps per type (STYLE §5: "a cap per type"). READY/SPAWN are empty by definition. */
uint32_t qf_max_len(uint16_t type)
{
    switch (type) {
    case QF_RUN: return QF_RUN_FIXED + QF_CLIENT_MAX + LIM_CODE_MAX;
    case QF_PROBE: return 4;
    case QF_HOST_REPLY: return QF_HOST_REPLY_FIXED + QF_HOST_REPLY_MAX;
    case QF_READY: return 0;
    case QF_RESULT: return QF_RESULT_FIXED + 2 * LIM_OUTPUT_MAX;
    case QF_PROBE_RESULT: return 12;
    case QF_HOST_CALL: return QF_HOST_CALL_FIXED + QF_HOST_METHOD_MAX + QF_HOST_PATH_MAX + QF_HOST_BODY_MAX;
    case QF_SPAWN: return 0;
    case QF_SPAWNED: return 8;
    case QF_HELLO: return 4;
    }
    return 0;
}

uint32_t qf_min_len(uint16_t type)
{
    switch (type) {
    case QF_RUN: return QF_RUN_FIXED + 1;
    case QF_PROBE: return 4;
    case QF_HOST_REPLY: return QF_HOST_REPLY_FIXED;
    case QF_RESULT: return QF_RESULT_FIXED;
    case QF_HOST_CALL: return QF_HOST_CALL_FIXED + 2;
    case QF_PROBE_RESULT: return 12;
    case QF_SPAWNED: return 8;
    case QF_HELLO: return 4;
    }
    return 0;
}

static bool known_type(uint16_t t)
{
    switch (t) {
    case QF_RUN:
    case QF_PROBE:
    case QF_HOST_REPLY:
    case QF_READY:
    case QF_RESULT:
    case QF_PROBE_RESULT:
    case QF_HOST_CALL:
    case QF_SPAWN:
    case QF_SPAWNED:
    case QF_HELLO:
        return true;
    }
    return false;
}

void qf_put_u32(uint8_t *p, uint32_t v)
{
    p[0] = (uint8_t)(v >> 24);
    p[1] = (uint8_t)(v >> 16);
    p[2] = (uint8_t)(v >> 8);
    p[3] = (uint8_t)v;
}

void qf_put_u64(uint8_t *p, uint64_t v)
{
    qf_put_u32(p, (uint32_t)(v >> 32));
    qf_put_u32(p + 4, (uint32_t)v);
}

static uint32_t get_be32(const uint8_t *p)
{
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | (uint32_t)p[3];
}

void qf_hdr_encode(uint8_t out[QF_HDR_LEN], const struct qf_hdr *h)
{
    qf_put_u32(out, h->len);
    out[4] = (uint8_t)(h->type >> 8);
    out[5] = (uint8_t)h->type;
    out[6] = (uint8_t)(h->flags >> 8);
    out[7] = (uint8_t)h->flags;
    qf_put_u64(out + 8, h->seq);
}

int qf_hdr_decode(const uint8_t in[QF_HDR_LEN], struct qf_hdr *h)
{
    h->len = get_be32(in);
    h->type = (uint16_t)(in[4] << 8 | in[5]);
    h->flags = (uint16_t)(in[6] << 8 | in[7]);
    h->seq = (uint64_t)get_be32(in + 8) << 32 | get_be32(in + 12);
    /* Fail closed: unknown type, reserved flags, or a length outside the type's bounds. */
    if (!known_type(h->type) || h->flags != 0)
        return -1;
    if (h->len > qf_max_len(h->type) || h->len < qf_min_len(h->type))
        return -1;
    return 0;
}

void qf_reader_init(struct qf_reader *r, const uint8_t *p, size_t len)
{
    r->p = p;
    r->len = len;
    r->off = 0;
    r->bad = false;
}

const uint8_t *qf_get_bytes(struct qf_reader *r, size_t n)
{
    /* Compare before subtracting: off <= len always holds. */
    if (r->bad || n > r->len - r->off) {
        r->bad = true;
        return NULL;
    }
    const uint8_t *v = r->p + r->off;
    r->off += n;
    return v;
}

uint32_t qf_get_u32(struct qf_reader *r)
{
    const uint8_t *b = qf_get_bytes(r, 4);
    return b ? get_be32(b) : 0;
}

int32_t qf_get_i32(struct qf_reader *r)
{
    return (int32_t)qf_get_u32(r);
}

uint8_t qf_get_u8(struct qf_reader *r)
{
    const uint8_t *b = qf_get_bytes(r, 1);
    return b ? b[0] : 0;
}

int64_t qf_get_i64(struct qf_reader *r)
{
    uint64_t hi = qf_get_u32(r);
    uint64_t lo = qf_get_u32(r);
    return (int64_t)(hi << 32 | lo);
}

int qf_reader_finish(const struct qf_reader *r)
{
    return (!r->bad && r->off == r->len) ? 0 : -1;
}

void qf_result_encode_fixed(uint8_t out[QF_RESULT_FIXED], int32_t exit_code, uint8_t flags,
                            uint32_t out_len, uint32_t err_len)
{
    qf_put_u32(out, (uint32_t)exit_code);
    out[4] = flags;
    out[5] = out[6] = out[7] = 0;
    qf_put_u32(out + 8, out_len);
    qf_put_u32(out + 12, err_len);
}

int qf_result_decode(const uint8_t *p, size_t len, struct qf_result *res)
{
    struct qf_reader r;
    qf_reader_init(&r, p, len);
    res->exit_code = qf_get_i32(&r);
    res->flags = qf_get_u8(&r);
    uint8_t z0 = qf_get_u8(&r), z1 = qf_get_u8(&r), z2 = qf_get_u8(&r);
    res->out_len = qf_get_u32(&r);
    res->err_len = qf_get_u32(&r);
    if (r.bad || (res->flags & ~QF_RES_FLAGS_ALL) || z0 || z1 || z2)
        return -1;
    /* Caps per stream before touching the bytes: a worker never gets to send more than it
     * was allowed to keep. */
    if (res->out_len > LIM_OUTPUT_MAX || res->err_len > LIM_OUTPUT_MAX)
        return -1;
    res->out = qf_get_bytes(&r, res->out_len);
    res->err = qf_get_bytes(&r, res->err_len);
    return qf_reader_finish(&r);
}

void qf_run_encode_fixed(uint8_t out[QF_RUN_FIXED], uint32_t timeout_ms, uint32_t flags, uint32_t client_len)
{
    qf_put_u32(out, timeout_ms);
    qf_put_u32(out + 4, flags);
    qf_put_u32(out + 8, client_len);
}

int qf_run_decode(const uint8_t *p, size_t len, struct qf_run *run)
{
    struct qf_reader r;
    qf_reader_init(&r, p, len);
    run->timeout_ms = qf_get_u32(&r);
    run->flags = qf_get_u32(&r);
    run->client_len = qf_get_u32(&r);
    if (r.bad || run->timeout_ms == 0 || run->timeout_ms > LIM_TIMEOUT_MS_MAX || (run->flags & ~QF_RUN_FLAGS_ALL))
        return -1;
    /* A client only with a grant, and never over its cap; the code is the rest (1..cap).
     * Compare before subtracting: r.off <= len. */
    if (run->client_len > QF_CLIENT_MAX || (run->client_len && !(run->flags & QF_RUN_GRANT)))
        return -1;
    run->client = qf_get_bytes(&r, run->client_len);
    if (r.bad || len - r.off == 0 || len - r.off > LIM_CODE_MAX)
        return -1;
    run->code_len = (uint32_t)(len - r.off);
    run->code = qf_get_bytes(&r, run->code_len);
    return qf_reader_finish(&r);
}

void qf_host_call_encode_fixed(uint8_t out[QF_HOST_CALL_FIXED], uint32_t call_no, uint32_t method_len,
                               uint32_t path_len, uint32_t body_len)
{
    qf_put_u32(out, call_no);
    qf_put_u32(out + 4, method_len);
    qf_put_u32(out + 8, path_len);
    qf_put_u32(out + 12, body_len);
}

int qf_host_call_decode(const uint8_t *p, size_t len, struct qf_host_call *c)
{
    struct qf_reader r;
    qf_reader_init(&r, p, len);
    c->call_no = qf_get_u32(&r);
    c->method_len = qf_get_u32(&r);
    c->path_len = qf_get_u32(&r);
    c->body_len = qf_get_u32(&r);
    /* Each length against its own cap before any is used, so their sum cannot wrap. */
    if (r.bad || c->call_no == 0 || c->method_len == 0 || c->method_len > QF_HOST_METHOD_MAX || c->path_len == 0 ||
        c->path_len > QF_HOST_PATH_MAX || c->body_len > QF_HOST_BODY_MAX)
        return -1;
    c->method = qf_get_bytes(&r, c->method_len);
    c->path = qf_get_bytes(&r, c->path_len);
    c->body = qf_get_bytes(&r, c->body_len);
    if (qf_reader_finish(&r) < 0)
        return -1;
    /* Text without NUL: the monitor hands both to the broker as C strings. */
    if (!qf_text_ok(c->method, c->method_len) || !qf_text_ok(c->path, c->path_len))
        return -1;
    return 0;
}

void qf_host_reply_encode_fixed(uint8_t out[QF_HOST_REPLY_FIXED], uint32_t call_no, uint32_t status, uint32_t flags,
                                uint32_t body_len)
{
    qf_put_u32(out, call_no);
    qf_put_u32(out + 4, status);
    qf_put_u32(out + 8, flags);
    qf_put_u32(out + 12, body_len);
}

int qf_host_reply_decode(const uint8_t *p, size_t len, struct qf_host_reply *rep)
{
    struct qf_reader r;
    qf_reader_init(&r, p, len);
    rep->call_no = qf_get_u32(&r);
    rep->status = qf_get_u32(&r);
    rep->flags = qf_get_u32(&r);
    rep->body_len = qf_get_u32(&r);
    if (r.bad || rep->call_no == 0 || (rep->flags & ~QF_HR_FLAGS_ALL) || rep->body_len > QF_HOST_REPLY_MAX)
        return -1;
    if (rep->flags & QF_HR_DEADLINE) {
        if (rep->status != 0 || rep->body_len != 0)
            return -1;
    } else if (rep->status < 100 || rep->status > 599) {
        return -1;
    }
    rep->body = qf_get_bytes(&r, rep->body_len);
    return qf_reader_finish(&r);
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
