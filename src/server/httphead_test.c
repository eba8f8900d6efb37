/* httphead_test.c: the strict request-head check, rule by rule, and incrementally. */
#include <string.h>

#include "../core/limits.h"
#include "httphead.h"
#include "unit.h"

static enum httphead_verdict check(const char *s, struct httphead *h)
{
    return httphead_check(s, strlen(s), h);
}

int main(void)
{
    struct httphead h;
    const char *good = "POST /plimsoll.v1.SandboxService/Run HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\n{}";
    CHECK(check(good, &h) == HTTPHEAD_OK && h.head_len == strlen(good) - 2);
    /* the body framing the relay forwards */
    CHECK(h.content_length == 2 && !h.chunked && !h.is_head);
    CHECK(check("HEAD /healthz HTTP/1.1\r\n\r\n", &h) == HTTPHEAD_OK && h.is_head && h.content_length == 0);
    CHECK(check("POST / HTTP/1.1\r\nContent-Length: 9999999999999999999\r\n\r\n", &h) == HTTPHEAD_OK &&
          h.content_length == 9999999999999999999ull);
    CHECK(check("POST / HTTP/1.1\r\ntransfer-encoding: Chunked\r\n\r\n", &h) == HTTPHEAD_OK && h.chunked);
    /* every strict prefix of the head needs more */
    size_t head = strlen(good) - 2;
    int more = 1;
    for (size_t i = 0; i < head; i++)
        more &= httphead_check(good, i, &h) == HTTPHEAD_MORE;
    CHECK(more);
    CHECK(check("GET /healthz HTTP/1.0\r\n\r\n", &h) == HTTPHEAD_OK);
    CHECK(check("GET /healthz HTTP/1.1\r\nX: a\tb \r\n\r\n", &h) == HTTPHEAD_OK);

    CHECK(check("GET /healthz HTTP/1.1\nHost: x\n\n", &h) == HTTPHEAD_BAD && strstr(h.why, "bare LF"));
    CHECK(check("GET /healthz HTTP/1.1\r\nHost: x\ry: z\r\n\r\n", &h) == HTTPHEAD_BAD && strstr(h.why, "bare CR"));
    CHECK(httphead_check("GET / HTTP/1.1\r\nA: b\0c\r\n\r\n", 25, &h) == HTTPHEAD_BAD && strstr(h.why, "NUL"));
    CHECK(check("GET / HTTP/1.1\r\nA: b\x01\r\n\r\n", &h) == HTTPHEAD_BAD);
    CHECK(check("GET / HTTP/1.1\r\nA: b\x7f\r\n\r\n", &h) == HTTPHEAD_BAD);
    CHECK(check("GET / HTTP/1.1\r\nA : b\r\n\r\n", &h) == HTTPHEAD_BAD);
    CHECK(check("GET / HTTP/1.1\r\n: b\r\n\r\n", &h) == HTTPHEAD_BAD);
    CHECK(check("GET / HTTP/1.1\r\nNoColon\r\n\r\n", &h) == HTTPHEAD_BAD);
    CHECK(check("GET / HTTP/1.1\r\nA: b\r\n c\r\n\r\n", &h) == HTTPHEAD_BAD && strstr(h.why, "folding"));
    CHECK(check("GET /%68ealthz HTTP/1.1\r\n\r\n", &h) == HTTPHEAD_BAD && strstr(h.why, "percent"));
    CHECK(check("GET http://x/healthz HTTP/1.1\r\n\r\n", &h) == HTTPHEAD_BAD);
    CHECK(check("GET /a b HTTP/1.1\r\n\r\n", &h) == HTTPHEAD_BAD);
    CHECK(check("GET / HTTP/2.0\r\n\r\n", &h) == HTTPHEAD_BAD);
    CHECK(check("GET  / HTTP/1.1\r\n\r\n", &h) == HTTPHEAD_BAD);
    CHECK(check("\r\n\r\n", &h) == HTTPHEAD_BAD);
    CHECK(check("POST / HTTP/1.1\r\nContent-Length: 2\r\ncontent-length: 2\r\n\r\n", &h) == HTTPHEAD_BAD &&
          strstr(h.why, "more than one"));
    CHECK(check("POST / HTTP/1.1\r\nContent-Length: 2\r\nContent-Length: 3\r\n\r\n", &h) == HTTPHEAD_BAD);
    CHECK(check("POST / HTTP/1.1\r\nContent-Length: +2\r\n\r\n", &h) == HTTPHEAD_BAD);
    CHECK(check("POST / HTTP/1.1\r\nContent-Length: 2, 2\r\n\r\n", &h) == HTTPHEAD_BAD);
    CHECK(check("POST / HTTP/1.1\r\nContent-Length:  7 \r\n\r\n", &h) == HTTPHEAD_OK);
    CHECK(check("POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n", &h) == HTTPHEAD_OK);
    CHECK(check("POST / HTTP/1.1\r\nTransfer-Encoding: gzip, chunked\r\n\r\n", &h) == HTTPHEAD_BAD);
    CHECK(check("POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\nContent-Length: 1\r\n\r\n", &h) == HTTPHEAD_BAD);

    /* 32 KiB including the empty line, and not one byte more */
    static char big[LIM_HEADER_MAX + 64];
    const char *start = "GET / HTTP/1.1\r\nX: ";
    size_t pad = LIM_HEADER_MAX - strlen(start) - 4;
    strcpy(big, start);
    memset(big + strlen(start), 'a', pad);
    strcpy(big + strlen(start) + pad, "\r\n\r\n");
    CHECK(check(big, &h) == HTTPHEAD_OK && h.head_len == LIM_HEADER_MAX);
    memset(big + strlen(start), 'a', pad + 1);
    strcpy(big + strlen(start) + pad + 1, "\r\n\r\n");
    CHECK(check(big, &h) == HTTPHEAD_TOO_LARGE);
    return unit_done();
}
