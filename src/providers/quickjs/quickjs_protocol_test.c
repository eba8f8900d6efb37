/* quickjs_protocol_test.c: mon_table enforced (issue 12, finding 8): the test plays a misbehaving
 * worker on one end of a socketpair and the monitor's protocol (mon_play) runs on the other. A
 * second READY, a second RESULT, a RESULT before READY and a HOST_CALL in a run without a grant
 * each end the exchange as a protocol violation; a well-behaved exchange on the same harness
 * succeeds, so the harness itself can fail. Tests only. */
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "../../core/exact_io.h"
#include "frame.h"
#include "qjs_int.h"
#include "unit.h"

int qjs_protocol_tests(void);

enum fake_script { FAKE_GOOD, FAKE_DOUBLE_READY, FAKE_DOUBLE_RESULT, FAKE_RESULT_FIRST, FAKE_CALL_NO_GRANT };

struct fake {
    int fd;
    enum fake_script script;
    int frames_read; /* RUN frames the fake worker received */
};

/* Appends one frame to buf at *off (the caller sized buf). */
static void put_frame(uint8_t *buf, size_t *off, uint16_t type, uint64_t seq, const void *pl, uint32_t len)
{
    f16_hdr_encode(buf + *off, &(struct f16_hdr){.len = len, .type = type, .flags = 0, .seq = seq});
    if (len)
        memcpy(buf + *off + F16_HDR_LEN, pl, len);
    *off += F16_HDR_LEN + len;
}

/* A RESULT with exit 0 and stdout "ok\n". */
static void put_result(uint8_t *buf, size_t *off, uint64_t seq)
{
    uint8_t pl[QF_RESULT_FIXED + 3];
    qf_result_encode_fixed(pl, 0, 0, 3, 0);
    memcpy(pl + QF_RESULT_FIXED, "ok\n", 3);
    put_frame(buf, off, QF_RESULT, seq, pl, sizeof pl);
}

static void *fake_main(void *arg)
{
    struct fake *f = arg;
    uint8_t out[256];
    size_t n = 0;
    /* Each misbehaviour goes out in one write, so the monitor finds it queued. */
    if (f->script == FAKE_RESULT_FIRST)
        put_result(out, &n, 0);
    else
        put_frame(out, &n, QF_READY, 0, NULL, 0);
    if (f->script == FAKE_DOUBLE_READY)
        put_frame(out, &n, QF_READY, 0, NULL, 0);
    if (write(f->fd, out, n) != (ssize_t)n)
        return NULL;
    uint8_t hb[F16_HDR_LEN];
    struct f16_hdr h;
    if (plm_read_exact(f->fd, hb, sizeof hb) < 0 || qf_hdr_decode(hb, &h) < 0 || h.type != QF_RUN)
        return NULL;
    uint8_t *pl = malloc(h.len ? h.len : 1);
    if (!pl || plm_read_exact(f->fd, pl, h.len) < 0) {
        free(pl);
        return NULL;
    }
    free(pl);
    f->frames_read++;
    n = 0;
    if (f->script == FAKE_CALL_NO_GRANT) {
        uint8_t call[QF_HOST_CALL_FIXED + 5];
        qf_host_call_encode_fixed(call, 1, 3, 2, 0);
        memcpy(call + QF_HOST_CALL_FIXED, "GET/x", 5);
        put_frame(out, &n, QF_HOST_CALL, h.seq, call, sizeof call);
    }
    put_result(out, &n, h.seq);
    if (f->script == FAKE_DOUBLE_RESULT)
        put_result(out, &n, h.seq);
    if (write(f->fd, out, n) != (ssize_t)n)
        return NULL;
    char b;
    while (read(f->fd, &b, 1) > 0) /* until the monitor's side closes */
        ;
    return NULL;
}

/* One exchange against a fake worker; returns mon_play's result, err and the RUNs it received. */
static int play(enum fake_script script, struct plm_js_result *res, struct plm_err *err, int *runs)
{
    int sv[2];
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0)
        return -2;
    struct fake f = {.fd = sv[1], .script = script};
    pthread_t t;
    if (pthread_create(&t, NULL, fake_main, &f) != 0) {
        close(sv[0]);
        close(sv[1]);
        return -2;
    }
    memset(err, 0, sizeof *err);
    int rc = mon_play(sv[0], "1", 1, NULL, NULL, 2000, res, err);
    close(sv[0]);
    pthread_join(t, NULL);
    close(sv[1]);
    *runs = f.frames_read;
    return rc;
}

int qjs_protocol_tests(void)
{
    struct plm_js_result res;
    struct plm_err err;
    int runs;

    /* Control: the same harness with a worker that keeps the protocol gets its result. */
    CHECK(play(FAKE_GOOD, &res, &err, &runs) == 0 && res.exit_code == 0 && res.out.len == 3 && runs == 1);
    plm_bytes_done(&res.out);
    plm_bytes_done(&res.err);

    /* A second READY: refused before the code is sent (the RUN never leaves the monitor). */
    CHECK(play(FAKE_DOUBLE_READY, &res, &err, &runs) < 0 && err.kind == PLM_E_UNAVAILABLE && runs == 0);
    CHECK(strstr(err.msg, "broke the protocol") != NULL);
    printf("# second READY: %s\n", err.msg);

    /* A RESULT where READY is owed. */
    CHECK(play(FAKE_RESULT_FIRST, &res, &err, &runs) < 0 && err.kind == PLM_E_UNAVAILABLE && runs == 0);

    /* A second RESULT behind the first: neither is trusted. */
    CHECK(play(FAKE_DOUBLE_RESULT, &res, &err, &runs) < 0 && err.kind == PLM_E_UNAVAILABLE &&
          err.refusal == PLM_REFUSAL_NONE && runs == 1);
    CHECK(strstr(err.msg, "broke the protocol") != NULL && res.out.len == 0);
    printf("# second RESULT: %s\n", err.msg);

    /* A host call in a run that has no grant. */
    CHECK(play(FAKE_CALL_NO_GRANT, &res, &err, &runs) < 0 && err.kind == PLM_E_UNAVAILABLE && runs == 1);
    CHECK(strstr(err.msg, "broke the protocol") != NULL);
    printf("# HOST_CALL without a grant: %s\n", err.msg);
    return unit_failed;
}
