/* call.c: one checked Run of a JavaScript snippet and one Describe, shared by `plimsoll run`,
 * `plimsoll describe` and `plimsoll mcp` so the request, the checks and the card exist once.
 * Owns: the request message we encode (the only thing the record check trusts), the request id,
 * the decoded answer (freed by cli_run_call_done / cli_describe_call_done).
 * Trusts: nothing in the answer until check.c has passed it.
 * Invariant: the request digest is recomputed from the very message we encoded and sent; the
 * caller's token is not kept here (the caller owns and wipes it). */
#include <stdlib.h>
#include <string.h>

#include "../core/cleanup.h"
#include "../wire/json_codec.h"
#include "client.h"

#define RUN_PATH "/plimsoll.v1.SandboxService/Run"
#define DESCRIBE_PATH "/plimsoll.v1.SandboxService/Describe"

/* Sends req (fully built by the caller, floor already checked) and checks the answer. */
static void run_request(const struct cli_conn *conn, const Plimsoll__V1__RunRequest *req, enum plm_tier floor_tier,
                        struct cli_run_call *call)
{
    struct plm_err err = {0};
    call->rep.request_id = call->rid;
    call->rep.floor = call->floor;
    call->rep.o = &call->o;
    size_t body_len = 0;
    cleanup_free char *body = wire_json_encode(&req->base, &body_len);
    if (!body || cli_request_id(call->rid) < 0) {
        call->o.verdict = CLI_V_TRANSPORT;
        call->o.not_sent = true;
        snprintf(call->o.message, sizeof call->o.message, "%s", body ? "getrandom failed" : "out of memory");
        call->rep.request_id = NULL;
        call->rep.exit_status = CLI_EXIT_TRANSPORT;
        return;
    }

    struct cli_http_answer ans;
    int r = cli_http_post(conn, RUN_PATH, body, body_len, call->rid, &ans, &err);
    if (r < 0) {
        call->o.verdict = CLI_V_TRANSPORT;
        call->o.not_sent = ans.not_sent;
        snprintf(call->o.message, sizeof call->o.message, "%s", err.msg);
    } else if (cli_classify_http(call->rid, &ans, &call->o)) {
        call->resp = (Plimsoll__V1__RunResponse *)wire_json_decode(&plimsoll__v1__run_response__descriptor,
                                                                   ans.body, ans.body_len, &err);
        if (!call->resp) {
            call->o.verdict = CLI_V_TRANSPORT;
            snprintf(call->o.message, sizeof call->o.message, "malformed response: %.480s", err.msg);
        } else {
            cli_check_answer(req, call->resp, floor_tier, &call->o);
        }
    }
    call->rep.elapsed_s = ans.elapsed_s;
    cli_http_answer_done(&ans);

    const Plimsoll__V1__RunResponse *resp = call->resp;
    call->checked = resp && (call->o.verdict == CLI_V_RAN || call->o.verdict == CLI_V_EVIDENCE_MISMATCH);
    const Plimsoll__V1__JavaScriptResult *jr =
        resp && resp->result_case == PLIMSOLL__V1__RUN_RESPONSE__RESULT_JAVASCRIPT ? resp->javascript : NULL;
    const Plimsoll__V1__ProjectResult *pr =
        resp && resp->result_case == PLIMSOLL__V1__RUN_RESPONSE__RESULT_PROJECT ? resp->project : NULL;
    const Plimsoll__V1__ModuleResult *mr =
        resp && resp->result_case == PLIMSOLL__V1__RUN_RESPONSE__RESULT_MODULE ? resp->module : NULL;
    call->module = call->checked ? mr : NULL;
    call->js = call->checked ? jr : NULL;
    call->project = call->checked ? pr : NULL;
    call->rep.resp = resp;
    call->rep.output_withheld = resp && !call->checked;
    if (req->payload_case == PLIMSOLL__V1__RUN_REQUEST__PAYLOAD_PROJECT)
        call->rep.exit_status = cli_exit_status_project(&call->o, pr);
    else if (req->payload_case == PLIMSOLL__V1__RUN_REQUEST__PAYLOAD_MODULE)
        call->rep.exit_status = cli_exit_status_module(&call->o, mr);
    else
        call->rep.exit_status = cli_exit_status(&call->o, jr);
}

/* What every run call starts with: a fresh call and a request that states the protocol, the
 * floor and the timeout. -1 for a floor that is not one (judged locally by every caller before
 * this; nothing is sent). */
static int run_begin(struct cli_run_call *call, const char *floor, int32_t timeout_ms, Plimsoll__V1__RunRequest *req,
                     enum plm_tier *floor_tier)
{
    memset(call, 0, sizeof *call);
    call->floor = floor ? floor : "";
    *floor_tier = PLM_TIER_UNKNOWN;
    if (tier_parse_floor(call->floor, floor_tier, NULL) < 0)
        return -1;
    *req = (Plimsoll__V1__RunRequest)PLIMSOLL__V1__RUN_REQUEST__INIT;
    req->protocol = CLI_PROTOCOL;
    req->minimum_isolation = (char *)call->floor;
    req->timeout_ms = timeout_ms;
    return 0;
}

int cli_run_javascript(const struct cli_conn *conn, const char *code, const char *grant, const char *floor,
                       int32_t timeout_ms, struct cli_run_call *call)
{
    Plimsoll__V1__RunRequest req;
    enum plm_tier floor_tier;
    if (run_begin(call, floor, timeout_ms, &req, &floor_tier) < 0)
        return -1;
    Plimsoll__V1__JavaScriptRun js = PLIMSOLL__V1__JAVA_SCRIPT_RUN__INIT;
    js.code = (char *)code;
    js.grant_profile = (char *)(grant ? grant : "");
    req.payload_case = PLIMSOLL__V1__RUN_REQUEST__PAYLOAD_JAVASCRIPT;
    req.javascript = &js;
    run_request(conn, &req, floor_tier, call);
    return 0;
}

int cli_run_project(const struct cli_conn *conn, Plimsoll__V1__ProjectRun *project, const char *floor,
                    int32_t timeout_ms, struct cli_run_call *call)
{
    Plimsoll__V1__RunRequest req;
    enum plm_tier floor_tier;
    if (run_begin(call, floor, timeout_ms, &req, &floor_tier) < 0)
        return -1;
    req.payload_case = PLIMSOLL__V1__RUN_REQUEST__PAYLOAD_PROJECT;
    req.project = project;
    run_request(conn, &req, floor_tier, call);
    return 0;
}

int cli_run_module(const struct cli_conn *conn, Plimsoll__V1__ModuleRun *module, const char *floor,
                   int32_t timeout_ms, struct cli_run_call *call)
{
    Plimsoll__V1__RunRequest req;
    enum plm_tier floor_tier;
    if (run_begin(call, floor, timeout_ms, &req, &floor_tier) < 0)
        return -1;
    req.payload_case = PLIMSOLL__V1__RUN_REQUEST__PAYLOAD_MODULE;
    req.module = module;
    run_request(conn, &req, floor_tier, call);
    return 0;
}

void cli_run_call_done(struct cli_run_call *call)
{
    call->module = NULL;
    if (call->resp)
        protobuf_c_message_free_unpacked(&call->resp->base, NULL);
    call->resp = NULL;
    call->js = NULL;
    call->project = NULL;
    call->rep.resp = NULL;
}

Plimsoll__V1__DescribeResponse *cli_describe_call(const struct cli_conn *conn, struct cli_outcome *o)
{
    memset(o, 0, sizeof *o);
    struct plm_err err = {0};
    char rid[33];
    if (cli_request_id(rid) < 0) {
        o->verdict = CLI_V_TRANSPORT;
        o->not_sent = true;
        snprintf(o->message, sizeof o->message, "getrandom failed");
        return NULL;
    }
    struct cli_http_answer ans;
    if (cli_http_post(conn, DESCRIBE_PATH, "{}", 2, rid, &ans, &err) < 0) {
        o->verdict = CLI_V_TRANSPORT;
        o->not_sent = ans.not_sent;
        snprintf(o->message, sizeof o->message, "transport error: %.480s", err.msg);
        return NULL;
    }
    Plimsoll__V1__DescribeResponse *d = NULL;
    if (cli_classify_http(rid, &ans, o)) {
        d = (Plimsoll__V1__DescribeResponse *)wire_json_decode(&plimsoll__v1__describe_response__descriptor,
                                                               ans.body, ans.body_len, &err);
        if (!d) {
            o->verdict = CLI_V_TRANSPORT;
            snprintf(o->message, sizeof o->message, "malformed response: %.480s", err.msg);
        }
    }
    cli_http_answer_done(&ans);
    return d;
}
