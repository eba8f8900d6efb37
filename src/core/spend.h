/* spend.h: the paid allowance (issue 23 item 4). A provider billed by the second (e2b) costs the
 * operator for every second its sandbox exists, which a rate limit does not bound. Two daily
 * allowances in seconds bound it: one for the whole daemon (SANDBOX_PAID_SECONDS_PER_DAY) and one
 * per caller (paid_seconds_per_day in PLIMSOLL_CLIENTS_FILE); 0 means none.
 * A run reserves the most it could cost (its clamped timeout plus the provider's teardown bound)
 * before admission and is charged its real wall time when it ends, at most what it reserved; the
 * rest is given back. A session's meter holds one reservation while its sandbox runs and is
 * charged the time it ran at each renewal, suspend and end.
 * Days are UTC calendar days. A reservation still held at midnight is counted in the new day in
 * full until it settles, then for the part after midnight, so no day's allowance is spent twice.
 * Counts live in memory: a restart forgets the day (docs/sessions.md says so).
 * Thread-safe. Times are wall-clock milliseconds from an injectable clock (tests move it). */
#pragma once
#include <stdbool.h>
#include <stdint.h>

#include "err.h"

struct spend;
struct spend_hold;

/* Returns the wall clock in Unix milliseconds. */
typedef int64_t (*spend_clock)(void *ctx);

/* What a reservation is for: the refusal says what it was made of. */
enum spend_what { SPEND_RUN, SPEND_SESSION };

/* daemon_secs: the daemon-wide allowance per UTC day, 0 = none. now NULL = the real clock. */
struct spend *spend_new(uint64_t daemon_secs, spend_clock now, void *now_ctx);
/* Frees the books; holds still open are forgotten with them. NULL-safe. */
void spend_free(struct spend *s);

/* Reserves want_ms for caller against its allowance (caller_secs, 0 = none) and the daemon's.
 * Refusal: PLM_E_CAPACITY / capacity, text beginning "paid budget: ". On success *out is the
 * hold, settled exactly once by spend_settle. */
int spend_reserve(struct spend *s, const char *caller, uint64_t caller_secs, uint64_t want_ms, enum spend_what what,
                  struct spend_hold **out, struct plm_err *err);
/* Charges took_ms (at most what was reserved), gives the rest back and frees h. Returns the
 * milliseconds charged. NULL h charges nothing. */
uint64_t spend_settle(struct spend *s, struct spend_hold *h, uint64_t took_ms);

/* Today's spend, in milliseconds (held reservations included). */
void spend_spent(struct spend *s, const char *caller, uint64_t *caller_ms, uint64_t *total_ms);
/* Reservations refused for a caller's allowance (daemon false) or the daemon's (true). */
uint64_t spend_refused(struct spend *s, bool daemon);

/* A session on a metered provider: one reservation while its sandbox runs. Not thread-safe by
 * itself: the daemon touches it only while it holds the session's turn (or has ended it). */
struct spend_meter {
    struct spend *s;
    char caller[128];
    uint64_t caller_secs;
    struct spend_hold *h; /* NULL while suspended or ended */
    int64_t since_ms;     /* when h was taken */
    uint64_t charged_ms;  /* charged so far, for the log */
};

void spend_meter_init(struct spend_meter *m, struct spend *s, const char *caller, uint64_t caller_secs);
/* Makes the reservation reach want_ms from now: takes it when nothing is held (the open, or the
 * call that resumes the session); otherwise, unless what is held already reaches that far,
 * charges what ran since the last cover and holds want_ms from now. A refusal (capacity, as
 * spend_reserve) leaves the session covered as far as it was. */
int spend_meter_cover(struct spend_meter *m, uint64_t want_ms, struct plm_err *err);
/* Charges what ran since the last cover and holds nothing (a suspend or the end). Returns the
 * session's milliseconds charged so far. */
uint64_t spend_meter_stop(struct spend_meter *m);
bool spend_meter_running(const struct spend_meter *m);
