/* secret.c: brk_secret storage and the bearer-token byte rule.
 * Trusts: nothing. Invariant: every byte a brk_secret ever held is zeroed before free(). */
#include "secret.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../core/limits.h"

int brk_secret_set(struct brk_secret *s, const char *p, size_t len)
{
    brk_secret_done(s);
    if (!p || memchr(p, '\0', len) || len == SIZE_MAX)
        return -1;
    char *d = malloc(len + 1);
    if (!d)
        return -1;
    memcpy(d, p, len);
    d[len] = '\0';
    s->data = d;
    s->len = len;
    return 0;
}

void brk_secret_done(struct brk_secret *s)
{
    if (!s)
        return;
    if (s->data) {
        explicit_bzero(s->data, s->len + 1);
        free(s->data);
    }
    s->data = NULL;
    s->len = 0;
}

const char *brk_secret_describe(const struct brk_secret *s, char out[BRK_SECRET_DESCRIBE_MAX])
{
    if (!brk_secret_isset(s))
        snprintf(out, BRK_SECRET_DESCRIBE_MAX, "[unset]");
    else
        snprintf(out, BRK_SECRET_DESCRIBE_MAX, "[redacted len=%zu]", s->len);
    return out;
}

bool brk_token_ok(const char *t, size_t len)
{
    if (!t || len == 0 || len > LIM_TOKEN_MAX)
        return false;
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)t[i];
        if (c < 0x21 || c > 0x7e)
            return false;
    }
    return true;
}
