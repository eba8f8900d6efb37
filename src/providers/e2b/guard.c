/* guard.c: the egress guard's listener and its per-run tokens (guard.h).
 * Owns: the guestio server of the listening socket (its confined helper parses every byte a
 *   guest sends: the HTTP request and the JSON body; docs/privsep.md), the token table.
 * Trusts: only canonical GCALL frames (decoded by src/guestio/frame.c); a token is compared
 *   only by its SHA-256 (the table never holds a token), and a call reaches a run's broker only
 *   while that run's token is registered.
 * Invariant: a call thread holds the run's cb_ctx (api.hold) from the lookup until its call
 *   returned, so unregistering never frees what a call uses; the token never reaches a log line. */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "../../core/cleanup.h"
#include "../../core/hostport.h"
#include "../../core/record.h"
#include "../../guestio/guestio.h"
#include "internal.h"

struct entry {
    char key[PLM_HEX_SHA256]; /* sha256 of the token */
    struct plm_host_api api;
    unsigned inflight;
};

struct e2b_guard {
    struct gio_server *srv;
    uint16_t port;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    struct entry *v;
    size_t n, cap;
    unsigned inflight; /* admission slots taken */
};

bool e2b_guard_token_ok(const char *t, size_t len)
{
    if (len != E2B_GUARD_TOKEN_LEN || strncmp(t, "crg_", 4))
        return false;
    for (size_t i = 4; i < len; i++)
        if (!((t[i] >= '0' && t[i] <= '9') || (t[i] >= 'a' && t[i] <= 'f')))
            return false;
    return true;
}

/* An answer of ours: {"error": msg} (msg is fixed words or the helper's checked reason). */
static void error_reply(struct plm_host_reply *out, int status, const char *msg, size_t len)
{
    char *b = NULL;
    int n = asprintf(&b, "{\"error\":\"%.*s\"}", (int)len, msg);
    out->status = status;
    out->body = n > 0 ? (uint8_t *)b : NULL;
    out->len = n > 0 ? (size_t)n : 0;
    out->content_type = strdup("application/json");
}

/* Looks the token up and holds its run (api.hold); *key is the entry's. 1: found and held; 0:
 * unknown; -1: a session's credential between its calls (no grant lent: nothing to hold). */
static int lookup_hold(struct e2b_guard *g, const char *token, struct plm_host_api *api, char key[PLM_HEX_SHA256])
{
    rec_sha256_hex(token, strlen(token), key);
    int found = 0;
    pthread_mutex_lock(&g->mu);
    for (size_t i = 0; i < g->n && !found; i++) {
        if (strcmp(g->v[i].key, key))
            continue;
        if (!g->v[i].api.call) {
            found = -1;
            break;
        }
        found = 1;
        *api = g->v[i].api;
        g->v[i].inflight++;
        if (api->hold)
            api->hold(api->cb_ctx);
    }
    pthread_mutex_unlock(&g->mu);
    return found;
}

static void unhold(struct e2b_guard *g, const struct plm_host_api *api, const char key[PLM_HEX_SHA256])
{
    if (api->release)
        api->release(api->cb_ctx);
    pthread_mutex_lock(&g->mu);
    for (size_t i = 0; i < g->n; i++)
        if (!strcmp(g->v[i].key, key) && g->v[i].inflight)
            g->v[i].inflight--;
    pthread_cond_broadcast(&g->cv);
    pthread_mutex_unlock(&g->mu);
}

/* The rest of the guard's order on one canonical request from the guestio helper, which has
 * answered 404 and a missing credential itself: the token (401), an admission slot (503), the
 * body's verdict (413, 400), then the broker (a status outside 200..599 becomes 502). */
static void on_gcall(void *ctx, const struct gio_gcall *gc, struct plm_host_reply *out)
{
    struct e2b_guard *g = ctx;
    static const char unknown[] = "unknown or expired egress guard credential";
    char tok[E2B_GUARD_TOKEN_LEN + 1], key[PLM_HEX_SHA256];
    struct plm_host_api api;
    if (gc->cred_len != E2B_GUARD_TOKEN_LEN) {
        error_reply(out, 401, unknown, sizeof unknown - 1);
        return;
    }
    memcpy(tok, gc->cred, E2B_GUARD_TOKEN_LEN);
    tok[E2B_GUARD_TOKEN_LEN] = 0;
    int known = e2b_guard_token_ok(tok, E2B_GUARD_TOKEN_LEN) ? lookup_hold(g, tok, &api, key) : 0;
    explicit_bzero(tok, sizeof tok);
    if (known < 0) { /* a session's credential while none of its calls runs */
        static const char idle[] = "no call of this session is in progress: its grant is not in effect";
        error_reply(out, 403, idle, sizeof idle - 1);
        return;
    }
    if (!known) {
        error_reply(out, 401, unknown, sizeof unknown - 1);
        return;
    }
    pthread_mutex_lock(&g->mu);
    bool admitted = g->inflight < E2B_GUARD_INFLIGHT;
    if (admitted)
        g->inflight++;
    pthread_mutex_unlock(&g->mu);
    if (!admitted) {
        static const char full[] = "egress guard at capacity"; /* the helper adds Retry-After: 1 */
        error_reply(out, 503, full, sizeof full - 1);
    } else if (gc->verdict == GIO_V_TOO_LARGE) {
        error_reply(out, 413, "request body too large", 22);
    } else if (gc->verdict == GIO_V_BAD) {
        char msg[200];
        int n = snprintf(msg, sizeof msg, "bad guard request: %.*s", (int)gc->why_len, (const char *)gc->why);
        error_reply(out, 400, msg, n > 0 ? (size_t)n : 0);
    } else {
        char *path = malloc(gc->path_len + 1);
        if (!path) {
            error_reply(out, 503, "out of memory", 13);
        } else {
            memcpy(path, gc->path, gc->path_len);
            path[gc->path_len] = 0;
            api.call(api.cb_ctx, gio_gmethod_name[gc->method], path, gc->body_len ? gc->body : NULL, gc->body_len, out);
            free(path);
            /* a 1xx cannot be a final answer; anything outside 200..599 is the broker's fault */
            if (out->status < 200 || out->status > 599) {
                free(out->body);
                free(out->content_type);
                *out = (struct plm_host_reply){0};
                error_reply(out, 502, "host api unavailable", 20);
            }
        }
    }
    if (admitted) {
        pthread_mutex_lock(&g->mu);
        g->inflight--;
        pthread_mutex_unlock(&g->mu);
    }
    unhold(g, &api, key);
}

int e2b_guard_start(const char *addr, const char *path, struct e2b_guard **out, struct plm_err *err)
{
    struct sockaddr_storage ss;
    socklen_t sl;
    if (plm_parse_hostport(addr, &ss, &sl) < 0)
        return plm_fail(err, 0, PLM_E_INVALID, "PLIMSOLL_GUARD_ADDR=\"%s\": expected host:port, [v6]:port or :port", addr);
    if (strlen(path) >= 240)
        return plm_fail(err, 0, PLM_E_INVALID, "E2B_GUARD_URL: the path is too long");
    cleanup_close int fd = socket(ss.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
    int one = 1;
    if (fd < 0 || setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) < 0 ||
        bind(fd, (struct sockaddr *)&ss, sl) < 0 || listen(fd, 128) < 0) {
        int e = errno;
        return plm_fail(err, e, PLM_E_INVALID, "PLIMSOLL_GUARD_ADDR=%s: cannot listen: %s", addr,
                           strerror(e));
    }
    struct sockaddr_storage bound;
    socklen_t bl = sizeof bound;
    uint16_t port = 0;
    if (getsockname(fd, (struct sockaddr *)&bound, &bl) == 0)
        port = ntohs(bound.ss_family == AF_INET6 ? ((struct sockaddr_in6 *)&bound)->sin6_port
                                                 : ((struct sockaddr_in *)&bound)->sin_port);
    struct e2b_guard *g = calloc(1, sizeof *g);
    if (!g)
        return plm_fail(err, ENOMEM, PLM_E_INTERNAL, "out of memory");
    g->port = port;
    pthread_mutex_init(&g->mu, NULL);
    pthread_cond_init(&g->cv, NULL);
    /* Guest bytes (the HTTP request and its JSON body) are parsed only in the confined guestio
     * helper (docs/privsep.md); the listener lives as long as the daemon, so the helper's
     * restart budget refills every minute rather than running out. */
    struct gio_limits lim = {.conn_max = E2B_GUARD_CONN_MAX, .head_max = GIO_HEAD_CAP, .body_max = GIO_GBODY_MAX,
                             .head_ms = 10000, .read_ms = E2B_GUARD_TIMEOUT_S * 1000,
                             .write_ms = E2B_GUARD_TIMEOUT_S * 1000, .guard_path = path,
                             .restart_window_ms = 60000};
    struct gio_handler h = {.guard = on_gcall, .ctx = g};
    if (gio_server_start(take_fd(&fd), &lim, &h, NULL, &g->srv, err) < 0) { /* the server owns fd */
        pthread_mutex_destroy(&g->mu);
        pthread_cond_destroy(&g->cv);
        free(g);
        return plm_err_wrap(err, "PLIMSOLL_GUARD_ADDR=%s: cannot start", addr);
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
    gio_server_stop(g->srv); /* waits for every call in flight */
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
        return plm_fail(err, errno, PLM_E_INTERNAL, "getrandom failed");
    struct entry e = {.api = api ? *api : (struct plm_host_api){0}};
    rec_sha256_hex(token, E2B_GUARD_TOKEN_LEN, e.key);
    pthread_mutex_lock(&g->mu);
    if (g->n == g->cap) {
        size_t nc = g->cap ? g->cap * 2 : 16;
        struct entry *nv = realloc(g->v, nc * sizeof *nv);
        if (!nv) {
            pthread_mutex_unlock(&g->mu);
            return plm_fail(err, ENOMEM, PLM_E_INTERNAL, "out of memory");
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

/* The entry of token, under g->mu; NULL when it is not registered. */
static struct entry *find_locked(struct e2b_guard *g, const char key[PLM_HEX_SHA256])
{
    for (size_t i = 0; i < g->n; i++)
        if (!strcmp(g->v[i].key, key))
            return &g->v[i];
    return NULL;
}

int e2b_guard_lend(struct e2b_guard *g, const char *token, const struct plm_host_api *api, struct plm_err *err)
{
    char key[PLM_HEX_SHA256];
    rec_sha256_hex(token, strlen(token), key);
    pthread_mutex_lock(&g->mu);
    struct entry *e = find_locked(g, key);
    bool ok = e && !e->api.call && api && api->call;
    if (ok)
        e->api = *api;
    pthread_mutex_unlock(&g->mu);
    if (!ok)
        return plm_fail(err, 0, PLM_E_INTERNAL, "e2b: the session's guard credential is not registered or is lent");
    return 0;
}

void e2b_guard_unlend(struct e2b_guard *g, const char *token)
{
    if (!g || !token || !token[0])
        return;
    char key[PLM_HEX_SHA256];
    rec_sha256_hex(token, strlen(token), key);
    pthread_mutex_lock(&g->mu);
    for (;;) {
        struct entry *e = find_locked(g, key);
        if (!e)
            break;
        /* as unregister: without hold/release a call in flight still uses cb_ctx */
        if (e->api.call && !e->api.hold && e->inflight) {
            pthread_cond_wait(&g->cv, &g->mu);
            continue;
        }
        e->api = (struct plm_host_api){0};
        break;
    }
    pthread_mutex_unlock(&g->mu);
}
