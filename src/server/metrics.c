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

static enum MHD_Result count_authz(void *cls, enum MHD_ValueKind kind, const char *key, const char *value)
{
    (void)kind;
    (void)value;
    if (strcasecmp(key, MHD_HTTP_HEADER_AUTHORIZATION) == 0)
        (*(unsigned *)cls)++;
    return MHD_YES;
}

/* The series hold every grant profile's name and every caller's counts: the scrape needs a
 * bearer with the `metrics` scope (clients file), the shared token, or dev mode. NULL: allowed. */
static const char *refuse_scrape(struct MHD_Connection *conn, unsigned *status)
{
    unsigned n = 0;
    MHD_get_connection_values(conn, MHD_HEADER_KIND, count_authz, &n);
    const char *h = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_AUTHORIZATION);
    struct principal who;
    struct plm_err err;
    if (auth_authenticate(metrics_auth, n == 1 ? h : NULL, n, &who, &err) < 0) {
        *status = 401;
        return "unauthenticated: /metrics needs a bearer token with the metrics scope\n";
    }
    if (!who.may_metrics) {
        *status = 403;
        return "permission denied: token lacks scope \"metrics\"\n";
    }
    return NULL;
}

static enum MHD_Result on_metrics(void *cls, struct MHD_Connection *conn, const char *url, const char *method,
                                  const char *version, const char *upload, size_t *upload_size, void **con_cls)
{
    (void)cls, (void)version, (void)upload, (void)upload_size, (void)con_cls;
    const struct rpc_env *env = metrics_env;
    unsigned status = 200;
    char *body = NULL;
    const char *refused = NULL;
    if (strcmp(url, "/metrics") != 0 || strcmp(method, "GET") != 0) {
        status = 404;
        body = strdup("not found\n");
    } else if ((refused = refuse_scrape(conn, &status))) {
        body = strdup(refused);
    } else {
        body = metrics_render(env);
    }
    if (!body)
        return MHD_NO;
    struct MHD_Response *r = MHD_create_response_from_buffer(strlen(body), body, MHD_RESPMEM_MUST_FREE);
    if (!r) {
        free(body);
        return MHD_NO;
    }
    MHD_add_response_header(r, "Content-Type", "text/plain; version=0.0.4");
    MHD_add_response_header(r, MHD_HTTP_HEADER_CONNECTION, "close");
    enum MHD_Result rc = MHD_queue_response(conn, status, r);
    MHD_destroy_response(r);
    return rc;
}

struct MHD_Daemon *metrics_start(struct gate *g, const struct srv_config *cfg)
{
    metrics_env = &cfg->env;
    metrics_auth = cfg->auth;
    (void)g;
    /* Behind its own gate (which terminates TLS when configured): MHD sees only complete,
     * checked heads relayed over a socketpair, and a GET has no body, so the one polling thread
     * answers each at once; the gate's per-peer cap keeps one address from filling the 16. */
    return MHD_start_daemon(MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_POLL | MHD_USE_ITC | MHD_USE_NO_LISTEN_SOCKET,
                            0, NULL, NULL, on_metrics, NULL, MHD_OPTION_CONNECTION_LIMIT, (unsigned)16,
                            MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)10, MHD_OPTION_END);
}
