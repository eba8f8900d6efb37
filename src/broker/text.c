/* text.c: character-class checks, message quoting and the string builder of text.h.
 * Trusts: nothing; inputs may be any bytes. Invariant: decoding never reads past len and refuses
 * every malformed sequence (the same strictness as plm_utf8_ok: no overlongs, no surrogates). */
#include "text.h"

#include "../core/buf.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Decodes one code point at s[*i]; returns -1 for malformed input. */
static int32_t next_cp(const unsigned char *s, size_t len, size_t *i)
{
    unsigned c = s[*i];
    if (c < 0x80) {
        (*i)++;
        return (int32_t)c;
    }
    size_t n;
    unsigned min;
    if ((c & 0xe0) == 0xc0)
        n = 1, min = 0x80, c &= 0x1f;
    else if ((c & 0xf0) == 0xe0)
        n = 2, min = 0x800, c &= 0x0f;
    else if ((c & 0xf8) == 0xf0)
        n = 3, min = 0x10000, c &= 0x07;
    else
        return -1;
    if (len - *i <= n)
        return -1;
    for (size_t k = 1; k <= n; k++) {
        unsigned b = s[*i + k];
        if ((b & 0xc0) != 0x80)
            return -1;
        c = (c << 6) | (b & 0x3f);
    }
    if (c < min || (c >= 0xd800 && c <= 0xdfff) || c > 0x10ffff)
        return -1;
    *i += n + 1;
    return (int32_t)c;
}

/* Unicode White_Space (what Go's unicode.IsSpace reports, which the reference uses). */
static bool is_space(int32_t c)
{
    switch (c) {
    case '\t':
    case '\n':
    case '\v':
    case '\f':
    case '\r':
    case ' ':
    case 0x85:
    case 0xa0:
    case 0x1680:
    case 0x2028:
    case 0x2029:
    case 0x202f:
    case 0x205f:
    case 0x3000: return true;
    default: return c >= 0x2000 && c <= 0x200a;
    }
}

static bool is_ctrl(int32_t c)
{
    return c < 0x20 || (c >= 0x7f && c <= 0x9f);
}

bool brk_text_ok(const char *s, size_t len, unsigned rules)
{
    if (!s)
        return false;
    if ((rules & BRK_TXT_NONEMPTY) && len == 0)
        return false;
    const unsigned char *p = (const unsigned char *)s;
    size_t i = 0;
    bool first = true;
    int32_t c = 0;
    while (i < len) {
        c = next_cp(p, len, &i);
        if (c < 0)
            return false;
        if ((rules & BRK_TXT_NO_CTRL) && is_ctrl(c))
            return false;
        if ((rules & BRK_TXT_NO_SPACE) && is_space(c))
            return false;
        if ((rules & BRK_TXT_TRIMMED) && first && is_space(c))
            return false;
        first = false;
    }
    if ((rules & BRK_TXT_TRIMMED) && len > 0 && is_space(c))
        return false;
    return true;
}

const char *brk_quote(char *out, size_t out_len, const char *s, size_t len)
{
    static const char hex[] = "0123456789abcdef";
    size_t o = 0;
    if (out_len == 0)
        return out;
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)s[i];
        char tmp[4];
        size_t n;
        if (c == '"' || c == '\\') {
            tmp[0] = '\\', tmp[1] = (char)c, n = 2;
        } else if (c >= 0x20 && c < 0x7f) {
            tmp[0] = (char)c, n = 1;
        } else {
            tmp[0] = '\\', tmp[1] = 'x', tmp[2] = hex[c >> 4], tmp[3] = hex[c & 15], n = 4;
        }
        /* keep room for "..." and the NUL */
        if (o + n + 4 > out_len) {
            if (o + 4 <= out_len) {
                memcpy(out + o, "...", 3);
                o += 3;
            }
            break;
        }
        memcpy(out + o, tmp, n);
        o += n;
    }
    out[o] = '\0';
    return out;
}

void brk_sbuf_add(struct brk_sbuf *b, const char *s, size_t len)
{
    plm_buf_add(&b->b, s, len);
}

void brk_sbuf_str(struct brk_sbuf *b, const char *s)
{
    brk_sbuf_add(b, s, strlen(s));
}

static void add_u16(struct brk_sbuf *b, unsigned u)
{
    char tmp[8];
    snprintf(tmp, sizeof tmp, "\\u%04x", u & 0xffff);
    brk_sbuf_add(b, tmp, 6);
}

void brk_sbuf_js_string(struct brk_sbuf *b, const char *s, size_t len)
{
    const unsigned char *p = (const unsigned char *)s;
    brk_sbuf_add(b, "\"", 1);
    size_t i = 0;
    while (i < len) {
        unsigned c = p[i];
        if (c >= 0x20 && c < 0x7f && c != '"' && c != '\\' && c != '<' && c != '>' && c != '&') {
            char ch = (char)c;
            brk_sbuf_add(b, &ch, 1);
            i++;
            continue;
        }
        int32_t cp = next_cp(p, len, &i);
        if (cp < 0) {
            /* Not UTF-8: callers validate first; fail closed rather than emit a guess. */
            b->b.failed = true;
            return;
        }
        if (cp >= 0x10000) {
            unsigned v = (unsigned)cp - 0x10000;
            add_u16(b, 0xd800 | (v >> 10));
            add_u16(b, 0xdc00 | (v & 0x3ff));
        } else {
            add_u16(b, (unsigned)cp);
        }
    }
    brk_sbuf_add(b, "\"", 1);
}

char *brk_sbuf_take(struct brk_sbuf *b)
{
    if (!b->b.p)
        brk_sbuf_add(b, "", 0); /* an empty builder still yields "" */
    return plm_buf_take(&b->b, NULL);
}

void brk_sbuf_done(struct brk_sbuf *b)
{
    plm_buf_done(&b->b);
    b->b.failed = false;
}
