/* respframe.c: see respframe.h. A byte-at-a-time state machine over lines for heads, chunk-size
 * lines and trailers, and a counted skip over body and chunk data. */
#include "respframe.h"

#include <string.h>
#include <strings.h>

enum { ST_STATUS, ST_FIELDS, ST_BODY, ST_CHUNK_SIZE, ST_CHUNK_DATA, ST_CHUNK_END, ST_TRAILER, ST_UNKNOWN };

void respframe_expect(struct respframe *r, bool head_request)
{
    memset(r, 0, sizeof *r);
    r->st = ST_STATUS;
    r->head_request = head_request;
}

static bool field_is(const char *line, const char *name, const char **val)
{
    size_t n = strlen(name);
    if (strncasecmp(line, name, n) != 0 || line[n] != ':')
        return false;
    *val = line + n + 1;
    while (**val == ' ' || **val == '\t')
        (*val)++;
    return true;
}

static bool parse_dec(const char *s, unsigned long long *out)
{
    unsigned long long v = 0;
    size_t i = 0;
    for (; s[i] >= '0' && s[i] <= '9'; i++) {
        if (i >= 18)
            return false;
        v = v * 10 + (unsigned)(s[i] - '0');
    }
    while (s[i] == ' ' || s[i] == '\t')
        i++;
    *out = v;
    return i > 0 && s[i] == 0;
}

static bool parse_hex(const char *s, unsigned long long *out)
{
    unsigned long long v = 0;
    size_t i = 0;
    for (;; i++) {
        char c = s[i];
        int d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
        if (d < 0)
            break;
        if (i >= 15)
            return false;
        v = v * 16 + (unsigned)d;
    }
    *out = v;
    return i > 0 && (s[i] == 0 || s[i] == ';' || s[i] == ' ' || s[i] == '\t');
}

/* The end of the head: where the body goes. Returns 1 when the response ended here. */
static int end_of_head(struct respframe *r)
{
    if (r->status >= 100 && r->status < 200) {
        if (r->status == 101)
            return r->st = ST_UNKNOWN, 0;
        bool hr = r->head_request;
        respframe_expect(r, hr); /* an interim answer: the final one follows */
        return 0;
    }
    if (r->head_request || r->status == 204 || r->status == 304)
        return r->st = ST_STATUS, 1;
    if (r->chunked)
        return r->st = ST_CHUNK_SIZE, 0;
    if (!r->has_length)
        return r->st = ST_UNKNOWN, 0;
    if (r->left == 0)
        return r->st = ST_STATUS, 1;
    r->st = ST_BODY;
    return 0;
}

/* One complete line (CRLF stripped, NUL-terminated, maybe truncated). Returns 1 when a response
 * ended with it. */
static int on_line(struct respframe *r)
{
    const char *l = r->line, *v;
    switch (r->st) {
    case ST_STATUS:
        if (strncmp(l, "HTTP/1.", 7) != 0 || !l[7] || l[8] != ' ' || r->in_line_overflow)
            return r->st = ST_UNKNOWN, 0;
        r->status = 0;
        for (int i = 9; i < 12; i++) {
            if (l[i] < '0' || l[i] > '9')
                return r->st = ST_UNKNOWN, 0;
            r->status = r->status * 10 + (unsigned)(l[i] - '0');
        }
        r->chunked = r->has_length = false;
        r->left = 0;
        r->st = ST_FIELDS;
        return 0;
    case ST_FIELDS:
        if (!*l)
            return end_of_head(r);
        if (field_is(l, "Content-Length", &v)) {
            unsigned long long n;
            if (r->has_length || r->in_line_overflow || !parse_dec(v, &n))
                return r->st = ST_UNKNOWN, 0;
            r->has_length = true;
            r->left = n;
        } else if (field_is(l, "Transfer-Encoding", &v)) {
            if (strcasecmp(v, "chunked") != 0)
                return r->st = ST_UNKNOWN, 0;
            r->chunked = true;
        }
        return 0;
    case ST_CHUNK_SIZE:
        if (r->in_line_overflow || !parse_hex(l, &r->left))
            return r->st = ST_UNKNOWN, 0;
        r->st = r->left ? ST_CHUNK_DATA : ST_TRAILER;
        return 0;
    case ST_CHUNK_END:
        if (*l)
            return r->st = ST_UNKNOWN, 0;
        r->st = ST_CHUNK_SIZE;
        return 0;
    case ST_TRAILER:
        if (*l)
            return 0;
        r->st = ST_STATUS;
        return 1;
    default:
        return r->st = ST_UNKNOWN, 0;
    }
}

int respframe_feed(struct respframe *r, const char *p, size_t n)
{
    int done = 0;
    size_t i = 0;
    while (i < n) {
        if (r->st == ST_UNKNOWN)
            return -1;
        if (r->st == ST_BODY || r->st == ST_CHUNK_DATA) {
            size_t take = n - i < r->left ? n - i : (size_t)r->left;
            r->left -= take;
            i += take;
            if (r->left == 0) {
                if (r->st == ST_BODY) {
                    r->st = ST_STATUS;
                    done++;
                } else {
                    r->st = ST_CHUNK_END;
                }
            }
            continue;
        }
        char c = p[i++];
        if (c == '\n') {
            if (r->line_len && r->line[r->line_len - 1] == '\r')
                r->line_len--;
            r->line[r->line_len] = 0;
            done += on_line(r);
            r->line_len = 0;
            r->in_line_overflow = false;
        } else if (r->line_len + 1 < sizeof r->line) {
            r->line[r->line_len++] = c;
        } else {
            r->in_line_overflow = true;
        }
    }
    return r->st == ST_UNKNOWN ? -1 : done;
}
