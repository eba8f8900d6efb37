/* utf8.c: strict UTF-8 (validate.h). Its own file because the confined guestio helper, which
 * is never sanitized and links nothing else of src/core, needs it too (src/guestio/frame.c).
 * Pure: no allocation, no I/O. */
#include <stdbool.h>
#include <stddef.h>

#include "validate.h"

bool plm_utf8_ok(const char *s, size_t len)
{
    const unsigned char *p = (const unsigned char *)s;
    size_t i = 0;
    while (i < len) {
        unsigned c = p[i];
        if (c < 0x80) {
            i++;
            continue;
        }
        size_t n;
        unsigned min;
        if ((c & 0xe0) == 0xc0) {
            n = 1, min = 0x80, c &= 0x1f;
        } else if ((c & 0xf0) == 0xe0) {
            n = 2, min = 0x800, c &= 0x0f;
        } else if ((c & 0xf8) == 0xf0) {
            n = 3, min = 0x10000, c &= 0x07;
        } else {
            return false;
        }
        if (len - i <= n)
            return false;
        for (size_t k = 1; k <= n; k++) {
            if ((p[i + k] & 0xc0) != 0x80)
                return false;
            c = (c << 6) | (p[i + k] & 0x3f);
        }
        /* overlong forms, UTF-16 surrogates and values past U+10FFFF are not UTF-8 */
        if (c < min || (c >= 0xd800 && c <= 0xdfff) || c > 0x10ffff)
            return false;
        i += n + 1;
    }
    return true;
}
