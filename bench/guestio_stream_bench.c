/* guestio_stream_bench.c: what moving the microvm channel's parser into the guestio helper costs
 * (docs/privsep.md, stream mode), side by side in one run on one machine:
 *   - open_close: gio_stream_open + gio_stream_close (spawn, confine, HELLO, hand-over, reap): what
 *     each VM now pays once, at its first read;
 *   - frame_direct / frame_helper: one guest frame from the guest's write to a decoded frame in the
 *     reader, sequentially; "direct" is the daemon's old path (read + mvc_decode_guest in process),
 *     "helper" the new one (helper reads, decodes, re-encodes, forwards; mvc_canon_decode here).
 *     Two sizes: a 64-byte HOST_CALL (a host call's request) and a 1 MiB one (the broker's body cap).
 * Prints one JSON line per figure. Usage: guestio_stream_bench [opens] [frames] */
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include "../src/core/clock.h"
#include "../src/guestio/guestio.h"
#include "../src/guestio/vmchan.h"

static int cmp(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

static void report(const char *what, uint64_t *v, size_t n, size_t failures)
{
    qsort(v, n, sizeof *v, cmp);
    printf("{\"bench\":\"guestio_stream\",\"what\":\"%s\",\"n\":%zu,\"failures\":%zu,\"p50_us\":%llu,\"p99_us\":%llu}\n",
           what, n, failures, (unsigned long long)v[n / 2], (unsigned long long)v[n * 99 / 100]);
    fflush(stdout);
}

/* Writes the whole frame (the guest's side is blocking). */
static int put(int fd, const uint8_t *p, size_t n)
{
    while (n) {
        ssize_t k = write(fd, p, n);
        if (k <= 0)
            return -1;
        p += k, n -= (size_t)k;
    }
    return 0;
}

static uint8_t *frame;
static size_t frame_len;

static void make_frame(uint16_t type, size_t payload)
{
    free(frame);
    frame_len = F16_HDR_LEN + payload;
    frame = calloc(1, frame_len);
    uint8_t *pl = frame + F16_HDR_LEN;
    if (type == MVC_HOST_CALL) {
        qf_host_call_encode_fixed(pl, 1, 3, 11, (uint32_t)(payload - QF_HOST_CALL_FIXED - 14));
        memcpy(pl + QF_HOST_CALL_FIXED, "GET/v1/items/1", 14);
        memset(pl + QF_HOST_CALL_FIXED + 14, 'b', payload - QF_HOST_CALL_FIXED - 14);
    } else {
        qf_result_encode_fixed(pl, 0, 0, (uint32_t)(payload - QF_RESULT_FIXED), 0);
        memset(pl + QF_RESULT_FIXED, 'o', payload - QF_RESULT_FIXED);
    }
    f16_hdr_encode(frame, &(struct f16_hdr){.len = (uint32_t)payload, .type = type, .seq = 1});
}

/* The old path: the guest's bytes read and decoded in this process (the guest's writes
 * interleaved with the reads, as a VM and the daemon run side by side). */
static int direct_one(int rd, int wr, uint8_t *buf, size_t cap)
{
    size_t have = 0, used = 0, sent = 0;
    struct mvc_frame f;
    for (;;) {
        if (sent < frame_len) {
            ssize_t k = send(wr, frame + sent, frame_len - sent, MSG_DONTWAIT | MSG_NOSIGNAL);
            if (k < 0 && errno != EAGAIN)
                return -1;
            sent += k > 0 ? (size_t)k : 0;
        }
        enum mvc_decode_status st = mvc_decode_guest(buf, have, &f, &used);
        if (st == MVC_FRAME)
            return used == frame_len ? 0 : -1;
        if (st == MVC_BAD || have == cap)
            return -1;
        ssize_t k = recv(rd, buf + have, cap - have, MSG_DONTWAIT);
        if (k == 0 || (k < 0 && errno != EAGAIN))
            return -1;
        have += k > 0 ? (size_t)k : 0;
    }
}

static int helper_one(struct gio_stream *gs, int wr)
{
    if (put(wr, frame, frame_len) < 0)
        return -1;
    const uint8_t *p;
    size_t len;
    int why;
    struct mvc_frame f;
    struct plm_err e = {0};
    int64_t dl = (int64_t)clock_mono_ms() + 5000;
    if (gio_stream_next(gs, dl, &p, &len, &why, &e) != 1 || mvc_canon_decode(p, len, &f) < 0)
        return -1;
    return len == frame_len ? 0 : -1;
}

static void frames(const char *name, uint64_t *v, size_t n)
{
    char what[64];
    int sv[2];
    uint8_t *buf = malloc(MVC_CANON_MAX);
    size_t fail = 0;
    /* direct */
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0)
        exit(1);
    for (size_t i = 0; i < n; i++) {
        uint64_t t0 = clock_mono_us();
        fail += direct_one(sv[0], sv[1], buf, MVC_CANON_MAX) < 0;
        v[i] = clock_mono_us() - t0;
    }
    snprintf(what, sizeof what, "frame_direct_%s", name);
    report(what, v, n, fail);
    close(sv[0]);
    close(sv[1]);
    /* helper */
    fail = 0;
    struct gio_stream *gs = NULL;
    struct plm_err e = {0};
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0 || gio_stream_open(dup(sv[0]), NULL, &gs, &e) < 0) {
        fprintf(stderr, "open: %s\n", e.msg);
        exit(1);
    }
    struct timeval tv = {.tv_sec = 5}; /* a helper that ended must not leave the guest's write blocked */
    setsockopt(sv[1], SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
    for (size_t i = 0; i < n; i++) {
        uint64_t t0 = clock_mono_us();
        int bad = helper_one(gs, sv[1]) < 0;
        v[i] = clock_mono_us() - t0;
        if (bad) { /* the stream is over: count the rest as failures, never wait on it */
            fail += n - i;
            break;
        }
    }
    snprintf(what, sizeof what, "frame_helper_%s", name);
    report(what, v, n, fail);
    gio_stream_close(gs);
    close(sv[0]);
    close(sv[1]);
    free(buf);
}

int main(int argc, char **argv)
{
    size_t opens = argc > 1 ? strtoul(argv[1], NULL, 10) : 200, n = argc > 2 ? strtoul(argv[2], NULL, 10) : 2000;
    if (!opens || !n)
        return 2;
    uint64_t *v = calloc(opens > n ? opens : n, sizeof *v);
    if (!v)
        return 1;
    size_t fail = 0;
    for (size_t i = 0; i < opens; i++) {
        int sv[2];
        if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0)
            return 1;
        struct gio_stream *gs = NULL;
        struct plm_err e = {0};
        uint64_t t0 = clock_mono_us();
        fail += gio_stream_open(dup(sv[0]), NULL, &gs, &e) < 0;
        gio_stream_close(gs);
        v[i] = clock_mono_us() - t0;
        close(sv[0]);
        close(sv[1]);
    }
    report("open_close", v, opens, fail);
    make_frame(MVC_HOST_CALL, 64);
    frames("64B", v, n);
    make_frame(MVC_HOST_CALL, 1024 * 1024); /* a host call with a 1 MiB body: the largest but a project report */
    frames("1MiB", v, n / 10 ? n / 10 : 1);
    free(frame);
    free(v);
    return 0;
}
