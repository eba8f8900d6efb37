/* http.c: the HTTP/1.1 framing of a guest-facing socket (http.h): one request head in, one
 * response head out. Pure: no I/O, no allocation, no globals. It runs only inside the confined
 * guestio helper (and its tests and fuzzer), never in the daemon (docs/privsep.md).
 * Trusts: nothing; the head comes from guest code and is at most GIO_HEAD_CAP bytes.
 * Invariant: the target is passed on byte for byte as it stood in the request line (only its
 * delimiting space becomes a NUL); anything this parser cannot frame unambiguously (folded or
 * malformed headers, conflicting or non-decimal Content-Length, any Transfer-Encoding) is
 * refused rather than guessed at, since a framing disagreement between us and the guest could
 * only let it smuggle a second request past what the broker sees. */
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "frame.h"
#include "http.h"

size_t gio_http_head_end(const uint8_t *buf, size_t len)
{
    for (size_t i = 0; i < len; i++) {
        if (buf[i] != '\n')
            continue;
        if (i + 1 < len && buf[i + 1] == '\n')
            return i + 2;
        if (i + 2 < len && buf[i + 1] == '\r' && buf[i + 2] == '\n')
            return i + 3;
    }
    return 0;
}

/* Splits the next line off [*p, end): NUL-terminates it (dropping one CR before the LF) and
 * returns its start, or NULL at the end. A CR elsewhere stays in the line and is refused by
 * the character rules of whoever reads it. */
static char *next_line(uint8_t **p, uint8_t *end, size_t *n)
{
    if (*p >= end)
        return NULL;
    uint8_t *s = *p, *nl = memchr(s, '\n', (size_t)(end - s));
    if (!nl)
        return NULL; /* a line without its LF is not part of a complete head */
    *p = nl + 1;
    size_t len = (size_t)(nl - s);
    if (len && s[len - 1] == '\r')
        len--;
    s[len] = 0; /* the LF or the CR: inside the buffer either way */
    *n = len;
    return (char *)s;
}

static int request_line(char *l, size_t n, struct gio_http_req *r)
{
    size_t m = 0;
    while (m < n && gio_tchar((uint8_t)l[m]))
        m++;
    if (m == 0 || m >= sizeof r->method || m >= n || l[m] != ' ')
        return 400;
    memcpy(r->method, l, m);
    r->method[m] = 0;
    size_t t = m + 1, te = t;
    /* The target is every byte up to the next space that is not a control character; bytes
     * above 0x7e pass through for the broker to refuse (a target it would re-encode). */
    while (te < n && l[te] != ' ' && gio_target_byte((uint8_t)l[te]))
        te++;
    if (te == t || te >= n || l[te] != ' ')
        return 400;
    l[te] = 0;
    r->target = l + t;
    const char *v = l + te + 1;
    size_t vn = n - te - 1;
    if (vn == 8 && !memcmp(v, "HTTP/1.1", 8))
        return 0;
    if (vn == 8 && !memcmp(v, "HTTP/1.0", 8)) {
        r->http10 = true;
        return 0;
    }
    if (vn == 8 && !memcmp(v, "HTTP/", 5) && v[5] >= '0' && v[5] <= '9' && v[6] == '.' && v[7] >= '0' && v[7] <= '9')
        return 505;
    return 400;
}

/* Content-Length: 1..19 decimal digits (no sign, no list); a repeat must say the same. */
static int content_length(const char *v, struct gio_http_req *r)
{
    size_t n = strlen(v);
    if (n == 0 || n > 19)
        return 400;
    uint64_t x = 0;
    for (size_t i = 0; i < n; i++) {
        if (v[i] < '0' || v[i] > '9')
            return 400;
        x = x * 10 + (uint64_t)(v[i] - '0'); /* 19 digits cannot overflow 64 bits */
    }
    if (r->has_length && r->content_length != x)
        return 400;
    r->has_length = true;
    r->content_length = x;
    return 0;
}

int gio_http_parse(uint8_t *buf, size_t len, const char *cred_header, struct gio_http_req *r)
{
    memset(r, 0, sizeof *r);
    if (!gio_http_head_end(buf, len))
        return 400;
    uint8_t *p = buf, *end = buf + len;
    size_t n;
    char *l = next_line(&p, end, &n);
    if (!l)
        return 400;
    int st = request_line(l, n, r);
    if (st)
        return st;
    bool te = false;
    for (;;) {
        if (!(l = next_line(&p, end, &n)))
            return 400; /* no blank line: not a head */
        if (!n)
            break;
        if (l[0] == ' ' || l[0] == '\t')
            return 400; /* obs-fold: refused (RFC 9112 §5.2 allows that) */
        size_t k = 0;
        while (k < n && gio_tchar((uint8_t)l[k]))
            k++;
        if (k == 0 || k >= n || l[k] != ':')
            return 400;
        l[k] = 0;
        char *v = l + k + 1, *ve = l + n;
        while (v < ve && (*v == ' ' || *v == '\t'))
            v++;
        while (ve > v && (ve[-1] == ' ' || ve[-1] == '\t'))
            ve--;
        *ve = 0;
        for (const char *c = v; c < ve; c++)
            if (((uint8_t)*c < 0x20 && *c != '\t') || (uint8_t)*c == 0x7f)
                return 400;
        if (!strcasecmp(l, "Content-Length")) {
            if ((st = content_length(v, r)) != 0)
                return st;
        } else if (!strcasecmp(l, "Transfer-Encoding")) {
            te = true;
        } else if (!strcasecmp(l, "Expect") && !strcasecmp(v, "100-continue")) {
            r->expect_continue = true;
        } else if (cred_header && !strcasecmp(l, cred_header)) {
            r->cred = v;
            r->cred_count++;
        }
    }
    /* Without a Content-Length we cannot bound a chunked upload before reading it, and a body
     * framed two ways is the classic smuggling shape: either way, length required. */
    if (te)
        return 411;
    return 0;
}

static const char *reason(int status)
{
    switch (status) {
    case 100: return "Continue";
    case 200: return "OK";
    case 201: return "Created";
    case 202: return "Accepted";
    case 204: return "No Content";
    case 301: return "Moved Permanently";
    case 302: return "Found";
    case 304: return "Not Modified";
    case 400: return "Bad Request";
    case 401: return "Unauthorized";
    case 403: return "Forbidden";
    case 404: return "Not Found";
    case 408: return "Request Timeout";
    case 409: return "Conflict";
    case 411: return "Length Required";
    case 413: return "Content Too Large";
    case 422: return "Unprocessable Content";
    case 429: return "Too Many Requests";
    case 431: return "Request Header Fields Too Large";
    case 500: return "Internal Server Error";
    case 502: return "Bad Gateway";
    case 503: return "Service Unavailable";
    case 504: return "Gateway Timeout";
    case 505: return "HTTP Version Not Supported";
    default: return "Status"; /* the reason phrase carries no meaning (RFC 9112 §4) */
    }
}

size_t gio_http_head(char *out, size_t cap, int status, const char *content_type, size_t body_len)
{
    int n;
    /* 204 and 304 carry no body by definition; a length would be read as one by some clients. */
    if (status == 204 || status == 304)
        n = snprintf(out, cap, "HTTP/1.1 %d %s\r\nConnection: close\r\n\r\n", status, reason(status));
    else
        n = snprintf(out, cap, "HTTP/1.1 %d %s\r\nContent-Type: %s\r\nContent-Length: %zu\r\nConnection: close\r\n\r\n",
                     status, reason(status), content_type, body_len);
    return n > 0 && (size_t)n < cap ? (size_t)n : 0;
}
