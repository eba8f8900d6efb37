/* respframe_test.c: where MHD's answers end, byte by byte and in one piece. */
#include <string.h>

#include "respframe.h"
#include "unit.h"

/* Feeds s one byte at a time; returns the completed count, or -1. */
static int bytewise(struct respframe *r, const char *s)
{
    int done = 0;
    for (size_t i = 0; s[i]; i++) {
        int k = respframe_feed(r, s + i, 1);
        if (k < 0)
            return -1;
        done += k;
    }
    return done;
}

static int whole(bool head_req, const char *s)
{
    struct respframe r;
    respframe_expect(&r, head_req);
    int a = respframe_feed(&r, s, strlen(s));
    respframe_expect(&r, head_req);
    int b = bytewise(&r, s);
    return a == b ? a : -99;
}

int main(void)
{
    CHECK(whole(false, "HTTP/1.1 200 OK\r\nContent-Length: 3\r\n\r\nok\n") == 1);
    CHECK(whole(false, "HTTP/1.1 200 OK\r\nContent-Length: 3\r\n\r\nok") == 0); /* one byte short */
    CHECK(whole(false, "HTTP/1.1 200 OK\r\ncontent-length:0\r\n\r\n") == 1);
    CHECK(whole(true, "HTTP/1.1 200 OK\r\nContent-Length: 3\r\n\r\n") == 1); /* HEAD: no body */
    CHECK(whole(false, "HTTP/1.1 204 No Content\r\n\r\n") == 1);
    CHECK(whole(false, "HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n{}") == 1);
    CHECK(whole(false, "HTTP/1.1 100 Continue\r\n\r\n") == 0);
    CHECK(whole(false, "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nok\r\na;x=y\r\n0123456789\r\n0\r\n\r\n") == 1);
    CHECK(whole(false, "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nok\r\n0\r\nT: 1\r\n\r\n") == 1);
    CHECK(whole(false, "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nok\r\n0\r\n") == 0);
    /* two answers back to back, and a long header line that does not matter */
    char two[600] = "HTTP/1.1 200 OK\r\nX-Long: ";
    memset(two + strlen(two), 'a', 300);
    strcat(two, "\r\nContent-Length: 1\r\n\r\nxHTTP/1.0 404 Not Found\r\nContent-Length: 0\r\n\r\n");
    CHECK(whole(false, two) == 2);
    /* what cannot be framed */
    CHECK(whole(false, "HTTP/1.1 200 OK\r\n\r\nbody until close") == -1);
    CHECK(whole(false, "HTTP/1.1 101 Switching Protocols\r\n\r\n") == -1);
    CHECK(whole(false, "HTTP/1.1 200 OK\r\nContent-Length: 1\r\nContent-Length: 1\r\n\r\nx") == -1);
    CHECK(whole(false, "HTTP/1.1 200 OK\r\nContent-Length: x\r\n\r\n") == -1);
    CHECK(whole(false, "HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip\r\n\r\n") == -1);
    CHECK(whole(false, "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n") == -1);
    CHECK(whole(false, "garbage\r\n") == -1);
    CHECK(whole(false, "HTTP/1.1 200 OK\r\nContent-Length: 99999999999999999999\r\n\r\n") == -1);
    return unit_done();
}
