/* runframe.h: the payloads of one snippet run, the same bytes on every tier that runs one: the
 * quickjs monitor and its worker (quickjs/frame.h) and the microvm host and its guest agent
 * (guestio/vmchan.h), so a snippet's request and answer are the same bytes at `process` and at
 * `vm`. The qf_ prefix is historical: these were the quickjs frames first.
 * Pure bytes: this file allocates nothing and calls no syscall; the headers are frame16's. */
#pragma once
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "frame16.h"

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
