/* codec_test.c: the canonical frame codec (frame.c) and the helper's HTTP parser (http.c),
 * without processes: round trips, every length and byte-class bound on both sides of its
 * limit, direction and flag checks, and payloads that are one byte short or long. */
#include <stdlib.h>
#include <string.h>

#include "../../tests/unit.h"
#include "frame.h"
#include "http.h"

static bool starts(const char *s, const char *prefix)
{
    return !strncmp(s, prefix, strlen(prefix));
}

static void test_header(void)
{
    uint8_t b[F16_HDR_LEN];
    struct f16_hdr h = {.len = 7, .type = GIO_T_CALL, .flags = 0, .seq = 0x0102030405060708ull}, d;
    f16_hdr_encode(b, &h);
    CHECK(b[0] == 0 && b[3] == 7 && b[5] == GIO_T_CALL && b[8] == 1 && b[15] == 8); /* big-endian */
    CHECK(gio_hdr_decode(b, GIO_TO_DAEMON, &d) == 0 && d.len == 7 && d.seq == h.seq && d.type == GIO_T_CALL);
    CHECK(gio_hdr_decode(b, GIO_TO_HELPER, &d) < 0); /* a CALL never goes to the helper */
    h.flags = 1;
    f16_hdr_encode(b, &h);
    CHECK(gio_hdr_decode(b, GIO_TO_DAEMON, &d) < 0);
    h.flags = 0;
    h.type = 99;
    f16_hdr_encode(b, &h);
    CHECK(gio_hdr_decode(b, GIO_TO_DAEMON, &d) < 0);
    /* the cap of each type, exactly and one past */
    h.type = GIO_T_CALL;
    h.len = gio_max_len(GIO_TO_DAEMON, GIO_T_CALL);
    f16_hdr_encode(b, &h);
    CHECK(gio_hdr_decode(b, GIO_TO_DAEMON, &d) == 0);
    h.len++;
    f16_hdr_encode(b, &h);
    CHECK(gio_hdr_decode(b, GIO_TO_DAEMON, &d) < 0);
    h.len = 0xffffffffu;
    f16_hdr_encode(b, &h);
    CHECK(gio_hdr_decode(b, GIO_TO_DAEMON, &d) < 0);
    h.type = GIO_T_DONE;
    h.len = 1;
    f16_hdr_encode(b, &h);
    CHECK(gio_hdr_decode(b, GIO_TO_DAEMON, &d) < 0); /* DONE is empty */
    h.len = 0;
    h.seq = 0;
    f16_hdr_encode(b, &h);
    CHECK(gio_hdr_decode(b, GIO_TO_DAEMON, &d) < 0); /* seq 0 is never a connection */
    h.type = GIO_T_HELLO;
    h.len = 4;
    f16_hdr_encode(b, &h);
    CHECK(gio_hdr_decode(b, GIO_TO_DAEMON, &d) == 0);
    h.seq = 5;
    f16_hdr_encode(b, &h);
    CHECK(gio_hdr_decode(b, GIO_TO_DAEMON, &d) < 0); /* HELLO belongs to no connection */
    h = (struct f16_hdr){.len = 0, .type = GIO_T_CONN, .seq = 1};
    f16_hdr_encode(b, &h);
    CHECK(gio_hdr_decode(b, GIO_TO_HELPER, &d) == 0 && gio_hdr_decode(b, GIO_TO_DAEMON, &d) < 0);
    h = (struct f16_hdr){.len = GIO_REPLY_FIXED + GIO_CTYPE_MAX + GIO_REPLY_MAX + 1, .type = GIO_T_REPLY, .seq = 1};
    f16_hdr_encode(b, &h);
    CHECK(gio_hdr_decode(b, GIO_TO_HELPER, &d) < 0);
    uint8_t hello[4];
    uint32_t v = 0;
    gio_hello_encode(hello, GIO_VERSION);
    CHECK(gio_hello_decode(hello, 4, &v) == 0 && v == GIO_VERSION);
    gio_hello_encode(hello, GIO_VERSION + 1);
    CHECK(gio_hello_decode(hello, 4, &v) < 0 && gio_hello_decode(hello, 3, &v) < 0);
}

static size_t enc_call(uint8_t *buf, size_t cap, const char *m, const char *t, const char *body)
{
    struct gio_call c = {(const uint8_t *)m, (const uint8_t *)t, (const uint8_t *)body,
                         strlen(m),          strlen(t),          body ? strlen(body) : 0};
    return gio_call_encode(buf, cap, &c);
}

static void test_call(void)
{
    uint8_t buf[256];
    size_t n = enc_call(buf, sizeof buf, "POST", "/v1/items/%2e%2e?q", "{\"a\":1}");
    CHECK(n == GIO_CALL_FIXED + 4 + 18 + 7);
    struct gio_call c;
    CHECK(gio_call_decode(buf, n, &c) == 0);
    CHECK(c.method_len == 4 && !memcmp(c.method, "POST", 4));
    CHECK(c.target_len == 18 && !memcmp(c.target, "/v1/items/%2e%2e?q", 18));
    CHECK(c.body_len == 7 && !memcmp(c.body, "{\"a\":1}", 7));
    /* exactly len: one byte short and one byte long both fail */
    CHECK(gio_call_decode(buf, n - 1, &c) < 0);
    buf[n] = 'x';
    CHECK(gio_call_decode(buf, n + 1, &c) < 0);
    for (size_t cut = 0; cut < n; cut++)
        CHECK(gio_call_decode(buf, cut, &c) < 0);
    /* byte classes: the encoder refuses, and so does the decoder on a hand-made payload */
    CHECK(enc_call(buf, sizeof buf, "GE T", "/", NULL) == 0);
    CHECK(enc_call(buf, sizeof buf, "", "/", NULL) == 0);
    CHECK(enc_call(buf, sizeof buf, "GET", "", NULL) == 0);
    CHECK(enc_call(buf, sizeof buf, "GET", "/a b", NULL) == 0);
    CHECK(enc_call(buf, sizeof buf, "GET", "/a\x7f", NULL) == 0);
    CHECK(enc_call(buf, sizeof buf, "GET", "/\x80\xff", NULL) > 0); /* non-ASCII is the broker's call */
    n = enc_call(buf, sizeof buf, "GET", "/ab", NULL);
    CHECK(gio_call_decode(buf, n, &c) == 0 && c.body_len == 0);
    buf[1 + 3 + 2 + 1] = 0; /* a NUL inside the target */
    CHECK(gio_call_decode(buf, n, &c) < 0);
    buf[1 + 3 + 2 + 1] = '\n';
    CHECK(gio_call_decode(buf, n, &c) < 0);
    n = enc_call(buf, sizeof buf, "GET", "/ab", NULL);
    buf[2] = '\r'; /* inside the method */
    CHECK(gio_call_decode(buf, n, &c) < 0);
    n = enc_call(buf, sizeof buf, "GET", "/ab", NULL);
    buf[0] = 0; /* method length 0 */
    CHECK(gio_call_decode(buf, n, &c) < 0);
    buf[0] = 33; /* over the method cap */
    CHECK(gio_call_decode(buf, n, &c) < 0);
    /* lengths at their caps */
    char m32[33], m33[34];
    memset(m32, 'M', 32);
    m32[32] = 0;
    memset(m33, 'M', 33);
    m33[33] = 0;
    CHECK(enc_call(buf, sizeof buf, m32, "/", NULL) > 0 && enc_call(buf, sizeof buf, m33, "/", NULL) == 0);
    CHECK(gio_call_size(1, GIO_TARGET_MAX, GIO_BODY_MAX) > 0 && gio_call_size(1, GIO_TARGET_MAX + 1, 0) == 0 &&
          gio_call_size(1, 1, GIO_BODY_MAX + 1) == 0);
    size_t big = gio_call_size(3, GIO_TARGET_MAX, GIO_BODY_MAX);
    uint8_t *p = malloc(big + 1);
    char *t = malloc(GIO_TARGET_MAX + 2);
    char *body = malloc(GIO_BODY_MAX + 2);
    if (p && t && body) {
        t[0] = '/';
        memset(t + 1, 'a', GIO_TARGET_MAX);
        t[GIO_TARGET_MAX] = 0;
        memset(body, 'b', GIO_BODY_MAX);
        body[GIO_BODY_MAX] = 0;
        CHECK(enc_call(p, big, "PUT", t, body) == big);
        CHECK(gio_call_decode(p, big, &c) == 0 && c.target_len == GIO_TARGET_MAX && c.body_len == GIO_BODY_MAX);
        CHECK(enc_call(p, big - 1, "PUT", t, body) == 0); /* the buffer is too small */
        /* a body length field one past the cap */
        size_t off = 1 + 3 + 2 + GIO_TARGET_MAX;
        p[off] = (uint8_t)((GIO_BODY_MAX + 1) >> 24);
        p[off + 1] = (uint8_t)((GIO_BODY_MAX + 1) >> 16);
        p[off + 2] = (uint8_t)((GIO_BODY_MAX + 1) >> 8);
        p[off + 3] = (uint8_t)(GIO_BODY_MAX + 1);
        p[big] = 'b';
        CHECK(gio_call_decode(p, big + 1, &c) < 0);
    }
    free(p);
    free(t);
    free(body);
}

static void test_reply(void)
{
    uint8_t buf[256];
    struct gio_reply r = {201, (const uint8_t *)"application/json", (const uint8_t *)"{}", 16, 2}, d;
    size_t n = gio_reply_encode(buf, sizeof buf, &r);
    CHECK(n == GIO_REPLY_FIXED + 16 + 2);
    CHECK(gio_reply_decode(buf, n, &d) == 0 && d.status == 201 && d.ctype_len == 16 && d.body_len == 2 &&
          !memcmp(d.body, "{}", 2));
    CHECK(gio_reply_decode(buf, n - 1, &d) < 0 && gio_reply_decode(buf, n + 1, &d) < 0);
    for (size_t cut = 0; cut < n; cut++)
        CHECK(gio_reply_decode(buf, cut, &d) < 0);
    buf[0] = 0, buf[1] = 199;
    CHECK(gio_reply_decode(buf, n, &d) < 0);
    buf[0] = 2, buf[1] = 0x58; /* 600 */
    CHECK(gio_reply_decode(buf, n, &d) < 0);
    n = gio_reply_encode(buf, sizeof buf, &r);
    buf[4] = '\n'; /* a control byte in the Content-Type */
    CHECK(gio_reply_decode(buf, n, &d) < 0);
    r.status = 100;
    CHECK(gio_reply_encode(buf, sizeof buf, &r) == 0);
    r.status = 200;
    r.ctype = (const uint8_t *)"a\r\nX: y";
    r.ctype_len = 7;
    CHECK(gio_reply_encode(buf, sizeof buf, &r) == 0);
    r.ctype_len = 0;
    r.body_len = 0;
    n = gio_reply_encode(buf, sizeof buf, &r);
    CHECK(n == GIO_REPLY_FIXED && gio_reply_decode(buf, n, &d) == 0 && d.ctype_len == 0);
    CHECK(gio_reply_size(GIO_CTYPE_MAX + 1, 0) == 0 && gio_reply_size(0, GIO_REPLY_MAX + 1) == 0 &&
          gio_reply_size(GIO_CTYPE_MAX, GIO_REPLY_MAX) > 0);
}

/* GCALL (guard mode): each verdict round-trips; every field the daemon relies on is refused one
 * step past its bound, and a payload one byte short or long is refused. */
static void test_gcall(void)
{
    static uint8_t buf[GIO_GCALL_FIXED + GIO_CRED_MAX + GIO_GPATH_MAX + 64];
    struct gio_gcall g = {.cred = (const uint8_t *)"crg_ab", .cred_len = 6, .verdict = GIO_V_CALL,
                          .method = GIO_GM_DELETE, .path = (const uint8_t *)"/v1/\xc3\xa9", .path_len = 6,
                          .body = (const uint8_t *)"{\"a\":1}", .body_len = 7},
                     d;
    size_t n = gio_gcall_encode(buf, sizeof buf, &g);
    CHECK(n == gio_gcall_size(&g) && n == 2 + 6 + 1 + 2 + 6 + 4 + 7);
    CHECK(gio_gcall_decode(buf, n, &d) == 0 && d.verdict == GIO_V_CALL && d.method == GIO_GM_DELETE &&
          d.cred_len == 6 && d.path_len == 6 && d.body_len == 7 && !memcmp(d.body, "{\"a\":1}", 7));
    CHECK(!strcmp(gio_gmethod_name[d.method], "DELETE"));
    for (size_t cut = 0; cut < n; cut++)
        CHECK(gio_gcall_decode(buf, cut, &d) < 0);
    CHECK(gio_gcall_decode(buf, n + 1, &d) < 0);
    buf[2 + 6 + 1] = GIO_GM_COUNT; /* no such method */
    CHECK(gio_gcall_decode(buf, n, &d) < 0);
    n = gio_gcall_encode(buf, sizeof buf, &g);
    buf[2 + 6 + 1 + 2 + 4] = 0xc3, buf[2 + 6 + 1 + 2 + 5] = 0x28; /* not UTF-8 in the path */
    CHECK(gio_gcall_decode(buf, n, &d) < 0);
    n = gio_gcall_encode(buf, sizeof buf, &g);
    buf[2 + 6 + 1 + 2 + 1] = 0; /* a NUL in the path */
    CHECK(gio_gcall_decode(buf, n, &d) < 0);
    n = gio_gcall_encode(buf, sizeof buf, &g);
    buf[3] = ' '; /* a space in the credential */
    CHECK(gio_gcall_decode(buf, n, &d) < 0);
    struct gio_gcall bad = g;
    bad.cred_len = 0;
    CHECK(gio_gcall_encode(buf, sizeof buf, &bad) == 0);
    bad = g;
    bad.path_len = GIO_GPATH_MAX + 1;
    CHECK(gio_gcall_size(&bad) == 0);
    bad = g;
    bad.body = (const uint8_t *)"\xff";
    bad.body_len = 1;
    CHECK(gio_gcall_encode(buf, sizeof buf, &bad) == 0);
    /* the refusals */
    struct gio_gcall why = {.cred = (const uint8_t *)"t", .cred_len = 1, .verdict = GIO_V_BAD,
                            .why = (const uint8_t *)"method must be a string", .why_len = 23};
    n = gio_gcall_encode(buf, sizeof buf, &why);
    CHECK(n == 2 + 1 + 1 + 23 && gio_gcall_decode(buf, n, &d) == 0 && d.verdict == GIO_V_BAD && d.why_len == 23);
    buf[5] = '"'; /* a quote would break the daemon's JSON answer */
    CHECK(gio_gcall_decode(buf, n, &d) < 0);
    why.why_len = 0;
    CHECK(gio_gcall_encode(buf, sizeof buf, &why) == 0);
    struct gio_gcall big = {.cred = (const uint8_t *)"t", .cred_len = 1, .verdict = GIO_V_TOO_LARGE};
    n = gio_gcall_encode(buf, sizeof buf, &big);
    CHECK(n == 3 && gio_gcall_decode(buf, n, &d) == 0 && d.verdict == GIO_V_TOO_LARGE);
    CHECK(gio_gcall_decode(buf, n + 1, &d) < 0);
    buf[2] = 3; /* no such verdict */
    CHECK(gio_gcall_decode(buf, n, &d) < 0);
    /* the stream frames: END is exactly one byte, GUEST is capped, both only towards the daemon */
    uint8_t h[F16_HDR_LEN];
    struct f16_hdr hh = {.len = 1, .type = GIO_T_END, .seq = 1}, hd;
    f16_hdr_encode(h, &hh);
    CHECK(gio_hdr_decode(h, GIO_TO_DAEMON, &hd) == 0 && gio_hdr_decode(h, GIO_TO_HELPER, &hd) < 0);
    hh.len = 2;
    f16_hdr_encode(h, &hh);
    CHECK(gio_hdr_decode(h, GIO_TO_DAEMON, &hd) < 0);
    hh = (struct f16_hdr){.len = GIO_GUEST_MAX + 1, .type = GIO_T_GUEST, .seq = 1};
    f16_hdr_encode(h, &hh);
    CHECK(gio_hdr_decode(h, GIO_TO_DAEMON, &hd) < 0);
}

static void test_cred_header(void)
{
    struct gio_http_req r;
    uint8_t a[] = "POST /g HTTP/1.1\r\nx-plimsoll-e2b-guard:  crg_1 \r\nContent-Length: 0\r\n\r\n";
    CHECK(gio_http_parse(a, sizeof a - 1, "X-Plimsoll-E2B-Guard", &r) == 0 && r.cred_count == 1 &&
          !strcmp(r.cred, "crg_1"));
    uint8_t b[] = "POST /g HTTP/1.1\r\nX-Plimsoll-E2B-Guard: a\r\nX-Plimsoll-E2B-Guard: b\r\n\r\n";
    CHECK(gio_http_parse(b, sizeof b - 1, "X-Plimsoll-E2B-Guard", &r) == 0 && r.cred_count == 2);
    uint8_t c[] = "POST /g HTTP/1.1\r\nX-Plimsoll-E2B-Guard: a\r\n\r\n";
    CHECK(gio_http_parse(c, sizeof c - 1, NULL, &r) == 0 && r.cred == NULL && r.cred_count == 0);
}

/* The parser moved here from the docker provider unchanged; its cases moved with it. */
static void test_http(void)
{
    struct gio_http_req r;
    uint8_t a[] = "POST /v1/x%2F?q#f HTTP/1.1\nContent-Length:  12 \nExpect: 100-Continue\n\n";
    CHECK(gio_http_head_end(a, sizeof a - 1) == sizeof a - 1);
    CHECK(gio_http_parse(a, sizeof a - 1, NULL, &r) == 0);
    CHECK_STR(r.method, "POST");
    CHECK_STR(r.target, "/v1/x%2F?q#f");
    CHECK(r.has_length && r.content_length == 12 && r.expect_continue && !r.http10);
    uint8_t b[] = "GET / HTTP/1.0\r\nContent-Length: 3\r\ncontent-length: 3\r\n\r\n";
    CHECK(gio_http_parse(b, sizeof b - 1, NULL, &r) == 0 && r.http10 && r.content_length == 3);
    uint8_t c[] = "GET / HTTP/1.1\r\nX: a\rb\r\n\r\n"; /* a lone CR inside a value */
    CHECK(gio_http_parse(c, sizeof c - 1, NULL, &r) == 400);
    uint8_t d[] = "GET / HTTP/1.1\r\n\r\n";
    CHECK(gio_http_parse(d, 10, NULL, &r) == 400); /* not a complete head */
    uint8_t e[] = "GET / HTTP/1.1\r\nContent-Length: 99999999999999999999\r\n\r\n";
    CHECK(gio_http_parse(e, sizeof e - 1, NULL, &r) == 400);
    uint8_t f[] = "GET /\x80\xff HTTP/1.1\r\n\r\n"; /* non-ASCII passes, for the broker to refuse */
    CHECK(gio_http_parse(f, sizeof f - 1, NULL, &r) == 0 && !strcmp(r.target, "/\x80\xff"));
    char h[256];
    CHECK(gio_http_head(h, sizeof h, 204, "x", 5) > 0 && !strstr(h, "Content-Length"));
    CHECK(gio_http_head(h, sizeof h, 599, "a/b", 7) > 0 && starts(h, "HTTP/1.1 599 Status\r\n") &&
          strstr(h, "Content-Length: 7\r\n") && strstr(h, "Content-Type: a/b\r\n"));
    CHECK(gio_http_head(h, 20, 200, "x", 1) == 0);
    /* what the parser accepts, the CALL encoder accepts: the helper never has to drop a request */
    uint8_t g[] = "M!#$%&'*+-.^_`|~ /\x21\x7e\x80 HTTP/1.1\r\n\r\n";
    uint8_t buf[128];
    CHECK(gio_http_parse(g, sizeof g - 1, NULL, &r) == 0);
    struct gio_call call = {(const uint8_t *)r.method, (const uint8_t *)r.target, NULL,
                            strlen(r.method),          strlen(r.target),          0};
    CHECK(gio_call_encode(buf, sizeof buf, &call) > 0);
}

int main(void)
{
    test_header();
    test_call();
    test_reply();
    test_http();
    test_gcall();
    test_cred_header();
    return unit_done();
}
