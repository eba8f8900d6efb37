/* metrics_series.c: what GET /metrics says (wire.md §15), as Prometheus text 0.0.4.
 * Owns: the run-latency histogram (per verdict; one provider per daemon) and the per-route
 * host-call series (a counter and a latency histogram per profile x allowlist route), built once
 * from the loaded grants file before any run, then only added to with atomics.
 * Trusts: profile names (validated identifiers at load) and route templates (canonical paths from
 * the file); both are still escaped as label values, so nothing can break a line.
 * Series: the reference's names and labels (plimsoll_runs_total, plimsoll_runs_failed_total,
 * plimsoll_inflight, plimsoll_shed_total{reason}, plimsoll_host_calls_total{profile,method,route},
 * plimsoll_host_call_latency_seconds{profile,method,route}), then ours (docs/decisions.md). */
#include "metrics_series.h"

#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "../broker/route.h"
#include "../core/buf.h"
#include "../core/spend.h"

#define METRICS_BODY_MAX (16u << 20) /* a scrape past this is refused, never cut */

/* Upper bounds in microseconds; +Inf is the count. */
static const uint64_t run_le_us[] = {5000,    10000,   25000,    50000,    100000,   250000,   500000, 1000000,
                                     2500000, 5000000, 10000000, 30000000, 60000000, 120000000, 300000000};
static const uint64_t call_le_us[] = {5000,   10000,   25000,   50000,    100000,   250000,  500000,
                                      1000000, 2500000, 5000000, 10000000, 30000000, 60000000};
#define RUN_NB (sizeof run_le_us / sizeof *run_le_us)
#define CALL_NB (sizeof call_le_us / sizeof *call_le_us)
_Static_assert(CALL_NB <= RUN_NB, "struct hist is sized for the longer bucket list");

struct hist {
    atomic_uint_fast64_t bucket[RUN_NB]; /* non-cumulative; sized for the longer list */
    atomic_uint_fast64_t count, sum_us;
};

static const char *const verdict_names[] = {"exited", "timed_out", "project", "refused", "error"};
static struct hist run_hist[MS_VERDICT_N];

struct route_series {
    const struct brk_profile *profile;
    const struct brk_route *route;
    atomic_uint_fast64_t calls;
    struct hist latency;
};
static struct route_series *routes; /* every profile's routes, in file order */
static size_t n_routes;
static atomic_uint_fast64_t shed_decode;

static void observe(struct hist *h, const uint64_t *le, size_t nb, uint64_t us)
{
    size_t i = 0;
    while (i < nb && us > le[i])
        i++;
    if (i < nb)
        atomic_fetch_add(&h->bucket[i], 1);
    atomic_fetch_add(&h->count, 1);
    atomic_fetch_add(&h->sum_us, us);
}

int metrics_series_init(const struct brk_profiles *ps)
{
    size_t n = 0;
    for (size_t i = 0; ps && i < ps->n; i++)
        n += ps->v[i].n_routes;
    if (n && !(routes = calloc(n, sizeof *routes)))
        return -1;
    for (size_t i = 0; ps && i < ps->n; i++)
        for (size_t k = 0; k < ps->v[i].n_routes; k++)
            routes[n_routes++] = (struct route_series){.profile = &ps->v[i], .route = &ps->v[i].routes[k]};
    return 0;
}

void metrics_series_free(void)
{
    free(routes);
    routes = NULL;
    n_routes = 0;
}

void metrics_note_run(enum ms_verdict v, uint64_t duration_us)
{
    if (v < MS_VERDICT_N)
        observe(&run_hist[v], run_le_us, RUN_NB, duration_us);
}

void metrics_shed(const char *reason)
{
    if (strcmp(reason, "decode") == 0)
        atomic_fetch_add(&shed_decode, 1);
}

void metrics_note_host_calls(const struct brk_profile *p, const struct brk_trace *t)
{
    /* Calls past the trace's row cap (t->dropped) carry no route: they are in the verdict
     * counters only (docs/decisions.md). */
    for (size_t r = 0; r < t->n_rows; r++) {
        const struct brk_trace_row *row = &t->rows[r];
        for (size_t i = 0; i < n_routes; i++) {
            const struct brk_route *rt = routes[i].route;
            if (routes[i].profile == p && strcmp(brk_method_name(rt->method), row->method) == 0 &&
                strcmp(rt->path, row->route) == 0) {
                atomic_fetch_add(&routes[i].calls, 1);
                observe(&routes[i].latency, call_le_us, CALL_NB, row->latency_us);
                break;
            }
        }
    }
}

/* A label value: backslash, quote and newline escaped as the text format wants. */
static bool label(struct plm_buf *b, const char *s)
{
    bool ok = true;
    for (; *s && ok; s++)
        ok = *s == '\\' ? plm_buf_add(b, "\\\\", 2)
             : *s == '"' ? plm_buf_add(b, "\\\"", 2)
             : *s == '\n' ? plm_buf_add(b, "\\n", 2)
                          : plm_buf_add(b, s, 1);
    return ok;
}

static bool route_labels(struct plm_buf *b, const struct route_series *r)
{
    return plm_buf_add(b, "profile=\"", 9) && label(b, r->profile->name) &&
           plm_buf_printf(b, "\",method=\"%s\",route=\"", brk_method_name(r->route->method)) &&
           label(b, r->route->path) && plm_buf_add(b, "\"", 1);
}

/* One histogram's _bucket/_sum/_count lines; `labels` writes the labels before `le`. */
static bool hist_lines(struct plm_buf *b, const char *name, const struct hist *h, const uint64_t *le, size_t nb,
                       bool (*labels)(struct plm_buf *, const void *), const void *ctx)
{
    uint64_t cum = 0;
    bool ok = true;
    for (size_t i = 0; i <= nb && ok; i++) {
        cum += i < nb ? atomic_load(&h->bucket[i]) : 0;
        uint64_t v = i < nb ? cum : atomic_load(&h->count);
        ok = plm_buf_printf(b, "%s_bucket{", name) && labels(b, ctx);
        if (ok && i < nb)
            ok = plm_buf_printf(b, ",le=\"%g\"} %llu\n", (double)le[i] / 1e6, (unsigned long long)v);
        else if (ok)
            ok = plm_buf_printf(b, ",le=\"+Inf\"} %llu\n", (unsigned long long)v);
    }
    return ok && plm_buf_printf(b, "%s_sum{", name) && labels(b, ctx) &&
           plm_buf_printf(b, "} %.6f\n", (double)atomic_load(&h->sum_us) / 1e6) &&
           plm_buf_printf(b, "%s_count{", name) && labels(b, ctx) &&
           plm_buf_printf(b, "} %llu\n", (unsigned long long)atomic_load(&h->count));
}

static bool route_labels_cb(struct plm_buf *b, const void *ctx) { return route_labels(b, ctx); }

struct run_label {
    const char *provider, *verdict;
};

static bool run_labels_cb(struct plm_buf *b, const void *ctx)
{
    const struct run_label *l = ctx;
    return plm_buf_add(b, "provider=\"", 10) && label(b, l->provider) &&
           plm_buf_printf(b, "\",verdict=\"%s\"", l->verdict);
}

static bool head(struct plm_buf *b, const char *name, const char *type, const char *help)
{
    return plm_buf_printf(b, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

char *metrics_render(const struct rpc_env *env)
{
    const struct rpc_counters *c = env->counters;
    struct plm_buf b = {.max = METRICS_BODY_MAX};
    bool ok =
        head(&b, "plimsoll_runs_total", "counter", "Runs handed to the provider.") &&
        plm_buf_printf(&b, "plimsoll_runs_total %llu\n", (unsigned long long)atomic_load(&c->dispatched)) &&
        head(&b, "plimsoll_runs_failed_total", "counter", "Infrastructure failures of runs (never refusals).") &&
        plm_buf_printf(&b, "plimsoll_runs_failed_total %llu\n", (unsigned long long)atomic_load(&c->failed)) &&
        head(&b, "plimsoll_inflight", "gauge", "Admission slots held (runs, and sessions holding memory).") &&
        plm_buf_printf(&b, "plimsoll_inflight %u\n", adm_inflight(env->adm)) &&
        head(&b, "plimsoll_shed_total", "counter", "Runs shed before dispatch, by reason.") &&
        plm_buf_printf(&b,
                       "plimsoll_shed_total{reason=\"at_capacity\"} %llu\n"
                       "plimsoll_shed_total{reason=\"per_key\"} %llu\n"
                       "plimsoll_shed_total{reason=\"rate\"} %llu\n"
                       "plimsoll_shed_total{reason=\"memory\"} %llu\n"
                       "plimsoll_shed_total{reason=\"decode\"} %llu\n",
                       (unsigned long long)adm_shed_count(env->adm, ADM_SHED_AT_CAPACITY),
                       (unsigned long long)adm_shed_count(env->adm, ADM_SHED_PER_KEY),
                       (unsigned long long)adm_shed_count(env->adm, ADM_SHED_RATE),
                       (unsigned long long)adm_shed_count(env->adm, ADM_SHED_MEMORY),
                       (unsigned long long)atomic_load(&shed_decode));
    if (ok && env->spend) /* only a provider billed by the second has a paid allowance */
        ok = plm_buf_printf(&b,
                            "plimsoll_shed_total{reason=\"paid_caller\"} %llu\n"
                            "plimsoll_shed_total{reason=\"paid_daemon\"} %llu\n",
                            (unsigned long long)spend_refused(env->spend, false),
                            (unsigned long long)spend_refused(env->spend, true));
    if (ok && n_routes)
        ok = head(&b, "plimsoll_host_calls_total", "counter", "Host calls sent upstream, per grant route.");
    for (size_t i = 0; ok && i < n_routes; i++)
        ok = plm_buf_add(&b, "plimsoll_host_calls_total{", 26) && route_labels(&b, &routes[i]) &&
             plm_buf_printf(&b, "} %llu\n", (unsigned long long)atomic_load(&routes[i].calls));
    if (ok && n_routes)
        ok = head(&b, "plimsoll_host_call_latency_seconds", "histogram", "Upstream round trip of host calls.");
    for (size_t i = 0; ok && i < n_routes; i++)
        ok = hist_lines(&b, "plimsoll_host_call_latency_seconds", &routes[i].latency, call_le_us, CALL_NB,
                        route_labels_cb, &routes[i]);
    /* ours */
    ok = ok && head(&b, "plimsoll_refused_total", "counter", "Runs refused before dispatch (not dispatched).") &&
         plm_buf_printf(&b, "plimsoll_refused_total %llu\n", (unsigned long long)atomic_load(&c->refused)) &&
         head(&b, "plimsoll_run_duration_seconds", "histogram", "Run handler latency, by provider and verdict.");
    for (size_t v = 0; ok && v < MS_VERDICT_N; v++) {
        struct run_label l = {.provider = env->provider->ops->name, .verdict = verdict_names[v]};
        ok = hist_lines(&b, "plimsoll_run_duration_seconds", &run_hist[v], run_le_us, RUN_NB, run_labels_cb, &l);
    }
    if (ok && env->grants && c->host_calls)
        ok = head(&b, "plimsoll_host_call_verdicts_total", "counter", "Host calls per grant profile and verdict.");
    for (size_t i = 0; ok && env->grants && c->host_calls && i < env->grants->n; i++) {
        const struct rpc_host_calls *hc = &c->host_calls[i];
        const char *p = env->grants->v[i].name;
        ok = plm_buf_printf(&b,
                            "plimsoll_host_call_verdicts_total{profile=\"%s\",verdict=\"allowed\"} %llu\n"
                            "plimsoll_host_call_verdicts_total{profile=\"%s\",verdict=\"denied\"} %llu\n"
                            "plimsoll_host_call_verdicts_total{profile=\"%s\",verdict=\"shed\"} %llu\n",
                            p, (unsigned long long)atomic_load(&hc->allowed), p,
                            (unsigned long long)atomic_load(&hc->denied), p, (unsigned long long)atomic_load(&hc->shed));
    }
    size_t len;
    return ok ? plm_buf_take(&b, &len) : (plm_buf_done(&b), NULL);
}
