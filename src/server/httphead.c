/* httphead.c: see httphead.h. One pass finds the end of the head while refusing bad bytes
 * early (a bare LF would otherwise keep the gate waiting for a CRLFCRLF that never comes); a
 * second pass over the complete head checks each line. */
#include "httphead.h"

#include <stdbool.h>
#include <string.h>
#include <strings.h>

#include "../core/limits.h"

static bool tchar(unsigned char c)
{
    return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
           (c && strchr("!#$&'*+-.^_`|~", c));
}

static enum httphead_verdict bad(struct httphead *out, const char *why)
{
    out->why = why;
    return HTTPHEAD_BAD;
}

/* "METHOD SP /target SP HTTP/1.x" of n bytes (no CRLF). */
static enum httphead_verdict request_line(const char *s, size_t n, struct httphead *out)
{
    size_t i = 0;
    while (i < n && tchar((unsigned char)s[i]))
        i++;
    if (i == 0 || i >= n || s[i] != ' ')
        return bad(out, "malformed request line");
    size_t t = ++i;
    if (i >= n || s[i] != '/')
        return bad(out, "request target must be a path");
    while (i < n && s[i] != ' ') {
        unsigned char c = (unsigned char)s[i];
        if (c <= 0x20 || c >= 0x7f)
            return bad(out, "request target holds a byte outside printable ASCII");
        if (c == '%')
            return bad(out, "percent-encoded request target");
        i++;
    }
    if (i == t || i >= n)
        return bad(out, "malformed request line");
    i++;
    if (n - i != 8 || (memcmp(s + i, "HTTP/1.1", 8) != 0 && memcmp(s + i, "HTTP/1.0", 8) != 0))
        return bad(out, "unsupported HTTP version");
    return HTTPHEAD_OK;
}

static bool name_is(const char *s, size_t n, const char *name)
{
    return strlen(name) == n && strncasecmp(s, name, n) == 0;
}

/* Pass 1: bytes and line endings, up to the empty line; *end stays 0 while the head is incomplete. */
static enum httphead_verdict head_end(const char *buf, size_t len, struct httphead *out, size_t *end)
{
    size_t line_start = 0;
    *end = 0;
    for (size_t i = 0; i < len; i++) {
        char c = buf[i];
        if (i >= LIM_HEADER_MAX) {
            out->why = "request head exceeds 32 KiB";
            return HTTPHEAD_TOO_LARGE;
        }
        if (c == 0)
            return bad(out, "NUL byte in the request head");
        if (c == '\r') {
            if (i + 1 < len && buf[i + 1] != '\n')
                return bad(out, "bare CR in the request head");
            continue;
        }
        if (c == '\n') {
            if (i == 0 || buf[i - 1] != '\r')
                return bad(out, "bare LF in the request head");
            if (i - line_start == 1) { /* "\r\n" alone: the empty line */
                *end = i + 1;
                return HTTPHEAD_OK;
            }
            line_start = i + 1;
        }
    }
    return HTTPHEAD_OK;
}

enum httphead_verdict httphead_check(const char *buf, size_t len, struct httphead *out)
{
    out->head_len = 0;
    out->why = NULL;
    out->content_length = 0;
    out->chunked = out->is_head = 0;
    size_t end;
    enum httphead_verdict v = head_end(buf, len, out, &end);
    if (v != HTTPHEAD_OK)
        return v;
    if (!end)
        return HTTPHEAD_MORE;
    /* Pass 2: each line of the complete head. */
    const char *p = buf;
    const char *nl = memchr(p, '\n', end);
    v = request_line(p, (size_t)(nl - 1 - p), out);
    if (v != HTTPHEAD_OK)
        return v;
    unsigned n_cl = 0, n_te = 0;
    for (p = nl + 1; p < buf + end - 2; p = nl + 1) {
        nl = memchr(p, '\n', (size_t)(buf + end - p));
        size_t n = (size_t)(nl - 1 - p); /* without CRLF */
        if (p[0] == ' ' || p[0] == '\t')
            return bad(out, "obsolete line folding");
        const char *colon = memchr(p, ':', n);
        if (!colon || colon == p)
            return bad(out, "header line without a field name");
        for (const char *q = p; q < colon; q++)
            if (!tchar((unsigned char)*q))
                return bad(out, "invalid byte in a header field name");
        const char *val = colon + 1, *vend = p + n;
        for (const char *q = val; q < vend; q++) {
            unsigned char c = (unsigned char)*q;
            if ((c < 0x20 && c != '\t') || c == 0x7f)
                return bad(out, "control byte in a header value");
        }
        while (val < vend && (*val == ' ' || *val == '\t'))
            val++;
        while (vend > val && (vend[-1] == ' ' || vend[-1] == '\t'))
            vend--;
        size_t name_len = (size_t)(colon - p), vlen = (size_t)(vend - val);
        if (name_is(p, name_len, "Content-Length")) {
            if (++n_cl > 1)
                return bad(out, "more than one Content-Length");
            if (vlen == 0 || vlen > 19)
                return bad(out, "invalid Content-Length");
            unsigned long long cl = 0;
            for (size_t k = 0; k < vlen; k++) {
                if (val[k] < '0' || val[k] > '9')
                    return bad(out, "invalid Content-Length");
                cl = cl * 10 + (unsigned)(val[k] - '0'); /* 19 digits cannot overflow */
            }
            out->content_length = cl;
        } else if (name_is(p, name_len, "Transfer-Encoding")) {
            if (++n_te > 1 || !(vlen == 7 && strncasecmp(val, "chunked", 7) == 0))
                return bad(out, "unsupported Transfer-Encoding");
        }
    }
    if (n_cl && n_te)
        return bad(out, "both Content-Length and Transfer-Encoding");
    out->chunked = n_te > 0;
    out->is_head = end > 5 && memcmp(buf, "HEAD ", 5) == 0;
    out->head_len = end;
    return HTTPHEAD_OK;
}
