/* ui_test.c: the UI's pieces without a network: HTML escaping, the interlock verdict against a
 * fake provider, and the run-card ring (bounded, newest first, never code or output). */
#include <stdlib.h>
#include <string.h>

#include "../wire/connect_error.h"
#include "unit.h"
#include "ui.h"
#include "ui_ring.h"

static enum plm_tier fake_tier_value = PLM_TIER_PROCESS;
static enum plm_tier fake_tier(struct plm_provider *p)
{
    (void)p;
    return fake_tier_value;
}
static const struct plm_provider_ops fake_ops = {.name = "fake", .tier = fake_tier};

static char *html(const char *s)
{
    char *buf = NULL;
    size_t n = 0;
    FILE *f = open_memstream(&buf, &n);
    ui_html(f, s);
    fclose(f);
    return buf;
}

static void test_html(void)
{
    char *o = html("<a href=\"x\" onclick='y'>&</a>\nok\t");
    CHECK_STR(o, "&lt;a href=&quot;x&quot; onclick=&#39;y&#39;&gt;&amp;&lt;/a&gt;\nok\t");
    free(o);
    o = html("bell\a esc\x1b del\x7f");
    CHECK_STR(o, "bell\\x07 esc\\x1b del\\x7f");
    free(o);
    o = html("caf\xc3\xa9 \xc2\x85"); /* é stays, the C1 NEL is escaped */
    CHECK_STR(o, "caf\xc3\xa9 \\xc2\\x85");
    free(o);
    o = html("bad \xff<"); /* not UTF-8: every high byte escaped */
    CHECK_STR(o, "bad \\xff&lt;");
    free(o);
    o = html(NULL);
    CHECK(o && *o == 0);
    free(o);
}

static void test_verdict(void)
{
    struct plm_provider p = {.ops = &fake_ops};
    struct ui_verdict v;
    struct plm_err err = {0};
    CHECK(ui_verdict(&p, "", &v, &err) == 0 && strcmp(v.state, "none") == 0 && v.admitted && !v.card[0]);
    CHECK(ui_verdict(&p, "process", &v, &err) == 0 && strcmp(v.state, "admitted") == 0 && v.admitted);
    CHECK_STR(v.headline, "Admitted: the actual wall process meets the floor process.");
    CHECK(ui_verdict(&p, "vm", &v, &err) == 0 && strcmp(v.state, "refused") == 0 && !v.admitted);
    CHECK_STR(v.headline, "Run refused before dispatch: actual wall process is below the floor vm.");
    CHECK(strncmp(v.detail, "No runtime evidence exists because the code did not start.", 58) == 0);
    CHECK(strstr(v.card, "--- plimsoll run card ---\nrequested floor: vm\n") != NULL);
    CHECK(strstr(v.card, "verdict:         refused before dispatch: isolation (no code ran)\n") != NULL);
    CHECK(strstr(v.card, "error:           failed_precondition: provider isolation process is below requested minimum vm\n"));
    CHECK(strstr(v.card, "exit status:     200\n") != NULL);
    CHECK(ui_verdict(&p, "none", &v, &err) < 0 && err.kind == PLM_E_INVALID);
    CHECK(ui_verdict(&p, "VM", &v, &err) < 0);
    CHECK(ui_verdict(&p, "vm ", &v, &err) < 0);
    /* The tier is read on every call: a provider that proved more is admitted at once. */
    fake_tier_value = PLM_TIER_VM;
    CHECK(ui_verdict(&p, "vm", &v, &err) == 0 && v.admitted);
    fake_tier_value = PLM_TIER_PROCESS;
}

static void note_refusal(struct ui_ring *r, const char *rid, const char *floor)
{
    Plimsoll__V1__JavaScriptRun js = PLIMSOLL__V1__JAVA_SCRIPT_RUN__INIT;
    js.code = "SECRET_CODE()";
    Plimsoll__V1__RunRequest req = PLIMSOLL__V1__RUN_REQUEST__INIT;
    req.protocol = 3;
    req.minimum_isolation = (char *)floor;
    req.payload_case = PLIMSOLL__V1__RUN_REQUEST__PAYLOAD_JAVASCRIPT;
    req.javascript = &js;
    struct rpc_answer a = {.status = 400, .fmt = RPC_JSON};
    a.body = wire_connect_error_json("failed_precondition", "provider isolation process is below requested minimum vm",
                                     PLM_REFUSAL_ISOLATION, &a.len);
    a.status = wire_connect_status("failed_precondition");
    ui_ring_note(r, rid, "alice", &req, &a);
    free(a.body);
}

static void test_ring(void)
{
    ui_ring_note(NULL, "x", "y", NULL, NULL); /* off: a no-op, not a crash */
    struct ui_ring *r = ui_ring_new();
    CHECK(r != NULL);
    struct ui_run_card *cards = calloc(UI_RING_N + 4, sizeof *cards);
    CHECK(ui_ring_snapshot(r, cards, UI_RING_N) == 0);

    note_refusal(r, "00000000000000000000000000000001", "vm");
    CHECK(ui_ring_snapshot(r, cards, UI_RING_N) == 1);
    CHECK_STR(cards[0].verdict, "refused");
    CHECK_STR(cards[0].caller, "alice");
    CHECK_STR(cards[0].floor, "vm");
    CHECK(cards[0].tier[0] == 0 && cards[0].record_sha256[0] == 0 && cards[0].duration_ms == -1);
    CHECK(strstr(cards[0].card, "refused before dispatch: isolation (no code ran)") != NULL);
    CHECK(strstr(cards[0].card, "request id:      00000000000000000000000000000001\n") != NULL);
    CHECK(strstr(cards[0].card, "SECRET") == NULL);

    /* A 200 whose record does not check: record mismatch, and the output never lands on a card. */
    Plimsoll__V1__JavaScriptRun js = PLIMSOLL__V1__JAVA_SCRIPT_RUN__INIT;
    js.code = "SECRET_CODE()";
    Plimsoll__V1__RunRequest req = PLIMSOLL__V1__RUN_REQUEST__INIT;
    req.protocol = 3;
    req.minimum_isolation = "";
    req.payload_case = PLIMSOLL__V1__RUN_REQUEST__PAYLOAD_JAVASCRIPT;
    req.javascript = &js;
    const char *body = "{\"sandbox\":\"fake\",\"isolation\":\"process\",\"durationMs\":\"7\","
                       "\"javascript\":{\"stdout\":\"U0VDUkVUX09VVFBVVA==\"},"
                       "\"record\":{\"version\":2,\"recordSha256\":\"" 
                       "abababababababababababababababababababababababababababababababab\"}}";
    struct rpc_answer ok = {.status = 200, .fmt = RPC_JSON, .body = (char *)body, .len = strlen(body)};
    ui_ring_note(r, "00000000000000000000000000000002", "bob", &req, &ok);
    CHECK(ui_ring_snapshot(r, cards, UI_RING_N) == 2);
    CHECK_STR(cards[0].verdict, "record_mismatch");
    CHECK_STR(cards[0].tier, "process");
    CHECK(cards[0].duration_ms == 7);
    CHECK(strstr(cards[0].card, "record mismatch: code may have run") != NULL);
    CHECK(strstr(cards[0].card, "withheld (13 bytes stdout") != NULL);
    CHECK(strstr(cards[0].card, "SECRET") == NULL);
    CHECK_STR(cards[1].verdict, "refused"); /* newest first */

    /* Garbage in a 200 (cannot come from rpc_run, but fail safe) is carded, not trusted. */
    struct rpc_answer bad = {.status = 200, .fmt = RPC_JSON, .body = "{", .len = 1};
    ui_ring_note(r, "", "", &req, &bad);
    CHECK(ui_ring_snapshot(r, cards, 1) == 1 && strcmp(cards[0].verdict, "transport_error") == 0);
    ui_ring_note(r, "x", "y", NULL, &bad); /* no decoded request: nothing recorded */
    CHECK(ui_ring_snapshot(r, cards, UI_RING_N) == 3);

    /* Bounded: the oldest fall out. */
    char rid[33];
    for (int i = 0; i < UI_RING_N + 3; i++) {
        snprintf(rid, sizeof rid, "%032d", 100 + i);
        note_refusal(r, rid, "kernel");
    }
    CHECK(ui_ring_snapshot(r, cards, UI_RING_N + 4) == UI_RING_N);
    snprintf(rid, sizeof rid, "%032d", 100 + UI_RING_N + 2);
    CHECK_STR(cards[0].request_id, rid);
    snprintf(rid, sizeof rid, "%032d", 100 + 3);
    CHECK_STR(cards[UI_RING_N - 1].request_id, rid);
    free(cards);
    ui_ring_free(r);
}

/* A project answer with a PNG chart: the card (and so the page) shows the image only as a count
 * and a size, never its bytes or the step output. */
static void test_image_artifact(void)
{
    struct ui_ring *r = ui_ring_new();
    CHECK(r != NULL);
    Plimsoll__V1__ProjectRun pj = PLIMSOLL__V1__PROJECT_RUN__INIT;
    char *steps[] = {"python3 main.py"};
    pj.steps = steps;
    pj.n_steps = 1;
    Plimsoll__V1__RunRequest req = PLIMSOLL__V1__RUN_REQUEST__INIT;
    req.protocol = 3;
    req.minimum_isolation = "";
    req.payload_case = PLIMSOLL__V1__RUN_REQUEST__PAYLOAD_PROJECT;
    req.project = &pj;
    /* plot.png: a PNG signature and 8 more bytes; notes.txt: "SECRET"; stdout "SECRET_OUTPUT" */
    const char *body = "{\"sandbox\":\"fake\",\"isolation\":\"container\",\"durationMs\":\"9\","
                       "\"project\":{\"outcome\":\"PROJECT_OUTCOME_COMPLETED\",\"steps\":[{\"command\":"
                       "\"python3 main.py\",\"stdout\":\"U0VDUkVUX09VVFBVVA==\"}],\"artifacts\":["
                       "{\"path\":\"plot.png\",\"content\":\"iVBORw0KGgoAAAANSUhEUg==\"},"
                       "{\"path\":\"notes.txt\",\"content\":\"U0VDUkVU\"}]},"
                       "\"record\":{\"version\":2,\"recordSha256\":\""
                       "abababababababababababababababababababababababababababababababab\"}}";
    struct rpc_answer ans = {.status = 200, .fmt = RPC_JSON, .body = (char *)body, .len = strlen(body)};
    ui_ring_note(r, "00000000000000000000000000000009", "carol", &req, &ans);
    struct ui_run_card card;
    CHECK(ui_ring_snapshot(r, &card, 1) == 1);
    CHECK(strstr(card.card, "artifacts:       2, 22 bytes, 1 image (16 bytes)") != NULL);
    CHECK(strstr(card.card, "SECRET") == NULL);
    CHECK(strstr(card.card, "PNG") == NULL && strstr(card.card, "iVBOR") == NULL);
    ui_ring_free(r);
}

int main(void)
{
    test_image_artifact();
    test_html();
    test_verdict();
    test_ring();
    return unit_done();
}
