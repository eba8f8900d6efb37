/* session_rpc_test.c: OpenSession, SessionRun and CloseSession against a fake session provider:
 * the check orders of sessions.md §2.1-§2.3, codes and marks, SessionEnded details, the record
 * chain (version 2, version 3 unanswered), caps, replacement, the claim rule and idle suspend.
 * Checklist items (§8) pinned here: 1-12, 14, 16, 17, 23-32, 34, 37, 38, 40-42. */
#include <jansson.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "../core/admission.h"
#include "../core/clock.h"
#include "../core/record.h"
#include "../core/session_registry.h"
#include "session_rpc.h"
#include "unit.h"

/* ---- the fake provider: a session is an integer register; cells "set N" and "get" ---- */

struct fsess {
    long value;
    bool closed;
};
struct fake {
    int opens, closes, runs, suspends;
    struct plm_session_spec last_spec;
    const char *last_langs[3];
    uint32_t last_timeout;
    enum plm_tier tier;
    int mode; /* 0 ok, 1 unmarked failure, 2 marked refusal, 3 end MAIN_PROCESS_ENDED, 4 open fails,
                 5 the caller goes away while the sandbox opens, 6 a call that states no tier */
    unsigned close_delay_ms; /* a sandbox slow to go */
    const char *opened_identity;
};
static struct fake F = {.tier = PLM_TIER_CONTAINER, .opened_identity = "sw-1"};
static struct fsess pool[64];
/* The caller's context of the next call (rpc.h): its deadline and whether it went away. */
static uint64_t DEADLINE = RPC_NO_DEADLINE;
static bool GONE;
static bool caller_gone(void *cls)
{
    (void)cls;
    return GONE;
}
static int pool_n;

static enum plm_tier f_tier(struct plm_provider *p) { return ((struct fake *)p->state)->tier; }
static void f_env(struct plm_provider *p, struct plm_payload_env *e)
{
    (void)p;
    memset(e, 0, sizeof *e);
    snprintf(e->identity, sizeof e->identity, "fake-session-env");
    snprintf(e->software_identity, sizeof e->software_identity, "sw-1");
    e->max_timeout_ms = 120000;
    e->default_timeout_ms = 30000;
    e->languages[0] = "javascript";
    e->languages[1] = "python";
}
static void f_describe(struct plm_provider *p, struct plm_describe *d)
{
    memset(d, 0, sizeof *d);
    d->sandbox = "fake";
    d->tier = f_tier(p);
    d->policy = "";
    snprintf(d->javascript.identity, sizeof d->javascript.identity, "fake-js");
    d->javascript.max_timeout_ms = 1000;
}
static int f_open(struct plm_provider *p, const struct plm_session_spec *spec, struct plm_session **out,
                  struct plm_session_opened *info, struct plm_err *err)
{
    struct fake *f = p->state;
    f->opens++;
    f->last_spec = *spec;
    memcpy(f->last_langs, spec->languages, sizeof f->last_langs);
    if (f->mode == 4)
        return plm_fail(err, 0, PLM_E_INTERNAL, "fake: open failed");
    if (f->mode == 5)
        GONE = true;
    if (pool_n >= 64)
        return plm_fail(err, 0, PLM_E_INTERNAL, "fake: full");
    pool[pool_n] = (struct fsess){0};
    *out = (struct plm_session *)&pool[pool_n++];
    info->tier = f->tier;
    snprintf(info->software_identity, sizeof info->software_identity, "%s", f->opened_identity);
    snprintf(info->environment, sizeof info->environment, "fake-session-env");
    return 0;
}
static int f_cell(struct plm_provider *p, struct plm_session *s, const struct plm_run_ctx *ctx,
                  const struct plm_request *req, struct plm_result *out, enum plm_session_end *ended,
                  struct plm_err *err)
{
    struct fake *f = p->state;
    struct fsess *fs = (struct fsess *)s;
    f->runs++;
    f->last_timeout = ctx->timeout_ms;
    if (f->mode == 1)
        return plm_fail(err, 0, PLM_E_INTERNAL, "fake: the relay was lost after the code was sent");
    if (f->mode == 2)
        return plm_refuse(err, PLM_E_ENVIRONMENT, PLM_REFUSAL_ENVIRONMENT, "fake: interpreter cannot start");
    if (fs->closed)
        return plm_fail(err, 0, PLM_E_INTERNAL, "fake: call on a closed session");
    const char *code = req->kind == PLM_KIND_CELL ? req->cell.code : req->js.code;
    if (!strncmp(code, "set ", 4))
        fs->value = strtol(code + 4, NULL, 10);
    char buf[32];
    int n = snprintf(buf, sizeof buf, "%ld\n", fs->value);
    struct plm_bytes *o = req->kind == PLM_KIND_CELL ? &out->cell.out : &out->js.out;
    o->data = (uint8_t *)strdup(buf);
    o->len = (size_t)n;
    out->kind = req->kind;
    out->tier = f->mode == 6 ? PLM_TIER_UNKNOWN : f->tier; /* measured; the daemon stamps the rest */
    if (f->mode == 3)
        *ended = PLM_END_MAIN_PROCESS_ENDED;
    return 0;
}
static int f_suspend(struct plm_provider *p, struct plm_session *s, bool *mem, struct plm_err *err)
{
    (void)s;
    (void)err;
    ((struct fake *)p->state)->suspends++;
    *mem = false;
    return 0;
}
static int f_close(struct plm_provider *p, struct plm_session *s, struct plm_err *err)
{
    (void)err;
    struct fake *f = p->state;
    if (f->close_delay_ms)
        usleep(f->close_delay_ms * 1000u);
    f->closes++;
    ((struct fsess *)s)->closed = true;
    return 0;
}
static const struct plm_provider_ops fake_ops = {
    .name = "fake", .tier = f_tier, .describe = f_describe, .session_env = f_env, .session_open = f_open,
    .session_run = f_cell, .session_run_cell = f_cell, .session_suspend = f_suspend, .session_close = f_close};

/* ---- calling the procedures and reading their answers ---- */

struct ans {
    unsigned status;
    char code[64], msg[512];
    char types[4][40];   /* detail types in order */
    char values[4][2048];
    size_t n_details;
    json_t *body;        /* the 200 answer's JSON */
};

enum proc { P_OPEN, P_RUN, P_CLOSE };
static struct rpc_env ENV;

static struct ans call(enum proc which, const char *caller, const char *json)
{
    struct principal who = {.may_run = true};
    snprintf(who.id, sizeof who.id, "%s", caller);
    struct rpc_answer a = {0};
    struct rpc_call c = rpc_call_plain(&who, "", RPC_JSON, json, strlen(json));
    c.deadline_ms = DEADLINE;
    c.caller_gone = caller_gone;
    if (which == P_OPEN)
        rpc_open_session(&ENV, &c, &a);
    else if (which == P_RUN)
        rpc_session_run(&ENV, &c, &a);
    else
        rpc_close_session(&ENV, &c, &a);
    struct ans out = {.status = a.status};
    json_t *root = json_loadb(a.body ? a.body : "", a.len, 0, NULL);
    if (a.status == 200) {
        snprintf(out.code, sizeof out.code, "ok");
        out.body = root;
        root = NULL;
    } else if (root) {
        snprintf(out.code, sizeof out.code, "%s", json_string_value(json_object_get(root, "code")));
        snprintf(out.msg, sizeof out.msg, "%s", json_string_value(json_object_get(root, "message")));
        size_t i;
        json_t *d;
        json_array_foreach(json_object_get(root, "details"), i, d) {
            if (i >= 4)
                break;
            snprintf(out.types[i], sizeof out.types[i], "%s", json_string_value(json_object_get(d, "type")));
            snprintf(out.values[i], sizeof out.values[i], "%s", json_string_value(json_object_get(d, "value")));
            out.n_details = i + 1;
        }
    }
    json_decref(root);
    free(a.body);
    return out;
}

static const char *sget(json_t *o, const char *path)
{
    char buf[128];
    snprintf(buf, sizeof buf, "%s", path);
    json_t *cur = o;
    for (char *save, *k = strtok_r(buf, ".", &save); k && cur; k = strtok_r(NULL, ".", &save))
        cur = json_object_get(cur, k);
    return cur && json_is_string(cur) ? json_string_value(cur) : "";
}

static long long iget(json_t *o, const char *path)
{
    char buf[128];
    snprintf(buf, sizeof buf, "%s", path);
    json_t *cur = o;
    for (char *save, *k = strtok_r(buf, ".", &save); k && cur; k = strtok_r(NULL, ".", &save))
        cur = json_object_get(cur, k);
    if (json_is_integer(cur))
        return json_integer_value(cur);
    if (json_is_string(cur))
        return strtoll(json_string_value(cur), NULL, 10);
    return cur ? -1 : 0; /* proto3 JSON omits zero values */
}

static int b64val(char c)
{
    const char *t = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    const char *p = strchr(t, c);
    return c && p ? (int)(p - t) : -1;
}
static size_t unb64(const char *s, uint8_t *out)
{
    size_t n = 0;
    uint32_t acc = 0;
    int bits = 0;
    for (; *s; s++) {
        int v = b64val(*s);
        if (v < 0)
            break;
        acc = acc << 6 | (uint32_t)v;
        bits += 6;
        if (bits >= 8) {
            bits -= 8;
            out[n++] = (uint8_t)(acc >> bits);
        }
    }
    return n;
}

static char ID[64], FP[80];

static void open_ok(const char *caller, const char *extra)
{
    char req[512];
    snprintf(req, sizeof req, "{\"protocol\":3%s}", extra);
    struct ans a = call(P_OPEN, caller, req);
    snprintf(ID, sizeof ID, "%s", a.body ? sget(a.body, "sessionId") : "");
    snprintf(FP, sizeof FP, "%s", a.body ? sget(a.body, "session") : "");
    json_decref(a.body);
}

static struct ans run_cell(const char *caller, const char *id, const char *code)
{
    char req[512];
    snprintf(req, sizeof req,
             "{\"protocol\":3,\"sessionId\":\"%s\",\"cell\":{\"language\":\"javascript\",\"code\":\"%s\"}}", id, code);
    return call(P_RUN, caller, req);
}

static struct ans close_s(const char *caller, const char *id)
{
    char req[128];
    snprintf(req, sizeof req, "{\"protocol\":3,\"sessionId\":\"%s\"}", id);
    return call(P_CLOSE, caller, req);
}

/* Items 14 and 37: the caller's context at an open and at a close. */
static void test_context(struct plm_provider *prov)
{
    struct adm *adm = adm_new(&(struct adm_config){.max_concurrent = 4, .per_key_concurrent = 4});
    ENV.adm = adm;
    struct plm_session_config cfg = {.max_sessions = 1, .per_caller = 1, .lifetime_ms = 600000, .idle_ms = 60000};
    struct plm_err err = {0};
    struct sess_svc *svc = sess_svc_new(&cfg, prov, adm, &err);
    ENV.sessions = svc;
    int opens = F.opens, closes = F.closes;
    /* gone before admission (§2.1 step 10): refused, capacity; nothing opened */
    GONE = true;
    struct ans a = call(P_OPEN, "gina", "{\"protocol\":3}");
    GONE = false;
    CHECK(!strcmp(a.code, "canceled") && !strcmp(a.values[0], "CAY"));
    CHECK(F.opens == opens && sess_svc_open_count(svc) == 0 && adm_inflight(adm) == 0);
    /* gone while the sandbox opened (step 12, item 14): closed at once, refused, the place free */
    F.mode = 5;
    a = call(P_OPEN, "gina", "{\"protocol\":3}");
    F.mode = 0;
    GONE = false;
    CHECK(!strcmp(a.code, "canceled") && !strcmp(a.values[0], "CAY"));
    CHECK(F.opens == opens + 1 && F.closes == closes + 1);
    CHECK(sess_svc_open_count(svc) == 0 && adm_inflight(adm) == 0);
    open_ok("gina", ""); /* the only place is free again */
    CHECK(ID[0] != 0 && sess_svc_open_count(svc) == 1);
    /* a deadline already passed (§2.3 step 3): refused, capacity; the session untouched */
    DEADLINE = clock_mono_ms();
    a = close_s("gina", ID);
    CHECK(!strcmp(a.code, "deadline_exceeded") && !strcmp(a.values[0], "CAY"));
    CHECK(F.closes == closes + 1 && sess_svc_open_count(svc) == 1);
    /* a sandbox slower to go than the deadline (step 5, item 37): deadline_exceeded, unmarked,
     * the entry stays; a later close waits for the turn and collects the count */
    F.close_delay_ms = 2500;
    DEADLINE = clock_mono_ms() + 500;
    a = close_s("gina", ID);
    DEADLINE = RPC_NO_DEADLINE;
    CHECK(!strcmp(a.code, "deadline_exceeded") && a.n_details == 0 && strstr(a.msg, "close it again"));
    a = close_s("gina", ID);
    F.close_delay_ms = 0;
    CHECK(!strcmp(a.code, "ok") && a.body && !strcmp(sget(a.body, "ended"), "SESSION_END_CLOSED"));
    json_decref(a.body);
    CHECK(F.closes == closes + 2 && sess_svc_open_count(svc) == 0 && adm_inflight(adm) == 0);
    a = close_s("gina", ID);
    CHECK_STR(a.code, "not_found");
    /* a close left alone while the daemon stops: the service waits for its thread */
    open_ok("gina", "");
    F.close_delay_ms = 300;
    DEADLINE = clock_mono_ms() + 50;
    a = close_s("gina", ID);
    DEADLINE = RPC_NO_DEADLINE;
    CHECK_STR(a.code, "deadline_exceeded");
    sess_svc_free(svc);
    F.close_delay_ms = 0;
    CHECK(F.closes == closes + 3 && adm_inflight(adm) == 0);
    adm_free(adm);
}

int main(void)
{
    struct plm_provider prov = {.ops = &fake_ops, .state = &F};
    struct adm *adm = adm_new(&(struct adm_config){.max_concurrent = 16, .per_key_concurrent = 16});
    struct rpc_counters counters = {0};
    ENV = (struct rpc_env){.provider = &prov, .adm = adm, .counters = &counters};
    struct ans a;

    /* ---- sessions off (item 2, open question 1) ---- */
    a = call(P_OPEN, "alice", "{\"protocol\":3}");
    CHECK_STR(a.code, "unimplemented");
    CHECK_STR(a.values[0], "CAQ");
    a = run_cell("alice", "00112233445566778899aabbccddeeff", "get");
    CHECK_STR(a.code, "not_found");
    a = close_s("alice", "00112233445566778899aabbccddeeff");
    CHECK_STR(a.code, "not_found");
    CHECK(F.opens == 0);

    struct plm_session_config cfg = {.max_sessions = 3, .per_caller = 2, .per_owner = 0, .lifetime_ms = 600000,
                                     .idle_ms = 60000, .disk_bytes = 7u << 20};
    struct plm_err err = {0};
    struct sess_svc *svc = sess_svc_new(&cfg, &prov, adm, &err);
    CHECK(svc != NULL);
    ENV.sessions = svc;

    /* ---- Describe fields 15-20 (item 3) ---- */
    {
        struct rpc_answer d = {0};
        struct rpc_call dc = rpc_call_plain(NULL, "", RPC_JSON, "{}", 2);
        rpc_describe(&ENV, &dc, &d);
        json_t *j = json_loadb(d.body, d.len, 0, NULL);
        CHECK(json_is_true(json_object_get(j, "supportsSessions")));
        CHECK(iget(j, "sessionLifetimeMs") == 600000 && iget(j, "sessionIdleTimeoutMs") == 60000);
        CHECK(iget(j, "maxSessionsPerCaller") == 2);
        CHECK_STR(sget(j, "sessionEnvironment.identity"), "fake-session-env");
        json_decref(j);
        free(d.body);
    }

    /* ---- protocol on all three (item 1) ---- */
    a = call(P_OPEN, "alice", "{\"protocol\":0}");
    CHECK_STR(a.code, "invalid_argument");
    CHECK_STR(a.values[0], "CAM");
    a = call(P_OPEN, "alice", "{\"protocol\":2}");
    CHECK_STR(a.code, "unimplemented");
    CHECK_STR(a.values[0], "CAM");
    a = call(P_RUN, "alice", "{\"protocol\":0,\"sessionId\":\"x\"}");
    CHECK_STR(a.values[0], "CAM");
    a = call(P_CLOSE, "alice", "{\"protocol\":7,\"sessionId\":\"x\"}");
    CHECK_STR(a.code, "unimplemented");
    CHECK_STR(a.values[0], "CAM");

    /* ---- open order: floor parse, floor, rule, languages, owner (§2.1) ---- */
    a = call(P_OPEN, "alice", "{\"protocol\":3,\"minimumIsolation\":\"none\",\"languages\":[\"cobol\"]}");
    CHECK_STR(a.code, "invalid_argument");
    CHECK(strstr(a.msg, "languages") == NULL);
    a = call(P_OPEN, "alice", "{\"protocol\":3,\"minimumIsolation\":\"vm\","
                              "\"softwareRule\":{\"mode\":\"exact\",\"identities\":[\"sw-9\"]}}");
    CHECK_STR(a.code, "failed_precondition");
    CHECK_STR(a.values[0], "CAU"); /* the floor before the rule */
    a = call(P_OPEN, "alice", "{\"protocol\":3,\"softwareRule\":{\"mode\":\"exact\",\"identities\":[\"sw-9\"]},"
                              "\"languages\":[\"cobol\"]}");
    CHECK_STR(a.values[0], "CAc"); /* the rule (environment) before the hint (item 26) */
    a = call(P_OPEN, "alice", "{\"protocol\":3,\"languages\":[\"cobol\"],\"owner\":\"a/b\"}");
    CHECK_STR(a.code, "invalid_argument");
    CHECK(strstr(a.msg, "languages") != NULL); /* item 24 */
    const char *bad_owners[] = {"a/b", "a b",
                                "12345678901234567890123456789012345678901234567890123456789012345"};
    for (size_t i = 0; i < 3; i++) { /* item 23 */
        char req[256];
        snprintf(req, sizeof req, "{\"protocol\":3,\"owner\":\"%s\"}", bad_owners[i]);
        a = call(P_OPEN, "alice", req);
        CHECK(strcmp(a.code, "invalid_argument") == 0 && strcmp(a.values[0], "CAE") == 0 && strstr(a.msg, "owner"));
    }
    CHECK(F.opens == 0);

    /* ---- a session: open answer, provider spec, hint order (items 4, 5, 24, 25) ---- */
    a = call(P_OPEN, "alice", "{\"protocol\":3,\"languages\":[\"python\",\"javascript\",\"python\"],"
                              "\"idleTimeoutMs\":1,\"softwareRule\":{\"mode\":\"exact\",\"identities\":[\"sw-1\"]}}");
    CHECK_STR(a.code, "ok");
    snprintf(ID, sizeof ID, "%s", sget(a.body, "sessionId"));
    char fp[PLM_HEX_SHA256];
    rec_session_fingerprint(ID, fp);
    CHECK(strlen(ID) == 32 && strspn(ID, "0123456789abcdef") == 32);
    CHECK_STR(sget(a.body, "session"), fp);
    CHECK_STR(sget(a.body, "isolation"), "container");
    CHECK_STR(sget(a.body, "sandbox"), "fake");
    CHECK_STR(sget(a.body, "softwareIdentity"), "sw-1");
    CHECK(iget(a.body, "idleTimeoutMs") == 1000);
    CHECK(iget(a.body, "expiresUnixMs") > clock_unix_ms() + 590000);
    json_decref(a.body);
    CHECK(F.last_spec.lifetime_ms == 600000 && F.last_spec.disk_bytes == 7u << 20);
    /* stated order (javascript, python), deduplicated */
    CHECK(F.last_langs[0] && !strcmp(F.last_langs[0], "javascript") && F.last_langs[1] &&
          !strcmp(F.last_langs[1], "python") && !F.last_langs[2]);
    char alice_id[64];
    snprintf(alice_id, sizeof alice_id, "%s", ID);

    /* ---- SessionRun order (§2.2): lookup, payload, rule binding, floor ---- */
    a = run_cell("bob", alice_id, "get"); /* foreign (item 8) */
    struct ans unknown = run_cell("alice", "ffffffffffffffffffffffffffffffff", "get"); /* unknown (item 9) */
    CHECK_STR(a.code, "not_found");
    CHECK(a.status == unknown.status && !strcmp(a.msg, unknown.msg) && a.n_details == unknown.n_details);
    CHECK(a.n_details == 2 && !strcmp(a.types[0], "plimsoll.v1.NotDispatched") && !strcmp(a.values[0], "CAE"));
    CHECK_STR(a.types[1], "plimsoll.v1.SessionEnded");
    CHECK(!strcmp(a.values[1], unknown.values[1]));
    {
        uint8_t raw[64];
        size_t n = unb64(a.values[1], raw);
        CHECK(n >= 2 && raw[0] == 0x08 && raw[1] == 9); /* SessionEnded{NOT_FOUND} */
    }
    a = close_s("bob", alice_id); /* a foreign caller cannot close */
    CHECK_STR(a.code, "not_found");
    char req[1024];
    snprintf(req, sizeof req, "{\"protocol\":3,\"sessionId\":\"%s\"}", alice_id);
    a = call(P_RUN, "alice", req);
    CHECK(!strcmp(a.code, "invalid_argument") && strstr(a.msg, "exactly one of")); /* item 28 */
    a = run_cell("alice", alice_id, "get"); /* omits the open's rule (item 26) */
    CHECK(!strcmp(a.code, "invalid_argument") && strstr(a.msg, "software_rule"));
#define RULE ",\"softwareRule\":{\"mode\":\"exact\",\"identities\":[\"sw-1\"]}"
    snprintf(req, sizeof req,
             "{\"protocol\":3,\"minimumIsolation\":\"vm\",\"sessionId\":\"%s\"" RULE
             ",\"cell\":{\"language\":\"javascript\",\"code\":\"get\"}}",
             alice_id);
    a = call(P_RUN, "alice", req);
    CHECK(!strcmp(a.code, "failed_precondition") && !strcmp(a.values[0], "CAU"));
    snprintf(req, sizeof req, "{\"protocol\":3,\"sessionId\":\"%s\"" RULE ",\"cell\":{\"language\":\"cobol\",\"code\":\"x\"}}",
             alice_id);
    a = call(P_RUN, "alice", req);
    CHECK(!strcmp(a.code, "invalid_argument") && !strcmp(a.values[0], "CAE")); /* item 30 */
    CHECK(F.runs == 0);

    /* ---- three calls chain; the 24 h timeout gets the ceiling (items 6, 29) ---- */
    char prev[PLM_HEX_SHA256] = "";
    const char *codes[] = {"set 41", "get", "get"};
    for (int i = 0; i < 3; i++) {
        snprintf(req, sizeof req,
                 "{\"protocol\":3,\"timeoutMs\":86400000,\"sessionId\":\"%s\"" RULE
                 ",\"cell\":{\"language\":\"javascript\",\"code\":\"%s\"}}",
                 alice_id, codes[i]);
        F.mode = i == 2 ? 6 : 0;
        a = call(P_RUN, "alice", req);
        F.mode = 0;
        CHECK_STR(a.code, "ok");
        /* the one stamp (sess_stamp): what the session opened with, and the tier the provider
         * measured for the call (a call that states none is unknown, never the open's tier) */
        const char *want_tier = i == 2 ? "unknown" : "container";
        CHECK_STR(sget(a.body, "run.sandbox"), "fake");
        CHECK_STR(sget(a.body, "run.isolation"), want_tier);
        CHECK_STR(sget(a.body, "run.environment"), "fake-session-env");
        CHECK_STR(sget(a.body, "run.softwareIdentity"), "sw-1");
        json_t *rec = json_object_get(json_object_get(a.body, "run"), "record");
        CHECK_STR(sget(rec, "isolation"), want_tier);
        CHECK(iget(rec, "version") == 2 && iget(rec, "sequence") == i + 1);
        CHECK_STR(sget(rec, "session"), fp);
        CHECK_STR(sget(rec, "previousSha256"), prev);
        CHECK_STR(sget(rec, "softwareRuleId"), "exact:sw-1");
        CHECK_STR(sget(a.body, "run.cell.stdout"), "NDEK"); /* "41\n": state kept across cells */
        /* the record digest recomputes from its fields */
        struct plm_record r = {.version = 2};
        snprintf(r.request_sha256, sizeof r.request_sha256, "%s", sget(rec, "requestSha256"));
        snprintf(r.result_sha256, sizeof r.result_sha256, "%s", sget(rec, "resultSha256"));
        r.provider = sget(rec, "provider");
        r.isolation = sget(rec, "isolation");
        r.environment = sget(rec, "environment");
        r.policy = sget(rec, "policy");
        r.started_unix_ms = iget(rec, "startedUnixMs");
        r.ended_unix_ms = iget(rec, "endedUnixMs");
        r.session = sget(rec, "session");
        r.sequence = (uint64_t)iget(rec, "sequence");
        r.previous_sha256 = sget(rec, "previousSha256");
        r.software_identity = sget(rec, "softwareIdentity");
        r.software_rule_id = sget(rec, "softwareRuleId");
        char dg[PLM_HEX_SHA256];
        rec_record_digest(&r, dg);
        CHECK_STR(sget(rec, "recordSha256"), dg);
        snprintf(prev, sizeof prev, "%s", sget(rec, "recordSha256"));
        json_decref(a.body);
    }
    CHECK(F.last_timeout == 120000); /* the environment's ceiling (under the 5 min RPC ceiling) */

    /* ---- an unanswered call is chained as version 3 (item 38) ---- */
    F.mode = 1;
    snprintf(req, sizeof req, "{\"protocol\":3,\"sessionId\":\"%s\"" RULE ",\"cell\":{\"language\":\"javascript\",\"code\":\"get\"}}",
             alice_id);
    a = call(P_RUN, "alice", req);
    F.mode = 0;
    CHECK_STR(a.code, "internal");
    CHECK(a.n_details == 1 && !strcmp(a.types[0], "plimsoll.v1.UnansweredCall"));
    char v3[PLM_HEX_SHA256] = "";
    {
        uint8_t raw[2048];
        size_t n = unb64(a.values[0], raw);
        Plimsoll__V1__UnansweredCall *u = plimsoll__v1__unanswered_call__unpack(NULL, n, raw);
        CHECK(u && u->record && u->record->version == 3 && u->record->sequence == 4);
        if (u && u->record) {
            struct plm_record r;
            wire_record_view(u->record, &r);
            CHECK_STR(r.unanswered, "internal");
            CHECK_STR(r.result_sha256, "");
            CHECK_STR(r.previous_sha256, prev);
            char dg[PLM_HEX_SHA256];
            rec_record_digest(&r, dg);
            CHECK_STR(u->record->record_sha256, dg);
            snprintf(v3, sizeof v3, "%s", dg);
        }
        if (u)
            plimsoll__v1__unanswered_call__free_unpacked(u, NULL);
    }
    /* a marked refusal from the provider: no record, the chain does not move */
    F.mode = 2;
    a = call(P_RUN, "alice", req);
    F.mode = 0;
    CHECK(!strcmp(a.code, "failed_precondition") && !strcmp(a.values[0], "CAc"));
    a = call(P_RUN, "alice", req); /* the next call chains after the unanswered one */
    CHECK_STR(a.code, "ok");
    CHECK(iget(a.body, "run.record.sequence") == 5);
    CHECK_STR(sget(a.body, "run.record.previousSha256"), v3);
    snprintf(prev, sizeof prev, "%s", sget(a.body, "run.record.recordSha256"));
    json_decref(a.body);

    /* ---- Run refuses a cell (item 30) ---- */
    {
        struct principal who = {.may_run = true};
        struct rpc_answer ra = {0};
        const char *cell = "{\"protocol\":3,\"cell\":{\"language\":\"python\",\"code\":\"1\"}}";
        struct rpc_call rc = rpc_call_plain(&who, "", RPC_JSON, cell, strlen(cell));
        rpc_run(&ENV, &rc, &ra);
        CHECK(ra.status == 400 && ra.body && strstr(ra.body, "only in a session"));
        free(ra.body);
    }

    /* ---- caps (items 12, 16) ---- */
    open_ok("alice", "");
    char alice2[64];
    snprintf(alice2, sizeof alice2, "%s", ID);
    a = call(P_OPEN, "alice", "{\"protocol\":3}");
    CHECK(!strcmp(a.code, "resource_exhausted") && !strcmp(a.values[0], "CAY") && strstr(a.msg, "one caller"));
    open_ok("bob", "");
    char bob_id[64];
    snprintf(bob_id, sizeof bob_id, "%s", ID);
    a = call(P_OPEN, "carol", "{\"protocol\":3}");
    CHECK(!strcmp(a.code, "resource_exhausted") && strstr(a.msg, "most this daemon keeps"));

    /* ---- close: summary, then not_found (items 6, 7) ---- */
    int closes = F.closes;
    a = close_s("alice", alice_id);
    CHECK_STR(a.code, "ok");
    CHECK(iget(a.body, "calls") == 5);
    CHECK_STR(sget(a.body, "lastRecordSha256"), prev);
    CHECK_STR(sget(a.body, "session"), fp);
    CHECK_STR(sget(a.body, "ended"), "SESSION_END_CLOSED");
    json_decref(a.body);
    CHECK(F.closes == closes + 1);
    a = run_cell("alice", alice_id, "get");
    CHECK_STR(a.code, "not_found");
    a = close_s("alice", alice_id);
    CHECK_STR(a.code, "not_found");

    /* ---- a call that ended the session answers `ended`; the next is refused with it ---- */
    F.mode = 3;
    a = run_cell("bob", bob_id, "get");
    F.mode = 0;
    CHECK_STR(a.code, "ok");
    CHECK_STR(sget(a.body, "ended"), "SESSION_END_MAIN_PROCESS_ENDED");
    json_decref(a.body);
    a = run_cell("bob", bob_id, "get");
    CHECK(!strcmp(a.code, "failed_precondition") && a.n_details == 2);
    CHECK(!strcmp(a.types[0], "plimsoll.v1.SessionEnded") && !strcmp(a.values[1], "CAE"));
    a = close_s("bob", bob_id);
    CHECK(!strcmp(a.code, "ok") && !strcmp(sget(a.body, "ended"), "SESSION_END_MAIN_PROCESS_ENDED") &&
          iget(a.body, "calls") == 1);
    json_decref(a.body);

    /* ---- expiry (item 11): a request may shorten the lifetime ---- */
    open_ok("bob", ",\"lifetimeMs\":50");
    snprintf(bob_id, sizeof bob_id, "%s", ID);
    usleep(80 * 1000);
    a = run_cell("bob", bob_id, "get");
    CHECK(!strcmp(a.code, "failed_precondition") && !strcmp(a.types[0], "plimsoll.v1.SessionEnded"));
    {
        uint8_t raw[256];
        size_t n = unb64(a.values[0], raw);
        CHECK(n >= 2 && raw[1] == 2); /* EXPIRED */
    }
    a = close_s("bob", bob_id);
    CHECK(!strcmp(sget(a.body, "ended"), "SESSION_END_EXPIRED"));
    json_decref(a.body);

    /* ---- unclaimed (item 40), then idle suspend and resume (items 32, 41) ---- */
    open_ok("bob", "");
    snprintf(bob_id, sizeof bob_id, "%s", ID);
    uint32_t inflight = adm_inflight(adm);
    sess_svc_tick(svc, clock_mono_ms() + 61000);
    CHECK(adm_inflight(adm) == inflight - 2); /* slots freed (alice2 was never named either) */
    a = run_cell("bob", bob_id, "get");
    CHECK(!strcmp(a.code, "failed_precondition") && !strcmp(a.types[0], "plimsoll.v1.SessionEnded"));
    a = close_s("bob", bob_id);
    CHECK(!strcmp(sget(a.body, "ended"), "SESSION_END_UNCLAIMED") && iget(a.body, "calls") == 0);
    json_decref(a.body);

    open_ok("bob", "");
    snprintf(bob_id, sizeof bob_id, "%s", ID);
    snprintf(req, sizeof req, "{\"protocol\":3,\"sessionId\":\"%s\",\"minimumIsolation\":\"vm\",\"cell\":{\"language\":\"javascript\",\"code\":\"get\"}}", bob_id);
    a = call(P_RUN, "bob", req); /* refused, yet it claims the session (item 41) */
    CHECK_STR(a.values[0], "CAU");
    inflight = adm_inflight(adm);
    int suspends = F.suspends;
    sess_svc_tick(svc, clock_mono_ms() + 61000);
    CHECK(F.suspends == suspends + 1 && adm_inflight(adm) == inflight - 1);
    a = run_cell("bob", bob_id, "set 5");
    CHECK_STR(a.code, "ok");
    json_decref(a.body);
    CHECK(adm_inflight(adm) == inflight); /* the resumed session holds a slot again */

    /* ---- per-owner replacement through the RPCs (item 17) ---- */
    a = close_s("alice", alice2);
    json_decref(a.body);
    a = close_s("bob", bob_id);
    json_decref(a.body);
    sess_svc_free(svc);
    cfg.per_owner = 1;
    cfg.per_caller = 0;
    svc = sess_svc_new(&cfg, &prov, adm, &err);
    ENV.sessions = svc;
    open_ok("alice", ",\"owner\":\"u1\"");
    char old[64];
    snprintf(old, sizeof old, "%s", ID);
    open_ok("alice", ",\"owner\":\"u1\"");
    CHECK(strlen(ID) == 32 && strcmp(ID, old) != 0);
    a = run_cell("alice", old, "get");
    CHECK(!strcmp(a.code, "failed_precondition") && !strcmp(a.values[1], "CAE"));
    {
        uint8_t raw[256];
        size_t n = unb64(a.values[0], raw);
        CHECK(n >= 2 && raw[1] == 8); /* REPLACED */
    }
    a = close_s("alice", old);
    CHECK(!strcmp(sget(a.body, "ended"), "SESSION_END_REPLACED"));
    json_decref(a.body);
    a = run_cell("alice", ID, "get");
    CHECK_STR(a.code, "ok");
    json_decref(a.body);

    /* the rule is checked again against what the opened session runs (item 27) */
    F.opened_identity = "sw-2";
    closes = F.closes;
    a = call(P_OPEN, "carol", "{\"protocol\":3" RULE "}");
    F.opened_identity = "sw-1";
    CHECK(!strcmp(a.code, "failed_precondition") && !strcmp(a.values[0], "CAc"));
    CHECK(F.closes == closes + 1); /* the mismatching sandbox was closed at once */
    /* a failed provider open gives its place and slot back */
    inflight = adm_inflight(adm);
    F.mode = 4;
    a = call(P_OPEN, "carol", "{\"protocol\":3}");
    F.mode = 0;
    CHECK_STR(a.code, "internal");
    CHECK(adm_inflight(adm) == inflight);
    open_ok("carol", "");
    CHECK(strlen(ID) == 32);
    a = close_s("carol", ID);
    json_decref(a.body);

    /* shutdown ends what is open and gives every slot back */
    closes = F.closes;
    sess_svc_free(svc);
    CHECK(F.closes == closes + 1);
    CHECK(adm_inflight(adm) == 0);

    /* idle 0: an unclaimed session is closed after the claim window; a claimed one never
     * suspends and runs to its lifetime (item 42) */
    cfg.idle_ms = 0;
    cfg.per_owner = 0;
    svc = sess_svc_new(&cfg, &prov, adm, &err);
    ENV.sessions = svc;
    open_ok("dave", "");
    char unclaimed[64];
    snprintf(unclaimed, sizeof unclaimed, "%s", ID);
    open_ok("dave", "");
    a = run_cell("dave", ID, "set 1");
    json_decref(a.body);
    int susp = F.suspends;
    sess_svc_tick(svc, clock_mono_ms() + SREG_CLAIM_WINDOW_MS + 1000);
    CHECK(F.suspends == susp);
    a = run_cell("dave", unclaimed, "get");
    CHECK(!strcmp(a.code, "failed_precondition") && !strcmp(a.types[0], "plimsoll.v1.SessionEnded"));
    a = run_cell("dave", ID, "get");
    CHECK_STR(a.code, "ok");
    json_decref(a.body);
    sess_svc_free(svc);
    CHECK(adm_inflight(adm) == 0);
    adm_free(adm);

    /* a rate-refused call on a suspended session gives back the slot it took (item 34) */
    adm = adm_new(&(struct adm_config){.max_concurrent = 4, .per_key_concurrent = 4, .rate_per_min = 1,
                                       .rate_burst = 2});
    ENV.adm = adm;
    cfg.idle_ms = 60000;
    svc = sess_svc_new(&cfg, &prov, adm, &err);
    ENV.sessions = svc;
    open_ok("erin", "");              /* token 1 */
    a = run_cell("erin", ID, "set 3"); /* token 2 */
    CHECK_STR(a.code, "ok");
    json_decref(a.body);
    sess_svc_tick(svc, clock_mono_ms() + 61000);
    CHECK(adm_inflight(adm) == 0); /* suspended: the slot went back */
    a = run_cell("erin", ID, "get");
    CHECK(!strcmp(a.code, "resource_exhausted") && !strcmp(a.values[0], "CAY"));
    CHECK(adm_inflight(adm) == 0); /* the slot it took to resume was given back */
    sess_svc_free(svc);
    CHECK(adm_inflight(adm) == 0);
    adm_free(adm);
    test_context(&prov);
    return unit_done();
}
