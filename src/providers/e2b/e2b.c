/* e2b.c: the e2b provider's ops table, configuration, Describe, and lifetime (e2b.h).
 * Owns: struct e2b_state: the tracked sandboxes, the reconcile thread, the guard listener.
 * Trusts: struct e2b_config only after the checks below (and endpoints.c) accepted it.
 * Invariant: the constructor makes no network call (only the guard's listening socket); the tier
 * is vm only after the smoke test proved it; destroy stops the reconcile, deletes every sandbox
 * still tracked and stops the guard, in that order. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../../core/cleanup.h"
#include "../../core/record.h"
#include "internal.h"

static struct e2b_state *st(struct plm_provider *p)
{
    return p->state;
}

static enum plm_tier ops_tier(struct plm_provider *p)
{
    return atomic_load(&st(p)->proven) ? PLM_TIER_VM : PLM_TIER_NONE;
}

void e2b_identity(struct e2b_state *s, char *out, size_t cap)
{
    /* A non-default endpoint is part of the environment, so a record made against a double or a
     * private deployment says so. */
    if (s->endpoints_default)
        snprintf(out, cap, "e2b-template:%.100s", s->template_id);
    else
        snprintf(out, cap, "e2b-template:%.40s api=%.100s", s->template_id, s->api_base);
}

static void ops_describe(struct plm_provider *p, struct plm_describe *d)
{
    struct e2b_state *s = st(p);
    memset(d, 0, sizeof *d);
    bool proven = atomic_load(&s->proven);
    d->sandbox = "e2b";
    d->tier = proven ? PLM_TIER_VM : PLM_TIER_NONE;
    d->supports_project = true;
    d->supports_javascript_grants = d->supports_project_grants = proven && s->guard != NULL;
    d->supports_session_grants = d->supports_javascript_grants && s->session_grants != E2B_SG_NONE;
    char ident[160];
    e2b_identity(s, ident, sizeof ident);
    snprintf(d->javascript.identity, sizeof d->javascript.identity, "%s", ident);
    snprintf(d->project.identity, sizeof d->project.identity, "%s", ident);
    d->javascript.default_timeout_ms = d->project.default_timeout_ms = E2B_DEFAULT_TIMEOUT_MS;
    d->javascript.max_timeout_ms = d->project.max_timeout_ms = E2B_MAX_TIMEOUT_MS;
    d->javascript.languages[0] = "javascript";
    d->project.languages[0] = "javascript";
    d->project.languages[1] = "shell";
    d->memory_mb = s->memory_mb;
    d->disk_mb = s->disk_mb;
    d->cpus = s->cpus;
    d->evidence = proven ? &s->card : NULL;
    d->policy = proven ? s->card.policy : "";
    d->billing_teardown_ms = E2B_BILLING_TEARDOWN_MS;
}

static int ops_preflight(struct plm_provider *p, struct plm_err *err)
{
    /* (spec) no API call: the key and the configuration were checked by the constructor */
    if (!st(p)->api_key[0])
        return plm_fail(err, 0, PLM_E_INVALID, "e2b: E2B_API_KEY is not set");
    return 0;
}

static int ops_smoke(struct plm_provider *p, struct plm_err *err)
{
    return e2b_smoke(st(p), err);
}

static int ops_run_js(struct plm_provider *p, const struct plm_run_ctx *ctx, const struct plm_request *req,
                      struct plm_result *out, struct plm_err *err)
{
    return e2b_run_snippet(st(p), ctx, req, out, err);
}

static int ops_run_project(struct plm_provider *p, const struct plm_run_ctx *ctx, const struct plm_request *req,
                           struct plm_result *out, struct plm_err *err)
{
    return e2b_run_project(st(p), ctx, req, out, err);
}

static void share_lock(CURL *h, curl_lock_data data, curl_lock_access access, void *ud)
{
    (void)h, (void)access;
    struct e2b_state *s = ud;
    pthread_mutex_lock(&s->share_mu[data < CURL_LOCK_DATA_LAST ? data : 0]);
}

static void share_unlock(CURL *h, curl_lock_data data, void *ud)
{
    (void)h;
    struct e2b_state *s = ud;
    pthread_mutex_unlock(&s->share_mu[data < CURL_LOCK_DATA_LAST ? data : 0]);
}

static void share_init(struct e2b_state *s)
{
    for (int i = 0; i < CURL_LOCK_DATA_LAST; i++)
        pthread_mutex_init(&s->share_mu[i], NULL);
    s->share = curl_share_init();
    if (!s->share)
        return; /* every call then opens its own connection: slower, not wrong */
    if (curl_share_setopt(s->share, CURLSHOPT_LOCKFUNC, share_lock) != CURLSHE_OK ||
        curl_share_setopt(s->share, CURLSHOPT_UNLOCKFUNC, share_unlock) != CURLSHE_OK ||
        curl_share_setopt(s->share, CURLSHOPT_USERDATA, s) != CURLSHE_OK ||
        curl_share_setopt(s->share, CURLSHOPT_SHARE, CURL_LOCK_DATA_CONNECT) != CURLSHE_OK ||
        curl_share_setopt(s->share, CURLSHOPT_SHARE, CURL_LOCK_DATA_DNS) != CURLSHE_OK ||
        curl_share_setopt(s->share, CURLSHOPT_SHARE, CURL_LOCK_DATA_SSL_SESSION) != CURLSHE_OK) {
        curl_share_cleanup(s->share);
        s->share = NULL;
    }
}

static void state_free(struct e2b_state *s)
{
    if (!s)
        return;
    e2b_reconciler_stop(s);
    e2b_shutdown_sweep(s); /* SIGTERM: runs have drained; what is still alive goes now */
    e2b_guard_stop(s->guard);
    if (s->share)
        curl_share_cleanup(s->share); /* every easy handle is gone: no call is in flight */
    for (int i = 0; i < CURL_LOCK_DATA_LAST; i++)
        pthread_mutex_destroy(&s->share_mu[i]);
    free(s->tracked);
    pthread_mutex_destroy(&s->mu);
    pthread_mutex_destroy(&s->rmu);
    pthread_cond_destroy(&s->rcv);
    explicit_bzero(s->api_key, sizeof s->api_key);
    free(s);
    curl_global_cleanup();
}

static void ops_destroy(struct plm_provider *p)
{
    state_free(p->state);
    p->state = NULL;
}

static const struct plm_provider_ops e2b_ops = {
    .name = "e2b",
    .tier = ops_tier,
    .describe = ops_describe,
    .preflight = ops_preflight,
    .smoke_test = ops_smoke,
    .run_javascript = ops_run_js,
    .run_project = ops_run_project,
    .session_env = e2b_ops_session_env, /* one sandbox per session (session.c); never suspends */
    .session_open = e2b_ops_session_open,
    .session_run = e2b_ops_session_run,
    .session_run_cell = e2b_ops_session_cell,
    .session_close = e2b_ops_session_close,
    .destroy = ops_destroy,
};

#define CFG_ERR(err, ...) plm_fail(err, 0, PLM_E_INVALID, __VA_ARGS__)

static int copy_var(const char *var, const char *v, char *dst, size_t cap, struct plm_err *err)
{
    if (strlen(v) >= cap)
        return CFG_ERR(err, "%s: longer than %zu bytes", var, cap - 1);
    for (const char *p = v; *p; p++)
        if ((unsigned char)*p <= 0x20 || (unsigned char)*p >= 0x7f)
            return CFG_ERR(err, "%s: spaces, control characters and non-ASCII are not allowed", var);
    snprintf(dst, cap, "%s", v);
    return 0;
}

static int configure(struct e2b_state *s, const struct e2b_config *c, struct plm_err *err)
{
    if (c->api_key && *c->api_key && copy_var("E2B_API_KEY", c->api_key, s->api_key, sizeof s->api_key, err) < 0)
        return -1;
    const char *t = c->template_id && *c->template_id ? c->template_id : "base";
    if (copy_var("E2B_TEMPLATE", t, s->template_id, sizeof s->template_id, err) < 0)
        return -1;
    for (const char *p = t; *p; p++)
        if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') || strchr("-_.:/", *p)))
            return CFG_ERR(err, "E2B_TEMPLATE=\"%s\": expected a template name or ID", t);
    const char *dom = c->domain && *c->domain ? c->domain : E2B_DEFAULT_DOMAIN;
    if (copy_var("E2B_DOMAIN", dom, s->domain, sizeof s->domain, err) < 0)
        return -1;
    for (const char *p = dom; *p; p++)
        if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') || *p == '.' ||
              *p == '-'))
            return CFG_ERR(err, "E2B_DOMAIN=\"%s\": expected a DNS name", dom);
    const char *api = c->api_url && *c->api_url ? c->api_url : E2B_DEFAULT_API;
    if (e2b_check_base_url("E2B_API_URL", api, false, s->api_base, sizeof s->api_base, err) < 0)
        return -1;
    char def_envd[400];
    snprintf(def_envd, sizeof def_envd, "https://%d-{sandbox}.%s", E2B_ENVD_PORT, s->domain);
    const char *envd = c->envd_url && *c->envd_url ? c->envd_url : def_envd;
    if (e2b_check_base_url("E2B_ENVD_URL", envd, true, s->envd_tmpl, sizeof s->envd_tmpl, err) < 0)
        return -1;
    s->endpoints_default = !strcmp(s->api_base, E2B_DEFAULT_API) && !strcmp(s->envd_tmpl, def_envd) &&
                           !strcmp(s->domain, E2B_DEFAULT_DOMAIN);
    if (c->ca_file && *c->ca_file) {
        if (copy_var("E2B_CA_FILE", c->ca_file, s->ca_file, sizeof s->ca_file, err) < 0)
            return -1;
        if (access(s->ca_file, R_OK) < 0)
            return CFG_ERR(err, "E2B_CA_FILE=%s: not readable: %s", s->ca_file, strerror(errno));
    }
    if (c->pids_set)
        return CFG_ERR(err, "SANDBOX_PIDS is set, but the e2b provider cannot enforce a process limit; unset it");
    if (c->cpus != (double)(uint32_t)c->cpus)
        return CFG_ERR(err, "SANDBOX_CPUS=%g: the e2b provider needs a whole number of vCPUs", c->cpus);
    s->cpus = (uint32_t)c->cpus;
    s->memory_mb = c->memory_mb;
    s->disk_mb = c->disk_mb;
    bool gurl = c->guard_url && *c->guard_url, gaddr = c->guard_addr && *c->guard_addr;
    if (gurl && !gaddr)
        return CFG_ERR(err, "E2B_GUARD_URL is set, but PLIMSOLL_GUARD_ADDR is not: the guard needs its listener");
    if (gaddr && !gurl)
        return CFG_ERR(err, "PLIMSOLL_GUARD_ADDR is set, but E2B_GUARD_URL is not: E2B would not know the guard");
    if (gurl) {
        if (e2b_check_guard_url(c->guard_url, s->guard_url, sizeof s->guard_url, s->guard_host, sizeof s->guard_host,
                                err) < 0)
            return -1;
        const char *path = strchr(s->guard_url + 8, '/');
        if (e2b_guard_start(c->guard_addr, path, &s->guard, err) < 0)
            return -1;
    }
    /* How a session's call reaches the guard (docs/sessions.md "Grants in sessions"). */
    const char *sg = c->session_grants ? c->session_grants : "";
    if (!strcmp(sg, "session"))
        s->session_grants = E2B_SG_SESSION;
    else if (!strcmp(sg, "call"))
        s->session_grants = E2B_SG_CALL;
    else if (*sg)
        return CFG_ERR(err, "E2B_SESSION_GRANTS=\"%.60s\": expected \"session\" or \"call\", or unset", sg);
    if (*sg && !gurl)
        return CFG_ERR(err,
                       "E2B_SESSION_GRANTS=%s needs E2B_GUARD_URL: a session's grant reaches its broker through "
                       "the guard",
                       sg);
    s->reconcile_s = c->reconcile_s ? c->reconcile_s : 60;
    /* The instance label must survive a restart, so a daemon killed mid-run finds its orphans:
     * it is derived from what names this daemon (host, listener, control plane), never random. */
    char host[256] = "";
    gethostname(host, sizeof host - 1);
    char seed[1200], digest[PLM_HEX_SHA256];
    int n = snprintf(seed, sizeof seed, "plimsoll-e2b-instance|%s|%s|%s", host, c->listen_addr ? c->listen_addr : "",
                     s->api_base);
    if (n < 0 || (size_t)n >= sizeof seed)
        n = (int)strlen(seed); /* cut, still deterministic */
    rec_sha256_hex(seed, (size_t)n, digest);
    snprintf(s->instance, sizeof s->instance, "%.16s", digest);
    return 0;
}

struct plm_provider *e2b_provider_new(const struct e2b_config *cfg, struct plm_err *err)
{
    cleanup_free struct e2b_state *s = calloc(1, sizeof *s);
    cleanup_free struct plm_provider *p = calloc(1, sizeof *p);
    if (!s || !p) {
        plm_fail(err, ENOMEM, PLM_E_INTERNAL, "out of memory");
        return NULL;
    }
    curl_global_init(CURL_GLOBAL_DEFAULT); /* before any thread of ours exists */
    pthread_mutex_init(&s->mu, NULL);
    pthread_mutex_init(&s->rmu, NULL);
    clock_cond_init(&s->rcv);
    share_init(s);
    if (configure(s, cfg, err) < 0) {
        plm_err_wrap(err, "e2b provider");
        state_free(take_ptr(&s)); /* its locks and the curl globals were set up */
        return NULL;
    }
    p->ops = &e2b_ops;
    p->state = take_ptr(&s);
    return take_ptr(&p);
}
