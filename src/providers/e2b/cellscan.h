/* cellscan.h: the end-of-cell marker in a session interpreter's output (session.c). Pure: bytes
 * in, bounded state out; no I/O, so it is unit-tested and fuzzed alone.
 *
 * The in-sandbox kernel (kernel_js.c) ends each cell by writing, after everything the cell
 * printed, "\x1eplimsoll-cell <nonce> <status>\n" to stdout and "\x1eplimsoll-cell <nonce>\n" to
 * stderr; <nonce> is 32 lowercase hex drawn by the daemon for that cell, <status> a decimal
 * integer (0 ran, 1 raised). The output is hostile: it can contain any bytes, partial markers,
 * markers of other nonces, or a marker of this nonce with a malformed tail. The scanner keeps
 * up to `keep` bytes of the cell's output (flagging the rest), counts every byte, and needs at
 * most the marker's length of look-behind, so its memory is bounded whatever it is fed. Bytes
 * after the marker belong to no cell and are reported as ignored. */
#pragma once
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "../../core/request.h"

#define E2B_CELL_NONCE_HEX 32
#define E2B_CELL_MARK_PREFIX "\x1eplimsoll-cell "
#define E2B_CELL_STATUS_MAX 6 /* digits of a status, an optional '-' included */

enum e2b_cellscan_state { CELLSCAN_OUTPUT, CELLSCAN_STATUS, CELLSCAN_DONE, CELLSCAN_BAD };

struct e2b_cellscan {
    char want[sizeof E2B_CELL_MARK_PREFIX + E2B_CELL_NONCE_HEX]; /* prefix + nonce */
    size_t want_len, matched; /* marker bytes matched so far (held back from the output) */
    bool with_status;         /* stdout: " <status>\n" follows the nonce; stderr: "\n" */
    char status_text[E2B_CELL_STATUS_MAX + 2];
    size_t status_len;
    enum e2b_cellscan_state state;
    int32_t status;
    size_t keep;
    struct plm_bytes out; /* up to keep bytes, malloc'd */
    bool truncated;
    uint64_t seen; /* output bytes of the cell, kept or not */
};

/* nonce: exactly 32 lowercase hex characters, else -1. */
int e2b_cellscan_init(struct e2b_cellscan *c, const char *nonce, bool with_status, size_t keep);
/* Feeds n bytes. Returns 1 once the marker is complete (*used = bytes consumed up to and
 * including it), 0 to go on (*used = n), -1 on a malformed marker of this nonce or out of
 * memory (the state says which). Once done or bad, later calls consume nothing. */
int e2b_cellscan_feed(struct e2b_cellscan *c, const uint8_t *p, size_t n, size_t *used);
/* Moves the kept output to *out (the scanner keeps none). */
void e2b_cellscan_take(struct e2b_cellscan *c, struct plm_bytes *out);
void e2b_cellscan_done(struct e2b_cellscan *c);
