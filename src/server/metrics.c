/* metrics.c: the metrics listener and its scope check; the series are metrics_series.c's. */
#include "metrics.h"

#include <jansson.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "../core/limits.h"
#include "log.h"
#include "metrics_series.h"

static const struct rpc_env *metrics_env;
static const struct auth *metrics_auth;

void metrics_readyz_failed(const char *detail)
{
    static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
    static time_t last;
    time_t now = time(NULL);
    pthread_mutex_lock(&mu);
    bool due = last == 0 || now - last >= 30;
    if (due)
        last = now;
    pthread_mutex_unlock(&mu);
    if (due) {
        json_t *f = json_object();
        json_t *d = json_string(detail);
        json_object_set_new(f, "detail", d ? d : json_string("(not UTF-8)"));
        log_event("warning", "not_ready", f);
    }
}

/* The series hold every grant profile's name and every caller's counts: the scrape needs a
 * bearer with the `metrics` scope (clients file), the shared token, or dev mode. NULL: allowed. */
static const char *refuse_scrape(const struct gate_req *rq, unsigned *status)
{
    char buf[LIM_TOKEN_MAX + 16];
    unsigned n = 0;
    const char *h = gate_req_header_str(rq, "Authorization", buf, sizeof buf, &n);
    struct principal who;
    struct plm_err err;
    if (auth_authenticate(metrics_auth, h, n, &who, &err) < 0) {
        *status = 401;
        return "unauthenticated: /metrics needs a bearer token with the metrics scope\n";
    }
    if (!who.may_metrics) {
        *status = 403;
        return "permission denied: token lacks scope \"metrics\"\n";
    }
    return NULL;
}

void metrics_answer(const struct srv_config *cfg, struct gate_req *rq)
{
    metrics_env = &cfg->env;
    metrics_auth = cfg->auth;
    unsigned status = 200;
    const char *refused = NULL;
    struct gate_resp *rs = &rq->resp;
    rs->close = true; /* a scrape every few seconds needs no kept connection */
    if (strcmp(rq->path, "/metrics") != 0 || strcmp(rq->method, "GET") != 0) {
        gate_resp_set(rs, 404, "text/plain; version=0.0.4", "not found\n", 10, false);
    } else if ((refused = refuse_scrape(rq, &status))) {
        gate_resp_set(rs, status, "text/plain; version=0.0.4", (char *)refused, strlen(refused), false);
    } else {
        char *body = metrics_render(metrics_env);
        if (!body)
            gate_resp_text(rs, 500, "out of memory\n");
        else
            gate_resp_set(rs, 200, "text/plain; version=0.0.4", body, strlen(body), true);
    }
}
