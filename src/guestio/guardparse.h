/* guardparse.h: the e2b egress guard's wire format as the guestio helper reads it (guard mode,
 * docs/privsep.md): the credential header E2B's network rule injects and the guard's JSON
 * request body. The guard itself (the daemon's listener, tokens, the broker call) is the e2b
 * provider's (providers/e2b/guard.h, which includes this file); the body parser lives here
 * because it reads guest bytes, and guest bytes are parsed only in the confined helper.
 * guardparse.c is pure, fuzzed on its own (fuzz/fuzz_e2b_guard.c), and linked into the helper
 * and the tests only, never into the daemon. */
#pragma once
#include <stddef.h>
#include <stdint.h>

#define E2B_GUARD_HEADER "X-Plimsoll-E2B-Guard"
#define E2B_GUARD_BODY_MAX (2u * 1024 * 1024)

struct e2b_guard_call {
    char method[8]; /* upper-cased: GET PUT POST DELETE PATCH */
    char *path;     /* the raw target as the guest sent it (the broker checks it) */
    uint8_t *body;  /* NULL when absent */
    size_t len;
};
/* Parses {"method": str, "path": str[, "body": str|null]} from at most E2B_GUARD_BODY_MAX bytes.
 * Returns 0, or 400 with why filled (printable ASCII). The strings must be valid UTF-8 without
 * NUL; unknown keys are refused; the method must be one of the five (any case). */
int e2b_guard_parse(const uint8_t *buf, size_t len, struct e2b_guard_call *out, char *why, size_t wcap);
void e2b_guard_call_done(struct e2b_guard_call *c);
