/* placement_fake.c: the fake daemons of placement_fake.h. A success carries a record computed the
 * way a daemon computes it (the digests of the request received and the result sent), so the
 * client's checks pass on it exactly as on a real answer. */
#include <stdlib.h>
#include <string.h>

#include "../core/base64.h"
#include "../wire/convert.h"
#include "../wire/json_codec.h"
#include "placement_fake.h"

static int answer_json(struct cli_http_answer *a, long status, const char *rid, char *body)
{
    a->status = status;
    a->content_type = strdup("application/json");
    a->request_id_echo = strdup(rid);
    a->request_id_n = 1;
    a->body = body;
    a->body_len = strlen(body);
    return 0;
}

static int answer_msg(struct cli_http_answer *a, const char *rid, const ProtobufCMessage *m)
{
    size_t n = 0;
    return answer_json(a, 200, rid, wire_json_encode(m, &n));
}

static int describe(struct fake *f, const char *rid, struct cli_http_answer *a)
{
    f->describes++;
    Plimsoll__V1__DescribeResponse d = PLIMSOLL__V1__DESCRIBE_RESPONSE__INIT;
    Plimsoll__V1__PayloadEnvironment env = PLIMSOLL__V1__PAYLOAD_ENVIRONMENT__INIT;
    char *langs[1] = {"javascript"};
    env.identity = (char *)(f->env_identity ? f->env_identity : "");
    env.languages = langs;
    env.n_languages = 1;
    d.sandbox = (char *)f->provider;
    d.isolation = (char *)f->isolation;
    d.protocol = CLI_PROTOCOL;
    d.supports_project = f->project;
    d.supports_module = f->module;
    d.supports_sessions = f->sessions;
    d.supports_javascript_grants = f->js_grants;
    d.supports_project_grants = f->project_grants;
    d.javascript_environment = &env;
    d.project_environment = f->project ? &env : NULL;
    d.module_environment = f->module ? &env : NULL;
    d.session_environment = f->sessions ? &env : NULL;
    return answer_msg(a, rid, &d.base);
}

static int refuse(int reason, const char *rid, struct cli_http_answer *a)
{
    Plimsoll__V1__NotDispatched nd = PLIMSOLL__V1__NOT_DISPATCHED__INIT;
    nd.reason = (Plimsoll__V1__NotDispatchedReason)reason;
    uint8_t raw[16];
    size_t n = plimsoll__v1__not_dispatched__pack(&nd, raw);
    char b64[32];
    b64[b64_encode(raw, n, b64, B64_STD, true)] = '\0';
    const char *code = reason == PLM_REFUSAL_PERMISSION ? "permission_denied"
                       : reason == PLM_REFUSAL_CAPACITY ? "resource_exhausted"
                       : reason == PLM_REFUSAL_UNSUPPORTED ? "unimplemented"
                       : reason == PLM_REFUSAL_ISOLATION ? "failed_precondition"
                                                         : "invalid_argument";
    long status = reason == PLM_REFUSAL_PERMISSION ? 403 : reason == PLM_REFUSAL_CAPACITY ? 429 : 400;
    char *body = NULL;
    if (asprintf(&body, "{\"code\":\"%s\",\"message\":\"refused by the fake\",\"details\":[{\"type\":"
                        "\"plimsoll.v1.NotDispatched\",\"value\":\"%s\"}]}", code, b64) < 0)
        return -1;
    return answer_json(a, status, rid, body);
}

/* A success for req, its record stamped as a daemon stamps it. */
static int run_ok(struct fake *f, const Plimsoll__V1__RunRequest *req, const char *rid, struct cli_http_answer *a)
{
    Plimsoll__V1__RunResponse resp = PLIMSOLL__V1__RUN_RESPONSE__INIT;
    Plimsoll__V1__JavaScriptResult js = PLIMSOLL__V1__JAVA_SCRIPT_RESULT__INIT;
    Plimsoll__V1__ProjectResult pr = PLIMSOLL__V1__PROJECT_RESULT__INIT;
    Plimsoll__V1__ModuleResult mr = PLIMSOLL__V1__MODULE_RESULT__INIT;
    resp.sandbox = (char *)f->provider;
    resp.isolation = (char *)(f->answer == FAKE_DOWNGRADE ? "container" : f->isolation);
    resp.environment = (char *)(f->env_identity ? f->env_identity : "");
    if (req->payload_case == PLIMSOLL__V1__RUN_REQUEST__PAYLOAD_PROJECT) {
        pr.outcome = PLIMSOLL__V1__PROJECT_OUTCOME__PROJECT_OUTCOME_COMPLETED;
        resp.result_case = PLIMSOLL__V1__RUN_RESPONSE__RESULT_PROJECT;
        resp.project = &pr;
    } else if (req->payload_case == PLIMSOLL__V1__RUN_REQUEST__PAYLOAD_MODULE) {
        mr.outcome = PLIMSOLL__V1__PROJECT_OUTCOME__PROJECT_OUTCOME_COMPLETED;
        resp.result_case = PLIMSOLL__V1__RUN_RESPONSE__RESULT_MODULE;
        resp.module = &mr;
    } else {
        js.stdout.data = (uint8_t *)f->url;
        js.stdout.len = strlen(f->url);
        resp.result_case = PLIMSOLL__V1__RUN_RESPONSE__RESULT_JAVASCRIPT;
        resp.javascript = &js;
    }
    Plimsoll__V1__RunRecord rec = PLIMSOLL__V1__RUN_RECORD__INIT;
    char req_hex[PLM_HEX_SHA256], res_hex[PLM_HEX_SHA256], rec_hex[PLM_HEX_SHA256];
    struct plm_err err = {0};
    struct wire_request_view rv = {0};
    struct wire_result_view sv = {0};
    if (wire_request_view(req, &rv, &err) < 0 || wire_result_view(&resp, &sv, &err) < 0) {
        wire_request_view_done(&rv);
        return answer_json(a, 500, rid, strdup("{\"code\":\"internal\",\"message\":\"fake: view\"}"));
    }
    rec_request_digest(&rv.req, req_hex);
    rec_result_digest(&sv.res, res_hex);
    wire_request_view_done(&rv);
    wire_result_view_done(&sv);
    rec.version = 2;
    rec.request_sha256 = req_hex;
    rec.result_sha256 = res_hex;
    rec.provider = resp.sandbox;
    rec.isolation = resp.isolation;
    rec.environment = resp.environment;
    rec.policy = "fake";
    struct plm_record pr_view;
    wire_record_view(&rec, &pr_view);
    rec_record_digest(&pr_view, rec_hex);
    rec.record_sha256 = rec_hex;
    resp.record = &rec;
    return answer_msg(a, rid, &resp.base);
}

static void note_floor(struct fake *f, const char *floor)
{
    if (f->n_floors < 8)
        snprintf(f->floors[f->n_floors++], sizeof f->floors[0], "%s", floor ? floor : "");
}

static int run(struct fake *f, const char *body, size_t len, const char *rid, struct cli_http_answer *a)
{
    f->runs++;
    struct plm_err err = {0};
    Plimsoll__V1__RunRequest *req =
        (Plimsoll__V1__RunRequest *)wire_json_decode(&plimsoll__v1__run_request__descriptor, body, len, &err);
    if (!req)
        return answer_json(a, 400, rid, strdup("{\"code\":\"invalid_argument\",\"message\":\"fake: undecodable\"}"));
    note_floor(f, req->minimum_isolation);
    int r;
    if (f->answer == FAKE_REFUSE)
        r = refuse(f->reason, rid, a);
    else if (f->answer == FAKE_UNMARKED)
        r = answer_json(a, 500, rid, strdup("{\"code\":\"internal\",\"message\":\"fell over mid-run\"}"));
    else
        r = run_ok(f, req, rid, a);
    protobuf_c_message_free_unpacked(&req->base, NULL);
    return r;
}

static int open_session(struct fake *f, const char *body, size_t len, const char *rid, struct cli_http_answer *a)
{
    f->opens++;
    struct plm_err err = {0};
    Plimsoll__V1__OpenSessionRequest *req = (Plimsoll__V1__OpenSessionRequest *)wire_json_decode(
        &plimsoll__v1__open_session_request__descriptor, body, len, &err);
    if (!req)
        return answer_json(a, 400, rid, strdup("{\"code\":\"invalid_argument\",\"message\":\"fake: undecodable\"}"));
    note_floor(f, req->minimum_isolation);
    protobuf_c_message_free_unpacked(&req->base, NULL);
    if (f->answer == FAKE_REFUSE)
        return refuse(f->reason, rid, a);
    char id[33], fp[PLM_HEX_SHA256];
    memset(id, 'a', 32);
    id[32] = '\0';
    rec_session_fingerprint(id, fp);
    snprintf(f->session_fp, sizeof f->session_fp, "%s", fp);
    f->session_calls = 0;
    f->session_last[0] = '\0';
    Plimsoll__V1__OpenSessionResponse o = PLIMSOLL__V1__OPEN_SESSION_RESPONSE__INIT;
    o.session_id = id;
    o.session = fp;
    o.sandbox = (char *)f->provider;
    o.isolation = (char *)f->isolation;
    o.expires_unix_ms = 1790000000000;
    o.idle_timeout_ms = 60000;
    return answer_msg(a, rid, &o.base);
}

/* One cell: its stdout is the code itself, the record chained after the session's last. */
static int session_run(struct fake *f, const char *body, size_t len, const char *rid, struct cli_http_answer *a)
{
    struct plm_err err = {0};
    Plimsoll__V1__SessionRunRequest *req = (Plimsoll__V1__SessionRunRequest *)wire_json_decode(
        &plimsoll__v1__session_run_request__descriptor, body, len, &err);
    if (!req || req->payload_case != PLIMSOLL__V1__SESSION_RUN_REQUEST__PAYLOAD_CELL) {
        if (req)
            protobuf_c_message_free_unpacked(&req->base, NULL);
        return answer_json(a, 400, rid, strdup("{\"code\":\"invalid_argument\",\"message\":\"fake: not a cell\"}"));
    }
    Plimsoll__V1__CellResult cell = PLIMSOLL__V1__CELL_RESULT__INIT;
    cell.stdout.data = (uint8_t *)req->cell->code;
    cell.stdout.len = strlen(req->cell->code);
    Plimsoll__V1__RunResponse run = PLIMSOLL__V1__RUN_RESPONSE__INIT;
    run.sandbox = (char *)f->provider;
    run.isolation = (char *)f->isolation;
    run.result_case = PLIMSOLL__V1__RUN_RESPONSE__RESULT_CELL;
    run.cell = &cell;
    char req_hex[PLM_HEX_SHA256], res_hex[PLM_HEX_SHA256], rec_hex[PLM_HEX_SHA256];
    struct wire_request_view rv = {0};
    struct wire_result_view sv = {0};
    int ok = wire_session_request_view(req, &rv, &err) == 0 && wire_result_view(&run, &sv, &err) == 0;
    if (ok) {
        rec_request_digest(&rv.req, req_hex);
        rec_result_digest(&sv.res, res_hex);
        wire_result_view_done(&sv);
    }
    wire_request_view_done(&rv);
    if (!ok) {
        protobuf_c_message_free_unpacked(&req->base, NULL);
        return answer_json(a, 500, rid, strdup("{\"code\":\"internal\",\"message\":\"fake: view\"}"));
    }
    Plimsoll__V1__RunRecord rec = PLIMSOLL__V1__RUN_RECORD__INIT;
    rec.version = 2;
    rec.request_sha256 = req_hex;
    rec.result_sha256 = res_hex;
    rec.provider = run.sandbox;
    rec.isolation = run.isolation;
    rec.environment = "";
    rec.policy = "fake";
    rec.session = f->session_fp;
    rec.sequence = f->session_calls + 1;
    char previous[PLM_HEX_SHA256];
    snprintf(previous, sizeof previous, "%s", f->session_last); /* f->session_last moves on below */
    rec.previous_sha256 = previous;
    struct plm_record view;
    wire_record_view(&rec, &view);
    rec_record_digest(&view, rec_hex);
    rec.record_sha256 = rec_hex;
    run.record = &rec;
    f->session_calls++;
    snprintf(f->session_last, sizeof f->session_last, "%s", rec_hex);
    Plimsoll__V1__SessionRunResponse sr = PLIMSOLL__V1__SESSION_RUN_RESPONSE__INIT;
    sr.run = &run;
    int r = answer_msg(a, rid, &sr.base);
    protobuf_c_message_free_unpacked(&req->base, NULL);
    return r;
}

static int close_session(struct fake *f, const char *rid, struct cli_http_answer *a)
{
    Plimsoll__V1__CloseSessionResponse c = PLIMSOLL__V1__CLOSE_SESSION_RESPONSE__INIT;
    c.session = f->session_fp;
    c.calls = f->session_calls;
    c.last_record_sha256 = f->session_last;
    c.ended = PLIMSOLL__V1__SESSION_END__SESSION_END_CLOSED;
    return answer_msg(a, rid, &c.base);
}

static int fake_post(void *ctx, const struct cli_conn *c, const char *path, const char *body, size_t len,
                     const char *rid, struct cli_http_answer *ans, struct plm_err *err)
{
    struct fake_net *net = ctx;
    struct fake *f = NULL;
    for (size_t i = 0; i < net->n && !f; i++)
        if (strcmp(net->f[i].url, c->url) == 0)
            f = &net->f[i];
    if (!f || f->answer == FAKE_DOWN) {
        ans->not_sent = true;
        return plm_fail(err, 0, PLM_E_UNAVAILABLE, "%s: connection refused", c->url);
    }
    snprintf(f->last_token, sizeof f->last_token, "%s", c->token ? c->token : "");
    if (strstr(path, "/Describe"))
        return describe(f, rid, ans);
    if (f->answer == FAKE_LOST) {
        f->runs++;
        return plm_fail(err, 0, PLM_E_UNAVAILABLE, "%s: connection reset", c->url);
    }
    if (strstr(path, "/OpenSession"))
        return open_session(f, body, len, rid, ans);
    if (strstr(path, "/SessionRun"))
        return session_run(f, body, len, rid, ans);
    if (strstr(path, "/CloseSession"))
        return close_session(f, rid, ans);
    if (strstr(path, "/Run"))
        return run(f, body, len, rid, ans);
    return answer_json(ans, 404, rid, strdup("{\"code\":\"unimplemented\",\"message\":\"fake: no such method\"}"));
}

void fake_net_init(struct fake_net *net, struct fake *f, size_t n)
{
    net->f = f;
    net->n = n;
    net->t = (struct cli_transport){.post = fake_post, .ctx = net};
}
