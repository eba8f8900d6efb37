/* text.h: small text helpers private to src/broker: strict character-class checks on operator and
 * caller strings, safe quoting for error messages, and a growable string builder.
 * Owns: nothing but what a brk_sbuf holds. Invariant: no helper reads past the length it is given,
 * and a brk_sbuf that hit an allocation failure stays failed (every later append is a no-op), so
 * a generator checks once at the end. */
#pragma once
#include "../core/buf.h"
#include <stdbool.h>
#include <stddef.h>

/* Rules for brk_text_ok, or'ed together. UTF-8 validity is always checked. */
enum {
    BRK_TXT_NONEMPTY = 1 << 0, /* at least one byte */
    BRK_TXT_NO_CTRL = 1 << 1,  /* no C0, DEL or C1 control characters */
    BRK_TXT_NO_SPACE = 1 << 2, /* no Unicode whitespace anywhere */
    BRK_TXT_TRIMMED = 1 << 3,  /* no Unicode whitespace at either end */
};
bool brk_text_ok(const char *s, size_t len, unsigned rules);

/* Writes s (len bytes) into out for an error message: printable ASCII stays, everything else
 * becomes \xNN; quotes and backslashes are escaped; longer input is cut with "...". Always
 * NUL-terminates (out_len >= 1). Returns out. */
const char *brk_quote(char *out, size_t out_len, const char *s, size_t len);

/* A string builder: the shared capped buffer (core/buf.h, no cap), NUL-terminated while it has
 * not failed; after a failure (out of memory, or input that is not UTF-8) it yields NULL. */
struct brk_sbuf {
    struct plm_buf b;
};
void brk_sbuf_add(struct brk_sbuf *b, const char *s, size_t len);
void brk_sbuf_str(struct brk_sbuf *b, const char *s);
/* Appends s as a JavaScript/JSON string literal in double quotes, ASCII-only: every byte outside
 * printable ASCII, every quote, backslash, '<', '>' and '&', and U+2028/U+2029 are \u escapes, so
 * the literal can never end early or change meaning wherever it is embedded. s must be UTF-8. */
void brk_sbuf_js_string(struct brk_sbuf *b, const char *s, size_t len);
/* Hands the string out (NULL if the builder failed) and resets the builder. */
char *brk_sbuf_take(struct brk_sbuf *b);
void brk_sbuf_done(struct brk_sbuf *b);
