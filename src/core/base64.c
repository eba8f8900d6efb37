/* base64.c: see base64.h. */
#include "base64.h"

static const char STD[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
static const char URL[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";

size_t b64_encoded_len(size_t n, bool pad)
{
    return n / 3 * 4 + (n % 3 ? (pad ? 4 : n % 3 + 1) : 0);
}

size_t b64_encode(const uint8_t *in, size_t n, char *out, enum b64_alphabet a, bool pad)
{
    const char *t = a == B64_URL ? URL : STD;
    size_t o = 0, i = 0;
    for (; i + 3 <= n; i += 3) {
        uint32_t v = (uint32_t)in[i] << 16 | (uint32_t)in[i + 1] << 8 | in[i + 2];
        out[o++] = t[v >> 18 & 63];
        out[o++] = t[v >> 12 & 63];
        out[o++] = t[v >> 6 & 63];
        out[o++] = t[v & 63];
    }
    if (n - i) { /* one or two bytes left: two or three characters, then padding if asked */
        bool two = n - i == 2;
        uint32_t v = (uint32_t)in[i] << 16 | (two ? (uint32_t)in[i + 1] << 8 : 0);
        out[o++] = t[v >> 18 & 63];
        out[o++] = t[v >> 12 & 63];
        if (two)
            out[o++] = t[v >> 6 & 63];
        if (pad) {
            if (!two)
                out[o++] = '=';
            out[o++] = '=';
        }
    }
    return o;
}

static int value_of(unsigned char c, int alphabet /* 0 std, 1 url, 2 either */)
{
    if (c >= 'A' && c <= 'Z')
        return c - 'A';
    if (c >= 'a' && c <= 'z')
        return c - 'a' + 26;
    if (c >= '0' && c <= '9')
        return c - '0' + 52;
    if ((c == '+' && alphabet != 1) || (c == '-' && alphabet != 0))
        return 62;
    if ((c == '/' && alphabet != 1) || (c == '_' && alphabet != 0))
        return 63;
    return -1;
}

int b64_decode(const char *in, size_t n, enum b64_mix mix, uint8_t *out, size_t *out_len, size_t *bad_at)
{
    size_t pad = 0;
    while (pad < 2 && pad < n && in[n - 1 - pad] == '=')
        pad++;
    size_t m = n - pad;
    *out_len = 0;
    if ((pad && n % 4 != 0) || m % 4 == 1) {
        *bad_at = SIZE_MAX;
        return -1;
    }
    int alphabet = 2;
    if (mix == B64_ONE_ALPHABET) {
        alphabet = 0;
        for (size_t i = 0; i < m; i++)
            if (in[i] == '-' || in[i] == '_')
                alphabet = 1;
    }
    size_t o = 0;
    uint32_t acc = 0;
    for (size_t i = 0; i < m; i++) {
        int x = value_of((unsigned char)in[i], alphabet);
        if (x < 0) {
            *bad_at = i;
            return -1;
        }
        acc = acc << 6 | (uint32_t)x;
        if (i % 4 == 3) {
            out[o++] = (uint8_t)(acc >> 16);
            out[o++] = (uint8_t)(acc >> 8);
            out[o++] = (uint8_t)acc;
            acc = 0;
        }
    }
    if (m % 4 == 2) {
        out[o++] = (uint8_t)(acc >> 4);
    } else if (m % 4 == 3) {
        out[o++] = (uint8_t)(acc >> 10);
        out[o++] = (uint8_t)(acc >> 2);
    }
    *out_len = o;
    return 0;
}
