/* validate.h: the shared request validation (providers.md §1.4), run before the floor check.
 * Every violation is PLM_E_INVALID with refusal `request`: nothing ran. */
#pragma once
#include "err.h"
#include "request.h"

/* Validates the payload of r (kind set, sizes, UTF-8, NULs, paths, rule). A cell is refused here
 * with "... a cell runs only in a session (SessionRun)". */
int plm_validate_payload(const struct plm_request *r, struct plm_err *err);
/* Validates the software rule alone (mode, count, identity sizes). */
int plm_validate_rule(const struct plm_request *r, struct plm_err *err);
/* The path rule of providers.md §1.4 (lexically clean, relative, no control bytes or '\\'). */
bool plm_path_ok(const char *p);
/* Strict UTF-8 (no overlongs, no surrogates, <= U+10FFFF) over len bytes. */
bool plm_utf8_ok(const char *s, size_t len);
