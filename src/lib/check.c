/* check.c: the client's trust decisions over an answer, as pure functions.
 * Owns: answer binding, Connect error parsing and classification, the record checks of
 * wire.md §13.8, the result-kind and tier re-checks of §11.4-11.5, and the exit status.
 * Trusts: nothing the server sent; only the request message we encoded ourselves.
 * Invariant: "refused before dispatch" is reached only from a bound error stating a reason;
 * every failed or unparsable check reads as "may have run", never as "nothing ran". */
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "../core/base64.h"
#include "../core/cleanup.h"
#include "../core/limits.h"
#include "../wire/convert.h"
#include "client.h"

static const char *str_or_empty(const char *s) { return s ? s : ""; }

/* ---- base64, UTF-8, headers ---- */

int cli_b64_decode(const char *in, size_t len, uint8_t **out, size_t *out_len)
{
    *out = NULL;
    *out_len = 0;
    cleanup_free uint8_t *buf = malloc(b64_decoded_max(len));
    size_t bad;
    /* standard or URL-safe alphabet (wire.md §7.1: any variant) */
    if (!buf || b64_decode(in, len, B64_ANY_ALPHABET, buf, out_len, &bad) < 0)
        return -1;
    *out = take_ptr(&buf);
    return 0;
}

bool cli_utf8_valid(const uint8_t *s, size_t len)
{
    size_t i = 0;
    while (i < len) {
        uint8_t c = s[i];
        if (c < 0x80) {
            i++;
            continue;
        }
        size_t need;
        uint32_t cp;
        if (c >= 0xc2 && c <= 0xdf) {
            need = 1;
            cp = c & 0x1f;
        } else if (c >= 0xe0 && c <= 0xef) {
            need = 2;
            cp = c & 0x0f;
        } else if (c >= 0xf0 && c <= 0xf4) {
            need = 3;
            cp = c & 0x07;
        } else {
            return false;
        }
        if (len - i <= need)
            return false;
        for (size_t k = 1; k <= need; k++) {
            if ((s[i + k] & 0xc0) != 0x80)
                return false;
            cp = (cp << 6) | (s[i + k] & 0x3f);
        }
        /* Overlong forms, surrogates and values past U+10FFFF are not UTF-8. */
        if ((need == 2 && cp < 0x800) || (need == 3 && cp < 0x10000) || cp > 0x10ffff ||
            (cp >= 0xd800 && cp <= 0xdfff))
            return false;
        i += need + 1;
    }
    return true;
}

bool cli_content_type_is_json(const char *ct)
{
    if (!ct)
        return false;
    while (*ct == ' ' || *ct == '\t')
        ct++;
    size_t n = strcspn(ct, ";");
    while (n > 0 && (ct[n - 1] == ' ' || ct[n - 1] == '\t'))
        n--;
    static const char want[] = "application/json";
    return n == sizeof want - 1 && strncasecmp(ct, want, n) == 0;
}

bool cli_answer_bound(const char *sent_id, const char *echo, unsigned echo_n)
{
    /* Exactly one echo, byte for byte ours (wire.md §9). Anything else: the answer may belong
     * to another request, so it proves nothing about ours. */
    return sent_id && echo && echo_n == 1 && strcmp(sent_id, echo) == 0;
}

/* ---- Connect errors ---- */

static const char *const connect_codes[] = {
    "canceled",          "unknown",        "invalid_argument", "deadline_exceeded",
    "not_found",         "already_exists", "permission_denied", "resource_exhausted",
    "failed_precondition", "aborted",      "out_of_range",     "unimplemented",
    "internal",          "unavailable",    "data_loss",        "unauthenticated",
};

bool cli_connect_code_valid(const char *code)
{
    if (!code)
        return false;
    for (size_t i = 0; i < sizeof connect_codes / sizeof connect_codes[0]; i++)
        if (strcmp(code, connect_codes[i]) == 0)
            return true;
    return false;
}

const char *cli_code_from_status(long status)
{
    switch (status) {
    case 400: return "internal";
    case 401: return "unauthenticated";
    case 403: return "permission_denied";
    case 404: return "unimplemented";
    case 429:
    case 502:
    case 503:
    case 504: return "unavailable";
    default: return "unknown";
    }
}

static int not_dispatched_from_detail(const json_t *d)
{
    const char *type = json_string_value(json_object_get(d, "type"));
    const json_t *value = json_object_get(d, "value");
    if (!type || !json_is_string(value))
        return 0;
    const char *slash = strrchr(type, '/');
    if (strcmp(slash ? slash + 1 : type, "plimsoll.v1.NotDispatched") != 0)
        return 0;
    cleanup_free uint8_t *bytes = NULL;
    size_t n = 0;
    if (cli_b64_decode(json_string_value(value), json_string_length(value), &bytes, &n) < 0)
        return 0;
    /* protobuf-c skips unknown fields and fails a known field of the wrong wire type, as the
     * reference Python decoder does; an undecodable detail states nothing. */
    Plimsoll__V1__NotDispatched *nd = plimsoll__v1__not_dispatched__unpack(NULL, n, bytes);
    if (!nd)
        return 0;
    int reason = (int)nd->reason;
    plimsoll__v1__not_dispatched__free_unpacked(nd, NULL);
    /* Reason 0 is never attached; reading it as "nothing ran" would fail open. */
    return reason > 0 ? reason : 0;
}

int cli_not_dispatched_from_details(const json_t *details)
{
    if (!json_is_array(details))
        return 0;
    size_t i;
    const json_t *d;
    json_array_foreach(details, i, d) {
        int r = not_dispatched_from_detail(d);
        if (r)
            return r;
    }
    return 0;
}

int cli_not_dispatched_from_header(const char *value)
{
    if (!value)
        return 0;
    for (int r = PLM_REFUSAL_REQUEST; r <= PLM_REFUSAL_ENVIRONMENT; r++)
        if (strcmp(value, plm_refusal_name((enum plm_refusal)r)) == 0)
            return r;
    return 0;
}

void cli_parse_error(long status, const char *body, size_t len, struct cli_error_answer *out)
{
    memset(out, 0, sizeof *out);
    snprintf(out->code, sizeof out->code, "%s", cli_code_from_status(status));
    snprintf(out->message, sizeof out->message, "HTTP %ld", status);
    if (!body)
        return;
    cli_cleanup_json json_t *root = json_loadb(body, len, JSON_REJECT_DUPLICATES, NULL);
    if (!json_is_object(root))
        return;
    const char *code = json_string_value(json_object_get(root, "code"));
    if (cli_connect_code_valid(code))
        snprintf(out->code, sizeof out->code, "%s", code);
    const char *msg = json_string_value(json_object_get(root, "message"));
    if (msg && *msg)
        snprintf(out->message, sizeof out->message, "%s", msg);
    out->detail_reason = cli_not_dispatched_from_details(json_object_get(root, "details"));
}

void cli_classify_error(const struct cli_error_answer *e, bool bound, const char *nd_header,
                        struct cli_outcome *o)
{
    o->bound = bound;
    snprintf(o->code, sizeof o->code, "%s", e->code);
    snprintf(o->message, sizeof o->message, "%s", e->message);
    int reason = 0;
    if (bound) {
        /* The detail wins over the header; the header counts only when no detail says. */
        reason = e->detail_reason;
        if (!reason)
            reason = cli_not_dispatched_from_header(nd_header);
    } else if (e->detail_reason || cli_not_dispatched_from_header(nd_header)) {
        /* Not ours for sure: its "nothing ran" would be a claim about some other call. */
        o->detail_disregarded = true;
    }
    if (reason) {
        o->verdict = CLI_V_REFUSED;
        o->refusal = reason;
    } else {
        o->verdict = CLI_V_ERROR;
        o->refusal = 0;
    }
}

bool cli_classify_http(const char *sent_id, const struct cli_http_answer *a, struct cli_outcome *o)
{
    memset(o, 0, sizeof *o);
    o->bound = cli_answer_bound(sent_id, a->request_id_echo, a->request_id_n);
    if (a->status != 200) {
        struct cli_error_answer e;
        cli_parse_error(a->status, a->body, a->body_len, &e);
        cli_classify_error(&e, o->bound, a->not_dispatched, o);
        return false;
    }
    /* Binding before anything else about a success: an answer that is not provably ours says
     * nothing about our call, which may or may not have run (ErrAnswerNotBound). */
    if (!o->bound) {
        o->verdict = CLI_V_RECORD_MISMATCH;
        snprintf(o->message, sizeof o->message, "answer not bound: %s",
                 a->request_id_n == 0 ? "no Plimsoll-Request-Id echo"
                 : a->request_id_n > 1 ? "more than one Plimsoll-Request-Id echo"
                                       : "the Plimsoll-Request-Id echo differs from the id sent");
        return false;
    }
    if (!cli_content_type_is_json(a->content_type)) {
        o->verdict = CLI_V_TRANSPORT;
        snprintf(o->message, sizeof o->message, "malformed response: content type \"%.64s\" is not application/json",
                 a->content_type ? a->content_type : "");
        return false;
    }
    return true;
}

/* ---- record checks (wire.md §13.8) ---- */

static int mismatch(struct plm_err *err, const char *what)
{
    return plm_fail(err, 0, PLM_E_MISMATCH, "record mismatch: %s", what);
}

static bool rule_sent(const Plimsoll__V1__SoftwareRule *rule)
{
    return rule && ((rule->mode && *rule->mode) || rule->n_identities > 0);
}

static bool rule_satisfied(const Plimsoll__V1__SoftwareRule *rule, const char *identity)
{
    if (!identity || !*identity)
        return false;
    const char *mode = str_or_empty(rule->mode);
    if (strcmp(mode, "exact") == 0)
        return rule->n_identities == 1 && strcmp(str_or_empty(rule->identities[0]), identity) == 0;
    if (strcmp(mode, "approved") == 0) {
        for (size_t i = 0; i < rule->n_identities; i++)
            if (strcmp(str_or_empty(rule->identities[i]), identity) == 0)
                return true;
    }
    return false;
}

/* Steps 1-3: a record is present, at the version the protocol sent needs. */
static int record_version(const Plimsoll__V1__RunRequest *sent, const Plimsoll__V1__RunRecord *rec,
                          struct plm_err *err)
{
    if (!rec)
        return mismatch(err, "no record");
    if (rec->version != 1 && rec->version != 2)
        return plm_fail(err, 0, PLM_E_MISMATCH, "record mismatch: version error: record version %u", rec->version);
    if (sent->protocol >= 2 && rec->version != 2)
        return plm_fail(err, 0, PLM_E_MISMATCH,
                        "record mismatch: version error: protocol %u needs a version 2 record, got %u",
                        sent->protocol, rec->version);
    if (rec->version == 1 && (*str_or_empty(rec->software_identity) || *str_or_empty(rec->software_rule_id)))
        return mismatch(err, "version 1 record carries software fields");
    return 0;
}

/* Steps 4-5: the request digest from the message we encoded and sent, the result digest from the
 * response as received. */
static int record_digests(const Plimsoll__V1__RunRequest *sent, const Plimsoll__V1__RunResponse *resp,
                          const Plimsoll__V1__RunRecord *rec, struct plm_err *err)
{
    char hex[PLM_HEX_SHA256];
    struct wire_request_view rv = {0};
    if (wire_request_view(sent, &rv, err) < 0)
        return plm_err_wrap(err, "record check: request view");
    rec_request_digest(&rv.req, hex);
    wire_request_view_done(&rv);
    if (strcmp(hex, str_or_empty(rec->request_sha256)) != 0)
        return mismatch(err, "request_sha256 differs from the digest of the request sent");

    struct wire_result_view sv = {0};
    if (wire_result_view(resp, &sv, err) < 0)
        return plm_err_wrap(err, "record check: result view");
    rec_result_digest(&sv.res, hex);
    wire_result_view_done(&sv);
    if (strcmp(hex, str_or_empty(rec->result_sha256)) != 0)
        return mismatch(err, "result_sha256 differs from the digest of the result received");
    return 0;
}

/* Step 7, version 2: environment, software identity, and the rule we sent. */
static int record_software(const Plimsoll__V1__RunRequest *sent, const Plimsoll__V1__RunResponse *resp,
                           const Plimsoll__V1__RunRecord *rec, struct plm_err *err)
{
    if (strcmp(str_or_empty(rec->environment), str_or_empty(resp->environment)) != 0)
        return mismatch(err, "environment differs from the answer's environment");
    if (strcmp(str_or_empty(rec->software_identity), str_or_empty(resp->software_identity)) != 0)
        return mismatch(err, "software_identity differs from the answer's software identity");
    const Plimsoll__V1__SoftwareRule *rule = sent->software_rule;
    const char *mode = rule ? str_or_empty(rule->mode) : "";
    size_t n_ids = rule ? rule->n_identities : 0;
    cleanup_free char *rule_id = rec_rule_id(mode, rule ? (const char *const *)rule->identities : NULL, n_ids);
    if (!rule_id)
        return plm_fail(err, ENOMEM, PLM_E_INTERNAL, "record check: out of memory");
    if (strcmp(rule_id, str_or_empty(rec->software_rule_id)) != 0)
        return mismatch(err, "software_rule_id differs from the rule sent");
    if (rule_sent(rule) && !rule_satisfied(rule, resp->software_identity))
        return mismatch(err, "software identity does not satisfy the rule sent");
    return 0;
}

int cli_check_record(const Plimsoll__V1__RunRequest *sent, const Plimsoll__V1__RunResponse *resp,
                     struct plm_err *err)
{
    const Plimsoll__V1__RunRecord *rec = resp->record;
    if (record_version(sent, rec, err) < 0 || record_digests(sent, resp, rec, err) < 0)
        return -1;

    /* 6. evidence fields, byte for byte */
    if (strcmp(str_or_empty(rec->provider), str_or_empty(resp->sandbox)) != 0)
        return mismatch(err, "provider differs from the answer's sandbox");
    if (strcmp(str_or_empty(rec->isolation), str_or_empty(resp->isolation)) != 0)
        return mismatch(err, "isolation differs from the answer's isolation");
    if (rec->version == 2 && record_software(sent, resp, rec, err) < 0)
        return -1;

    /* 8. the record digest, recomputed from the record's own fields */
    char hex[PLM_HEX_SHA256];
    struct plm_record pr;
    wire_record_view(rec, &pr);
    rec_record_digest(&pr, hex);
    if (strcmp(hex, str_or_empty(rec->record_sha256)) != 0)
        return mismatch(err, "record_sha256 differs from the digest of the record's fields");

    /* Beyond the reference: `unanswered` exists only in version 3 and is outside the v1/v2
     * digest, so on an answered record it could only be noise or tampering. Fail closed. */
    if (*str_or_empty(rec->unanswered))
        return mismatch(err, "unanswered set on an answered record");

    /* 9. a single Run belongs to no session */
    if (*str_or_empty(rec->session) || rec->sequence != 0 || *str_or_empty(rec->previous_sha256))
        return mismatch(err, "session fields set on a single run");
    return 0;
}

void cli_check_answer(const Plimsoll__V1__RunRequest *sent, const Plimsoll__V1__RunResponse *resp,
                      enum plm_tier floor, struct cli_outcome *o)
{
    struct plm_err err = {0};
    int rec_r = cli_check_record(sent, resp, &err);

    /* Result kind next (Go client order): oneof numbers are shared between request and answer. */
    if (resp->result_case == PLIMSOLL__V1__RUN_RESPONSE__RESULT__NOT_SET ||
        (int)resp->result_case != (int)sent->payload_case) {
        o->verdict = CLI_V_RECORD_MISMATCH;
        snprintf(o->message, sizeof o->message, "result kind mismatch: the answer's result is not the payload kind sent");
        return;
    }
    if (rec_r < 0) {
        o->verdict = CLI_V_RECORD_MISMATCH;
        snprintf(o->message, sizeof o->message, "%s", err.msg);
        return;
    }
    /* Last, the evidence: the tier that actually ran against our floor (wire.md §11.4). */
    if (floor != PLM_TIER_UNKNOWN && !tier_meets(tier_parse(resp->isolation), floor)) {
        o->verdict = CLI_V_EVIDENCE_MISMATCH;
        char iso[64];
        snprintf(iso, sizeof iso, "%s", str_or_empty(resp->isolation));
        snprintf(o->message, sizeof o->message,
                 "result isolation %s is below requested minimum %s; execution may have occurred",
                 *iso ? iso : "\"\"", tier_name(floor));
        return;
    }
    o->verdict = CLI_V_RAN;
    o->message[0] = '\0';
}

const char *cli_verdict_name(enum cli_verdict v)
{
    switch (v) {
    case CLI_V_RAN: return "ran";
    case CLI_V_REFUSED: return "refused";
    case CLI_V_EVIDENCE_MISMATCH: return "evidence_mismatch";
    case CLI_V_RECORD_MISMATCH: return "record_mismatch";
    case CLI_V_TRANSPORT: return "transport_error";
    case CLI_V_ERROR: return "error";
    }
    return "error";
}

void cli_reason_name(int reason, char *buf, size_t len)
{
    if (reason >= PLM_REFUSAL_REQUEST && reason <= PLM_REFUSAL_ENVIRONMENT)
        snprintf(buf, len, "%s", plm_refusal_name((enum plm_refusal)reason));
    else
        snprintf(buf, len, "reason %d", reason);
}

int cli_timeout_ms(double seconds, int32_t *ms)
{
    if (!isfinite(seconds) || seconds <= 0 || seconds > LIM_TIMEOUT_MS_MAX / 1000.0)
        return -1;
    long long m = llround(seconds * 1000.0);
    *ms = (int32_t)(m < 1 ? 1 : m);
    return 0;
}

bool cli_grant_name_valid(const char *name)
{
    size_t len = name ? strlen(name) : 0;
    return len >= 1 && len <= LIM_GRANT_PROFILE_MAX &&
           strspn(name, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._-") == len;
}
