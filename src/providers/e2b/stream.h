/* stream.h: the parser of envd's Connect server-streaming answer to process.Process/Start
 * (application/connect+json). Pure: bytes in, bounded state out; no I/O, so it is fuzzed alone.
 *
 * Each envelope is one flag byte and a 4-byte big-endian length, then that many bytes of JSON.
 * Flag bit 0x02 marks the end-of-stream trailer ({"error": {code, message}} or {}); any other flag
 * bit (compression) is refused. A message frame is {"event": {start | data | end | keepalive}};
 * data carries base64 stdout/stderr; end carries exitCode (absent = 0, proto3 JSON), status and
 * error. The upstream is hostile: a frame over E2B_FRAME_MAX is a protocol error, bytes past the
 * trailer are a protocol error, and past E2B_STREAM_MAX bytes in total the parser stops reading
 * (over_budget: the run's exit becomes 153 with both streams truncated). Output is kept up to
 * `keep` bytes per stream (flags past that). */
#pragma once
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "../../core/request.h"

#define E2B_FRAME_MAX (8u * 1024 * 1024)   /* (spec) one envelope */
#define E2B_STREAM_MAX (32u * 1024 * 1024) /* (spec) one stream, all envelopes */

struct e2b_stream {
    /* configuration */
    size_t keep; /* bytes kept per output stream */
    /* A long-lived process (a session's interpreter, session.c): output goes to sink as it is
     * decoded instead of being kept, and the stream has no total budget (frames stay bounded;
     * the sink bounds what one cell may produce). Set after e2b_stream_init. */
    void (*sink)(void *ctx, int which, const uint8_t *p, size_t n); /* which: 0 stdout, 1 stderr */
    void *sink_ctx;
    void (*on_start)(void *ctx, int64_t pid); /* the start event, once */
    /* framing */
    uint8_t head[5];
    size_t head_have;
    uint8_t *frame;
    uint32_t frame_len, frame_have;
    uint8_t frame_flags;
    uint64_t total;
    /* results */
    struct plm_bytes out, err;
    bool out_truncated, err_truncated;
    bool started, ended, trailer, over_budget, failed;
    int64_t pid;
    int32_t exit_code;
    char end_status[64];
    char end_error[160];
    char trailer_code[48];
    char trailer_msg[160];
    char fail[160]; /* why failed */
};

void e2b_stream_init(struct e2b_stream *s, size_t keep);
/* Feeds n bytes. Returns 0 to go on, 1 when the parser wants no more bytes (trailer seen or
 * over budget), -1 on a protocol error (s->fail says what). Once non-zero, later calls return the
 * same without reading. */
int e2b_stream_feed(struct e2b_stream *s, const uint8_t *p, size_t n);
/* After the transport ended: -1 (with s->fail) when the stream is incomplete (a partial envelope). */
int e2b_stream_finish(struct e2b_stream *s);
void e2b_stream_done(struct e2b_stream *s);

/* Strict standard base64 (with padding) into out (cap bytes); returns the length or -1. */
long e2b_b64_decode(const char *in, size_t len, uint8_t *out, size_t cap);
