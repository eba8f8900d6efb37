/* buf.c: see buf.h. */
#include "buf.h"

#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

bool plm_buf_reserve(struct plm_buf *b, size_t n)
{
    size_t max = b->max ? b->max : SIZE_MAX - 1, need;
    if (b->failed || __builtin_add_overflow(b->len, n, &need) || need > max) {
        b->failed = true;
        return false;
    }
    if (need + 1 <= b->cap)
        return true;
    size_t cap = b->cap ? b->cap : need + 1;
    while (cap < need + 1)
        cap = cap > (max + 1) / 2 ? max + 1 : cap * 2;
    char *p = realloc(b->p, cap);
    if (!p) {
        b->failed = true;
        return false;
    }
    b->p = p;
    b->cap = cap;
    return true;
}

bool plm_buf_add(struct plm_buf *b, const void *s, size_t n)
{
    if (!plm_buf_reserve(b, n))
        return false;
    if (n)
        memcpy(b->p + b->len, s, n);
    b->len += n;
    b->p[b->len] = '\0';
    return true;
}

char *plm_buf_take(struct plm_buf *b, size_t *len)
{
    char *p = b->failed ? NULL : b->p;
    if (len)
        *len = p ? b->len : 0;
    if (!p)
        free(b->p);
    size_t max = b->max;
    memset(b, 0, sizeof *b);
    b->max = max;
    return p;
}

void plm_buf_done(struct plm_buf *b)
{
    free(b->p);
    b->p = NULL;
    b->len = b->cap = 0;
}

bool plm_buf_printf(struct plm_buf *b, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (n < 0 || !plm_buf_reserve(b, (size_t)n)) {
        b->failed = true;
        return false;
    }
    va_start(ap, fmt);
    vsnprintf(b->p + b->len, (size_t)n + 1, fmt, ap); /* reserve left room for the NUL */
    va_end(ap);
    b->len += (size_t)n;
    return true;
}
