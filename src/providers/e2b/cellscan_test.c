/* cellscan_test.c: the end-of-cell marker scanner (cellscan.h): markers found whole and cut at
 * every byte boundary, other nonces and partial markers kept as output, malformed tails refused,
 * the keep limit, bytes after the marker. The stream parser's sink mode that feeds it is tested
 * in e2b_test.c. */
#include <stdio.h>
#include <string.h>

#include "../../../tests/unit.h"
#include "cellscan.h"

#define NONCE "0123456789abcdef0123456789abcdef"
#define OTHER "ffffffffffffffffffffffffffffffff"

/* Feeds text in chunks of `chunk` bytes; returns the final verdict and the bytes used in total. */
static int feed(struct e2b_cellscan *c, const char *text, size_t len, size_t chunk, size_t *total)
{
    int r = 0;
    *total = 0;
    for (size_t off = 0; off < len; off += chunk) {
        size_t n = len - off < chunk ? len - off : chunk, used = 0;
        r = e2b_cellscan_feed(c, (const uint8_t *)text + off, n, &used);
        *total += used;
        if (r != 0)
            break;
    }
    return r;
}

static bool out_is(const struct e2b_cellscan *c, const char *want, size_t wlen)
{
    return c->out.len == wlen && (wlen == 0 || memcmp(c->out.data, want, wlen) == 0);
}

static void test_whole_and_cut(void)
{
    static const char text[] = "hello\n\x1eplimsoll-cell " OTHER " 0\n\x1eplim\x1e\x1eplimsoll-cell " NONCE
                               " 1\nafter";
    static const char want[] = "hello\n\x1eplimsoll-cell " OTHER " 0\n\x1eplim\x1e";
    size_t len = sizeof text - 1, mark_end = len - 5;
    bool all_ok = true;
    for (size_t chunk = 1; chunk <= len; chunk++) {
        struct e2b_cellscan c;
        e2b_cellscan_init(&c, NONCE, true, 1024);
        size_t used;
        int r = feed(&c, text, len, chunk, &used);
        bool ok = r == 1 && c.status == 1 && used == mark_end && out_is(&c, want, sizeof want - 1) && !c.truncated;
        if (!ok) {
            printf("# chunk %zu: r=%d status=%d used=%zu out=%zu\n", chunk, r, c.status, used, c.out.len);
            all_ok = false;
        }
        e2b_cellscan_done(&c);
    }
    CHECK(all_ok);
}

static void test_stderr_marker(void)
{
    struct e2b_cellscan c;
    CHECK(e2b_cellscan_init(&c, NONCE, false, 1024) == 0);
    static const char text[] = "Traceback\n\x1eplimsoll-cell " NONCE "\n";
    size_t used;
    CHECK(feed(&c, text, sizeof text - 1, 7, &used) == 1);
    CHECK(out_is(&c, "Traceback\n", 10));
    struct plm_bytes b;
    e2b_cellscan_take(&c, &b);
    CHECK(b.len == 10 && c.out.data == NULL);
    plm_bytes_done(&b);
    e2b_cellscan_done(&c);
}

static void test_malformed(void)
{
    static const char *bad[] = {"\x1eplimsoll-cell " NONCE "x", "\x1eplimsoll-cell " NONCE " \n",
                                "\x1eplimsoll-cell " NONCE " 12a\n", "\x1eplimsoll-cell " NONCE " 1234567\n",
                                "\x1eplimsoll-cell " NONCE " --1\n", "\x1eplimsoll-cell " NONCE " -\n"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        struct e2b_cellscan c;
        e2b_cellscan_init(&c, NONCE, true, 64);
        size_t used;
        CHECK(feed(&c, bad[i], strlen(bad[i]), 3, &used) == -1);
        CHECK(c.state == CELLSCAN_BAD);
        CHECK(e2b_cellscan_feed(&c, (const uint8_t *)"x", 1, &used) == -1 && used == 0);
        e2b_cellscan_done(&c);
    }
    struct e2b_cellscan c;
    e2b_cellscan_init(&c, NONCE, true, 64);
    size_t used;
    static const char neg[] = "\x1eplimsoll-cell " NONCE " -12\n";
    CHECK(feed(&c, neg, sizeof neg - 1, 100, &used) == 1 && c.status == -12);
    CHECK(e2b_cellscan_feed(&c, (const uint8_t *)"x", 1, &used) == 1 && used == 0);
    e2b_cellscan_done(&c);
    CHECK(e2b_cellscan_init(&c, "0123", true, 64) == -1);
    CHECK(e2b_cellscan_init(&c, "0123456789ABCDEF0123456789abcdef", true, 64) == -1);
}

static void test_keep_limit(void)
{
    struct e2b_cellscan c;
    e2b_cellscan_init(&c, NONCE, true, 10);
    char big[4096];
    memset(big, 'a', sizeof big);
    big[100] = 0x1e; /* a lone record separator is output */
    size_t used;
    CHECK(feed(&c, big, sizeof big, 333, &used) == 0 && used == sizeof big);
    CHECK(c.out.len == 10 && c.truncated && c.seen == sizeof big);
    static const char end[] = "\x1eplimsoll-cell " NONCE " 0\n";
    CHECK(feed(&c, end, sizeof end - 1, 5, &used) == 1 && c.status == 0);
    e2b_cellscan_done(&c);
}

int main(void)
{
    test_whole_and_cut();
    test_stderr_marker();
    test_malformed();
    test_keep_limit();
    return unit_done();
}
