/* chan_test.c: the decoder of guest frames (chan.c, run in the guestio helper), on valid frames,
 * every prefix of them, and the malformed shapes a hostile guest can write; and the canonical
 * pair of the guestio split: what the helper re-encodes is byte for byte what it decoded, and
 * the daemon's mvc_canon_decode takes exactly one complete frame. */
#include <stdint.h>
#include <string.h>

#include "../../tests/unit.h"
#include "vmchan.h"
#include "../core/limits.h"

static size_t frame(uint8_t *buf, uint16_t type, uint16_t flags, uint64_t seq, const void *p, uint32_t len)
{
    f16_hdr_encode(buf, &(struct f16_hdr){.len = len, .type = type, .flags = flags, .seq = seq});
    if (len)
        memcpy(buf + F16_HDR_LEN, p, len);
    return F16_HDR_LEN + len;
}

/* Decoded, re-encoded (the helper), decoded again (the daemon): the same bytes, the same frame. */
static bool canon_round_trip(const uint8_t *buf, size_t n)
{
    static uint8_t enc[1024];
    struct mvc_frame f, g;
    size_t used = 0;
    if (mvc_decode_guest(buf, n, &f, &used) != MVC_FRAME || used != n)
        return false;
    size_t m = mvc_canon_encode(enc, sizeof enc, &f);
    if (m != n || memcmp(enc, buf, n) != 0 || mvc_canon_decode(enc, m, &g) < 0)
        return false;
    /* a frame with a byte more or less is not one complete frame */
    return g.hdr.type == f.hdr.type && g.hdr.seq == f.hdr.seq && g.hdr.len == f.hdr.len &&
           mvc_canon_decode(enc, m - 1, &g) < 0 && mvc_canon_encode(enc, m - 1, &f) == 0;
}

static size_t result_frame(uint8_t *buf, const char *out, const char *err)
{
    uint8_t pl[256];
    uint32_t ol = (uint32_t)strlen(out), el = (uint32_t)strlen(err);
    qf_result_encode_fixed(pl, 3, QF_RES_OUT_TRUNC, ol, el);
    memcpy(pl + QF_RESULT_FIXED, out, ol);
    memcpy(pl + QF_RESULT_FIXED + ol, err, el);
    return frame(buf, MVC_RESULT, 0, 7, pl, QF_RESULT_FIXED + ol + el);
}

int main(void)
{
    uint8_t buf[1024];
    struct mvc_frame f;
    size_t used = 0;

    /* A RESULT decodes, and each strict prefix asks for more. */
    size_t n = result_frame(buf, "hello\n", "err");
    CHECK(mvc_decode_guest(buf, n, &f, &used) == MVC_FRAME);
    CHECK(used == n && f.hdr.type == MVC_RESULT && f.hdr.seq == 7);
    CHECK(f.u.result.exit_code == 3 && f.u.result.out_len == 6 && memcmp(f.u.result.out, "hello\n", 6) == 0);
    CHECK(f.u.result.err_len == 3 && (f.u.result.flags & QF_RES_OUT_TRUNC));
    bool prefixes_wait = true;
    for (size_t k = 0; k < n; k++)
        prefixes_wait &= mvc_decode_guest(buf, k, &f, &used) == MVC_NEED_MORE;
    CHECK(prefixes_wait);
    /* Two frames back to back: the first is returned with its own length. */
    size_t n2 = n + frame(buf + n, MVC_SEEDED, 0, 8, NULL, 0);
    CHECK(mvc_decode_guest(buf, n2, &f, &used) == MVC_FRAME && used == n);
    CHECK(mvc_decode_guest(buf + n, n2 - n, &f, &used) == MVC_FRAME && f.hdr.type == MVC_SEEDED);
    CHECK(canon_round_trip(buf, n));
    CHECK(canon_round_trip(buf + n, n2 - n));
    CHECK(mvc_canon_decode(buf, n2, &f) < 0); /* two frames are not one */

    /* READY text: printable only. */
    n = frame(buf, MVC_READY, 0, 0, "6.1.0\ncpu\n", 10);
    CHECK(mvc_decode_guest(buf, n, &f, &used) == MVC_FRAME && f.u.text.len == 10);
    CHECK(canon_round_trip(buf, n));
    n = frame(buf, MVC_READY, 0, 0, "6.1\0x", 5);
    CHECK(mvc_decode_guest(buf, n, &f, &used) == MVC_BAD);

    /* Hostile headers: a host->guest type, an unknown type, reserved flags, a length over the
     * type's cap (refused from the header alone, before any payload is waited for). */
    n = frame(buf, MVC_RUN, 0, 1, "x", 1);
    CHECK(mvc_decode_guest(buf, F16_HDR_LEN, &f, &used) == MVC_BAD);
    n = frame(buf, 99, 0, 1, NULL, 0);
    CHECK(mvc_decode_guest(buf, n, &f, &used) == MVC_BAD);
    n = frame(buf, MVC_SEEDED, 1, 1, NULL, 0);
    CHECK(mvc_decode_guest(buf, n, &f, &used) == MVC_BAD);
    f16_hdr_encode(buf, &(struct f16_hdr){.len = 0xffffffffu, .type = MVC_RESULT, .seq = 1});
    CHECK(mvc_decode_guest(buf, F16_HDR_LEN, &f, &used) == MVC_BAD);
    f16_hdr_encode(buf, &(struct f16_hdr){.len = MVC_READY_MAX + 1, .type = MVC_READY, .seq = 1});
    CHECK(mvc_decode_guest(buf, F16_HDR_LEN, &f, &used) == MVC_BAD);
    /* A RESULT whose inner lengths disagree with the frame's. */
    uint8_t pl[64];
    qf_result_encode_fixed(pl, 0, 0, 40, 0);
    n = frame(buf, MVC_RESULT, 0, 1, pl, QF_RESULT_FIXED + 4);
    CHECK(mvc_decode_guest(buf, n, &f, &used) == MVC_BAD);
    /* Reserved result flags. */
    qf_result_encode_fixed(pl, 0, 0x80, 0, 0);
    n = frame(buf, MVC_RESULT, 0, 1, pl, QF_RESULT_FIXED);
    CHECK(mvc_decode_guest(buf, n, &f, &used) == MVC_BAD);
    /* Sessions: SESSION_READY is empty; the host's SESSION and CELL never come from a guest; a
     * host-side CELL header is bounded by the code's cap. */
    n = frame(buf, MVC_SESSION_READY, 0, 5, NULL, 0);
    CHECK(mvc_decode_guest(buf, n, &f, &used) == MVC_FRAME && f.hdr.type == MVC_SESSION_READY && f.hdr.seq == 5);
    CHECK(canon_round_trip(buf, n));
    n = frame(buf, MVC_SESSION_READY, 0, 5, "x", 1);
    CHECK(mvc_decode_guest(buf, n, &f, &used) == MVC_BAD);
    n = frame(buf, MVC_CELL, 0, 1, "\0\0\0\1\0\0\0\1x", 9);
    CHECK(mvc_decode_guest(buf, n, &f, &used) == MVC_BAD);
    n = frame(buf, MVC_SESSION, 0, 1, "\0\0\0\1\0\0\0\1", 8);
    CHECK(mvc_decode_guest(buf, n, &f, &used) == MVC_BAD);
    struct f16_hdr sh;
    f16_hdr_encode(buf, &(struct f16_hdr){.len = MVC_CELL_FIXED, .type = MVC_CELL, .seq = 1});
    CHECK(mvc_hdr_decode(buf, &sh) < 0); /* a cell without code */
    f16_hdr_encode(buf, &(struct f16_hdr){.len = MVC_CELL_FIXED + LIM_CODE_MAX + 1, .type = MVC_CELL, .seq = 1});
    CHECK(mvc_hdr_decode(buf, &sh) < 0);
    f16_hdr_encode(buf, &(struct f16_hdr){.len = MVC_SESSION_LEN, .type = MVC_SESSION, .seq = 1});
    CHECK(mvc_hdr_decode(buf, &sh) == 0);
    /* SESSION_STATUS: exactly 16 bytes; file and errno both zero or both set, each in range. */
    uint8_t ss[17] = {0};
    f16_put_u64(ss, 9u << 20);
    n = frame(buf, MVC_SESSION_STATUS, 0, 6, ss, MVC_SESSION_STATUS_LEN);
    CHECK(mvc_decode_guest(buf, n, &f, &used) == MVC_FRAME && f.u.status.used == 9u << 20 && f.u.status.file == 0);
    CHECK(canon_round_trip(buf, n));
    f16_put_u32(ss + 8, 2), f16_put_u32(ss + 12, 28); /* file 2: ENOSPC */
    n = frame(buf, MVC_SESSION_STATUS, 0, 6, ss, MVC_SESSION_STATUS_LEN);
    CHECK(mvc_decode_guest(buf, n, &f, &used) == MVC_FRAME && f.u.status.file == 2 && f.u.status.errnum == 28);
    CHECK(canon_round_trip(buf, n));
    n = frame(buf, MVC_SESSION_STATUS, 0, 6, ss, MVC_SESSION_STATUS_LEN + 1);
    CHECK(mvc_decode_guest(buf, n, &f, &used) == MVC_BAD);
    f16_put_u32(ss + 12, 0); /* a failed file without its errno */
    n = frame(buf, MVC_SESSION_STATUS, 0, 6, ss, MVC_SESSION_STATUS_LEN);
    CHECK(mvc_decode_guest(buf, n, &f, &used) == MVC_BAD);
    f16_put_u32(ss + 8, MVC_FILES_MAX + 1), f16_put_u32(ss + 12, 28);
    n = frame(buf, MVC_SESSION_STATUS, 0, 6, ss, MVC_SESSION_STATUS_LEN);
    CHECK(mvc_decode_guest(buf, n, &f, &used) == MVC_BAD);
    f16_put_u32(ss + 8, 1), f16_put_u32(ss + 12, MVC_ERRNO_MAX + 1);
    n = frame(buf, MVC_SESSION_STATUS, 0, 6, ss, MVC_SESSION_STATUS_LEN);
    CHECK(mvc_decode_guest(buf, n, &f, &used) == MVC_BAD);
    /* FILES goes host->guest only, bounded by the files' caps. */
    n = frame(buf, MVC_FILES, 0, 1, "\0\0\0\1\0\0\0\1a\0\0\0\0", 13);
    CHECK(mvc_decode_guest(buf, n, &f, &used) == MVC_BAD);
    CHECK(mvc_hdr_decode(buf, &sh) == 0);
    f16_hdr_encode(buf, &(struct f16_hdr){.len = mvc_max_len(MVC_FILES) + 1, .type = MVC_FILES, .seq = 1});
    CHECK(mvc_hdr_decode(buf, &sh) < 0);

    /* DIED carries exactly 4 bytes. */
    n = frame(buf, MVC_DIED, 0, 1, "\0\0\0\11", 4);
    CHECK(mvc_decode_guest(buf, n, &f, &used) == MVC_FRAME && f.u.died_status == 9);
    CHECK(canon_round_trip(buf, n));
    n = frame(buf, MVC_DIED, 0, 1, "\0\0\0\11\0", 5);
    CHECK(mvc_decode_guest(buf, n, &f, &used) == MVC_BAD);
    /* A HOST_CALL with a NUL in its path. */
    qf_host_call_encode_fixed(pl, 1, 3, 3, 0);
    memcpy(pl + QF_HOST_CALL_FIXED, "GET/\0x", 6);
    n = frame(buf, MVC_HOST_CALL, 0, 1, pl, QF_HOST_CALL_FIXED + 6);
    CHECK(mvc_decode_guest(buf, n, &f, &used) == MVC_BAD);
    memcpy(pl + QF_HOST_CALL_FIXED, "GET/ab", 6);
    n = frame(buf, MVC_HOST_CALL, 0, 1, pl, QF_HOST_CALL_FIXED + 6);
    CHECK(mvc_decode_guest(buf, n, &f, &used) == MVC_FRAME && f.u.host_call.call_no == 1);
    CHECK(canon_round_trip(buf, n));
    /* the daemon refuses what the guest decoder refuses, and host->guest types */
    memcpy(buf + F16_HDR_LEN + QF_HOST_CALL_FIXED + 3, "/\0", 2);
    CHECK(mvc_canon_decode(buf, n, &f) < 0);
    n = frame(buf, MVC_RUN, 0, 1, pl, QF_RUN_FIXED + 1);
    CHECK(mvc_canon_decode(buf, n, &f) < 0);

    /* PROJECT_RESULT: one step, one artifact, no error; then lengths that disagree. */
    uint8_t pr[256];
    size_t k = 0;
#define U32(v) (f16_put_u32(pr + k, (v)), k += 4)
    U32(1);
    U32(0); /* exit 0 */
    pr[k++] = 2; pr[k++] = 0; pr[k++] = 0; pr[k++] = 0; /* stdout cut */
    U32(12); U32(3); U32(0);
    memcpy(pr + k, "hi\n", 3), k += 3;
    U32(0); U32(1);
    U32(5); U32(2);
    memcpy(pr + k, "a.txtok", 7), k += 7;
    U32(0);
#undef U32
    n = frame(buf, MVC_PROJECT_RESULT, 0, 4, pr, (uint32_t)k);
    CHECK(mvc_decode_guest(buf, n, &f, &used) == MVC_FRAME && f.u.project.n_steps == 1 && f.u.project.n_artifacts == 1);
    CHECK(canon_round_trip(buf, n));
    struct mvc_project_walk w;
    struct mvc_step st;
    struct mvc_artifact art;
    mvc_project_walk_init(&w, &f);
    CHECK(mvc_project_next_step(&w, &st) == 1 && st.out_len == 3 && st.out_truncated && st.ms == 12);
    CHECK(mvc_project_next_step(&w, &st) == 0);
    CHECK(mvc_project_next_artifact(&w, &art) == 1 && art.path_len == 5 && art.len == 2 &&
          memcmp(art.content, "ok", 2) == 0);
    CHECK(mvc_project_next_artifact(&w, &art) == 0);
    pr[4 + 4] = 8; /* a reserved step flag */
    n = frame(buf, MVC_PROJECT_RESULT, 0, 4, pr, (uint32_t)k);
    CHECK(mvc_decode_guest(buf, n, &f, &used) == MVC_BAD);
    pr[4 + 4] = 2;
    n = frame(buf, MVC_PROJECT_RESULT, 0, 4, pr, (uint32_t)k - 1); /* one byte short */
    CHECK(mvc_decode_guest(buf, n, &f, &used) == MVC_BAD);
    f16_put_u32(pr, MVC_STEPS_MAX + 1); /* too many steps */
    n = frame(buf, MVC_PROJECT_RESULT, 0, 4, pr, (uint32_t)k);
    CHECK(mvc_decode_guest(buf, n, &f, &used) == MVC_BAD);
    CHECK(mvc_canon_decode(buf, n, &f) < 0);
    /* no steps, no artifacts, an error text */
    k = 0;
    f16_put_u32(pr, 0), f16_put_u32(pr + 4, 0), f16_put_u32(pr + 8, 0), f16_put_u32(pr + 12, 4);
    memcpy(pr + 16, "oops", 4);
    n = frame(buf, MVC_PROJECT_RESULT, 0, 5, pr, 20);
    CHECK(canon_round_trip(buf, n));

    return unit_done();
}
