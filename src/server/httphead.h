/* httphead.h: a strict check of an HTTP/1.x request head (request line and header fields), run
 * by the gate (gate.h) on the bytes it peeked from a new connection, before libmicrohttpd sees
 * any of them (issue 12 finding 6; docs/decisions.md says why MHD alone cannot be strict).
 * Trusts: nothing. Pure: no allocation, no I/O, so it is unit-tested and fuzzed on its own.
 * Refused (RFC 9112 read strictly, plus our own routing rule):
 *   - a head larger than LIM_HEADER_MAX (32 KiB, line endings and final empty line included);
 *   - a NUL byte, a bare CR or a bare LF anywhere, any other control byte but HTAB in a value,
 *     obsolete line folding, whitespace between a field name and its colon;
 *   - a request line that is not `token SP origin-form SP HTTP/1.0|HTTP/1.1`, and any '%' in the
 *     target: every path we serve is plain ASCII, so a percent-encoded one is an evasion attempt
 *     (`/…/%52un`) and the router only ever sees the raw bytes it would have seen;
 *   - more than one Content-Length (equal or not), a Content-Length that is not all digits,
 *     Transfer-Encoding other than exactly `chunked`, or both Transfer-Encoding and
 *     Content-Length (request smuggling). */
#pragma once
#include <stddef.h>

enum httphead_verdict {
    HTTPHEAD_MORE = 0,      /* no complete head yet, nothing wrong so far */
    HTTPHEAD_OK = 1,        /* a complete, valid head of head_len bytes */
    HTTPHEAD_BAD = -1,      /* malformed: answer 400 and close */
    HTTPHEAD_TOO_LARGE = -2 /* over LIM_HEADER_MAX: answer 431 and close */
};

struct httphead {
    size_t head_len; /* bytes up to and including the empty line */
    const char *why; /* a fixed text naming the rule a refused head broke */
    /* Framing of the body that follows a valid head (the relay forwards exactly this much): */
    unsigned long long content_length; /* 0 when absent */
    int chunked;                       /* Transfer-Encoding: chunked */
    int is_head;                       /* method HEAD: the answer has no body */
};

/* buf holds the first len bytes the peer sent (any number, even beyond the head). */
enum httphead_verdict httphead_check(const char *buf, size_t len, struct httphead *out);
