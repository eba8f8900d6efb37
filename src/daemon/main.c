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

/* A stage's failure, said on stderr; returns -1 so a stage writes `return die(...)`. */
static int die(const char *what, const struct plm_err *err)
{
    fprintf(stderr, "plimsolld: %s: %s\n", what, err->msg);
    return -1;
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

/* Everything the daemon holds while it runs. One owner, one release path (daemon_release, a
 * cleanup attribute on main's copy): each stage only fills fields, and whatever a failed stage
 * left behind is released there, in the reverse order of the stages. */
struct daemon {
    sigset_t sigs;
    struct plm_config cfg;
    struct tls_store *tls;
    struct auth *auth;
    struct brk_profiles *grants;
    struct plm_provider *p;
    struct plm_describe pd; /* what the provider states once proved */
    struct rpc_counters counters;
    struct spend *spend;  /* a provider billed by the second only */
    struct adm *adm;
    struct ui_ring *ring; /* PLIMSOLL_UI=1 only */
    struct sess_svc *sessions;
    struct srv *srv;
};

static void daemon_release(struct daemon *d)
{
    srv_free(d->srv);
    sess_svc_free(d->sessions);
    ui_ring_free(d->ring);
    adm_free(d->adm);
    spend_free(d->spend); /* after the sessions: their meters are stopped */
    plm_provider_free(d->p);
    free(d->counters.host_calls);
    metrics_series_free();
    brk_profiles_free(d->grants);
    auth_free(d->auth);
    tls_store_free(d->tls);
}
#define cleanup_daemon __attribute__((cleanup(daemon_release)))

static int out_of_memory(void)
{
    fprintf(stderr, "plimsolld: out of memory\n");
    return -1;
}

/* Stage 1: the environment, read and checked (config.c), and the log's format. */
static int stage_configure(struct daemon *d)
{
    struct plm_err err = {0};
    config_warn_unknown(environ);
    if (config_load(env_get, &d->cfg, &err) < 0)
        return die("configuration", &err);
    log_set_text(d->cfg.log_text);
    return 0;
}

/* Stage 2: who may call, over what: the TLS pair, the credentials, the grant profiles. */
static int stage_access(struct daemon *d)
{
    struct plm_err err = {0};
    const struct plm_config *cfg = &d->cfg;
    if (cfg->tls_cert && !(d->tls = tls_store_new(cfg->tls_cert, cfg->tls_key, &err)))
        return die("configuration", &err);
    if (!(d->auth = auth_new(cfg->clients_file, cfg->token, &err)))
        return die("configuration", &err);
    if (auth_mode(d->auth) == AUTH_OPEN && cfg->provider != CFG_DISABLED && !cfg->insecure) {
        fprintf(stderr, "plimsolld: configuration: SANDBOX_PROVIDER=%s runs code, but neither PLIMSOLL_TOKEN nor "
                        "PLIMSOLL_CLIENTS_FILE is set; set one, or PLIMSOLL_INSECURE=1 for open dev mode\n",
                cfg->provider_name);
        return -1;
    }
    if (check_paid_allowances(cfg, d->auth) < 0)
        return -1;
    if (cfg->grants_file && !(d->grants = brk_profiles_load(cfg->grants_file, NULL, &err)))
        return die("configuration: PLIMSOLL_GRANTS_FILE", &err);
    return 0;
}

/* Stage 3: the provider, built and proved (preflight, smoke test, the floor), and the memory
 * budget against what one of its runs reserves. */
static int stage_provider(struct daemon *d)
{
    struct plm_err err = {0};
    plm_progress_set(log_progress);
    plm_log_set(log_lower);
    if (!(d->p = providers_build(&d->cfg, &err)))
        return die("provider", &err);
    struct plm_provider *p = d->p;
    if (p->ops->preflight && p->ops->preflight(p, &err) < 0)
        return die("preflight", &err);
    if (p->ops->smoke_test && p->ops->smoke_test(p, &err) < 0)
        return die("startup proof (smoke test)", &err);
    if (d->cfg.min_isolation != PLM_TIER_UNKNOWN && !tier_meets(p->ops->tier(p), d->cfg.min_isolation)) {
        fprintf(stderr, "plimsolld: SANDBOX_MIN_ISOLATION=%s, but provider %s proved only %s; refusing to start\n",
                tier_name(d->cfg.min_isolation), p->ops->name, tier_name(p->ops->tier(p)));
        return -1;
    }
    p->ops->describe(p, &d->pd); /* the per-run memory SANDBOX_TOTAL_MEMORY_MB reserves */
    if (config_memory_budget(d->cfg.total_memory_mb, d->pd.memory_mb, p->ops->name, &err) < 0)
        return die("configuration", &err);
    return 0;
}

/* Stage 4: admission, the paid allowance, the counters and the UI's ring. */
static int stage_admission(struct daemon *d)
{
    const struct plm_config *cfg = &d->cfg;
    if (d->pd.billing_teardown_ms && !(d->spend = spend_new(cfg->paid_seconds_per_day, NULL, NULL)))
        return out_of_memory();
    struct adm_config ac = {.max_concurrent = cfg->max_concurrent, .per_key_concurrent = cfg->per_key_concurrent,
                            .rate_per_min = cfg->rate_per_min, .rate_burst = cfg->rate_burst,
                            .total_memory_mb = cfg->total_memory_mb, .run_memory_mb = d->pd.memory_mb};
    if (!(d->adm = adm_new(&ac)))
        return out_of_memory();
    if (d->grants && d->grants->n && !(d->counters.host_calls = calloc(d->grants->n, sizeof *d->counters.host_calls)))
        return out_of_memory();
    if (metrics_series_init(d->grants) < 0)
        return out_of_memory();
    if (cfg->ui && !(d->ring = ui_ring_new()))
        return out_of_memory();
    return 0;
}

/* Stage 5: sessions (sessions.md §3.1, §7): proved before they are offered. */
static int stage_sessions(struct daemon *d)
{
    struct plm_err err = {0};
    if (d->cfg.sessions.max_sessions == 0)
        return 0;
    if (!(d->sessions = sess_svc_new(&d->cfg.sessions, d->p, d->adm, &err)))
        return die("configuration", &err);
    sess_svc_set_spend(d->sessions, d->spend, d->pd.billing_teardown_ms);
    if (sess_svc_smoke_test(d->sessions, &err) < 0) {
        fprintf(stderr, "plimsolld: sessions are not ready; refusing to serve: %s\n", err.msg);
        return -1;
    }
    return 0;
}

/* Stage 6: the listeners. */
static int stage_listen(struct daemon *d)
{
    struct plm_err err = {0};
    const struct plm_config *cfg = &d->cfg;
    struct srv_config sc = {.addr = cfg->addr, .metrics_addr = cfg->metrics_addr, .auth = d->auth,
                            .env = {.provider = d->p, .grants = d->grants, .adm = d->adm, .counters = &d->counters,
                                    .sessions = d->sessions, .ring = d->ring, .spend = d->spend},
                            .max_decode = 2 * cfg->max_concurrent, .max_connections = 1024, .ui = cfg->ui,
                            .allowed_hosts = cfg->allowed_hosts, .tls = d->tls};
    if (!(d->srv = srv_start(&sc, &err)))
        return die("listener", &err);
    log_started(cfg, d->p, d->srv, d->auth);
    return 0;
}

/* Serving: SIGHUP reloads the TLS pair; SIGTERM or SIGINT ends every session, then drains. */
static void serve_until_stopped(struct daemon *d)
{
    int sig = 0;
    while (sigwait(&d->sigs, &sig) == 0 && sig == SIGHUP)
        reload_tls(d->tls);
    json_t *f = json_object();
    json_object_set_new(f, "signal", json_string(sig == SIGTERM ? "SIGTERM" : "SIGINT"));
    log_event("info", "draining", f);
    sess_svc_shutdown(d->sessions); /* every session ends SHUTDOWN and gives its slot back */
    drain(d->srv, d->adm);
    log_event("info", "stopped", NULL);
}

/* -h prints the variables; any other argument is refused. -1: go on and start. */
static int arguments(int argc, char **argv)
{
    if (argc <= 1)
        return -1;
    if (!strcmp(argv[1], "-h") || !strcmp(argv[1], "--help") || !strcmp(argv[1], "help")) {
        config_help(stdout);
        return 0;
    }
    fprintf(stderr, "plimsolld: takes no arguments (see plimsolld -h); got \"%s\"\n", argv[1]);
    return 2;
}

int main(int argc, char **argv)
{
    int rc = arguments(argc, argv);
    if (rc >= 0)
        return rc;
    cleanup_daemon struct daemon d = {0};
    /* Signals are taken synchronously by this thread; every thread started later inherits the mask. */
    sigemptyset(&d.sigs);
    sigaddset(&d.sigs, SIGTERM);
    sigaddset(&d.sigs, SIGINT);
    sigaddset(&d.sigs, SIGHUP); /* reloads the TLS pair */
    pthread_sigmask(SIG_BLOCK, &d.sigs, NULL);
    signal(SIGPIPE, SIG_IGN);
    static int (*const stages[])(struct daemon *) = {stage_configure, stage_access,   stage_provider,
                                                     stage_admission, stage_sessions, stage_listen};
    for (size_t i = 0; i < sizeof stages / sizeof *stages; i++)
        if (stages[i](&d) < 0)
            return 1;
    serve_until_stopped(&d);
    return 0;
}
