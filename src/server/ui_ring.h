/* ui_ring.h: the last UI_RING_N run cards the daemon answered, in memory, for the UI page.
 * Owns: each entry's fields and card text. Holds no code, no guest output and no token: only
 * the caller's id, the floor, the tier, the verdict, the record digest, the duration and the
 * card `plimsoll run` would print for the very answer sent (guest output never appears on a
 * card). Thread-safe: one mutex, held only to copy entries in or out. */
#pragma once
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "sandbox.pb-c.h"
#include "rpc.h"

#define UI_RING_N 32
#define UI_CARD_MAX 4096

/* What the page shows for one run. */
struct ui_run_card {
    int64_t unix_ms;          /* when the answer was recorded */
    char request_id[33];      /* "" when the caller sent none */
    char caller[128];         /* "" in open dev mode */
    char floor[16];           /* "" = none */
    char tier[16];            /* the answer's isolation; "" when refused or failed */
    char verdict[24];         /* check.c's name: ran, refused, evidence_mismatch, ... */
    char record_sha256[65];   /* "" without a record */
    int64_t duration_ms;      /* the answer's duration; -1 without a result */
    char card[UI_CARD_MAX];   /* the text card, as `plimsoll run` prints it */
};

struct ui_ring;

struct ui_ring *ui_ring_new(void);
void ui_ring_free(struct ui_ring *r);
/* Records the answer rpc_run is about to send for request `sent` (NULL when the request did not
 * decode: nothing is recorded). A NULL ring does nothing. The card is made by the CLI's own
 * checks and printer (check.c, card.c) over the answer as encoded. */
void ui_ring_note(struct ui_ring *r, const char *request_id, const char *caller, const Plimsoll__V1__RunRequest *sent,
                  const struct rpc_answer *ans);
/* Copies up to max entries, newest first; returns how many. */
size_t ui_ring_snapshot(struct ui_ring *r, struct ui_run_card *out, size_t max);
