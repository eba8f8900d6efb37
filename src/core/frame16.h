/* frame16.h: the one 16-byte frame header every private channel of the project speaks: the
 * quickjs monitor/zygote/worker sockets (quickjs/frame.h), the microvm host/guest port
 * (guestio/vmchan.h) and the daemon/guestio-helper socketpair (guestio/frame.h).
 * Wire format (STYLE.md §5), big-endian, decoded field by field:
 *     u32 len   payload bytes, within the type's bounds
 *     u16 type  one row of the channel's type table; anything else => the reader kills the writer
 *     u16 flags zero in v1; anything else => kill
 *     u64 seq   what the channel says (a request's id, a connection's id)
 * then exactly `len` payload bytes.
 * Pure bytes: no allocation, no syscall, no policy beyond the table the caller passes; each
 * channel keeps its own types, caps and extra rules (direction, seq) in its own codec. */
#pragma once
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define F16_HDR_LEN 16u

struct f16_hdr {
    uint32_t len;
    uint16_t type, flags;
    uint64_t seq;
};

/* One frame type of a channel and the bounds of its payload (min 0 and max 0: always empty). */
struct f16_type {
    uint16_t type;
    uint32_t min_len, max_len;
};

/* The row of `type` in a channel's table of n rows, or NULL when the channel has no such type. */
const struct f16_type *f16_lookup(const struct f16_type *rows, size_t n, uint16_t type);
/* The payload cap of `type` in the table; 0 for a type it lacks (which is never valid). */
uint32_t f16_max_len(const struct f16_type *rows, size_t n, uint16_t type);

void f16_hdr_encode(uint8_t out[F16_HDR_LEN], const struct f16_hdr *h);
/* Decodes the four fields, then checks them: the type is a row of the table, flags are zero and
 * the length is within the row's bounds. Returns 0 or -1 (h is filled either way). */
int f16_hdr_decode(const uint8_t in[F16_HDR_LEN], const struct f16_type *rows, size_t n, struct f16_hdr *h);

/* Big-endian integers at p. */
void f16_put_u16(uint8_t *p, uint16_t v);
void f16_put_u32(uint8_t *p, uint32_t v);
void f16_put_u64(uint8_t *p, uint64_t v);
uint16_t f16_be16(const uint8_t *p);
uint32_t f16_be32(const uint8_t *p);

/* A bounded reader over one payload. Any read past the end sets `bad` and returns zeros. */
struct f16_reader {
    const uint8_t *p;
    size_t len, off;
    bool bad;
};
void f16_reader_init(struct f16_reader *r, const uint8_t *p, size_t len);
uint8_t f16_get_u8(struct f16_reader *r);
uint32_t f16_get_u32(struct f16_reader *r);
int32_t f16_get_i32(struct f16_reader *r);
int64_t f16_get_i64(struct f16_reader *r);
/* A pointer to the next n bytes inside the payload, or NULL (and bad) past the end. */
const uint8_t *f16_get_bytes(struct f16_reader *r, size_t n);
/* 0 when nothing went wrong and every byte was consumed; -1 otherwise. */
int f16_reader_finish(const struct f16_reader *r);
