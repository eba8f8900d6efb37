/* respframe.h: where each HTTP/1.1 response that libmicrohttpd writes ends (the MHD -> client
 * direction of the relay, relay.c). The relay forwards one request at a time and reads the next
 * request head only once the answer to the previous one is complete, so it must know where an
 * answer ends: Content-Length, chunked, no body (HEAD, 1xx interim, 204, 304). A response it
 * cannot frame (no length: closed-delimited, 101 Switching Protocols, a malformed head) makes the
 * tracker UNKNOWN: the relay then reads no further request on that connection and closes it when
 * MHD does.
 * Trusts: little (MHD is ours, but the scanner is bounded anyway). Pure: no allocation, no I/O. */
#pragma once
#include <stdbool.h>
#include <stddef.h>

#define RESPFRAME_LINE 128 /* a longer header line is kept truncated: only short ones matter */

struct respframe {
    int st;                     /* internal state; 0 is "before a status line" */
    bool head_request;          /* the response answers a HEAD request */
    bool chunked, has_length, in_line_overflow;
    unsigned status;
    unsigned long long left;    /* body or chunk bytes still to come */
    size_t line_len;
    char line[RESPFRAME_LINE];
};

/* Starts tracking the answer to one request. */
void respframe_expect(struct respframe *r, bool head_request);
/* Feeds n bytes MHD wrote. Returns how many final (non-1xx) responses ended inside them, or -1
 * once the framing is unknown (sticky until respframe_expect). Bytes after a completed response
 * are scanned as the start of another one. */
int respframe_feed(struct respframe *r, const char *p, size_t n);
