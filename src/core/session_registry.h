/* session_registry.h: the daemon's open sessions (sessions.md §1, §3.2, §4.3).
 * One mutex guards every count, cap, turn, timer and tombstone, so two simultaneous opens can
 * never both take the last place, and a victim chosen for replacement cannot start a call.
 * Owns: every entry (id, caller, owner, chain state) and one reference to it; a provider's
 * session handle is only stored here: whoever removes an entry closes the handle first.
 * Invariant: an entry is found only by (id, caller); a miss, a foreign caller and a tombstone
 * past its time are the same NULL. The id itself is never logged: use `fp`. */
#pragma once
#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "err.h"
#include "session_end.h"
#include "record.h"
#include "spend.h"
#include "tier.h"


#define SREG_TOMBSTONE_MS (10u * 60 * 1000)
#define SREG_CLAIM_WINDOW_MS (5u * 60 * 1000)
#define SREG_MAX_VICTIMS 16
#define SREG_OWNER_MAX 64

struct sreg_cfg {
    uint32_t max_sessions; /* > 0 */
    uint32_t per_caller;   /* 0 = no cap */
    uint32_t per_owner;    /* 0 = no cap */
};

struct sreg_session {
    /* Set at commit, read-only afterwards. */
    char id[33];              /* 32 lowercase hex: the capability */
    char fp[PLM_HEX_SHA256];  /* its SHA-256: what logs and records carry */
    char *caller;
    char *owner;              /* NULL: no owner */
    void *handle;             /* the provider's session */
    /* Set by the opener right after commit, before the id is handed out; read-only afterwards. */
    enum plm_tier tier;       /* measured at open */
    char software_identity[160], environment[160];
    char rule_mode[16];       /* the open's software rule: "", "exact" or "approved" */
    char **rule_ids;          /* its identities (malloc'd array of malloc'd strings) */
    size_t n_rule_ids;
    uint64_t idle_ms;         /* effective idle timeout */
    /* The paid meter of a session on a provider billed by the second (meter.s NULL: unmetered).
     * Touched only with the turn held, or by the opener before the id is handed out. */
    struct spend_meter meter;
    /* Grants (issue 23 item 1): per grant profile (its index in the loaded profiles), the
     * route_max_calls counts the session's calls have spent; touched only with the turn held. */
    uint32_t **grant_caps;
    size_t n_grant_caps;
    uint64_t deadline_ms;     /* monotonic end of the lifetime */
    int64_t expires_unix_ms;
    /* Guarded by the registry's lock. */
    enum plm_session_end end; /* NONE while live */
    char end_detail[160];
    uint64_t ended_ms;        /* monotonic, for the tombstone */
    bool claimed;             /* a request named it */
    bool replaced;            /* chosen as a victim: counts against no cap */
    bool busy;                /* the turn is held (call, close, suspend, replacement) */
    bool removed;             /* unlinked by CloseSession */
    bool suspended;
    bool holds_slot;          /* holds a concurrency slot of the admission limiter */
    unsigned waiters;         /* at most one */
    uint64_t lru;             /* set at open and after each call that was not refused */
    uint64_t calls;           /* executed calls, unanswered ones included */
    char last_sha256[PLM_HEX_SHA256];
    uint64_t timer_gen, timer_due_ms; /* due 0: no timer */
    unsigned refs;
    pthread_cond_t turn_cv;
    struct sreg_session *next;
};

struct sreg_reservation {
    char *caller, *owner;
    struct sreg_session *victims[SREG_MAX_VICTIMS]; /* held (ref and turn) until victim_done */
    size_t n_victims;
    bool active;
    struct sreg_reservation *next;
};

struct sreg;
struct sreg *sreg_new(const struct sreg_cfg *cfg);
/* Frees every entry; the caller has closed their handles (sreg_drain). NULL-safe. */
void sreg_free(struct sreg *r);

/* §3.2: per-owner victims (least recently used, turn free), then the daemon-wide cap, then the
 * per-caller cap, all under the lock. On success the place is held (counted as opening) until
 * sreg_commit or sreg_unreserve, and each victim's turn is held by res. On refusal nothing
 * changed: PLM_E_CAPACITY, marked capacity. owner may be NULL or "". */
int sreg_reserve(struct sreg *r, struct sreg_reservation *res, const char *caller, const char *owner,
                 struct plm_err *err);
/* Gives the place back; victims not yet settled are restored (a refused open closes nothing). */
void sreg_unreserve(struct sreg *r, struct sreg_reservation *res);
/* The open closed victim i (closed=true: it ends REPLACED unless it had ended otherwise) or
 * failed to (it stays open, counted and usable). Either way its turn and reference go back. */
void sreg_victim_done(struct sreg *r, struct sreg_reservation *res, size_t i, bool closed);
/* Draws the id, registers the entry and ends the reservation. Returns the entry with one
 * reference for the caller (sreg_put), or NULL out of memory or randomness (res untouched). */
struct sreg_session *sreg_commit(struct sreg *r, struct sreg_reservation *res, void *handle, uint64_t now_ms);

/* Lookup by (id, caller); a referenced entry, or NULL for every kind of miss. Marks it claimed. */
struct sreg_session *sreg_lookup(struct sreg *r, const char *id, const char *caller, uint64_t now_ms);
void sreg_put(struct sreg *r, struct sreg_session *s);

/* The turn (§2.2 step 7). Waits up to wait_ms when another holds it; one waiter only.
 * Returns 0 (held), or -1 with PLM_E_CAPACITY/capacity: a second waiter, or the wait ran out
 * (then PLM_E_DEADLINE, still marked capacity). */
int sreg_turn_take(struct sreg *r, struct sreg_session *s, uint64_t wait_ms, struct plm_err *err);
/* Takes the turn only if it is free and nobody waits. */
bool sreg_turn_try(struct sreg *r, struct sreg_session *s);
void sreg_turn_give(struct sreg *r, struct sreg_session *s);

/* Records an end (first one wins, except REPLACED/UNCLAIMED over CLOSED, §2.4). */
void sreg_set_end(struct sreg *r, struct sreg_session *s, enum plm_session_end why, const char *detail);
/* Reads the end under the lock (detail may be NULL). */
enum plm_session_end sreg_end_of(struct sreg *r, struct sreg_session *s, char *detail, size_t n);
/* Chain state under the lock. */
void sreg_chain_get(struct sreg *r, struct sreg_session *s, uint64_t *calls, char last[PLM_HEX_SHA256]);
void sreg_chain_advance(struct sreg *r, struct sreg_session *s, const char record_sha256[PLM_HEX_SHA256]);
/* After a call that was not refused: the LRU stamp. */
void sreg_touch(struct sreg *r, struct sreg_session *s, uint64_t now_ms);
/* Unlinks the entry (CloseSession after the sandbox is gone); the registry's reference goes. */
void sreg_remove(struct sreg *r, struct sreg_session *s);
/* The suspend flags, under the lock. */
void sreg_set_suspended(struct sreg *r, struct sreg_session *s, bool suspended, bool holds_slot);
bool sreg_is_claimed(struct sreg *r, struct sreg_session *s);
/* Whether CloseSession (or shutdown) has unlinked the entry. */
bool sreg_is_removed(struct sreg *r, struct sreg_session *s);
bool sreg_is_suspended(struct sreg *r, struct sreg_session *s, bool *holds_slot);

/* Timers carry a generation: arming bumps it, so a timer that fired for an older arming is
 * stale and does nothing. due_ms 0 disarms. */
void sreg_arm(struct sreg *r, struct sreg_session *s, uint64_t due_ms);
struct sreg_due {
    struct sreg_session *s; /* referenced: sreg_put when done */
    uint64_t gen;
};
/* Hands out (at most n) sessions whose timer is due at now_ms, disarming them; also forgets
 * tombstones older than SREG_TOMBSTONE_MS whose handle is already gone (*forgotten counts
 * them). Returns how many were filled. */
size_t sreg_due(struct sreg *r, uint64_t now_ms, struct sreg_due *out, size_t n);
/* Whether gen is still the entry's current timer generation. */
bool sreg_gen_current(struct sreg *r, struct sreg_session *s, uint64_t gen);
/* Every linked entry, referenced (shutdown and tests); returns the count filled. */
size_t sreg_all(struct sreg *r, struct sreg_session **out, size_t n);

struct sreg_counts {
    uint32_t open, opening, tombstones;
};
void sreg_counts(struct sreg *r, struct sreg_counts *c);

/* Takes the provider handle out of the entry (exactly one closer gets it); NULL once taken. */
void *sreg_take_handle(struct sreg *r, struct sreg_session *s);
