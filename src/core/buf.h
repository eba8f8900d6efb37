/* buf.h: a growing byte buffer with a hard cap, once for the whole daemon (request and response
 * bodies, JSON text, generated scripts). Growth doubles, never past `max`; the bytes are always
 * followed by a NUL (not counted in len), so text can be used as a C string.
 * Owns: p, until plm_buf_take. Invariant: len <= max; after a failure (`failed`) nothing more is
 * appended, so a truncated result is never mistaken for a whole one. */
#pragma once
#include <stdbool.h>
#include <stddef.h>

struct plm_buf {
    char *p;
    size_t len, cap; /* cap includes room for the NUL */
    size_t max;      /* 0: no cap beyond memory */
    bool failed;     /* over max, or out of memory */
};

/* Room for n more bytes (and the NUL). false (and failed) past max or out of memory. An empty
 * buffer's first reservation is exact, so a body of a declared length is allocated once. */
bool plm_buf_reserve(struct plm_buf *b, size_t n);
bool plm_buf_add(struct plm_buf *b, const void *s, size_t n);
/* Appends printf-formatted text; false (and failed) as plm_buf_add. */
bool plm_buf_printf(struct plm_buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Hands p out (NULL after a failure or when nothing was added) and resets the buffer. */
char *plm_buf_take(struct plm_buf *b, size_t *len);
void plm_buf_done(struct plm_buf *b);
