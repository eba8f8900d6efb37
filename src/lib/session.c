/* session.c: one session as a client holds it (for `plimsoll repl` and `plimsoll mcp`): the
 * record chain checked as a client must (docs/sessions.md), a card line per cell, the close summary
 * checked against what we saw.
 * Owns: the session id (kept in memory only, never printed), the chain (calls, last digest), the
 * messages we encode (the only things the request digests are recomputed from).
 * Trusts: nothing in an answer until its record checked; after an answer that could not be
 * checked nothing more is sent on the session (§5.3) except the close. */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../core/cleanup.h"
#include "../core/limits.h"
#include "../wire/convert.h"
#include "../wire/json_codec.h"
#include "client.h"

#define SVC "/plimsoll.v1.SandboxService/"

/* POSTs m; on a bound 200 decodes it as `d`. Returns the decoded message or NULL with *o saying
 * what happened, and the raw error body in *err_body (malloc'd) for detail parsing. */
static ProtobufCMessage *post(struct cli_session *r, const char *proc, const ProtobufCMessage *m,
                              const ProtobufCMessageDescriptor *d, struct cli_outcome *o, char **err_body)
{
    *err_body = NULL;
    memset(o, 0, sizeof *o);
    size_t len = 0;
    cleanup_free char *body = wire_json_encode(m, &len);
    char rid[33], path[96];
    struct plm_err err = {0};
    if (!body || cli_request_id(rid) < 0) {
        o->verdict = CLI_V_TRANSPORT;
        snprintf(o->message, sizeof o->message, "out of memory or randomness");
        return NULL;
    }
    snprintf(path, sizeof path, SVC "%s", proc);
    struct cli_http_answer ans;
    ProtobufCMessage *out = NULL;
    if (cli_http_post(&r->conn, path, body, len, rid, &ans, &err) < 0) {
        o->verdict = CLI_V_TRANSPORT;
        o->not_sent = ans.not_sent;
        snprintf(o->message, sizeof o->message, "%s", err.msg);
        return NULL;
    }
    if (cli_classify_http(rid, &ans, o)) {
        out = wire_json_decode(d, ans.body, ans.body_len, &err);
        if (!out) {
            o->verdict = CLI_V_TRANSPORT;
            snprintf(o->message, sizeof o->message, "malformed response: %.400s", err.msg);
        }
    } else if (o->bound && ans.body) {
        *err_body = strdup(ans.body);
    }
    cli_http_answer_done(&ans);
    return out;
}

/* §5.2: the record check, then the chain. */
static int check_chain(struct cli_session *r, const Plimsoll__V1__SessionRunRequest *sent, const Plimsoll__V1__RunRecord *m,
                       const Plimsoll__V1__RunResponse *resp, char *why, size_t n)
{
    struct plm_record rec;
    wire_record_view(m, &rec);
    struct wire_request_view v;
    struct plm_err err = {0};
    if (wire_session_request_view(sent, &v, &err) < 0)
        return snprintf(why, n, "out of memory"), -1;
    char dg[PLM_HEX_SHA256];
    rec_request_digest(&v.req, dg);
    wire_request_view_done(&v);
    if (strcmp(dg, rec.request_sha256))
        return snprintf(why, n, "request digest differs from the request sent"), -1;
    if (resp) {
        struct wire_result_view rv;
        if (rec.version != 2 || wire_result_view(resp, &rv, &err) < 0)
            return snprintf(why, n, "an answered call must carry a version 2 record"), -1;
        rec_result_digest(&rv.res, dg);
        wire_result_view_done(&rv);
        if (strcmp(dg, rec.result_sha256))
            return snprintf(why, n, "result digest differs from the result"), -1;
        if (strcmp(rec.provider, resp->sandbox ? resp->sandbox : "") ||
            strcmp(rec.isolation, resp->isolation ? resp->isolation : ""))
            return snprintf(why, n, "record evidence differs from the answer"), -1;
    } else if (rec.version != 3 || *rec.result_sha256 || !cli_connect_code_valid(rec.unanswered)) {
        return snprintf(why, n, "an unanswered call must carry a version 3 record with a Connect code"), -1;
    }
    rec_record_digest(&rec, dg);
    if (strcmp(dg, rec.record_sha256))
        return snprintf(why, n, "record digest does not recompute"), -1;
    if (r->floor_tier != PLM_TIER_UNKNOWN && !tier_meets(tier_parse(rec.isolation), r->floor_tier))
        return snprintf(why, n, "the record's tier %s is below the floor %s", rec.isolation, r->floor), -1;
    if (strcmp(rec.session, r->fp) || rec.sequence != r->calls + 1 || strcmp(rec.previous_sha256, r->last))
        return snprintf(why, n, "chain broken: expected call %llu after %.12s",
                        (unsigned long long)r->calls + 1, r->last[0] ? r->last : "(none)"), -1;
    r->calls++;
    snprintf(r->last, sizeof r->last, "%s", rec.record_sha256);
    return 0;
}

/* An error answer: an UnansweredCall record is checked and chained; a refusal is reported. */
static int cell_error(struct cli_session *r, const Plimsoll__V1__SessionRunRequest *sent, const struct cli_outcome *o,
                      const char *body)
{
    cli_cleanup_json json_t *j = body ? json_loads(body, 0, NULL) : NULL;
    size_t i;
    json_t *d;
    json_array_foreach(json_object_get(j, "details"), i, d) {
        const char *type = json_string_value(json_object_get(d, "type"));
        const char *val = json_string_value(json_object_get(d, "value"));
        if (!type || !val || strcmp(type, "plimsoll.v1.UnansweredCall"))
            continue;
        uint8_t *raw = NULL;
        size_t n = 0;
        if (cli_b64_decode(val, strlen(val), &raw, &n) < 0)
            break;
        Plimsoll__V1__UnansweredCall *u = plimsoll__v1__unanswered_call__unpack(NULL, n, raw);
        free(raw);
        char why[160] = "undecodable";
        int rc = u && u->record ? check_chain(r, sent, u->record, NULL, why, sizeof why) : -1;
        if (u)
            plimsoll__v1__unanswered_call__free_unpacked(u, NULL);
        if (rc < 0) {
            fprintf(r->err, "[cell %llu] unanswered call whose record does not check: %s\n",
                    (unsigned long long)r->calls + 1, why);
            r->broken = true;
            return CLI_EXIT_RECORD;
        }
        fprintf(r->err, "[cell %llu] %s (may have run; chained as unanswered) · record %.12s\n",
                (unsigned long long)r->calls, o->code, r->last);
        return CLI_EXIT_SERVER;
    }
    if (o->verdict == CLI_V_REFUSED) {
        char rn[32];
        cli_reason_name(o->refusal, rn, sizeof rn);
        fprintf(r->err, "[refused: %s] %s: ", rn, o->code);
        cli_put_safe(r->err, o->message, "");
        fputc('\n', r->err);
        return CLI_EXIT_REFUSED;
    }
    r->broken = true; /* §5.3: nothing more is sent on this session */
    fprintf(r->err, "[cell %llu] %s, not checkable (%s); no further cells are sent: ", (unsigned long long)r->calls + 1,
            o->code[0] ? o->code : "error", cli_verdict_name(o->verdict));
    cli_put_safe(r->err, o->message, "");
    fputc('\n', r->err);
    return o->verdict == CLI_V_TRANSPORT ? CLI_EXIT_TRANSPORT : CLI_EXIT_SERVER;
}

int cli_session_cell(struct cli_session *r, const char *code)
{
    Plimsoll__V1__CellRun cell = PLIMSOLL__V1__CELL_RUN__INIT;
    cell.language = (char *)r->language;
    cell.code = (char *)code;
    Plimsoll__V1__SessionRunRequest req = PLIMSOLL__V1__SESSION_RUN_REQUEST__INIT;
    req.protocol = CLI_PROTOCOL;
    req.minimum_isolation = (char *)r->floor;
    req.timeout_ms = r->timeout_ms;
    req.session_id = r->id;
    req.payload_case = PLIMSOLL__V1__SESSION_RUN_REQUEST__PAYLOAD_CELL;
    req.cell = &cell;
    struct cli_outcome o;
    cleanup_free char *err_body = NULL;
    cli_cleanup_pb Plimsoll__V1__SessionRunResponse *resp = (void *)post(
        r, "SessionRun", &req.base, &plimsoll__v1__session_run_response__descriptor, &o, &err_body);
    if (!resp)
        return cell_error(r, &req, &o, err_body);
    char why[160];
    const Plimsoll__V1__RunResponse *run = resp->run;
    if (!run || !run->record || run->result_case != PLIMSOLL__V1__RUN_RESPONSE__RESULT_CELL ||
        check_chain(r, &req, run->record, run, why, sizeof why) < 0) {
        if (!run || !run->record || run->result_case != PLIMSOLL__V1__RUN_RESPONSE__RESULT_CELL)
            snprintf(why, sizeof why, "the answer carries no cell result and record");
        fprintf(r->err, "[cell %llu] record mismatch, output withheld: %s\n", (unsigned long long)r->calls + 1, why);
        r->broken = true;
        return CLI_EXIT_RECORD;
    }
    const Plimsoll__V1__CellResult *c = run->cell;
    if (c->stdout.len) /* an empty bytes field may have no buffer, which fwrite must not see */
        fwrite(c->stdout.data, 1, c->stdout.len, r->out);
    fflush(r->out);
    if (c->stderr.len)
        fwrite(c->stderr.data, 1, c->stderr.len, r->err);
    fprintf(r->err, "[cell %llu] exit %d%s%s%s · %s/%s · record %.12s · chain ok\n", (unsigned long long)r->calls,
            c->exit_code, c->timed_out ? " (timed out)" : "", c->interpreter_started ? " · fresh interpreter" : "",
            c->interpreter_ended ? " · interpreter ended" : "", run->sandbox, run->isolation, r->last);
    if (resp->ended) {
        fprintf(r->err, "[session ended: %s]\n", protobuf_c_enum_descriptor_get_value(&plimsoll__v1__session_end__descriptor,
                                                                                   (int)resp->ended)
                                                     ? protobuf_c_enum_descriptor_get_value(
                                                           &plimsoll__v1__session_end__descriptor, (int)resp->ended)->name
                                                     : "?");
        r->broken = true;
    }
    return 0;
}

int cli_session_open(struct cli_session *r, const char *owner)
{
    Plimsoll__V1__OpenSessionRequest req = PLIMSOLL__V1__OPEN_SESSION_REQUEST__INIT;
    req.protocol = CLI_PROTOCOL;
    req.minimum_isolation = (char *)r->floor;
    char *langs[1] = {(char *)r->language};
    req.languages = langs;
    req.n_languages = 1;
    req.owner = (char *)(owner ? owner : "");
    struct cli_outcome o;
    cleanup_free char *err_body = NULL;
    cli_cleanup_pb Plimsoll__V1__OpenSessionResponse *resp =
        (void *)post(r, "OpenSession", &req.base, &plimsoll__v1__open_session_response__descriptor, &o, &err_body);
    r->opened = o;
    if (!resp) {
        fprintf(r->err, "session: the open failed (%s): ", cli_verdict_name(o.verdict));
        cli_put_safe(r->err, o.message, "");
        fputc('\n', r->err);
        return o.verdict == CLI_V_REFUSED ? CLI_EXIT_REFUSED : o.verdict == CLI_V_TRANSPORT ? CLI_EXIT_TRANSPORT : CLI_EXIT_SERVER;
    }
    char fp[PLM_HEX_SHA256];
    rec_session_fingerprint(resp->session_id ? resp->session_id : "", fp);
    bool id_ok = resp->session_id && strlen(resp->session_id) == 32 && strspn(resp->session_id, "0123456789abcdef") == 32;
    if (!id_ok || strcmp(fp, resp->session ? resp->session : "") ||
        (r->floor_tier != PLM_TIER_UNKNOWN && !tier_meets(tier_parse(resp->isolation), r->floor_tier))) {
        fprintf(r->err, "session: the open's answer does not check (id, fingerprint or tier)\n");
        return CLI_EXIT_RECORD;
    }
    snprintf(r->id, sizeof r->id, "%s", resp->session_id);
    snprintf(r->fp, sizeof r->fp, "%s", fp);
    fprintf(r->err, "[session %.12s] %s/%s, idle %u ms, expires at %lld ms\n", r->fp, resp->sandbox, resp->isolation,
            resp->idle_timeout_ms, (long long)resp->expires_unix_ms);
    return 0;
}

int cli_session_close(struct cli_session *r)
{
    Plimsoll__V1__CloseSessionRequest req = PLIMSOLL__V1__CLOSE_SESSION_REQUEST__INIT;
    req.protocol = CLI_PROTOCOL;
    req.session_id = r->id;
    struct cli_outcome o;
    cleanup_free char *err_body = NULL;
    cli_cleanup_pb Plimsoll__V1__CloseSessionResponse *resp =
        (void *)post(r, "CloseSession", &req.base, &plimsoll__v1__close_session_response__descriptor, &o, &err_body);
    if (!resp) {
        fprintf(r->err, "session: close failed: %s\n", o.code[0] ? o.code : cli_verdict_name(o.verdict));
        return CLI_EXIT_SERVER;
    }
    const char *last = resp->last_record_sha256 ? resp->last_record_sha256 : "";
    if (strcmp(resp->session ? resp->session : "", r->fp) || resp->calls != r->calls || strcmp(last, r->last)) {
        fprintf(r->err, "session: the close summary does not match the chain we saw (%llu calls, server says %llu)\n",
                (unsigned long long)r->calls, (unsigned long long)resp->calls);
        return CLI_EXIT_RECORD;
    }
    const ProtobufCEnumValue *ev =
        protobuf_c_enum_descriptor_get_value(&plimsoll__v1__session_end__descriptor, (int)resp->ended);
    fprintf(r->err, "[session %.12s closed: %s] %llu calls, last record %.12s, chain ok\n", r->fp, ev ? ev->name : "?",
            (unsigned long long)resp->calls, r->last[0] ? r->last : "(none)");
    return 0;
}
