/* sweep.h: the after-call process sweep of an e2b session (sweep.c): what the VM runs at open is
 * recorded once; after each call every other process, but the session's live interpreters, dies. */
#pragma once
#include <stddef.h>
#include <stdint.h>

#include "internal.h"

/* At open, before any guest code: the VM's own processes as "pid:start-time" tokens, malloc'd
 * into *baseline. -1 when they cannot be listed (the open fails; the sandbox may exist). */
int e2b_sweep_baseline(struct e2b_state *s, const struct e2b_sandbox *sb, char **baseline, struct plm_err *err);
/* After a call: SIGKILL every process that is neither in baseline nor one of keep[] (pids of the
 * live interpreters, <= 0 skipped) until none is left. -1 when that was not proved (envd did not
 * run the sweep, it timed out, or a process survived it): the session must end. */
int e2b_sweep_after_call(struct e2b_state *s, const struct e2b_sandbox *sb, const char *baseline,
                         const int64_t *keep, size_t nkeep, struct plm_err *err);
