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
    QF_RUN = 1,           /* monitor -> worker: see struct qf_run */
    QF_PROBE = 2,         /* monitor -> worker: u32 probe id (startup evidence only) */
    QF_HOST_REPLY = 3,    /* monitor -> worker: the answer to one HOST_CALL, see qf_host_reply */
    QF_READY = 16,        /* worker -> monitor: confined, engine up; empty */
    QF_RESULT = 17,       /* worker -> monitor: see struct qf_result */
    QF_PROBE_RESULT = 18, /* worker -> monitor: i64 syscall return, u32 errno */
    QF_HOST_CALL = 19,    /* worker -> monitor: one host API call of a granted run, qf_host_call */
    QF_SPAWN = 32,        /* monitor -> zygote: empty; one fd in SCM_RIGHTS */
    QF_SPAWNED = 33,      /* zygote -> monitor: u32 pid (0 on failure), u32 errno */
    QF_HELLO = 34,        /* zygote -> monitor, once: u32 namespace flags applied */
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
#define QF_RES_ENDED 0x08u /* sessions only: the interpreter ends with this run (the worker exits) */
#define QF_RES_FLAGS_ALL 0x0fu
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

/* RUN payload: u32 timeout_ms (1..LIM_TIMEOUT_MS_MAX), u32 run flags (QF_RUN_*), u32 client_len,
 * the grant's client script (client_len bytes, 0..QF_CLIENT_MAX; 0 unless QF_RUN_GRANT), then the
 * code (the rest, 1..LIM_CODE_MAX bytes). QF_RUN_GRANT: the worker installs the native
 * __plimsoll_host_send and evaluates the client before the code (docs/quickjs.md, Grants). */
#define QF_RUN_FIXED 12u
#define QF_RUN_GRANT 0x01u
/* Sessions (session.c): after this run's RESULT the worker keeps its engine and waits for the
 * next RUN, unless the run ended its interpreter (deadline, process.exit), which exits. */
#define QF_RUN_SESSION 0x02u
#define QF_RUN_FLAGS_ALL 0x03u
#define QF_CLIENT_MAX (256u * 1024)
struct qf_run {
    uint32_t timeout_ms;
    uint32_t flags;
    const uint8_t *client, *code; /* point into the decoded payload */
    uint32_t client_len, code_len;
};
int qf_run_decode(const uint8_t *p, size_t len, struct qf_run *run);
void qf_run_encode_fixed(uint8_t out[QF_RUN_FIXED], uint32_t timeout_ms, uint32_t flags, uint32_t client_len);

/* Host API transport (issue 6). Caps are the broker's (src/broker): a method longer than 16
 * bytes cannot be one it knows, a target longer than 8 KiB is refused, a body over 1 MiB is
 * refused with 413 by the broker itself (so at most 1 MiB + 1 bytes are ever carried), and an
 * upstream answer is at most 4 MiB. */
#define QF_HOST_METHOD_MAX 16u
#define QF_HOST_PATH_MAX 8192u
#define QF_HOST_BODY_MAX (1024u * 1024 + 1)
#define QF_HOST_REPLY_MAX (4u * 1024 * 1024)

/* HOST_CALL payload: u32 call_no (1, 2, ... within the run: exactly one more than the last),
 * u32 method_len (1..16), u32 path_len (1..8192), u32 body_len (0..QF_HOST_BODY_MAX), then the
 * method, the path and the body. Method and path are UTF-8 text without NUL (qf_text_ok); the
 * body is opaque bytes (the client's JSON text); a body of 0 bytes means none. The header's seq
 * is the RUN's. */
#define QF_HOST_CALL_FIXED 16u
struct qf_host_call {
    uint32_t call_no;
    const uint8_t *method, *path, *body; /* point into the decoded payload */
    uint32_t method_len, path_len, body_len;
};
int qf_host_call_decode(const uint8_t *p, size_t len, struct qf_host_call *c);
void qf_host_call_encode_fixed(uint8_t out[QF_HOST_CALL_FIXED], uint32_t call_no, uint32_t method_len,
                               uint32_t path_len, uint32_t body_len);

/* HOST_REPLY payload: u32 call_no (echoes the call), u32 status, u32 reply flags (QF_HR_*),
 * u32 body_len (0..QF_HOST_REPLY_MAX), body. Without flags the status is 100..599 and the body
 * is what the broker answered (bytes; the worker decodes them as UTF-8 with replacement).
 * QF_HR_DEADLINE: the run's deadline passed while the call was out: status 0, no body, and the
 * worker ends the run as timed out without returning to JavaScript. The header's seq is the
 * RUN's. */
#define QF_HOST_REPLY_FIXED 16u
#define QF_HR_DEADLINE 0x01u
#define QF_HR_FLAGS_ALL 0x01u
struct qf_host_reply {
    uint32_t call_no, status, flags;
    const uint8_t *body; /* points into the decoded payload */
    uint32_t body_len;
};
int qf_host_reply_decode(const uint8_t *p, size_t len, struct qf_host_reply *r);
void qf_host_reply_encode_fixed(uint8_t out[QF_HOST_REPLY_FIXED], uint32_t call_no, uint32_t status, uint32_t flags,
                                uint32_t body_len);

/* UTF-8 (RFC 3629: no overlong forms, no surrogates, nothing past U+10FFFF) and no NUL byte. */
bool qf_text_ok(const uint8_t *p, size_t len);
/* Decodes bytes as UTF-8 the way WHATWG's decoder (and Node's Buffer#toString) does: each
 * maximal invalid subpart becomes U+FFFD. Writes the repaired UTF-8 to out (when not NULL) and
 * returns its length, at most 3 * len: call once with NULL to size the buffer. */
size_t qf_utf8_repair(const uint8_t *in, size_t len, uint8_t *out);
