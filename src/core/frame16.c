/* frame16.c: the 16-byte frame header and the payload reader (frame16.h).
 * Trusts: nothing; the bytes may be a compromised worker's, helper's or guest's.
 * Invariant: a header is accepted only when its type is a row of the caller's table and its
 * length lies within that row's bounds, so no caller allocates or waits for more than its cap;
 * the reader never reads outside p[0..len). */
#include "frame16.h"

const struct f16_type *f16_lookup(const struct f16_type *rows, size_t n, uint16_t type)
{
    for (size_t i = 0; i < n; i++)
        if (rows[i].type == type)
            return &rows[i];
    return NULL;
}

uint32_t f16_max_len(const struct f16_type *rows, size_t n, uint16_t type)
{
    const struct f16_type *t = f16_lookup(rows, n, type);
    return t ? t->max_len : 0;
}

void f16_put_u16(uint8_t *p, uint16_t v)
{
    p[0] = (uint8_t)(v >> 8);
    p[1] = (uint8_t)v;
}

void f16_put_u32(uint8_t *p, uint32_t v)
{
    p[0] = (uint8_t)(v >> 24);
    p[1] = (uint8_t)(v >> 16);
    p[2] = (uint8_t)(v >> 8);
    p[3] = (uint8_t)v;
}

void f16_put_u64(uint8_t *p, uint64_t v)
{
    f16_put_u32(p, (uint32_t)(v >> 32));
    f16_put_u32(p + 4, (uint32_t)v);
}

uint16_t f16_be16(const uint8_t *p)
{
    return (uint16_t)((unsigned)p[0] << 8 | p[1]);
}

uint32_t f16_be32(const uint8_t *p)
{
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | (uint32_t)p[3];
}

void f16_hdr_encode(uint8_t out[F16_HDR_LEN], const struct f16_hdr *h)
{
    f16_put_u32(out, h->len);
    f16_put_u16(out + 4, h->type);
    f16_put_u16(out + 6, h->flags);
    f16_put_u64(out + 8, h->seq);
}

int f16_hdr_decode(const uint8_t in[F16_HDR_LEN], const struct f16_type *rows, size_t n, struct f16_hdr *h)
{
    h->len = f16_be32(in);
    h->type = f16_be16(in + 4);
    h->flags = f16_be16(in + 6);
    h->seq = (uint64_t)f16_be32(in + 8) << 32 | f16_be32(in + 12);
    /* Fail closed: unknown type, reserved flags, or a length outside the type's bounds. */
    const struct f16_type *t = f16_lookup(rows, n, h->type);
    if (!t || h->flags != 0 || h->len > t->max_len || h->len < t->min_len)
        return -1;
    return 0;
}

void f16_reader_init(struct f16_reader *r, const uint8_t *p, size_t len)
{
    r->p = p;
    r->len = len;
    r->off = 0;
    r->bad = false;
}

const uint8_t *f16_get_bytes(struct f16_reader *r, size_t n)
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

uint8_t f16_get_u8(struct f16_reader *r)
{
    const uint8_t *b = f16_get_bytes(r, 1);
    return b ? b[0] : 0;
}

uint32_t f16_get_u32(struct f16_reader *r)
{
    const uint8_t *b = f16_get_bytes(r, 4);
    return b ? f16_be32(b) : 0;
}

int32_t f16_get_i32(struct f16_reader *r)
{
    return (int32_t)f16_get_u32(r);
}

int64_t f16_get_i64(struct f16_reader *r)
{
    uint64_t hi = f16_get_u32(r);
    uint64_t lo = f16_get_u32(r);
    return (int64_t)(hi << 32 | lo);
}

int f16_reader_finish(const struct f16_reader *r)
{
    return (!r->bad && r->off == r->len) ? 0 : -1;
}
