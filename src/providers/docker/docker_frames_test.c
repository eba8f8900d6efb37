/* docker_frames_test.c: the docker provider's stream side, without dockerd: the attach-stream
 * decoder, the runner's plan and report (frames, MAC, body), the start marker and end line, and
 * the outcome tables of providers.md §3.4-3.5. (Split from docker_test.c, which keeps the
 * configuration side.) */
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../../../tests/unit.h"
#include "internal.h"
#include "runner/sha256.h"

/* ---- the attach stream ----------------------------------------------------------------------- */

struct capture {
    char out[256], err[256];
    size_t no, ne;
};

static void cap_sink(void *ctx, int stream, const uint8_t *p, size_t n)
{
    struct capture *c = ctx;
    char *dst = stream == DOCK_STDERR ? c->err : c->out;
    size_t *len = stream == DOCK_STDERR ? &c->ne : &c->no;
    memcpy(dst + *len, p, n);
    *len += n;
}

static size_t frame(uint8_t *out, uint8_t stream, const char *payload)
{
    size_t n = strlen(payload);
    out[0] = stream, out[1] = out[2] = out[3] = 0;
    rw_put_u32(out + 4, (uint32_t)n);
    memcpy(out + 8, payload, n);
    return 8 + n;
}

static void test_mux(void)
{
    uint8_t buf[256];
    size_t n = 0;
    n += frame(buf + n, 1, "hello ");
    n += frame(buf + n, 2, "oops");
    n += frame(buf + n, 1, "");
    n += frame(buf + n, 1, "world");
    n += frame(buf + n, 0, "!");
    /* every split point gives the same result */
    bool all = true;
    for (size_t cut = 0; cut <= n; cut++) {
        struct dock_mux m = {0};
        struct capture c = {0};
        int r = dock_mux_feed(&m, buf, cut, cap_sink, &c);
        r |= dock_mux_feed(&m, buf + cut, n - cut, cap_sink, &c);
        all = all && r == 0 && dock_mux_idle(&m) && c.no == 12 && !memcmp(c.out, "hello world!", 12) && c.ne == 4 &&
              !memcmp(c.err, "oops", 4);
    }
    CHECK(all);
    /* byte by byte */
    struct dock_mux m = {0};
    struct capture c = {0};
    for (size_t i = 0; i < n; i++)
        dock_mux_feed(&m, buf + i, 1, cap_sink, &c);
    CHECK(dock_mux_idle(&m) && c.no == 12 && c.ne == 4);
    /* a partial frame is not a clean end */
    memset(&m, 0, sizeof m);
    CHECK(dock_mux_feed(&m, buf, 10, NULL, NULL) == 0 && !dock_mux_idle(&m));
    /* hostile headers */
    uint8_t bad[16] = {3, 0, 0, 0, 0, 0, 0, 1, 'x'};
    memset(&m, 0, sizeof m);
    CHECK(dock_mux_feed(&m, bad, 9, cap_sink, &c) < 0);
    CHECK(dock_mux_feed(&m, buf, 8, cap_sink, &c) < 0); /* sticky */
    uint8_t bad2[16] = {1, 0, 1, 0, 0, 0, 0, 1, 'x'};
    memset(&m, 0, sizeof m);
    CHECK(dock_mux_feed(&m, bad2, 9, cap_sink, &c) < 0);
    /* a huge declared size is streamed, never allocated */
    uint8_t huge[12] = {1, 0, 0, 0, 0xff, 0xff, 0xff, 0xff, 'a', 'b', 'c', 'd'};
    memset(&m, 0, sizeof m);
    memset(&c, 0, sizeof c);
    CHECK(dock_mux_feed(&m, huge, 12, cap_sink, &c) == 0 && c.no == 4 && !dock_mux_idle(&m));

    struct dock_bytes b = {.max = 5};
    dock_bytes_add(&b, (const uint8_t *)"abc", 3);
    CHECK(!b.truncated);
    dock_bytes_add(&b, (const uint8_t *)"defg", 4);
    CHECK(b.len == 5 && b.truncated && !memcmp(b.data, "abcde", 5));
    dock_bytes_done(&b);
}

/* ---- SHA-256 and HMAC of the runner against OpenSSL ------------------------------------------ */

static void hex_of(const uint8_t *p, size_t n, char *out)
{
    dock_hex(p, n, out);
}

static void test_sha(void)
{
    uint8_t d[32];
    char hex[65];
    struct rs_sha256 c;
    rs_sha256_init(&c);
    rs_sha256_update(&c, "abc", 3);
    rs_sha256_final(&c, d);
    hex_of(d, 32, hex);
    CHECK_STR(hex, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
    rs_sha256_init(&c);
    rs_sha256_final(&c, d);
    hex_of(d, 32, hex);
    CHECK_STR(hex, "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
    const char *two = "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq";
    rs_sha256_init(&c);
    rs_sha256_update(&c, two, strlen(two));
    rs_sha256_final(&c, d);
    hex_of(d, 32, hex);
    CHECK_STR(hex, "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
    /* RFC 4231 test case 2 */
    struct rs_hmac h;
    rs_hmac_init(&h, (const uint8_t *)"Jefe", 4);
    rs_hmac_update(&h, "what do ya want ", 16);
    rs_hmac_update(&h, "for nothing?", 12);
    rs_hmac_final(&h, d);
    hex_of(d, 32, hex);
    CHECK_STR(hex, "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843");
    /* random lengths and split points agree with OpenSSL, including keys over a block */
    bool same = true;
    uint8_t key[100], msg[300], o[32];
    for (int round = 0; round < 50; round++) {
        dock_random(key, sizeof key);
        dock_random(msg, sizeof msg);
        size_t kl = (size_t)(key[0] % 100) + 1, ml = (size_t)msg[0] + (size_t)msg[1] % 45, cut = ml / 3;
        rs_hmac_init(&h, key, kl);
        rs_hmac_update(&h, msg, cut);
        rs_hmac_update(&h, msg + cut, ml - cut);
        rs_hmac_final(&h, d);
        unsigned int ol = 0;
        HMAC(EVP_sha256(), key, (int)kl, msg, ml, o, &ol);
        same = same && ol == 32 && !memcmp(o, d, 32);
    }
    CHECK(same);
}

/* ---- the runner's report --------------------------------------------------------------------- */

struct wbuf {
    uint8_t p[8192];
    size_t n;
};
static void w_bytes(struct wbuf *w, const void *p, size_t n)
{
    memcpy(w->p + w->n, p, n);
    w->n += n;
}
static void w_u32(struct wbuf *w, uint32_t v)
{
    rw_put_u32(w->p + w->n, v);
    w->n += 4;
}
static void w_field(struct wbuf *w, const char *s, size_t n)
{
    w_u32(w, (uint32_t)n);
    w_bytes(w, s, n);
}

static void body_ok(struct wbuf *w, const char *cmd1, uint8_t flags2, const char *art)
{
    w->n = 0;
    w_bytes(w, RW_REPORT_MAGIC, 8);
    w_u32(w, 0); /* no error */
    w_u32(w, 2);
    w_field(w, cmd1, strlen(cmd1));
    w_field(w, "out1\n", 5);
    w_field(w, "", 0);
    w_u32(w, 0);
    uint8_t f0 = 0;
    w_bytes(w, &f0, 1);
    uint8_t dur[8] = {0, 0, 0, 0, 0, 0, 0, 7};
    w_bytes(w, dur, 8);
    w_field(w, "step two", 8);
    w_field(w, "", 0);
    w_field(w, "err\n", 4);
    w_u32(w, (uint32_t)-1);
    w_bytes(w, &flags2, 1);
    w_bytes(w, dur, 8);
    uint8_t t = 0;
    w_bytes(w, &t, 1);
    w_u32(w, 1);
    w_field(w, art, strlen(art));
    w_field(w, "\x00\x01\x02\xff", 4);
}

static size_t make_frame(uint8_t *out, const uint8_t key[32], const uint8_t *body, size_t len, bool forge)
{
    uint8_t mac[32];
    struct rs_hmac h;
    rs_hmac_init(&h, key, 32);
    rs_hmac_update(&h, body, len);
    rs_hmac_final(&h, mac);
    if (forge)
        mac[5] ^= 1;
    char hdr[RW_FRAME_HEADER_MAX + 2];
    size_t hl = dock_report_header(hdr, len, mac);
    memcpy(out, hdr, hl);
    memcpy(out + hl, body, len);
    return hl + len;
}

static void test_report(void)
{
    uint8_t key[32], other[32];
    for (int i = 0; i < 32; i++)
        key[i] = (uint8_t)i, other[i] = (uint8_t)(i + 1);
    static struct wbuf body;
    body_ok(&body, "step one", 0, "bin.dat");
    static uint8_t out[32768];
    const uint8_t *b;
    size_t bl, n;

    n = make_frame(out, key, body.p, body.n, false);
    CHECK(dock_report_find(out, n, key, &b, &bl) == DOCK_REPORT_OK && bl == body.n && !memcmp(b, body.p, bl));
    CHECK(dock_report_find(out, n, other, &b, &bl) == DOCK_REPORT_FORGED);   /* wrong key */
    CHECK(dock_report_find(out, n - 1, key, &b, &bl) == DOCK_REPORT_FORGED); /* body incomplete */
    CHECK(dock_report_find((const uint8_t *)"no frame here\n", 14, key, &b, &bl) == DOCK_REPORT_NONE);
    CHECK(dock_report_find(out, 0, key, &b, &bl) == DOCK_REPORT_NONE);
    /* a forged frame (a step's) first, then the runner's: the runner's wins */
    size_t f = make_frame(out, key, body.p, body.n, true);
    size_t g = make_frame(out + f, key, body.p, body.n, false);
    CHECK(dock_report_find(out, f, key, &b, &bl) == DOCK_REPORT_FORGED);
    CHECK(dock_report_find(out, f + g, key, &b, &bl) == DOCK_REPORT_OK && b == out + f + (g - body.n));
    /* non-canonical headers */
    static const char *const bad[] = {
        "\n<<<PLIMSOLL_REPORT_V2>>> 02 0000000000000000000000000000000000000000000000000000000000000000\nab",
        "\n<<<PLIMSOLL_REPORT_V2>>>  2 0000000000000000000000000000000000000000000000000000000000000000\nab",
        "\n<<<PLIMSOLL_REPORT_V2>>> 2  0000000000000000000000000000000000000000000000000000000000000000\nab",
        "\n<<<PLIMSOLL_REPORT_V2>>> 2 00000000000000000000000000000000000000000000000000000000000000AA\nab",
        "\n<<<PLIMSOLL_REPORT_V2>>> 99999999 0000000000000000000000000000000000000000000000000000000000000000\nab",
        "\n<<<PLIMSOLL_REPORT_V2>>> 2 000000000000000000000000000000000000000000000000000000000000000\nab",
        "\n<<<PLIMSOLL_REPORT_V2>>> -2 0000000000000000000000000000000000000000000000000000000000000000\nab",
        "\n<<<PLIMSOLL_REPORT_V2>>> 2 0000000000000000000000000000000000000000000000000000000000000000 \nab",
    };
    int forged = 0;
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++)
        forged += dock_report_find((const uint8_t *)bad[i], strlen(bad[i]), key, &b, &bl) == DOCK_REPORT_FORGED;
    CHECK(forged == (int)(sizeof bad / sizeof *bad));
    /* the incremental completeness check agrees with arrival */
    n = make_frame(out, key, body.p, body.n, false);
    size_t scan = 0;
    bool early = false;
    for (size_t i = 1; i < n; i++)
        early = early || dock_report_complete(out, i, &scan);
    CHECK(!early && dock_report_complete(out, n, &scan));

    /* the body decoder */
    const char *steps[] = {"step one", "step two"};
    const char *arts[] = {"out.txt", "bin.dat", "missing.txt"};
    struct plm_project_result pr;
    char *error = NULL;
    CHECK(dock_report_decode(body.p, body.n, steps, 2, arts, 3, &pr, &error) == 0);
    CHECK(pr.n_steps == 2 && !error);
    CHECK_STR(pr.steps[0].command, "step one");
    CHECK(pr.steps[0].out.len == 5 && pr.steps[0].duration_ms == 7 && pr.steps[1].exit_code == -1);
    CHECK(pr.n_artifacts == 1 && pr.artifacts[0].content.len == 4 &&
          !memcmp(pr.artifacts[0].content.data, "\x00\x01\x02\xff", 4));
    dock_project_result_done(&pr);
    CHECK(dock_report_decode(body.p, body.n - 1, steps, 2, arts, 3, &pr, &error) < 0); /* short */
    body.p[body.n] = 0;
    CHECK(dock_report_decode(body.p, body.n + 1, steps, 2, arts, 3, &pr, &error) < 0); /* trailing byte */
    const char *wrong[] = {"step ONE", "step two"};
    CHECK(dock_report_decode(body.p, body.n, wrong, 2, arts, 3, &pr, &error) < 0); /* not our command */
    CHECK(dock_report_decode(body.p, body.n, steps, 1, arts, 3, &pr, &error) < 0); /* more steps than sent */
    CHECK(dock_report_decode(body.p, body.n, steps, 2, arts, 1, &pr, &error) < 0); /* artifact not asked for */
    body_ok(&body, "step one", 0x10, "bin.dat");
    CHECK(dock_report_decode(body.p, body.n, steps, 2, arts, 3, &pr, &error) < 0); /* unknown flag */
    body_ok(&body, "step one", RW_F_TIMED_OUT | RW_F_ERR_TRUNC, "bin.dat");
    CHECK(dock_report_decode(body.p, body.n, steps, 2, arts, 3, &pr, &error) == 0 && pr.steps[1].timed_out &&
          pr.steps[1].err_truncated && !pr.steps[1].out_truncated);
    dock_project_result_done(&pr);
    /* an error report */
    body.n = 0;
    w_bytes(&body, RW_REPORT_MAGIC, 8);
    w_field(&body, "illegal file path: ../x", 23);
    w_u32(&body, 0);
    uint8_t z = 0;
    w_bytes(&body, &z, 1);
    w_u32(&body, 0);
    CHECK(dock_report_decode(body.p, body.n, steps, 2, arts, 3, &pr, &error) == 0 && error &&
          !strcmp(error, "illegal file path: ../x") && pr.n_steps == 0);
    free(error);
    error = NULL;
    dock_project_result_done(&pr);
    body.p[9] = 0xff; /* error length now huge */
    CHECK(dock_report_decode(body.p, body.n, steps, 2, arts, 3, &pr, &error) < 0);
}

/* ---- plan --------------------------------------------------------------------------------------- */

static void test_plan(void)
{
    uint8_t key[32];
    memset(key, 0xab, sizeof key);
    const struct plm_file files[] = {{"a/b.js", "x"}, {"c.txt", ""}};
    const char *steps[] = {"node a/b.js"};
    const char *arts[] = {"out.txt"};
    struct plm_request req = {
        .kind = PLM_KIND_PROJECT,
        .project = {.files = files, .n_files = 2, .steps = steps, .n_steps = 1, .artifacts = arts, .n_artifacts = 1}};
    uint8_t *plan = NULL;
    size_t len = 0;
    struct plm_err e = {0};
    CHECK(dock_plan_encode(key, 30000, &req, &plan, &len, &e) == 0);
    CHECK(len > 32 && !memcmp(plan, key, 32)); /* the key comes first */
    struct rw_reader r;
    rw_reader_init(&r, plan + 32, len - 32);
    uint32_t n, fl;
    CHECK(rw_magic(&r, RW_PLAN_MAGIC) && rw_u32(&r) == 30000 && rw_u32(&r) == 2);
    const uint8_t *p = rw_field(&r, 1024, &fl);
    CHECK(p && fl == 6 && !memcmp(p, "a/b.js", 6));
    rw_field(&r, 1024, &fl);
    rw_field(&r, 1024, &fl);
    rw_field(&r, 1024, &fl);
    CHECK(rw_u32(&r) == 1);
    rw_field(&r, 1024, &fl);
    n = rw_u32(&r);
    rw_field(&r, 1024, &fl);
    CHECK(n == 1 && rw_done(&r));
    free(plan);
}

/* ---- markers, end line and outcome tables --------------------------------------------------- */

static void test_markers(void)
{
    const char *m = DOCK_MARKER_PREFIX "0123456789abcdef";
    CHECK(dock_marker_matches(m, (const uint8_t *)DOCK_MARKER_PREFIX "0123456789abcdef\n", DOCK_MARKER_LEN));
    CHECK(!dock_marker_matches(m, (const uint8_t *)DOCK_MARKER_PREFIX "0123456789abcdeX\n", DOCK_MARKER_LEN));
    CHECK(!dock_marker_matches(m, (const uint8_t *)DOCK_MARKER_PREFIX "0123456789abcdef ", DOCK_MARKER_LEN));
    CHECK(!dock_marker_matches(m, (const uint8_t *)"docker: Error response", 22));
    CHECK(!dock_marker_matches(m, (const uint8_t *)"", 0));

    const char *argv[32];
    size_t n = 0;
    char *env[] = {"NODE_VERSION=22", "YARN=1"};
    const char *cmd[] = {"node", "-"};
    CHECK(dock_start_argv(m, "plimsoll-ended:x", env, 2, cmd, 2, argv, 32, &n) == 0 && n == 12);
    CHECK_STR(argv[0], "-i");
    CHECK_STR(argv[1], "PATH=" DOCK_GUEST_PATH);
    CHECK_STR(argv[2], "/bin/sh");
    CHECK_STR(argv[6], m);
    CHECK_STR(argv[7], "plimsoll-ended:x");
    CHECK_STR(argv[8], "NODE_VERSION=22");
    CHECK_STR(argv[10], "node");
    CHECK(strstr(argv[4], "printf '%s\\n' \"$1\" >&2") == argv[4]); /* the marker is the first thing */
    CHECK(dock_start_argv(m, NULL, env, 0, cmd, 1, argv, 32, &n) == 0 && n == 9 && !strcmp(argv[7], "-"));
    CHECK(dock_start_argv(m, NULL, env, 2, cmd, 2, argv, 8, &n) < 0);

    /* (spec §3.4) the classification table */
    CHECK(dock_snippet_classify(false, true, false) == DOCK_SNIP_NOT_STARTED);
    CHECK(dock_snippet_classify(true, true, false) == DOCK_SNIP_TIMED_OUT);
    CHECK(dock_snippet_classify(true, true, true) == DOCK_SNIP_TIMED_OUT);
    CHECK(dock_snippet_classify(false, false, true) == DOCK_SNIP_NO_MARKER); /* never exit 125/126/127 */
    CHECK(dock_snippet_classify(true, false, false) == DOCK_SNIP_LOST);
    CHECK(dock_snippet_classify(true, false, true) == DOCK_SNIP_EXITED);
}

static void feed_all(struct dock_endline *st, const char *end, const char *s, size_t chunk)
{
    size_t n = strlen(s);
    for (size_t i = 0; i < n; i += chunk)
        dock_endline_feed(st, end, (const uint8_t *)s + i, n - i < chunk ? n - i : chunk);
}

static void test_end_line(void)
{
    const char *end = DOCK_END_PREFIX "0123456789abcdef0123456789abcdef";
    char text[256];
    snprintf(text, sizeof text, "hi 3\nno newline%s:7\nafter", end);
    bool all = true;
    for (size_t chunk = 1; chunk < strlen(text) + 2; chunk++) {
        struct dock_endline st = {.keep = {.max = 1024}};
        feed_all(&st, end, text, chunk);
        all = all && st.ended && st.status_ok && st.status == 7 && st.keep.len == 15 &&
              !memcmp(st.keep.data, "hi 3\nno newline", 15);
        dock_bytes_done(&st.keep);
    }
    CHECK(all);
    /* no end line: output is held back only until the end of the stream */
    struct dock_endline st = {.keep = {.max = 1024}};
    feed_all(&st, end, "partial output", 3);
    CHECK(!st.ended && st.keep.len + st.hold_len == 14);
    dock_bytes_done(&st.keep);
    /* a forged end line with garbage: ended, but no status */
    struct dock_endline f = {.keep = {.max = 1024}};
    snprintf(text, sizeof text, "%s:abc\n", end);
    feed_all(&f, end, text, 5);
    CHECK(f.ended && !f.status_ok);
    dock_bytes_done(&f.keep);
    struct dock_endline g = {.keep = {.max = 1024}};
    snprintf(text, sizeof text, "%s:999\n", end);
    feed_all(&g, end, text, 64);
    CHECK(g.ended && !g.status_ok);
    dock_bytes_done(&g.keep);
    /* output past the cap is cut and flagged; the end line is still found */
    struct dock_endline c = {.keep = {.max = 4}};
    snprintf(text, sizeof text, "0123456789%s:0\n", end);
    feed_all(&c, end, text, 7);
    CHECK(c.ended && c.status == 0 && c.keep.len == 4 && c.keep.truncated);
    dock_bytes_done(&c.keep);
}

static void outcome(const struct dock_project_end *e, enum plm_outcome want, const char *detail, bool want_err)
{
    struct plm_project_result pr = {0};
    pr.steps = calloc(1, sizeof *pr.steps);
    pr.n_steps = 1;
    pr.steps[0].command = strdup("x");
    struct plm_err err = {0};
    int r = dock_project_outcome(e, &pr, &err);
    if (want_err) {
        CHECK(r < 0 && err.refusal == PLM_REFUSAL_NONE);
    } else {
        CHECK(r == 0 && pr.outcome == want);
        CHECK_STR(pr.detail, detail);
        if (want == PLM_OUTCOME_PROTOCOL_ERROR || (want == PLM_OUTCOME_TIMED_OUT && !e->timed_out_step))
            CHECK(pr.n_steps == 0); /* no steps survive these rows */
    }
    dock_project_result_done(&pr);
}

static void test_outcomes(void)
{
    outcome(&(struct dock_project_end){.deadline_passed = true}, 0, NULL, true);
    outcome(
        &(struct dock_project_end){.marked = true, .deadline_passed = true, .report = DOCK_REPORT_OK, .decoded = true},
        PLM_OUTCOME_TIMED_OUT, "run exceeded the time budget", false);
    outcome(&(struct dock_project_end){.report = DOCK_REPORT_NONE}, 0, NULL, true);
    outcome(&(struct dock_project_end){.marked = true, .have_exit = true, .exit_code = 137}, PLM_OUTCOME_PROTOCOL_ERROR,
            "the runner did not report (container exit 137)", false);
    outcome(&(struct dock_project_end){.marked = true}, PLM_OUTCOME_PROTOCOL_ERROR, "the runner did not report", false);
    outcome(&(struct dock_project_end){.marked = true, .report = DOCK_REPORT_FORGED}, PLM_OUTCOME_PROTOCOL_ERROR,
            "no authenticated runner report", false);
    outcome(&(struct dock_project_end){.marked = true, .report = DOCK_REPORT_OK}, PLM_OUTCOME_PROTOCOL_ERROR,
            "could not parse sandbox result", false);
    outcome(
        &(struct dock_project_end){
            .marked = true, .report = DOCK_REPORT_OK, .decoded = true, .error = "illegal file path: ../escape.ts"},
        PLM_OUTCOME_SETUP_FAILED, "illegal file path: ../escape.ts", false);
    outcome(&(struct dock_project_end){.marked = true, .report = DOCK_REPORT_OK, .decoded = true, .timed_out_step = 2},
            PLM_OUTCOME_TIMED_OUT, "step 2 exceeded its time budget", false);
    outcome(&(struct dock_project_end){.marked = true, .report = DOCK_REPORT_OK, .decoded = true},
            PLM_OUTCOME_COMPLETED, "", false);
}

int main(void)
{
    test_mux();
    test_sha();
    test_report();
    test_plan();
    test_markers();
    test_end_line();
    test_outcomes();
    return unit_done();
}
