/* session_config.h: the session variables of sessions.md §3.1, read and checked at startup.
 * Invariant: every variable is validated even when sessions are off; a malformed value stops
 * startup with a message naming it. */
#pragma once
#include <stdbool.h>
#include <stdint.h>

#include "../core/err.h"
#include "../server/session_limits.h" /* struct plm_session_config, filled here */

/* Go duration syntax ("90s", "1h30m", "500ms", "0"): a unit on every number except a lone 0.
 * Returns 0 and the value in milliseconds (fractions of a millisecond truncated), or -1. */
int session_parse_duration(const char *s, uint64_t *ms_out);
/* Fills c from the environment (defaults 0/0/0/0/30m/5m/1 GiB). */
int session_config_load(const char *(*get)(const char *), struct plm_session_config *c, struct plm_err *err);
