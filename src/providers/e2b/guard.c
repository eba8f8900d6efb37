/* guard.c: the egress guard's listener and its per-run tokens (guard.h).
 * Owns: the libmicrohttpd daemon, the listening socket, the token table.
 * Trusts: nothing a request carries; a token is compared only by its SHA-256 (the table never
 * holds a token), and a call reaches a run's broker only while that run's token is registered.
 * Invariant: a request thread holds the run's cb_ctx (api.hold) from the lookup until its call
 * returned, so unregistering never frees what a call uses; the token never reaches a log line. */
#include <arpa/inet.h>
#include <errno.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "../../core/hostport.h"
#include "../../core/record.h"
#include "internal.h"

struct entry {
    char key[PLM_HEX_SHA256]; /* sha256 of the token */
    struct plm_host_api api;
    unsigned inflight;
};

struct e2b_guard {
    struct MHD_Daemon *mhd;
    uint16_t port;
    char path[256];
    pthread_mutex_t mu;
    pthread_cond_t cv;
    struct entry *v;
    size_t n, cap;
    unsigned inflight; /* admission slots taken */
};

struct req {
    struct entry *e; /* NULL until admitted; points into no table (a copy) */
    struct plm_host_api api;
    char key[PLM_HEX_SHA256];
    uint8_t *buf;
    size_t len;
    bool over, admitted, held;
    bool begun;     /* the head was checked (the first access-handler call happened) */
    bool has_query; /* the raw request target had a '?' (even a bare one) */
};

/* Called with the raw request target before anything else: the one place a bare '?' shows. Its
 * answer becomes the request's state. */
static void *on_uri(void *cls, const char *uri, struct MHD_Connection *c)
{
    (void)cls, (void)c;
    struct req *r = calloc(1, sizeof *r);
    if (r)
        r->has_query = strchr(uri, '?') != NULL;
    return r;
}

static enum MHD_Result send_text(struct MHD_Connection *c, unsigned status, const char *ctype, const void *body,
                                 size_t len, bool retry_after)
{
    struct MHD_Response *r = MHD_create_response_from_buffer(len, (void *)body, MHD_RESPMEM_MUST_COPY);
    if (!r)
        return MHD_NO;
    MHD_add_response_header(r, "Content-Type", ctype ? ctype : "application/octet-stream");
    if (retry_after)
        MHD_add_response_header(r, "Retry-After", "1");
    enum MHD_Result ok = MHD_queue_response(c, status, r);
    MHD_destroy_response(r);
    return ok;
}

static enum MHD_Result send_error(struct MHD_Connection *c, unsigned status, const char *msg)
{
    char body[256];
    /* msg is ours (fixed words, or the parser's printable reason without quotes) */
    int n = snprintf(body, sizeof body, "{\"error\":\"%.200s\"}", msg);
    return send_text(c, status, "application/json", body, n > 0 ? (size_t)n : 0, status == 503);
}

/* Looks the token up and holds its run; fills r->api. */
static bool lookup_hold(struct e2b_guard *g, const char *token, struct req *r)
{
    char key[PLM_HEX_SHA256];
    rec_sha256_hex(token, strlen(token), key);
    bool found = false;
    pthread_mutex_lock(&g->mu);
    for (size_t i = 0; i < g->n && !found; i++) {
        if (strcmp(g->v[i].key, key))
            continue;
        found = true;
        r->api = g->v[i].api;
        memcpy(r->key, key, sizeof key);
        g->v[i].inflight++;
        if (r->api.hold)
            r->api.hold(r->api.cb_ctx);
        r->held = true;
    }
    pthread_mutex_unlock(&g->mu);
    return found;
}

static void unhold(struct e2b_guard *g, struct req *r)
{
    if (!r->held)
        return;
    r->held = false;
    if (r->api.release)
        r->api.release(r->api.cb_ctx);
    pthread_mutex_lock(&g->mu);
    for (size_t i = 0; i < g->n; i++)
        if (!strcmp(g->v[i].key, r->key) && g->v[i].inflight)
            g->v[i].inflight--;
    pthread_cond_broadcast(&g->cv);
    pthread_mutex_unlock(&g->mu);
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *c, const char *url, const char *method,
                                  const char *version, const char *upload, size_t *upload_size, void **con_cls)
{
    (void)version;
    struct e2b_guard *g = cls;
    struct req *r = *con_cls;
    if (!r)
        return MHD_NO; /* out of memory in on_uri */
    if (!r->begun) {
        r->begun = true;
        if (strcmp(method, "POST") || strcmp(url, g->path) || r->has_query)
            return send_error(c, 404, "not found");
        const char *tok = MHD_lookup_connection_value(c, MHD_HEADER_KIND, E2B_GUARD_HEADER);
        if (!tok || !*tok)
            return send_error(c, 401, "missing egress guard credential");
        if (!e2b_guard_token_ok(tok, strlen(tok)) || !lookup_hold(g, tok, r))
            return send_error(c, 401, "unknown or expired egress guard credential");
        pthread_mutex_lock(&g->mu);
        r->admitted = g->inflight < E2B_GUARD_INFLIGHT;
        if (r->admitted)
            g->inflight++;
        pthread_mutex_unlock(&g->mu);
        if (!r->admitted)
            return send_error(c, 503, "egress guard at capacity");
        return MHD_YES;
    }
    if (*upload_size) {
        size_t n = *upload_size;
        *upload_size = 0;
        if (!r->admitted || r->over || r->len + n > E2B_GUARD_BODY_MAX) {
            r->over = true; /* read and dropped: the answer is 413 */
            return MHD_YES;
        }
        uint8_t *nb = realloc(r->buf, r->len + n);
        if (!nb)
            return MHD_NO;
        memcpy(nb + r->len, upload, n);
        r->buf = nb;
        r->len += n;
        return MHD_YES;
    }
    if (!r->admitted || !r->held)
        return MHD_YES; /* an answer is already queued (the body was read and dropped) */
    if (r->over)
        return send_error(c, 413, "request body too large");
    struct e2b_guard_call call;
    char why[128];
    if (e2b_guard_parse(r->buf, r->len, &call, why, sizeof why)) {
        char msg[200];
        snprintf(msg, sizeof msg, "bad guard request: %s", why);
        return send_error(c, 400, msg);
    }
    struct plm_host_reply rep = {0};
    r->api.call(r->api.cb_ctx, call.method, call.path, call.body, call.len, &rep);
    e2b_guard_call_done(&call);
    enum MHD_Result ok;
    /* a 1xx cannot be a final answer; anything outside 200..599 is the broker's fault */
    if (rep.status < 200 || rep.status > 599)
        ok = send_error(c, 502, "host api unavailable");
    else
        ok = send_text(c, (unsigned)rep.status, rep.content_type, rep.body, rep.len, false);
    free(rep.body);
    free(rep.content_type);
    return ok;
}

static void on_completed(void *cls, struct MHD_Connection *c, void **con_cls, enum MHD_RequestTerminationCode toe)
{
    (void)c, (void)toe;
    struct e2b_guard *g = cls;
    struct req *r = *con_cls;
    if (!r)
        return;
    if (r->admitted) {
        pthread_mutex_lock(&g->mu);
        g->inflight--;
        pthread_mutex_unlock(&g->mu);
    }
    unhold(g, r);
    free(r->buf);
    free(r);
    *con_cls = NULL;
}

int e2b_guard_start(const char *addr, const char *path, struct e2b_guard **out, struct plm_err *err)
{
    struct sockaddr_storage ss;
    socklen_t sl;
    if (plm_parse_hostport(addr, &ss, &sl) < 0)
        return plm_err_set(err, 0, PLM_E_INVALID, PLM_REFUSAL_NONE,
                           "PLIMSOLL_GUARD_ADDR=\"%s\": expected host:port, [v6]:port or :port", addr);
    if (strlen(path) >= 256)
        return plm_err_set(err, 0, PLM_E_INVALID, PLM_REFUSAL_NONE, "E2B_GUARD_URL: the path is too long");
    int fd = socket(ss.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
    int one = 1;
    if (fd < 0 || setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) < 0 ||
        bind(fd, (struct sockaddr *)&ss, sl) < 0 || listen(fd, 128) < 0) {
        int e = errno;
        if (fd >= 0)
            close(fd);
        return plm_err_set(err, e, PLM_E_INVALID, PLM_REFUSAL_NONE, "PLIMSOLL_GUARD_ADDR=%s: cannot listen: %s", addr,
                           strerror(e));
    }
    struct e2b_guard *g = calloc(1, sizeof *g);
    if (!g) {
        close(fd);
        return plm_err_set(err, ENOMEM, PLM_E_INTERNAL, PLM_REFUSAL_NONE, "out of memory");
    }
    snprintf(g->path, sizeof g->path, "%s", path);
    pthread_mutex_init(&g->mu, NULL);
    pthread_cond_init(&g->cv, NULL);
    struct sockaddr_storage bound;
    socklen_t bl = sizeof bound;
    if (getsockname(fd, (struct sockaddr *)&bound, &bl) == 0)
        g->port = ntohs(bound.ss_family == AF_INET6 ? ((struct sockaddr_in6 *)&bound)->sin6_port
                                                    : ((struct sockaddr_in *)&bound)->sin_port);
    unsigned flags = MHD_USE_THREAD_PER_CONNECTION | MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_POLL | MHD_USE_ITC;
    g->mhd = MHD_start_daemon(flags, 0, NULL, NULL, on_request, g, MHD_OPTION_LISTEN_SOCKET, fd,
                              MHD_OPTION_CONNECTION_LIMIT, (unsigned)E2B_GUARD_CONN_MAX,
                              MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)E2B_GUARD_TIMEOUT_S,
                              MHD_OPTION_CONNECTION_MEMORY_LIMIT, (size_t)(64 * 1024),
                              MHD_OPTION_URI_LOG_CALLBACK, on_uri, g,
                              MHD_OPTION_NOTIFY_COMPLETED, on_completed, g, MHD_OPTION_END);
    if (!g->mhd) {
        close(fd);
        pthread_mutex_destroy(&g->mu);
        pthread_cond_destroy(&g->cv);
        free(g);
        return plm_err_set(err, 0, PLM_E_INTERNAL, PLM_REFUSAL_NONE, "PLIMSOLL_GUARD_ADDR=%s: cannot start", addr);
    }
    *out = g;
    return 0;
}

uint16_t e2b_guard_port(const struct e2b_guard *g)
{
    return g ? g->port : 0;
}

void e2b_guard_stop(struct e2b_guard *g)
{
    if (!g)
        return;
    MHD_stop_daemon(g->mhd); /* joins every connection thread */
    free(g->v);
    pthread_mutex_destroy(&g->mu);
    pthread_cond_destroy(&g->cv);
    free(g);
}

int e2b_guard_register(struct e2b_guard *g, const struct plm_host_api *api, char token[E2B_GUARD_TOKEN_LEN + 1],
                       struct plm_err *err)
{
    memcpy(token, "crg_", 4);
    if (e2b_random_hex(token + 4, 32) < 0)
        return plm_err_set(err, errno, PLM_E_INTERNAL, PLM_REFUSAL_NONE, "getrandom failed");
    struct entry e = {.api = *api};
    rec_sha256_hex(token, E2B_GUARD_TOKEN_LEN, e.key);
    pthread_mutex_lock(&g->mu);
    if (g->n == g->cap) {
        size_t nc = g->cap ? g->cap * 2 : 16;
        struct entry *nv = realloc(g->v, nc * sizeof *nv);
        if (!nv) {
            pthread_mutex_unlock(&g->mu);
            return plm_err_set(err, ENOMEM, PLM_E_INTERNAL, PLM_REFUSAL_NONE, "out of memory");
        }
        g->v = nv, g->cap = nc;
    }
    g->v[g->n++] = e;
    pthread_mutex_unlock(&g->mu);
    return 0;
}

void e2b_guard_unregister(struct e2b_guard *g, char token[E2B_GUARD_TOKEN_LEN + 1])
{
    if (!g || !token[0])
        return;
    char key[PLM_HEX_SHA256];
    rec_sha256_hex(token, strlen(token), key);
    explicit_bzero(token, E2B_GUARD_TOKEN_LEN + 1);
    pthread_mutex_lock(&g->mu);
    for (;;) {
        size_t i = 0;
        while (i < g->n && strcmp(g->v[i].key, key))
            i++;
        if (i == g->n)
            break;
        /* Without hold/release a call in flight still uses cb_ctx: wait for it, then look again
         * (the table may have moved meanwhile). */
        if (!g->v[i].api.hold && g->v[i].inflight) {
            pthread_cond_wait(&g->cv, &g->mu);
            continue;
        }
        g->v[i] = g->v[--g->n];
        break;
    }
    pthread_mutex_unlock(&g->mu);
}
