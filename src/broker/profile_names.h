/* profile_names.h: the name rules of a grant profile (profile_names.c). Each takes len bytes
 * (no NUL needed inside them) and says whether the name may be used; the caller words the error. */
#pragma once
#include <stdbool.h>
#include <stddef.h>

/* A shell-style variable name: [A-Za-z_][A-Za-z0-9_]*, 1..128 bytes. */
bool brk_env_name_ok(const char *s, size_t len);
/* A profile name: 1..LIM_GRANT_PROFILE_MAX bytes of [A-Za-z0-9._-]. */
bool brk_profile_name_ok(const char *s, size_t len);
/* The client's global: a plain identifier of at most BRK_GLOBAL_MAX bytes, not reserved, not a
 * built-in the client needs, not in the __plimsoll namespace. s must be NUL-terminated at len. */
bool brk_global_name_ok(const char *s, size_t len);
