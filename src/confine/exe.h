/* exe.h: the one rule for a helper binary the daemon executes (the quickjs worker, the guestio
 * helper): which file, and whether it may be trusted. */
#pragma once
#include <stddef.h>

#include "../core/err.h"

/* Opens (O_RDONLY | O_CLOEXEC) the first candidate that exists: `configured` when given (tests,
 * operators), else `name` beside the daemon's own binary (/proc/self/exe), else `build_path`
 * (the build tree's, when not ""). The file must be a regular executable owned by root or by
 * the daemon's effective uid and writable by neither group nor others: a binary anyone else
 * could swap under us fails closed. `what` names it in errors ("quickjs worker"). The path
 * used is copied into used[used_len] when used is not NULL. Returns the descriptor, or -1 with
 * err (internal: a missing or untrusted binary is the installation's fault, not the caller's). */
int open_trusted_exe(const char *configured, const char *name, const char *build_path, const char *what, char *used,
                     size_t used_len, struct plm_err *err);
