/* http.c: the HTTP layer of wire.md §11.1 on libmicrohttpd, one thread per connection so a long
 * run never blocks another caller.
 * Owns: one struct req per HTTP request (body buffer, request id), freed in on_completed.
 * Trusts: nothing from the peer. Invariant: authentication and the body limit are decided on the
 * first callback, before any body byte is read; every answer echoes a valid Plimsoll-Request-Id;
 * answers written before a procedure handler carry Plimsoll-Not-Dispatched. */
#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "../core/hostport.h"
#include "../core/buf.h"
#include "../core/clock.h"
#include "../core/limits.h"
#include "../wire/connect_error.h"
#include "gate.h"
#include "metrics.h"
#include "server.h"
#include "session_rpc.h"
#include "slots.h"
#include "ui.h"

#define RPC_PREFIX "/plimsoll.v1.SandboxService/"

struct srv {
    struct MHD_Daemon *mhd;
    struct MHD_Daemon *metrics;
    struct gate *gate, *metrics_gate; /* each listener's front door (gate.h) */
    struct srv_config cfg;
    uint16_t port, metrics_port;
    struct slots decode; /* decode slots, global and per caller */
    atomic_uint active;  /* requests inside a procedure handler */
};

enum route { R_NONE, R_RUN, R_DESCRIBE, R_OPEN_SESSION, R_SESSION_RUN, R_CLOSE_SESSION, R_HEALTHZ, R_READYZ, R_UI };

struct req {
    char request_id[33]; /* "" when absent or invalid: nothing is echoed */
    enum route route;
    enum rpc_fmt fmt;
    struct principal who;
    struct plm_buf body; /* capped at LIM_BODY_MAX */
    size_t declared; /* Content-Length, 0 when absent: the body buffer is sized once from it */
    bool holds_decode_slot;
    bool answered;
    bool deferred; /* a body-less health or UI request, answered on MHD's second call */
    uint64_t body_deadline_ms; /* the whole body must arrive by then (wire.md §18: 30 s) */
};

static int header_count_iter(void *cls, enum MHD_ValueKind kind, const char *key, const char *value)
{
    (void)kind;
    (void)value;
    struct {
        const char *name;
        unsigned n;
        const char *last;
    } *c = cls;
    if (strcasecmp(key, c->name) == 0) {
        c->n++;
        c->last = value;
    }
    return MHD_YES;
}

/* Returns the value of a header sent exactly once, else NULL; *n gets the count. */
static const char *single_header(struct MHD_Connection *conn, const char *name, unsigned *n)
{
    struct {
        const char *name;
        unsigned n;
        const char *last;
    } c = {name, 0, NULL};
    MHD_get_connection_values(conn, MHD_HEADER_KIND, (MHD_KeyValueIterator)header_count_iter, &c);
    if (n)
        *n = c.n;
    return c.n == 1 ? c.last : NULL;
}

static void read_request_id(struct MHD_Connection *conn, struct req *r)
{
    const char *v = single_header(conn, "Plimsoll-Request-Id", NULL);
    r->request_id[0] = 0;
    if (!v || strlen(v) != 32)
        return;
    for (int i = 0; i < 32; i++)
        if (!((v[i] >= '0' && v[i] <= '9') || (v[i] >= 'a' && v[i] <= 'f')))
            return;
    memcpy(r->request_id, v, 33);
}

static enum MHD_Result send_answer(struct MHD_Connection *conn, struct req *r, unsigned status,
                                   const char *ctype, char *body, size_t len, const char *not_dispatched)
{
    struct MHD_Response *resp =
        MHD_create_response_from_buffer(len, body ? body : (void *)"", body ? MHD_RESPMEM_MUST_FREE : MHD_RESPMEM_PERSISTENT);
    if (!resp) {
        free(body);
        return MHD_NO;
    }
    MHD_add_response_header(resp, "Content-Type", ctype);
    if (r->request_id[0])
        MHD_add_response_header(resp, "Plimsoll-Request-Id", r->request_id);
    if (not_dispatched)
        MHD_add_response_header(resp, "Plimsoll-Not-Dispatched", not_dispatched);
    enum MHD_Result rc = MHD_queue_response(conn, status, resp);
    MHD_destroy_response(resp);
    r->answered = true;
    return rc;
}

static enum MHD_Result send_text(struct MHD_Connection *conn, struct req *r, unsigned status, const char *text,
                                 const char *not_dispatched)
{
    char *b = strdup(text);
    return send_answer(conn, r, status, "text/plain; charset=utf-8", b, b ? strlen(b) : 0, not_dispatched);
}

/* A Connect error written before any procedure handler ran. */
static enum MHD_Result send_pre_handler(struct MHD_Connection *conn, struct req *r, unsigned status,
                                        const char *code, const char *msg, enum plm_refusal detail,
                                        const char *header_reason)
{
    size_t len = 0;
    char *body = wire_connect_error_json(code, msg, detail, &len);
    if (status == 0)
        status = wire_connect_status(code);
    return send_answer(conn, r, status, "application/json", body, len, header_reason);
}

static enum MHD_Result send_rpc_answer(struct MHD_Connection *conn, struct req *r, struct rpc_answer *a)
{
    const char *ctype = a->status == 200 && a->fmt == RPC_PROTO ? "application/proto" : "application/json";
    const char *nd = a->pre_handler ? plm_refusal_name(a->header_reason) : NULL;
    char *body = a->body;
    a->body = NULL;
    return send_answer(conn, r, a->status ? a->status : 500, ctype, body, a->len, nd);
}

static enum route route_of(const char *method, const char *url)
{
    if (strcmp(url, "/healthz") == 0)
        return R_HEALTHZ;
    if (strcmp(url, "/readyz") == 0)
        return R_READYZ;
    if (strncmp(url, RPC_PREFIX, strlen(RPC_PREFIX)) != 0)
        return R_NONE;
    const char *proc = url + strlen(RPC_PREFIX);
    (void)method;
    if (strcmp(proc, "Run") == 0)
        return R_RUN;
    if (strcmp(proc, "Describe") == 0)
        return R_DESCRIBE;
    if (!strcmp(proc, "OpenSession"))
        return R_OPEN_SESSION;
    if (!strcmp(proc, "SessionRun"))
        return R_SESSION_RUN;
    if (!strcmp(proc, "CloseSession"))
        return R_CLOSE_SESSION;
    return R_NONE;
}

/* application/json or application/proto, parameters after ';' ignored, case-insensitive. */
static int content_format(const char *ct, enum rpc_fmt *fmt)
{
    if (!ct)
        return -1;
    size_t n = strcspn(ct, ";");
    while (n && isspace((unsigned char)ct[n - 1]))
        n--;
    if (n == strlen("application/json") && strncasecmp(ct, "application/json", n) == 0)
        return *fmt = RPC_JSON, 0;
    if (n == strlen("application/proto") && strncasecmp(ct, "application/proto", n) == 0)
        return *fmt = RPC_PROTO, 0;
    return -1;
}

static enum MHD_Result first_call(struct srv *s, struct MHD_Connection *conn, struct req *r, const char *method,
                                  const char *url)
{
    struct plm_err err = {0};
    if (r->route == R_UI) { /* PLIMSOLL_UI=1: the read-only page answers in full (ui_http.c) */
        r->answered = true;
        return ui_answer(&s->cfg, conn, method, url);
    }
    if (r->route == R_HEALTHZ || r->route == R_READYZ) {
        if (strcmp(method, "GET") && strcmp(method, "HEAD"))
            return send_text(conn, r, 405, "method not allowed\n", NULL);
        if (r->route == R_HEALTHZ)
            return send_text(conn, r, 200, "ok\n", NULL);
        struct plm_provider *p = s->cfg.env.provider;
        if (p->ops->preflight && p->ops->preflight(p, &err) < 0) {
            metrics_readyz_failed(err.msg);
            return send_text(conn, r, 503, "not ready", NULL);
        }
        return send_text(conn, r, 200, "ready\n", NULL);
    }
    if (r->route == R_NONE)
        return send_pre_handler(conn, r, 404, "unimplemented", "no such procedure", PLM_REFUSAL_NONE, "unsupported");
    if (strcmp(method, "POST") != 0)
        return send_pre_handler(conn, r, 405, "invalid_argument", "procedures take POST", PLM_REFUSAL_NONE, "request");

    /* Authentication before a single body byte is read (§11.2 step 2). */
    unsigned n_auth = 0;
    const char *authz = single_header(conn, MHD_HTTP_HEADER_AUTHORIZATION, &n_auth);
    if (n_auth > 1)
        authz = NULL;
    if (auth_authenticate(s->cfg.auth, authz, n_auth, &r->who, &err) < 0 ||
        auth_require_run_scope(&r->who, &err) < 0)
        return send_pre_handler(conn, r, 0, wire_connect_code(err.kind), err.msg, err.refusal,
                                plm_refusal_name(err.refusal));

    /* The declared length is checked before the body is read. */
    const char *cl = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_LENGTH);
    if (cl) {
        char *end;
        errno = 0;
        unsigned long long v = strtoull(cl, &end, 10);
        if (errno || *end || end == cl || v > LIM_BODY_MAX)
            return send_pre_handler(conn, r, 0, "invalid_argument", "request body exceeds 8 MiB",
                                    PLM_REFUSAL_REQUEST, "request");
        r->declared = (size_t)v;
    }
    if (content_format(MHD_lookup_connection_value(conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_TYPE), &r->fmt) < 0)
        return send_pre_handler(conn, r, 415, "invalid_argument",
                                "content type must be application/json or application/proto", PLM_REFUSAL_NONE,
                                "request");
    /* Bodies held at once are bounded, and so are one caller's: beyond that shed instead of
     * buffering without limit or letting one caller's slow bodies hold every slot. */
    enum slots_verdict v = slots_acquire(&s->decode, r->who.id);
    if (v != SLOTS_OK) {
        metrics_shed("decode");
        return send_pre_handler(conn, r, 0, "resource_exhausted",
                                v == SLOTS_FULL ? "RPC decode capacity exhausted, retry shortly"
                                                : "per-caller RPC decode limit reached, retry shortly",
                                PLM_REFUSAL_CAPACITY, "capacity");
    }
    r->holds_decode_slot = true;
    /* The body read is bounded in total, not per byte: MHD's idle timeout restarts on every
     * byte, so it is re-armed to what is left of the deadline on every chunk (on_request). */
    r->body_deadline_ms = clock_mono_ms() + LIM_BODY_READ_MS;
    MHD_set_connection_option(conn, MHD_CONNECTION_OPTION_TIMEOUT, (unsigned)(LIM_BODY_READ_MS / 1000));
    return MHD_YES;
}

static void release_decode(struct srv *s, struct req *r)
{
    if (r->holds_decode_slot) {
        r->holds_decode_slot = false;
        slots_release(&s->decode, r->who.id);
    }
}

static int append_body(struct req *r, const char *data, size_t n)
{
    /* One allocation of the declared size (no doubling, no copy); growth only for chunked. */
    if (r->body.len == 0 && r->declared && !plm_buf_reserve(&r->body, r->declared))
        return -1;
    return plm_buf_add(&r->body, data, n) ? 0 : -1;
}

static enum MHD_Result dispatch(struct srv *s, struct MHD_Connection *conn, struct req *r)
{
    struct rpc_answer a = {0};
    release_decode(s, r);
    /* The body is in: from here the answer is written under the idle timeout, not the body's. */
    r->body_deadline_ms = 0;
    MHD_set_connection_option(conn, MHD_CONNECTION_OPTION_TIMEOUT, (unsigned)(LIM_IDLE_MS / 1000));
    atomic_fetch_add(&s->active, 1);
    const char *body = r->body.p ? r->body.p : "";
    switch (r->route) {
    case R_RUN: rpc_run(&s->cfg.env, &r->who, r->request_id, r->fmt, body, r->body.len, &a); break;
    case R_DESCRIBE: rpc_describe(&s->cfg.env, r->fmt, body, r->body.len, r->request_id, &a); break;
    case R_OPEN_SESSION: rpc_open_session(&s->cfg.env, &r->who, r->request_id, r->fmt, body, r->body.len, &a); break;
    case R_SESSION_RUN: rpc_session_run(&s->cfg.env, &r->who, r->request_id, r->fmt, body, r->body.len, &a); break;
    case R_CLOSE_SESSION: rpc_close_session(&s->cfg.env, &r->who, r->request_id, r->fmt, body, r->body.len, &a); break;
    default: rpc_session_unsupported(&a, r->request_id); break;
    }
    atomic_fetch_sub(&s->active, 1);
    return send_rpc_answer(conn, r, &a);
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *conn, const char *url, const char *method,
                                  const char *version, const char *upload, size_t *upload_size, void **con_cls)
{
    (void)version;
    struct srv *s = cls;
    struct req *r = *con_cls;
    if (!r) {
        r = calloc(1, sizeof *r);
        if (!r)
            return MHD_NO;
        *con_cls = r;
        r->body.max = LIM_BODY_MAX;
        read_request_id(conn, r);
        r->route = s->cfg.ui && ui_route(url) ? R_UI : route_of(method, url);
        /* libmicrohttpd 0.9.75 closes a connection whose answer was queued on the first call;
         * a request without a body gets its second call at once, and keeps the connection. */
        const char *cl = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_LENGTH);
        if ((r->route == R_HEALTHZ || r->route == R_READYZ || r->route == R_UI) && (!cl || !strcmp(cl, "0"))) {
            r->deferred = true;
            return MHD_YES;
        }
        return first_call(s, conn, r, method, url);
    }
    if (r->deferred) {
        r->deferred = false;
        return first_call(s, conn, r, method, url);
    }
    if (r->answered) {
        *upload_size = 0; /* an early refusal: discard whatever body still arrives */
        return MHD_YES;
    }
    if (r->body_deadline_ms) {
        uint64_t now = clock_mono_ms();
        if (now >= r->body_deadline_ms)
            return MHD_NO; /* the body took longer than 30 s in total: close */
        unsigned left = (unsigned)((r->body_deadline_ms - now + 999) / 1000);
        MHD_set_connection_option(conn, MHD_CONNECTION_OPTION_TIMEOUT, left);
    }
    if (*upload_size) {
        if (append_body(r, upload, *upload_size) < 0) {
            /* a chunked body without a declared length that grew past the limit */
            *upload_size = 0;
            release_decode(s, r);
            return send_pre_handler(conn, r, 0, "invalid_argument", "request body exceeds 8 MiB",
                                    PLM_REFUSAL_REQUEST, "request");
        }
        *upload_size = 0;
        return MHD_YES;
    }
    return dispatch(s, conn, r);
}

static void on_completed(void *cls, struct MHD_Connection *conn, void **con_cls, enum MHD_RequestTerminationCode toe)
{
    (void)conn;
    (void)toe;
    struct srv *s = cls;
    struct req *r = *con_cls;
    if (!r)
        return;
    release_decode(s, r);
    plm_buf_done(&r->body);
    free(r);
    *con_cls = NULL;
}

int srv_listen(const char *var, const char *addr, struct plm_err *err)
{
    struct sockaddr_storage ss;
    socklen_t sl;
    if (plm_parse_hostport(addr, &ss, &sl) < 0)
        return plm_err_set(err, 0, PLM_E_INVALID, PLM_REFUSAL_NONE,
                           "%s=\"%s\": expected host:port, [ipv6]:port or :port with a numeric host", var, addr);
    int fd = socket(ss.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return plm_err_set(err, errno, PLM_E_INTERNAL, PLM_REFUSAL_NONE, "%s: socket: %s", var, strerror(errno));
    int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (bind(fd, (struct sockaddr *)&ss, sl) < 0 || listen(fd, 1024) < 0) {
        int e = errno;
        close(fd);
        return plm_err_set(err, e, PLM_E_INTERNAL, PLM_REFUSAL_NONE, "%s=%s: %s", var, addr, strerror(e));
    }
    return fd;
}

static uint16_t bound_port(int fd)
{
    struct sockaddr_storage ss;
    socklen_t sl = sizeof ss;
    if (getsockname(fd, (struct sockaddr *)&ss, &sl) < 0)
        return 0;
    return ntohs(ss.ss_family == AF_INET6 ? ((struct sockaddr_in6 *)&ss)->sin6_port
                                          : ((struct sockaddr_in *)&ss)->sin_port);
}

static struct MHD_Daemon *start_mhd(unsigned max_conn, MHD_AccessHandlerCallback h, void *cls,
                                    MHD_RequestCompletedCallback done)
{
    /* No listening socket of its own: the gate (gate.h) accepts, checks every request head and
     * relays each connection over a socketpair; keep-alive is the gate's to offer. */
    unsigned flags = MHD_USE_THREAD_PER_CONNECTION | MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_POLL | MHD_USE_ITC |
                     MHD_USE_NO_LISTEN_SOCKET;
    return MHD_start_daemon(flags, 0, NULL, NULL, h, cls, MHD_OPTION_CONNECTION_LIMIT, max_conn,
                            MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)(LIM_IDLE_MS / 1000),
                            MHD_OPTION_CONNECTION_MEMORY_LIMIT, (size_t)(2 * LIM_HEADER_MAX),
                            MHD_OPTION_NOTIFY_COMPLETED, done, cls, MHD_OPTION_END);
}

/* A listener: its socket, its gate, then the MHD daemon behind the gate. */
static int start_listener(const char *var, const char *addr, unsigned max_conn, unsigned per_peer, struct tls_store *tls,
                          MHD_AccessHandlerCallback h, void *cls, MHD_RequestCompletedCallback done,
                          struct gate **gate_out, struct MHD_Daemon **mhd_out, uint16_t *port, struct plm_err *err)
{
    int fd = srv_listen(var, addr, err);
    if (fd < 0)
        return -1;
    *port = bound_port(fd);
    /* waiting for a head or idle, plus those MHD holds */
    struct gate_config gc = {.listen_fd = fd, .max_conns = LIM_PENDING_CONNECTIONS + (max_conn ? max_conn : 16),
                             .per_peer = per_peer, .tls = tls, .name = var};
    struct gate *g = gate_new(&gc, err);
    if (!g) {
        close(fd);
        return -1;
    }
    struct MHD_Daemon *mhd = h ? start_mhd(max_conn, h, cls, done) : metrics_start(g, cls);
    if (!mhd) {
        gate_free(g);
        return plm_fail(err, 0, PLM_E_INTERNAL, "%s=%s: cannot start the HTTP server", var, addr);
    }
    if (gate_run(g, mhd, err) < 0) {
        MHD_stop_daemon(mhd);
        gate_free(g);
        return -1;
    }
    *gate_out = g;
    *mhd_out = mhd;
    return 0;
}

struct srv *srv_start(const struct srv_config *cfg, struct plm_err *err)
{
    struct srv *s = calloc(1, sizeof *s);
    if (!s) {
        plm_fail(err, 12, PLM_E_INTERNAL, "out of memory");
        return NULL;
    }
    s->cfg = *cfg;
    unsigned per_peer = cfg->per_peer ? cfg->per_peer : LIM_CONN_PER_PEER;
    if (slots_init(&s->decode, cfg->max_decode, cfg->max_decode_per_caller ? cfg->max_decode_per_caller
                                                                           : (cfg->max_decode + 1) / 2) < 0) {
        free(s);
        plm_fail(err, 12, PLM_E_INTERNAL, "out of memory");
        return NULL;
    }
    if (start_listener("PLIMSOLL_ADDR", cfg->addr, cfg->max_connections, per_peer, cfg->tls, on_request, s, on_completed,
                       &s->gate, &s->mhd, &s->port, err) < 0) {
        srv_free(s);
        return NULL;
    }
    if (cfg->metrics_addr && *cfg->metrics_addr && strcmp(cfg->metrics_addr, "off") != 0 &&
        start_listener("PLIMSOLL_METRICS_ADDR", cfg->metrics_addr, 0, LIM_METRICS_PER_PEER, cfg->tls, NULL, &s->cfg,
                       NULL, &s->metrics_gate, &s->metrics, &s->metrics_port, err) < 0) {
        srv_free(s);
        return NULL;
    }
    return s;
}

uint16_t srv_port(const struct srv *s) { return s->port; }
uint16_t srv_metrics_port(const struct srv *s) { return s->metrics_port; }
/* Handlers running, and connections whose request or answer is still moving through the gate. */
unsigned srv_active(const struct srv *s) { return atomic_load(&((struct srv *)s)->active) + gate_busy(s->gate); }

void srv_quiesce(struct srv *s)
{
    if (s) { /* no new connections; requests in flight finish and their answers go out */
        gate_quiesce(s->gate);
        gate_quiesce(s->metrics_gate);
    }
}

void srv_free(struct srv *s)
{
    if (!s)
        return;
    gate_stop(s->gate);
    gate_stop(s->metrics_gate);
    if (s->mhd)
        MHD_stop_daemon(s->mhd);
    if (s->metrics)
        MHD_stop_daemon(s->metrics);
    gate_free(s->gate);
    gate_free(s->metrics_gate);
    slots_fini(&s->decode);
    free(s);
}
