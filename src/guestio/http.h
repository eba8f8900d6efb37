/* http.h: the HTTP/1.1 request-head parser and response-head writer of the guestio helper
 * (http.c). Pure functions; only the confined helper runs them on guest bytes. */
#pragma once
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct gio_http_req {
    char method[33];    /* a token, as sent (the broker matches it ignoring case) */
    const char *target; /* NUL-terminated inside the parsed buffer, verbatim */
    bool http10;
    bool has_length;
    uint64_t content_length; /* 0 without Content-Length */
    bool expect_continue;    /* Expect: 100-continue */
    const char *cred;        /* the value of the caller's credential header (trimmed), or NULL */
    unsigned cred_count;     /* how many times that header came */
};
/* Offset just past the blank line that ends the head in buf[0..len) (CRLF or bare LF line
 * ends), or 0 while it is incomplete. */
size_t gio_http_head_end(const uint8_t *buf, size_t len);
/* Parses the head buf[0..len) (len from gio_http_head_end), writing NULs into it. Returns 0 or
 * the HTTP status to refuse it with (400, 411, 505). cred_header (or NULL): a header whose
 * value is kept in r->cred (the e2b guard's token header). */
int gio_http_parse(uint8_t *buf, size_t len, const char *cred_header, struct gio_http_req *r);
/* "HTTP/1.1 <status> <reason>" with Content-Type, Content-Length (none for 204/304) and
 * Connection: close; returns the length written, or 0 when cap is too small. */
size_t gio_http_head(char *out, size_t cap, int status, const char *content_type, size_t body_len);
