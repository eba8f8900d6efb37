/* safe_print.c: writing a server's string to a terminal without letting it forge lines.
 * Owns: nothing. Trusts: no byte of s.
 * Invariant: C0 and C1 controls, DEL and invalid UTF-8 come out as \xNN (STYLE.md §8). */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "client.h"

void cli_put_safe(FILE *f, const char *s, const char *empty)
{
    if (!s) {
        fputs("-", f);
        return;
    }
    if (!*s) {
        fputs(empty ? empty : "", f);
        return;
    }
    const uint8_t *p = (const uint8_t *)s;
    size_t len = strlen(s);
    size_t i = 0;
    while (i < len) {
        uint8_t c = p[i];
        if (c >= 0x20 && c < 0x7f) {
            fputc(c, f);
            i++;
            continue;
        }
        if (c >= 0x80) {
            size_t n = c >= 0xf0 ? 4 : c >= 0xe0 ? 3 : 2;
            /* A valid sequence prints as is, except the C1 controls U+0080..U+009F. */
            if (i + n <= len && cli_utf8_valid(p + i, n) && !(c == 0xc2 && p[i + 1] < 0xa0)) {
                fwrite(p + i, 1, n, f);
                i += n;
                continue;
            }
        }
        fprintf(f, "\\x%02x", c);
        i++;
    }
}

