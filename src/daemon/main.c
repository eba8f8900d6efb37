/* main.c: plimsolld. Configuration from the environment, the provider and its startup proof,
 * the listener, and a graceful drain on SIGTERM.
 * Invariant: nothing is served until the provider's preflight and smoke test passed and its
 * proven tier meets SANDBOX_MIN_ISOLATION; any failure before that exits non-zero. */
#include <jansson.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "../broker/profiles.h"
#include "../core/admission.h"
#include "../core/log_hook.h"
#include "../core/spend.h"
#include "../server/auth.h"
#include "../server/log.h"
#include "../server/metrics_series.h"
#include "../server/server.h"
#include "../server/tls.h"
#include "../server/session_rpc.h"
#include "../server/ui_ring.h"
#include "config.h"
#include "config_table.h"
#include "providers.h"

extern char **environ;

#define DRAIN_MAX_S 360 /* the reference drains for up to 6 minutes */

static const char *env_get(const char *name) { return getenv(name); }

static int die(const char *what, const struct plm_err *err)
{
    fprintf(stderr, "plimsolld: %s: %s\n", what, err->msg);
    return 1;
}

/* The providers' startup progress (plm_progress), as info lines. */
static void log_progress(const char *provider, const char *step, const char *detail)
{
    log_event("info", "provider_progress",
              json_pack("{s:s, s:s, s:s}", "provider", provider, "step", step, "detail", detail));
}

/* The lower layers' own lines (plm_log): their fields arrive as JSON object members. */
static void log_lower(const char *level, const char *event, const char *fields)
{
    char wrapped[1100];
    snprintf(wrapped, sizeof wrapped, "{%.1090s}", fields);
    json_t *f = json_loads(wrapped, 0, NULL);
    if (!json_is_object(f))
        json_decref(f), f = json_pack("{s:s}", "detail", "unparseable log fields");
    log_event(level, event, f);
}

static void log_started(const struct plm_config *cfg, struct plm_provider *p, struct srv *s, struct auth *a)
{
    json_t *f = json_object();
    json_object_set_new(f, "port", json_integer(srv_port(s)));
    json_object_set_new(f, "addr", json_string(cfg->addr));
    if (srv_metrics_port(s))
        json_object_set_new(f, "metrics_port", json_integer(srv_metrics_port(s)));
    json_object_set_new(f, "provider", json_string(p->ops->name));
    json_object_set_new(f, "tier", json_string(tier_name(p->ops->tier(p))));
    const char *mode = auth_mode(a) == AUTH_CLIENTS ? "clients" : auth_mode(a) == AUTH_TOKEN ? "token" : "open";
    json_object_set_new(f, "auth", json_string(mode));
    json_object_set_new(f, "max_concurrent", json_integer(cfg->max_concurrent));
    json_object_set_new(f, "per_key_concurrent", json_integer(cfg->per_key_concurrent));
    json_object_set_new(f, "rate_per_min", json_integer(cfg->rate_per_min));
    json_object_set_new(f, "rate_burst", json_integer(cfg->rate_burst));
    json_object_set_new(f, "tls", json_boolean(cfg->tls_cert != NULL));
    log_event("info", "listening", f);
}

/* The clients file's paid_seconds_per_day against the provider: only e2b bills by the second, so
 * elsewhere the allowances bound nothing and the log says so (a clients file may be shared by
 * daemons of several providers, so this is no error). Hardened mode on e2b needs one on every
 * caller: a caller without one could spend the operator's money up to the daemon's allowance. */
static int check_paid_allowances(const struct plm_config *cfg, const struct auth *a)
{
    const char *first;
    size_t uncapped = auth_uncapped(a, &first);
    if (cfg->provider != CFG_E2B) {
        if (auth_capped(a) > 0)
            log_event("warning", "paid_allowance_unused",
                      json_pack("{s:I, s:s, s:s}", "clients", (json_int_t)auth_capped(a), "provider",
                                cfg->provider_name ? cfg->provider_name : "disabled", "detail",
                                "paid_seconds_per_day bounds only a provider billed by the second (e2b)"));
        return 0;
    }
    if (cfg->hardened && (auth_mode(a) != AUTH_CLIENTS || uncapped > 0)) {
        fprintf(stderr, "plimsolld: configuration: PLIMSOLL_HARDENED=1 on e2b needs paid_seconds_per_day on every "
                        "client in PLIMSOLL_CLIENTS_FILE; %zu client%s none (first: \"%s\")\n",
                uncapped, uncapped == 1 ? " has" : "s have", first ? first : "");
        return -1;
    }
    return 0;
}

/* SIGHUP: new handshakes use the pair as it is on disk now; open connections keep theirs; a pair
 * that does not load is logged and the old one kept. */
static void reload_tls(struct tls_store *tls)
{
    struct plm_err err = {0};
    json_t *f = json_object();
    if (!tls) {
        log_event("info", "sighup_ignored", f); /* no TLS: nothing to reload */
        return;
    }
    if (tls_store_reload(tls, &err) < 0) {
        json_object_set_new(f, "error", json_string(err.msg));
        log_event("error", "tls_reload_failed", f);
        return;
    }
    log_event("info", "tls_reloaded", f);
}

static void drain(struct srv *s, struct adm *adm)
{
    srv_quiesce(s);
    for (int i = 0; i < DRAIN_MAX_S * 10; i++) {
        if (srv_active(s) == 0 && adm_inflight(adm) == 0)
            return;
        struct timespec ts = {0, 100 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
    log_event("warning", "drain_timeout", NULL);
}

int main(int argc, char **argv)
{
    if (argc > 1) {
        if (!strcmp(argv[1], "-h") || !strcmp(argv[1], "--help") || !strcmp(argv[1], "help")) {
            config_help(stdout);
            return 0;
        }
        fprintf(stderr, "plimsolld: takes no arguments (see plimsolld -h); got \"%s\"\n", argv[1]);
        return 2;
    }
    /* Signals are taken synchronously by this thread; every thread started later inherits the mask. */
    sigset_t sigs;
    sigemptyset(&sigs);
    sigaddset(&sigs, SIGTERM);
    sigaddset(&sigs, SIGINT);
    sigaddset(&sigs, SIGHUP); /* reloads the TLS pair */
    pthread_sigmask(SIG_BLOCK, &sigs, NULL);
    signal(SIGPIPE, SIG_IGN);

    struct plm_err err = {0};
    struct plm_config cfg;
    config_warn_unknown(environ);
    if (config_load(env_get, &cfg, &err) < 0)
        return die("configuration", &err);
    log_set_text(cfg.log_text);

    struct tls_store *tls = NULL;
    if (cfg.tls_cert && !(tls = tls_store_new(cfg.tls_cert, cfg.tls_key, &err)))
        return die("configuration", &err);
    struct auth *auth = auth_new(cfg.clients_file, cfg.token, &err);
    if (!auth) {
        tls_store_free(tls);
        return die("configuration", &err);
    }
    if (auth_mode(auth) == AUTH_OPEN && cfg.provider != CFG_DISABLED && !cfg.insecure) {
        fprintf(stderr, "plimsolld: configuration: SANDBOX_PROVIDER=%s runs code, but neither PLIMSOLL_TOKEN nor "
                        "PLIMSOLL_CLIENTS_FILE is set; set one, or PLIMSOLL_INSECURE=1 for open dev mode\n",
                cfg.provider_name);
        auth_free(auth);
        tls_store_free(tls);
        return 1;
    }

    if (check_paid_allowances(&cfg, auth) < 0) {
        auth_free(auth);
        tls_store_free(tls);
        return 1;
    }
    struct brk_profiles *grants = NULL;
    if (cfg.grants_file) {
        grants = brk_profiles_load(cfg.grants_file, NULL, &err);
        if (!grants) {
            auth_free(auth);
            tls_store_free(tls);
            return die("configuration: PLIMSOLL_GRANTS_FILE", &err);
        }
    }
    plm_progress_set(log_progress);
    plm_log_set(log_lower);
    struct plm_provider *p = providers_build(&cfg, &err);
    if (!p) {
        brk_profiles_free(grants);
        auth_free(auth);
        tls_store_free(tls);
        return die("provider", &err);
    }
    int rc = 1;
    static struct rpc_counters counters;
    struct adm *adm = NULL;
    struct srv *srv = NULL;
    struct sess_svc *sessions = NULL;
    struct ui_ring *ring = NULL; /* PLIMSOLL_UI=1 only */
    struct spend *spend = NULL;  /* a provider billed by the second only */
    if ((p->ops->preflight && p->ops->preflight(p, &err) < 0)) {
        die("preflight", &err);
        goto out;
    }
    if (p->ops->smoke_test && p->ops->smoke_test(p, &err) < 0) {
        die("startup proof (smoke test)", &err);
        goto out;
    }
    if (cfg.min_isolation != PLM_TIER_UNKNOWN && !tier_meets(p->ops->tier(p), cfg.min_isolation)) {
        fprintf(stderr, "plimsolld: SANDBOX_MIN_ISOLATION=%s, but provider %s proved only %s; refusing to start\n",
                tier_name(cfg.min_isolation), p->ops->name, tier_name(p->ops->tier(p)));
        goto out;
    }
    struct plm_describe pd;
    p->ops->describe(p, &pd); /* the per-run memory SANDBOX_TOTAL_MEMORY_MB reserves */
    if (config_memory_budget(cfg.total_memory_mb, pd.memory_mb, p->ops->name, &err) < 0) {
        die("configuration", &err);
        goto out;
    }
    if (pd.billing_teardown_ms && !(spend = spend_new(cfg.paid_seconds_per_day, NULL, NULL))) {
        fprintf(stderr, "plimsolld: out of memory\n");
        goto out;
    }
    struct adm_config ac = {.max_concurrent = cfg.max_concurrent, .per_key_concurrent = cfg.per_key_concurrent,
                            .rate_per_min = cfg.rate_per_min, .rate_burst = cfg.rate_burst,
                            .total_memory_mb = cfg.total_memory_mb, .run_memory_mb = pd.memory_mb};
    adm = adm_new(&ac);
    if (!adm) {
        fprintf(stderr, "plimsolld: out of memory\n");
        goto out;
    }
    if (grants && grants->n && !(counters.host_calls = calloc(grants->n, sizeof *counters.host_calls))) {
        fprintf(stderr, "plimsolld: out of memory\n");
        goto out;
    }
    if (metrics_series_init(grants) < 0) {
        fprintf(stderr, "plimsolld: out of memory\n");
        goto out;
    }
    if (cfg.ui && !(ring = ui_ring_new())) {
        fprintf(stderr, "plimsolld: out of memory\n");
        goto out;
    }
    if (cfg.sessions.max_sessions > 0) { /* sessions.md §3.1, §7: proved before they are offered */
        if (!(sessions = sess_svc_new(&cfg.sessions, p, adm, &err))) {
            die("configuration", &err);
            goto out;
        }
        sess_svc_set_spend(sessions, spend, pd.billing_teardown_ms);
        if (sess_svc_smoke_test(sessions, &err) < 0) {
            fprintf(stderr, "plimsolld: sessions are not ready; refusing to serve: %s\n", err.msg);
            goto out;
        }
    }
    struct srv_config sc = {.addr = cfg.addr, .metrics_addr = cfg.metrics_addr, .auth = auth,
                            .env = {.provider = p, .grants = grants, .adm = adm, .counters = &counters,
                                    .sessions = sessions, .ring = ring, .spend = spend},
                            .max_decode = 2 * cfg.max_concurrent, .max_connections = 1024, .ui = cfg.ui,
                            .allowed_hosts = cfg.allowed_hosts, .tls = tls};
    srv = srv_start(&sc, &err);
    if (!srv) {
        die("listener", &err);
        goto out;
    }
    log_started(&cfg, p, srv, auth);

    int sig = 0;
    while (sigwait(&sigs, &sig) == 0 && sig == SIGHUP)
        reload_tls(tls);
    json_t *f = json_object();
    json_object_set_new(f, "signal", json_string(sig == SIGTERM ? "SIGTERM" : "SIGINT"));
    log_event("info", "draining", f);
    sess_svc_shutdown(sessions); /* every session ends SHUTDOWN and gives its slot back */
    drain(srv, adm);
    log_event("info", "stopped", NULL);
    rc = 0;
out:
    srv_free(srv);
    sess_svc_free(sessions);
    ui_ring_free(ring);
    adm_free(adm);
    spend_free(spend); /* after the sessions: their meters are stopped */
    plm_provider_free(p);
    free(counters.host_calls);
    metrics_series_free();
    brk_profiles_free(grants);
    auth_free(auth);
    tls_store_free(tls);
    return rc;
}
