/* secret.h: the one holder for credential bytes in src/broker (static bearer tokens, JWT signing
 * keys, minted per-run tokens).
 * Owns: its heap copy. Invariant: the bytes are wiped with explicit_bzero before the memory is
 * released, and the only printable form is brk_secret_describe()'s "[redacted len=N]". Nothing in
 * the broker passes a secret to a format string, a log line, an error message or a trace. */
#pragma once
#include <stdbool.h>
#include <stddef.h>

struct brk_secret {
    char *data; /* NUL-terminated copy, or NULL when unset; never print */
    size_t len;
};

/* Copies len bytes (an embedded NUL is refused). Returns 0, or -1 out of memory or on a NUL;
 * on failure s is left unset. Any previous value is wiped first. */
int brk_secret_set(struct brk_secret *s, const char *p, size_t len);
/* Wipes and frees; s is unset afterwards. Accepts an unset secret. */
void brk_secret_done(struct brk_secret *s);
static inline bool brk_secret_isset(const struct brk_secret *s)
{
    return s && s->data;
}

#define BRK_SECRET_DESCRIBE_MAX 40
/* "[redacted len=N]" or "[unset]"; the only way a secret is ever shown. */
const char *brk_secret_describe(const struct brk_secret *s, char out[BRK_SECRET_DESCRIBE_MAX]);

/* A bearer token as providers.md §5.2 requires of a minted credential, applied to static tokens
 * too (§8 item 56): 1..LIM_TOKEN_MAX bytes, each 0x21..0x7E (no space, control or non-ASCII). */
bool brk_token_ok(const char *t, size_t len);
