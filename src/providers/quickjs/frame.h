/* frame.h: the framing between the monitor (daemon), the zygote and one QuickJS worker.
 * Wire format (STYLE.md §5): a 16-byte header, big-endian, decoded field by field:
 *     u32 len   payload bytes; over qf_max_len(type) => the receiver kills the sender
 *     u16 type  enum qf_type; unknown => kill
 *     u16 flags zero in v1; anything else => kill
 *     u64 seq   a reply echoes its request's seq; unsolicited frames (READY) carry 0
 * then exactly `len` payload bytes. Payload decoders must consume exactly `len`.
 * Shared by both sides of the wall: this file allocates nothing and calls no syscall. */
#pragma once
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define QF_HDR_LEN 16u

enum qf_type {
    QF_RUN = 1,            /* monitor -> worker: u32 timeout_ms, code bytes (rest) */
    QF_PROBE = 2,          /* monitor -> worker: u32 probe id (startup evidence only) */
    QF_READY = 16,         /* worker -> monitor: confined, engine up; empty */
    QF_RESULT = 17,        /* worker -> monitor: see struct qf_result */
    QF_PROBE_RESULT = 18,  /* worker -> monitor: i64 syscall return, u32 errno */
    QF_SPAWN = 32,         /* monitor -> zygote: empty; one fd in SCM_RIGHTS */
    QF_SPAWNED = 33,       /* zygote -> monitor: u32 pid (0 on failure), u32 errno */
    QF_HELLO = 34,         /* zygote -> monitor, once: u32 namespace flags applied */
};

struct qf_hdr {
    uint32_t len;
    uint16_t type, flags;
    uint64_t seq;
};

/* The cap of each type's payload; 0 for an unknown type (which is never valid). */
uint32_t qf_max_len(uint16_t type);
/* Minimum payload (fixed part) of each type. */
uint32_t qf_min_len(uint16_t type);

void qf_hdr_encode(uint8_t out[QF_HDR_LEN], const struct qf_hdr *h);
/* Decodes and validates type, flags and len against the type's bounds. Returns 0 or -1. */
int qf_hdr_decode(const uint8_t in[QF_HDR_LEN], struct qf_hdr *h);

/* A bounded reader over one payload. Any read past the end sets `bad`. */
struct qf_reader {
    const uint8_t *p;
    size_t len, off;
    bool bad;
};
void qf_reader_init(struct qf_reader *r, const uint8_t *p, size_t len);
uint32_t qf_get_u32(struct qf_reader *r);
int32_t qf_get_i32(struct qf_reader *r);
uint8_t qf_get_u8(struct qf_reader *r);
int64_t qf_get_i64(struct qf_reader *r);
/* Returns a pointer to the next n bytes inside the payload, or NULL (and bad) past the end. */
const uint8_t *qf_get_bytes(struct qf_reader *r, size_t n);
/* 0 when nothing went wrong and every byte was consumed; -1 otherwise. */
int qf_reader_finish(const struct qf_reader *r);

void qf_put_u32(uint8_t *p, uint32_t v);
void qf_put_u64(uint8_t *p, uint64_t v);

/* RESULT payload: i32 exit_code, u8 flags (QF_RES_*), u8[3] zero, u32 out_len, u32 err_len,
 * out bytes, err bytes. out_len and err_len are each <= LIM_OUTPUT_MAX. */
#define QF_RES_TIMED_OUT 0x01u
#define QF_RES_OUT_TRUNC 0x02u
#define QF_RES_ERR_TRUNC 0x04u
#define QF_RES_FLAGS_ALL 0x07u
#define QF_RESULT_FIXED 16u

struct qf_result {
    int32_t exit_code;
    uint8_t flags;
    const uint8_t *out, *err; /* point into the decoded payload */
    uint32_t out_len, err_len;
};
int qf_result_decode(const uint8_t *p, size_t len, struct qf_result *res);
/* Writes the fixed part of a RESULT payload into out[QF_RESULT_FIXED]. */
void qf_result_encode_fixed(uint8_t out[QF_RESULT_FIXED], int32_t exit_code, uint8_t flags,
                            uint32_t out_len, uint32_t err_len);

/* RUN payload: u32 timeout_ms then the code (1..LIM_CODE_MAX bytes). */
#define QF_RUN_FIXED 4u
struct qf_run {
    uint32_t timeout_ms;
    const uint8_t *code;
    uint32_t code_len;
};
int qf_run_decode(const uint8_t *p, size_t len, struct qf_run *run);
