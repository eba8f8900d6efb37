/* frames.h: the byte parsers the docker provider runs over untrusted input: Docker's multiplexed
 * attach stream, a snippet's end line, the runner's report frames and the report body. Pure: no
 * I/O, no globals; every length is capped before it is used; the fuzzer
 * (fuzz/fuzz_docker_frames.c) drives all four. */
#pragma once
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "../../core/request.h"
#include "runner/wire.h"

/* A byte sink that keeps the first `max` bytes and flags the rest as truncated. */
struct dock_bytes {
    uint8_t *data;
    size_t len, cap, max;
    bool truncated, oom;
};
void dock_bytes_add(struct dock_bytes *b, const uint8_t *p, size_t n);
void dock_bytes_done(struct dock_bytes *b);
static inline void dock_bytes_cleanup_fn(struct dock_bytes *b)
{
    dock_bytes_done(b);
}
#define cleanup_bytes __attribute__((cleanup(dock_bytes_cleanup_fn))) /* a dock_bytes freed at scope exit */
/* Moves the kept bytes into a plm_bytes (ownership passes); b is left empty. */
void dock_bytes_take(struct dock_bytes *b, struct plm_bytes *out);

/* Docker's attach stream (Tty=false): frames of an 8-byte header {stream, 0, 0, 0, u32 BE size}
 * and `size` payload bytes. stream 0 and 1 are stdout, 2 is stderr; anything else (3 is the
 * daemon's own error channel), or a non-zero reserved byte, makes the stream malformed. */
enum { DOCK_STDOUT = 1, DOCK_STDERR = 2 };
struct dock_mux {
    uint8_t hdr[8];
    uint8_t have;   /* header bytes collected */
    uint8_t stream; /* of the frame in progress */
    uint32_t left;  /* payload bytes still to come in that frame */
    bool bad;
};
typedef void (*dock_sink_fn)(void *ctx, int stream, const uint8_t *p, size_t n);
/* Feeds n bytes; payload is delivered in pieces as it arrives. -1 once malformed (sticky). */
int dock_mux_feed(struct dock_mux *m, const uint8_t *p, size_t n, dock_sink_fn sink, void *ctx);
/* True at a frame boundary (a clean end of stream). */
bool dock_mux_idle(const struct dock_mux *m);

/* A snippet's stream ends with the start script's end line "<end marker>:<status>\n" (launch.c).
 * The splitter keeps what precedes it, and holds the last DOCK_END_LEN - 1 bytes back until more
 * arrive, so the line never reaches the kept output whatever the chunking. Bytes after it are
 * dropped. A status that is not 0..255 (a guest that forged the marker) leaves status_ok false. */
#define DOCK_END_PREFIX "plimsoll-ended:"
#define DOCK_END_LEN (sizeof DOCK_END_PREFIX - 1 + 32) /* prefix, 32 hex; then ":<status>\n" */
struct dock_endline {
    struct dock_bytes keep;
    uint8_t hold[DOCK_END_LEN + 24];
    size_t hold_len;
    bool ended, status_ok;
    int64_t status;
};
void dock_endline_feed(struct dock_endline *st, const char *end, const uint8_t *p, size_t n);
/* At the end of the stream or the deadline: what was held back is output after all. */
void dock_endline_flush(struct dock_endline *st);

/* The runner's report frames in its stdout (wire.h). */
enum dock_report_status {
    DOCK_REPORT_NONE = 0, /* no frame tag at all */
    DOCK_REPORT_FORGED,   /* tags, but none with a well-formed header, a complete body and our MAC */
    DOCK_REPORT_OK,       /* body and body_len: the first authenticated frame */
};
enum dock_report_status dock_report_find(const uint8_t *out, size_t len, const uint8_t key[RW_KEY_LEN],
                                         const uint8_t **body, size_t *body_len);
/* True once the first well-formed frame's body has fully arrived (authentication is still
 * dock_report_find's job). *scan keeps the search position between calls (start at 0), so the
 * cost stays linear in what arrives. */
bool dock_report_complete(const uint8_t *out, size_t len, size_t *scan);
/* Encodes the header line for body/mac (for tests and the fuzzer's seeds); returns its length. */
size_t dock_report_header(char out[RW_FRAME_HEADER_MAX + 2], size_t body_len, const uint8_t mac[32]);

/* Decodes an authenticated report body into pr (steps, artifacts, flag) or *error (the runner's
 * setup error, malloc'd). Every step's command must equal the step the host sent, every artifact
 * path must be one it asked for (once), text must be UTF-8. -1 when undecodable; pr is then
 * emptied. */
int dock_report_decode(const uint8_t *body, size_t len, const char *const *steps, size_t n_steps,
                       const char *const *artifacts, size_t n_artifacts, struct plm_project_result *pr, char **error);
void dock_project_result_done(struct plm_project_result *pr);
