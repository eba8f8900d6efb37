/* ui_ring.c: the in-memory ring of the last run cards (see ui_ring.h).
 * Trusts: the answer rpc_run built (our own bytes); it is still decoded and checked with the
 * client's code so the card says exactly what `plimsoll run` would say about it.
 * Invariant: an entry never holds guest output, code or a token; memory is fixed at
 * UI_RING_N entries. */
#include "ui_ring.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../card/card.h"
#include "../core/clock.h"
#include "../wire/json_codec.h"

struct ui_ring {
    pthread_mutex_t mu;
    struct ui_run_card v[UI_RING_N];
    size_t next, n;
};

struct ui_ring *ui_ring_new(void)
{
    struct ui_ring *r = calloc(1, sizeof *r);
    if (r && pthread_mutex_init(&r->mu, NULL) != 0) {
        free(r);
        return NULL;
    }
    return r;
}

void ui_ring_free(struct ui_ring *r)
{
    if (!r)
        return;
    pthread_mutex_destroy(&r->mu);
    free(r);
}

static Plimsoll__V1__RunResponse *decode_answer(const struct rpc_answer *ans)
{
    struct plm_err err = {0};
    if (ans->fmt == RPC_JSON)
        return (Plimsoll__V1__RunResponse *)wire_json_decode(&plimsoll__v1__run_response__descriptor, ans->body,
                                                             ans->len, &err);
    return plimsoll__v1__run_response__unpack(NULL, ans->len, (const uint8_t *)ans->body);
}

static void copy(char *dst, size_t n, const char *s) { snprintf(dst, n, "%s", s ? s : ""); }

void ui_ring_note(struct ui_ring *r, const char *request_id, const char *caller, const Plimsoll__V1__RunRequest *sent,
                  const struct rpc_answer *ans)
{
    if (!r || !sent || !ans->body)
        return;
    struct ui_run_card *c = calloc(1, sizeof *c);
    if (!c)
        return; /* the page misses one card; the run itself is unaffected */
    c->unix_ms = clock_unix_ms();
    copy(c->request_id, sizeof c->request_id, request_id);
    copy(c->caller, sizeof c->caller, caller);
    copy(c->floor, sizeof c->floor, sent->minimum_isolation);
    c->duration_ms = -1;

    struct cli_outcome o = {0};
    Plimsoll__V1__RunResponse *resp = NULL;
    if (ans->status == 200) {
        resp = decode_answer(ans);
        if (!resp) {
            o.verdict = CLI_V_TRANSPORT;
            snprintf(o.message, sizeof o.message, "the daemon's own answer did not decode");
        } else {
            enum plm_tier floor = PLM_TIER_UNKNOWN;
            tier_parse_floor(sent->minimum_isolation ? sent->minimum_isolation : "", &floor, NULL);
            o.bound = true;
            cli_check_answer(sent, resp, floor, &o);
        }
    } else {
        struct cli_error_answer e;
        cli_parse_error(ans->status, ans->body, ans->len, &e);
        cli_classify_error(&e, true, ans->pre_handler ? plm_refusal_name(ans->header_reason) : NULL, &o);
    }
    const Plimsoll__V1__JavaScriptResult *js =
        resp && resp->result_case == PLIMSOLL__V1__RUN_RESPONSE__RESULT_JAVASCRIPT ? resp->javascript : NULL;
    bool checked = resp && (o.verdict == CLI_V_RAN || o.verdict == CLI_V_EVIDENCE_MISMATCH);
    struct cli_run_report rep = {.request_id = c->request_id[0] ? c->request_id : NULL,
                                 .floor = c->floor,
                                 .o = &o,
                                 .resp = resp,
                                 .output_withheld = resp && !checked,
                                 .elapsed_s = -1, /* no round trip seen from inside the daemon */
                                 .exit_status = sent->payload_case == PLIMSOLL__V1__RUN_REQUEST__PAYLOAD_PROJECT
                                                    ? cli_exit_status_project(&o, resp ? resp->project : NULL)
                                                    : cli_exit_status(&o, js)};
    copy(c->verdict, sizeof c->verdict, cli_verdict_name(o.verdict));
    if (resp) {
        copy(c->tier, sizeof c->tier, resp->isolation);
        c->duration_ms = resp->duration_ms;
        if (resp->record)
            copy(c->record_sha256, sizeof c->record_sha256, resp->record->record_sha256);
    }
    FILE *m = fmemopen(c->card, sizeof c->card - 1, "w");
    if (m) {
        cli_card_print(m, &rep);
        fclose(m);
    }
    if (resp)
        protobuf_c_message_free_unpacked(&resp->base, NULL);

    pthread_mutex_lock(&r->mu);
    r->v[r->next] = *c;
    r->next = (r->next + 1) % UI_RING_N;
    if (r->n < UI_RING_N)
        r->n++;
    pthread_mutex_unlock(&r->mu);
    free(c);
}

size_t ui_ring_snapshot(struct ui_ring *r, struct ui_run_card *out, size_t max)
{
    if (!r)
        return 0;
    pthread_mutex_lock(&r->mu);
    size_t n = r->n < max ? r->n : max;
    for (size_t i = 0; i < n; i++)
        out[i] = r->v[(r->next + UI_RING_N - 1 - i) % UI_RING_N];
    pthread_mutex_unlock(&r->mu);
    return n;
}
