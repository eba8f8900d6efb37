/* api.c: include/plimsoll.h over client.h: clients and pools, Describe, the three Run payloads and
 * their results.
 * Owns: the public objects (each one allocation, freed by its own free function).
 * Invariant: a public call performs exactly the internal call the CLI performs, so the checks and
 * the placement rules are the same code. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include <curl/curl.h>

#include "../core/cleanup.h"
#include "../wire/json_codec.h"
#include "api.h"

static pthread_once_t curl_once = PTHREAD_ONCE_INIT;
static void curl_init(void) { curl_global_init(CURL_GLOBAL_DEFAULT); }

void api_err(char *err, size_t n, const char *msg)
{
    if (err && n)
        snprintf(err, n, "%s", msg);
}

PLIMSOLL_EXPORT const char *plimsoll_status_name(plimsoll_status s)
{
    static const char *names[] = {"ok", "refused", "evidence_mismatch", "error", "transport", "invalid"};
    return (unsigned)s < sizeof names / sizeof names[0] ? names[s] : "invalid";
}

plimsoll_status api_status(enum cli_verdict v)
{
    switch (v) {
    case CLI_V_RAN: return PLIMSOLL_OK;
    case CLI_V_REFUSED: return PLIMSOLL_REFUSED;
    case CLI_V_EVIDENCE_MISMATCH:
    case CLI_V_RECORD_MISMATCH: return PLIMSOLL_EVIDENCE_MISMATCH;
    case CLI_V_TRANSPORT: return PLIMSOLL_TRANSPORT;
    case CLI_V_ERROR: return PLIMSOLL_ERROR;
    }
    return PLIMSOLL_ERROR;
}

/* ---- clients ---- */

PLIMSOLL_EXPORT plimsoll_client *plimsoll_pool_new(void)
{
    pthread_once(&curl_once, curl_init);
    plimsoll_client *c = calloc(1, sizeof *c);
    if (c)
        plc_pool_init(&c->pool);
    return c;
}

PLIMSOLL_EXPORT plimsoll_client *plimsoll_client_new(const char *url, const char *token, const char *ca_file, char *err,
                                                     size_t err_len)
{
    plimsoll_client *c = plimsoll_pool_new();
    if (!c)
        return api_err(err, err_len, "out of memory"), NULL;
    if (plimsoll_pool_add(c, "default", url, token, ca_file, err, err_len) < 0) {
        plimsoll_client_free(c);
        return NULL;
    }
    c->direct = true;
    return c;
}

PLIMSOLL_EXPORT int plimsoll_pool_add(plimsoll_client *pool, const char *name, const char *url, const char *token,
                                      const char *ca_file, char *err, size_t err_len)
{
    struct plm_err e = {0};
    if (pool->direct)
        return api_err(err, err_len, "a one-daemon client takes no more backends"), -1;
    if (plc_pool_add(&pool->pool, name, url, token, ca_file, &e) < 0)
        return api_err(err, err_len, e.msg), -1;
    return 0;
}

PLIMSOLL_EXPORT int plimsoll_pool_load(plimsoll_client *pool, const char *path, char *err, size_t err_len)
{
    struct plm_err e = {0};
    if (pool->direct || pool->pool.n)
        return api_err(err, err_len, "load backends into an empty pool"), -1;
    if (plc_pool_load(&pool->pool, path, &e) < 0)
        return api_err(err, err_len, e.msg), -1;
    return 0;
}

PLIMSOLL_EXPORT void plimsoll_pool_set_ttl(plimsoll_client *pool, double seconds)
{
    if (seconds >= 0)
        pool->pool.ttl_s = seconds;
}

PLIMSOLL_EXPORT void plimsoll_client_free(plimsoll_client *c)
{
    if (!c)
        return;
    plc_pool_done(&c->pool);
    free(c);
}

PLIMSOLL_EXPORT int plimsoll_token_load(const char *path, char **token, char *err, size_t err_len)
{
    struct plm_err e = {0};
    *token = NULL;
    if (!path)
        return api_err(err, err_len, "no token file named"), -1;
    if (cli_token_load(path, token, &e) < 0)
        return api_err(err, err_len, e.msg), -1;
    return 0;
}

PLIMSOLL_EXPORT void plimsoll_token_free(char *token) { cli_token_free(token); }
PLIMSOLL_EXPORT void plimsoll_free(void *p) { free(p); }
PLIMSOLL_EXPORT size_t plimsoll_client_backends(const plimsoll_client *c) { return c->pool.n; }
PLIMSOLL_EXPORT const char *plimsoll_client_backend_name(const plimsoll_client *c, size_t i)
{
    return i < c->pool.n ? c->pool.b[i].name : NULL;
}

/* ---- Describe ---- */

plimsoll_result *api_result_new(void)
{
    plimsoll_result *r = calloc(1, sizeof *r);
    if (r)
        r->call.rep.o = &r->call.o;
    return r;
}

static void result_finish(plimsoll_result *r)
{
    r->status = api_status(r->call.o.verdict);
    if (r->call.o.verdict == CLI_V_REFUSED)
        cli_reason_name(r->call.o.refusal, r->reason, sizeof r->reason);
}

PLIMSOLL_EXPORT plimsoll_status plimsoll_describe(plimsoll_client *c, size_t i, plimsoll_info **out,
                                                  plimsoll_result **result)
{
    *out = NULL;
    if (result)
        *result = NULL;
    plimsoll_result *r cleanup_result = api_result_new();
    cleanup_free plimsoll_info *d = calloc(1, sizeof *d);
    if (!r || !d || i >= c->pool.n)
        return PLIMSOLL_INVALID;
    snprintf(r->choice.backend, sizeof r->choice.backend, "%s", c->pool.b[i].name);
    d->d = cli_describe_call(&c->pool.b[i].conn, &r->call.o);
    if (d->d)
        r->call.o.verdict = CLI_V_RAN;
    result_finish(r);
    plimsoll_status st = r->status;
    if (d->d)
        *out = take_ptr(&d);
    if (result)
        *result = take_ptr(&r);
    return st;
}

PLIMSOLL_EXPORT const char *plimsoll_info_provider(const plimsoll_info *d) { return d->d->sandbox; }
PLIMSOLL_EXPORT const char *plimsoll_info_isolation(const plimsoll_info *d) { return d->d->isolation; }
PLIMSOLL_EXPORT uint32_t plimsoll_info_protocol(const plimsoll_info *d) { return d->d->protocol; }

PLIMSOLL_EXPORT int plimsoll_info_supports(const plimsoll_info *d, const char *kind)
{
    if (!kind)
        return 0;
    if (!strcmp(kind, "javascript"))
        return 1;
    if (!strcmp(kind, "project"))
        return d->d->supports_project;
    if (!strcmp(kind, "module"))
        return d->d->supports_module;
    if (!strcmp(kind, "session"))
        return d->d->supports_sessions;
    return 0;
}

PLIMSOLL_EXPORT char *plimsoll_info_json(const plimsoll_info *d)
{
    size_t n = 0;
    return wire_json_encode(&d->d->base, &n);
}

PLIMSOLL_EXPORT void plimsoll_info_free(plimsoll_info *d)
{
    if (!d)
        return;
    protobuf_c_message_free_unpacked(&d->d->base, NULL);
    free(d);
}

/* ---- runs ---- */

static int prefer_adapter(const Plimsoll__V1__DescribeResponse *a, const Plimsoll__V1__DescribeResponse *b, void *ctx)
{
    const struct api_prefer *p = ctx;
    plimsoll_info ia = {.d = (Plimsoll__V1__DescribeResponse *)a}, ib = {.d = (Plimsoll__V1__DescribeResponse *)b};
    return p->fn(&ia, &ib, p->ctx);
}

void api_requirement(const plimsoll_requirement *in, struct api_prefer *adapter, struct plc_requirement *out)
{
    memset(out, 0, sizeof *out);
    if (!in)
        return;
    out->backend = in->backend;
    out->provider = in->provider;
    out->min_isolation = in->minimum_isolation;
    out->environment = in->environment;
    if (in->prefer) {
        *adapter = (struct api_prefer){.fn = in->prefer, .ctx = in->prefer_ctx};
        out->prefer = prefer_adapter;
        out->prefer_ctx = adapter;
    }
}

struct snippet_ctx {
    const plimsoll_snippet *s;
};

static int send_snippet(const struct cli_conn *conn, const char *floor, void *ctx, struct cli_run_call *call)
{
    const plimsoll_snippet *s = ((struct snippet_ctx *)ctx)->s;
    return cli_run_javascript(conn, s->code, s->grant_profile, floor, s->timeout_ms, call);
}

struct payload_ctx {
    ProtobufCMessage *m;
    int32_t timeout_ms;
};

static int send_project(const struct cli_conn *conn, const char *floor, void *ctx, struct cli_run_call *call)
{
    struct payload_ctx *p = ctx;
    return cli_run_project(conn, (Plimsoll__V1__ProjectRun *)p->m, floor, p->timeout_ms, call);
}

static int send_module(const struct cli_conn *conn, const char *floor, void *ctx, struct cli_run_call *call)
{
    struct payload_ctx *p = ctx;
    return cli_run_module(conn, (Plimsoll__V1__ModuleRun *)p->m, floor, p->timeout_ms, call);
}

static plimsoll_status invalid(plimsoll_result *r, const char *why, plimsoll_result **out)
{
    char copy[480];
    snprintf(copy, sizeof copy, "%.470s", why); /* why may be this very message */
    r->call.o.verdict = CLI_V_REFUSED;
    r->call.o.refusal = PLM_REFUSAL_REQUEST;
    snprintf(r->call.o.message, sizeof r->call.o.message, "%s (nothing was sent)", copy);
    r->call.rep.exit_status = CLI_EXIT_USAGE;
    r->status = PLIMSOLL_INVALID;
    if (out)
        *out = r;
    else
        plimsoll_result_free(r);
    return PLIMSOLL_INVALID;
}

/* One call: directly on a one-daemon client, else placed on the pool. */
static plimsoll_status dispatch(plimsoll_client *c, enum plc_kind kind, const char *floor, const plimsoll_requirement *pub,
                                bool grant, plc_send_fn send, void *ctx, plimsoll_result **out)
{
    if (out)
        *out = NULL;
    plimsoll_result *r = api_result_new();
    if (!r)
        return PLIMSOLL_INVALID;
    struct api_prefer adapter;
    struct plc_requirement req;
    api_requirement(pub, &adapter, &req);
    req.grant_profile = grant;
    if (c->direct) {
        enum plm_tier t;
        if (plc_merge_floor(floor, req.min_isolation, r->choice.floor, &t) < 0)
            return invalid(r, "a floor is not process, container, kernel or vm", out);
        if (send(&c->pool.b[0].conn, r->choice.floor, ctx, &r->call) < 0)
            return invalid(r, "a floor is not process, container, kernel or vm", out);
        snprintf(r->choice.backend, sizeof r->choice.backend, "%s", c->pool.b[0].name);
    } else if (plc_run(&c->pool, kind, floor, &req, send, ctx, &r->call, &r->choice) < 0 &&
               r->call.o.refusal == PLM_REFUSAL_REQUEST) {
        return invalid(r, r->call.o.message, out);
    }
    result_finish(r);
    plimsoll_status st = r->status;
    if (out)
        *out = r;
    else
        plimsoll_result_free(r);
    return st;
}

PLIMSOLL_EXPORT plimsoll_status plimsoll_run_snippet(plimsoll_client *c, const plimsoll_snippet *s,
                                                     const plimsoll_requirement *req, plimsoll_result **out)
{
    if (!s || !s->code || !cli_utf8_valid((const uint8_t *)s->code, strlen(s->code)) ||
        (s->grant_profile && *s->grant_profile && !cli_grant_name_valid(s->grant_profile))) {
        plimsoll_result *r = api_result_new();
        return r ? invalid(r, "the snippet is not UTF-8 or the grant profile name is not valid", out) : PLIMSOLL_INVALID;
    }
    struct snippet_ctx ctx = {.s = s};
    return dispatch(c, PLC_JAVASCRIPT, s->minimum_isolation, req, s->grant_profile && *s->grant_profile, send_snippet,
                    &ctx, out);
}

static plimsoll_status run_payload(plimsoll_client *c, enum plc_kind kind, const ProtobufCMessageDescriptor *desc,
                                   const char *json, const char *floor, int32_t timeout_ms,
                                   const plimsoll_requirement *req, plimsoll_result **out)
{
    struct plm_err err = {0};
    ProtobufCMessage *m = json ? wire_json_decode(desc, json, strlen(json), &err) : NULL;
    if (!m) {
        plimsoll_result *r = api_result_new();
        char why[600];
        snprintf(why, sizeof why, "the payload does not decode: %.500s", json ? err.msg : "none given");
        return r ? invalid(r, why, out) : PLIMSOLL_INVALID;
    }
    struct payload_ctx ctx = {.m = m, .timeout_ms = timeout_ms};
    bool grant = false;
    if (kind == PLC_PROJECT) {
        const char *g = ((Plimsoll__V1__ProjectRun *)m)->grant_profile;
        grant = g && *g;
    }
    plimsoll_status st = dispatch(c, kind, floor, req, grant, kind == PLC_PROJECT ? send_project : send_module, &ctx, out);
    protobuf_c_message_free_unpacked(m, NULL);
    return st;
}

PLIMSOLL_EXPORT plimsoll_status plimsoll_run_project(plimsoll_client *c, const char *project_json,
                                                     const char *minimum_isolation, int32_t timeout_ms,
                                                     const plimsoll_requirement *req, plimsoll_result **out)
{
    return run_payload(c, PLC_PROJECT, &plimsoll__v1__project_run__descriptor, project_json, minimum_isolation,
                       timeout_ms, req, out);
}

PLIMSOLL_EXPORT plimsoll_status plimsoll_run_module(plimsoll_client *c, const char *module_json,
                                                    const char *minimum_isolation, int32_t timeout_ms,
                                                    const plimsoll_requirement *req, plimsoll_result **out)
{
    return run_payload(c, PLC_MODULE, &plimsoll__v1__module_run__descriptor, module_json, minimum_isolation, timeout_ms,
                       req, out);
}
