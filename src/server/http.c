/* http.c: the HTTP layer of wire.md §11.1 on the gate (gate.h): routing, the Host check,
 * authentication, the declared length and content type, decode slots, then the procedures.
 * What never waits is answered on the listener's loop thread: refusals before a body, /healthz,
 * Describe, and a Run's decode, checks and admission (rpc_run_begin), so a refusal below the
 * floor never reaches a worker. Provider work (an admitted Run's dispatch, sessions, /readyz's
 * preflight), the UI page and any body over INLINE_BODY_MAX go to a worker thread (workers.h).
 * Owns: one struct req per request (its decode slot, its admitted run), released in on_done.
 * Trusts: nothing from the peer. Invariant: the Host check, authentication and the body limit
 * are decided on the head, before any body byte is read; every answer echoes a valid
 * Plimsoll-Request-Id; answers written before a procedure handler carry Plimsoll-Not-Dispatched. */
#include <ctype.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include "../core/clock.h"
#include "../core/hostport.h"
#include "../core/limits.h"
#include "../wire/connect_error.h"
#include "describe.h"
#include "gate.h"
#include "hostcheck.h"
#include "metrics.h"
#include "server.h"
#include "session_rpc.h"
#include "slots.h"
#include "ui.h"
#include "../core/cleanup.h"

#define RPC_PREFIX "/plimsoll.v1.SandboxService/"
#define INLINE_BODY_MAX (64u * 1024) /* a larger body is decoded on a worker, not the loop */
#define GATE_CONNS 16384u            /* connections held at once per listener (idle ones cost ~300 B) */

struct srv {
    struct gate *gate, *metrics_gate;
    struct srv_config cfg;
    uint16_t port, metrics_port;
    struct slots decode; /* decode slots, global and per caller */
    atomic_uint active;  /* requests inside a procedure handler */
    struct workers workers;
    bool workers_ok;
    bool host_check; /* open mode, or PLIMSOLL_ALLOWED_HOSTS set */
};

struct req;
/* Where a route's work is done. */
enum route_where {
    ON_WORKER,    /* on a worker thread: provider work, sessions, a page that may wait */
    ON_LOOP,      /* on the loop thread (for a procedure: when its body is small): it never waits */
    ADMIT_ON_LOOP /* Run: decode, checks and admission on the loop; only an admitted run goes on */
};

/* One row per path: a procedure (every one has the signature rpc_proc_fn, POST with a body) or a
 * page (GET or HEAD, no body). */
struct route {
    const char *path;
    rpc_proc_fn *proc;
    void (*page)(struct srv *s, struct gate_req *rq, struct req *r);
    enum route_where where;
};

struct req {
    char request_id[33]; /* "" when absent or invalid: nothing is echoed */
    const struct route *route;
    enum rpc_fmt fmt;
    struct principal who;
    uint64_t deadline_ms; /* from Connect-Timeout-Ms and the head's arrival; RPC_NO_DEADLINE: none */
    bool holds_decode_slot;
    struct rpc_run *run; /* admitted on the loop, dispatched on a worker */
};

static void read_request_id(const struct gate_req *rq, struct req *r)
{
    char v[40];
    r->request_id[0] = 0;
    if (!gate_req_header_str(rq, "Plimsoll-Request-Id", v, sizeof v, NULL) || strlen(v) != 32)
        return;
    for (int i = 0; i < 32; i++)
        if (!((v[i] >= '0' && v[i] <= '9') || (v[i] >= 'a' && v[i] <= 'f')))
            return;
    memcpy(r->request_id, v, 33);
}

static enum gate_next send_answer(struct gate_req *rq, struct req *r, unsigned status, const char *ctype, char *body,
                                  size_t len, const char *not_dispatched)
{
    if (!body && len) {
        gate_resp_text(&rq->resp, 500, "out of memory\n");
        return GATE_ANSWER;
    }
    gate_resp_set(&rq->resp, status, ctype, body, len, body != NULL);
    if (r->request_id[0])
        gate_resp_header(&rq->resp, "Plimsoll-Request-Id", r->request_id);
    if (not_dispatched)
        gate_resp_header(&rq->resp, "Plimsoll-Not-Dispatched", not_dispatched);
    return GATE_ANSWER;
}

/* Adds the headers every plain-text answer carries to one already begun in rq->resp. */
static enum gate_next send_text_headers(struct gate_req *rq, struct req *r)
{
    if (r->request_id[0])
        gate_resp_header(&rq->resp, "Plimsoll-Request-Id", r->request_id);
    return GATE_ANSWER;
}

static enum gate_next send_text(struct gate_req *rq, struct req *r, unsigned status, const char *text)
{
    gate_resp_text(&rq->resp, status, text);
    return send_text_headers(rq, r);
}

/* A Connect error written before any procedure handler ran. */
static enum gate_next send_pre_handler(struct gate_req *rq, struct req *r, unsigned status, const char *code,
                                       const char *msg, enum plm_refusal detail, const char *header_reason)
{
    size_t len = 0;
    char *body = wire_connect_error_json(code, msg, detail, &len);
    if (status == 0)
        status = wire_connect_status(code);
    return send_answer(rq, r, status, "application/json", body, len, header_reason);
}

static enum gate_next send_rpc_answer(struct gate_req *rq, struct req *r, struct rpc_answer *a)
{
    const char *ctype = a->status == 200 && a->fmt == RPC_PROTO ? "application/proto" : "application/json";
    const char *nd = a->pre_handler ? plm_refusal_name(a->header_reason) : NULL;
    char *body = a->body;
    a->body = NULL;
    if (!body)
        return send_text(rq, r, 500, "out of memory\n");
    return send_answer(rq, r, a->status ? a->status : 500, ctype, body, a->len, nd);
}

static void page_healthz(struct srv *s, struct gate_req *rq, struct req *r);
static void page_readyz(struct srv *s, struct gate_req *rq, struct req *r);
static void page_ui(struct srv *s, struct gate_req *rq, struct req *r);

static const struct route ROUTES[] = {
    {"/healthz", NULL, page_healthz, ON_LOOP},
    {"/readyz", NULL, page_readyz, ON_WORKER}, /* the provider's preflight may wait */
    {RPC_PREFIX "Run", rpc_run, NULL, ADMIT_ON_LOOP},
    {RPC_PREFIX "Describe", rpc_describe, NULL, ON_LOOP},
    {RPC_PREFIX "OpenSession", rpc_open_session, NULL, ON_WORKER},
    {RPC_PREFIX "SessionRun", rpc_session_run, NULL, ON_WORKER},
    {RPC_PREFIX "CloseSession", rpc_close_session, NULL, ON_WORKER},
};
/* PLIMSOLL_UI=1: the read-only page answers GET /, /ui and /ui/... in full (ui_http.c) */
static const struct route UI_ROUTE = {"/ui", NULL, page_ui, ON_WORKER};

static const struct route *route_of(const struct srv *s, const char *path)
{
    if (s->cfg.ui && ui_route(path))
        return &UI_ROUTE;
    for (size_t i = 0; i < sizeof ROUTES / sizeof *ROUTES; i++)
        if (strcmp(path, ROUTES[i].path) == 0)
            return &ROUTES[i];
    return NULL;
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

/* The Host check (hostcheck.h): NULL when the request may go on, else the status to answer. An
 * HTTP/1.1 request must carry exactly one Host whatever the mode (RFC 9112 §3.2). */
static unsigned host_refusal(const struct srv *s, const struct gate_req *rq)
{
    const char *h = NULL;
    size_t hl = 0;
    unsigned n = gate_req_header(rq, "Host", &h, &hl);
    if (n > 1 || (n == 0 && !rq->http10))
        return 400;
    if (!s->host_check)
        return 0;
    return n == 1 && hostcheck_ok(h, hl, rq->local, s->cfg.allowed_hosts) ? 0 : 421;
}

static enum gate_next refuse_host(struct gate_req *rq, struct req *r, unsigned status)
{
    if (status == 400)
        return send_text(rq, r, 400, "an HTTP/1.1 request carries exactly one Host\n");
    return send_pre_handler(rq, r, 421, "permission_denied",
                            "misdirected request: Host does not name this daemon (localhost, 127.0.0.1, [::1], the "
                            "listener's address, or an entry of PLIMSOLL_ALLOWED_HOSTS)",
                            PLM_REFUSAL_NONE, "request");
}

static bool is_cross_site(const struct gate_req *rq)
{
    const char *v;
    size_t vl;
    return gate_req_header(rq, "Sec-Fetch-Site", &v, &vl) && vl == 10 && strncasecmp(v, "cross-site", 10) == 0;
}

/* The caller's deadline (the Connect protocol's timeout header), counted from the head's
 * arrival; absent, the procedure's own ceilings apply. -1: present but not a timeout. */
static int read_deadline(const struct gate_req *rq, struct req *r)
{
    const char *v = NULL;
    size_t vl = 0;
    unsigned n = gate_req_header(rq, "Connect-Timeout-Ms", &v, &vl);
    r->deadline_ms = RPC_NO_DEADLINE;
    if (n == 0)
        return 0;
    uint64_t ms;
    if (n > 1 || rpc_parse_timeout_ms(v, vl, &ms) < 0)
        return -1;
    r->deadline_ms = clock_mono_ms() + ms;
    return 0;
}

/* A procedure's head: method, origin, authentication, length, type, decode slot. */
static enum gate_next procedure_head(struct srv *s, struct gate_req *rq, struct req *r)
{
    if (strcmp(rq->method, "POST") != 0)
        return send_pre_handler(rq, r, 405, "invalid_argument", "procedures take POST", PLM_REFUSAL_NONE, "request");
    /* A browser says where a request comes from: no page on another site may call a procedure,
     * token or not (DNS rebinding aside, a sandbox is never a cross-site API). */
    if (is_cross_site(rq))
        return send_pre_handler(rq, r, 403, "permission_denied", "cross-site requests are refused (Sec-Fetch-Site)",
                                PLM_REFUSAL_NONE, "request");
    /* Authentication before a single body byte is read (§11.2 step 2). */
    struct plm_err err = {0};
    char authz_buf[LIM_TOKEN_MAX + 16];
    unsigned n_auth = 0;
    const char *authz = gate_req_header_str(rq, "Authorization", authz_buf, sizeof authz_buf, &n_auth);
    if (auth_authenticate(s->cfg.auth, authz, n_auth, &r->who, &err) < 0 || auth_require_run_scope(&r->who, &err) < 0)
        return send_pre_handler(rq, r, 0, wire_connect_code(err.kind), err.msg, err.refusal,
                                plm_refusal_name(err.refusal));
    /* The declared length is checked before the body is read. */
    if (rq->content_length > LIM_BODY_MAX) {
        rq->resp.close = true;
        return send_pre_handler(rq, r, 0, "invalid_argument", "request body exceeds 8 MiB", PLM_REFUSAL_REQUEST,
                                "request");
    }
    char ct[128];
    if (content_format(gate_req_header_str(rq, "Content-Type", ct, sizeof ct, NULL), &r->fmt) < 0)
        return send_pre_handler(rq, r, 415, "invalid_argument",
                                "content type must be application/json or application/proto", PLM_REFUSAL_NONE,
                                "request");
    if (read_deadline(rq, r) < 0)
        return send_pre_handler(rq, r, 400, "invalid_argument",
                                "Connect-Timeout-Ms must be sent once, as 1 to 10 digits (milliseconds)",
                                PLM_REFUSAL_NONE, "request");
    /* Bodies held at once are bounded, and so are one caller's: beyond that shed instead of
     * buffering without limit or letting one caller's slow bodies hold every slot. */
    enum slots_verdict v = slots_acquire(&s->decode, r->who.id);
    if (v != SLOTS_OK) {
        metrics_shed("decode");
        return send_pre_handler(rq, r, 0, "resource_exhausted",
                                v == SLOTS_FULL ? "RPC decode capacity exhausted, retry shortly"
                                                : "per-caller RPC decode limit reached, retry shortly",
                                PLM_REFUSAL_CAPACITY, "capacity");
    }
    r->holds_decode_slot = true;
    return GATE_BODY;
}

static enum gate_next rpc_on_head(void *cls, struct gate_req *rq)
{
    struct srv *s = cls;
    struct req *r = calloc(1, sizeof *r);
    if (!r) {
        gate_resp_text(&rq->resp, 503, "out of memory, retry shortly\n");
        return GATE_ANSWER;
    }
    rq->state = r;
    r->deadline_ms = RPC_NO_DEADLINE;
    read_request_id(rq, r);
    unsigned host = host_refusal(s, rq);
    if (host)
        return refuse_host(rq, r, host);
    const struct route *rt = r->route = route_of(s, rq->path);
    if (!rt)
        return send_pre_handler(rq, r, 404, "unimplemented", "no such procedure", PLM_REFUSAL_NONE, "unsupported");
    if (rt->proc)
        return procedure_head(s, rq, r);
    if (strcmp(rq->method, "GET") && strcmp(rq->method, "HEAD")) {
        gate_resp_text(&rq->resp, 405, "method not allowed: GET and HEAD only\n");
        gate_resp_header(&rq->resp, "Allow", "GET, HEAD");
        return send_text_headers(rq, r);
    }
    if (rt->where == ON_LOOP) { /* /healthz: answered at once, whatever body it announced */
        rt->page(s, rq, r);
        return GATE_ANSWER;
    }
    /* Only procedures read a body, and only with a decode slot: the pages answered on a worker
     * refuse one at once (its bytes are dropped, never buffered). */
    if (rq->content_length)
        return send_text(rq, r, 400, "this path takes no request body\n");
    return GATE_WORK;
}

static bool peer_gone(void *rq) { return gate_req_peer_gone(rq); }

/* The call as a procedure sees it. On the loop the caller is never found gone (only a worker's
 * request holds a socket to ask); a run admitted there asks once its worker has it. */
static struct rpc_call call_of(struct gate_req *rq, struct req *r)
{
    struct rpc_call c = rpc_call_plain(&r->who, r->request_id, r->fmt, rq->body ? rq->body : "", rq->body_len);
    c.deadline_ms = r->deadline_ms;
    c.caller_gone = peer_gone;
    c.gone_cls = rq;
    return c;
}

static void release_decode(struct srv *s, struct req *r)
{
    if (r->holds_decode_slot) {
        r->holds_decode_slot = false;
        slots_release(&s->decode, r->who.id);
    }
}

/* The body is in: what never waits is answered here, on the loop thread. */
static enum gate_next rpc_on_body(void *cls, struct gate_req *rq)
{
    struct srv *s = cls;
    struct req *r = rq->state;
    release_decode(s, r);
    if (rq->body_len > INLINE_BODY_MAX || r->route->where == ON_WORKER)
        return GATE_WORK;
    struct rpc_answer a = {0};
    struct rpc_call call = call_of(rq, r);
    atomic_fetch_add(&s->active, 1);
    if (r->route->where == ADMIT_ON_LOOP)
        r->run = rpc_run_begin(&s->cfg.env, &call, &a);
    else
        r->route->proc(&s->cfg.env, &call, &a);
    atomic_fetch_sub(&s->active, 1);
    if (r->run)
        return GATE_WORK; /* admitted: the provider runs it on a worker */
    return send_rpc_answer(rq, r, &a);
}

static void page_healthz(struct srv *s, struct gate_req *rq, struct req *r)
{
    (void)s;
    send_text(rq, r, 200, "ok\n");
}

static void page_ui(struct srv *s, struct gate_req *rq, struct req *r)
{
    (void)r;
    ui_answer(&s->cfg, rq);
}

static void page_readyz(struct srv *s, struct gate_req *rq, struct req *r)
{
    struct plm_err err = {0};
    struct plm_provider *p = s->cfg.env.provider;
    if (p->ops->preflight && p->ops->preflight(p, &err) < 0) {
        metrics_readyz_failed(err.msg);
        send_text(rq, r, 503, "not ready");
        return;
    }
    send_text(rq, r, 200, "ready\n");
}

static void rpc_work(void *cls, struct gate_req *rq)
{
    struct srv *s = cls;
    struct req *r = rq->state;
    if (r->route->page) {
        r->route->page(s, rq, r);
        return;
    }
    struct rpc_answer a = {0};
    atomic_fetch_add(&s->active, 1);
    if (r->run) {
        rpc_run_finish(r->run, &a);
        r->run = NULL;
    } else {
        struct rpc_call call = call_of(rq, r);
        r->route->proc(&s->cfg.env, &call, &a);
    }
    atomic_fetch_sub(&s->active, 1);
    send_rpc_answer(rq, r, &a);
}

static void rpc_done(void *cls, struct gate_req *rq)
{
    struct srv *s = cls;
    struct req *r = rq->state;
    if (!r)
        return;
    release_decode(s, r);
    rpc_run_abandon(r->run); /* its connection closed before a worker took it */
    free(r);
    rq->state = NULL;
}

/* The metrics listener: the same Host check, then the scrape (metrics.c), on the loop thread. */
static enum gate_next metrics_on_head(void *cls, struct gate_req *rq)
{
    struct srv *s = cls;
    struct req r = {0};
    unsigned host = host_refusal(s, rq);
    if (host)
        return refuse_host(rq, &r, host);
    metrics_answer(&s->cfg, rq);
    return GATE_ANSWER;
}

int srv_listen(const char *var, const char *addr, struct plm_err *err)
{
    struct sockaddr_storage ss;
    socklen_t sl;
    if (plm_parse_hostport(addr, &ss, &sl) < 0)
        return plm_fail(err, 0, PLM_E_INVALID, "%s=\"%s\": expected host:port, [ipv6]:port or :port with a numeric host", var, addr);
    cleanup_close int fd = socket(ss.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return plm_fail(err, errno, PLM_E_INTERNAL, "%s: socket: %s", var, strerror(errno));
    int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (bind(fd, (struct sockaddr *)&ss, sl) < 0 || listen(fd, 1024) < 0)
        return plm_fail(err, errno, PLM_E_INTERNAL, "%s=%s: %s", var, addr, strerror(errno));
    return take_fd(&fd);
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

/* A listener: its socket and its gate. */
static int start_listener(struct srv *s, const char *var, const char *addr, unsigned max_conns, unsigned per_peer,
                          unsigned loops, const struct gate_handler *h, struct gate **gate_out, uint16_t *port,
                          struct plm_err *err)
{
    cleanup_close int fd = srv_listen(var, addr, err);
    if (fd < 0)
        return -1;
    *port = bound_port(fd);
    struct gate_config gc = {.listen_fd = fd, .max_conns = max_conns, .per_peer = per_peer, .tls = s->cfg.tls,
                             .name = var, .handler = *h, .workers = &s->workers, .loops = loops};
    struct gate *g = gate_new(&gc, err);
    if (!g)
        return -1; /* the socket is still ours: closed on the way out */
    take_fd(&fd); /* the gate's from here on */
    if (gate_run(g, err) < 0) {
        gate_free(g);
        return -1;
    }
    *gate_out = g;
    return 0;
}

/* Idle keep-alive connections are cheap here (a table entry each): let the descriptor limit,
 * not a low default soft limit, bound them. */
static void raise_fd_limit(rlim_t want)
{
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < want) {
        rl.rlim_cur = rl.rlim_max < want ? rl.rlim_max : want;
        setrlimit(RLIMIT_NOFILE, &rl);
    }
}

/* Loop threads of the RPC listener: one per CPU (at least 2, at most 8), so Describe and
 * refusals, answered on the loops, use every core as libmicrohttpd's threads did. */
static unsigned rpc_loops(void)
{
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n < 2 ? 2 : n > 8 ? 8 : (unsigned)n;
}

struct srv *srv_start(const struct srv_config *cfg, struct plm_err *err)
{
    struct srv *s = calloc(1, sizeof *s);
    if (!s) {
        plm_fail(err, ENOMEM, PLM_E_INTERNAL, "out of memory");
        return NULL;
    }
    s->cfg = *cfg;
    /* Describe's answer is kept between calls while nothing it states changed (describe.c);
     * without memory for it, Describe is encoded on every call, as before. */
    s->cfg.env.describe_cache = describe_cache_new();
    s->host_check = auth_mode(cfg->auth) == AUTH_OPEN || (cfg->allowed_hosts && *cfg->allowed_hosts);
    unsigned per_peer = cfg->per_peer ? cfg->per_peer : LIM_CONN_PER_PEER;
    if (slots_init(&s->decode, cfg->max_decode, cfg->max_decode_per_caller ? cfg->max_decode_per_caller
                                                                           : (cfg->max_decode + 1) / 2) < 0) {
        describe_cache_free(s->cfg.env.describe_cache);
        free(s);
        plm_fail(err, ENOMEM, PLM_E_INTERNAL, "out of memory");
        return NULL;
    }
    /* one worker per request that can be in a handler at once; more wait in order */
    if (workers_init(&s->workers, cfg->max_connections ? cfg->max_connections : 64) < 0) {
        slots_fini(&s->decode);
        describe_cache_free(s->cfg.env.describe_cache);
        free(s);
        plm_fail(err, ENOMEM, PLM_E_INTERNAL, "cannot set up the worker threads");
        return NULL;
    }
    s->workers_ok = true;
    raise_fd_limit(GATE_CONNS + 4096);
    struct gate_handler rpc = {.cls = s, .on_head = rpc_on_head, .on_body = rpc_on_body, .work = rpc_work,
                               .done = rpc_done};
    if (start_listener(s, "PLIMSOLL_ADDR", cfg->addr, GATE_CONNS, per_peer, rpc_loops(), &rpc, &s->gate, &s->port,
                       err) < 0) {
        srv_free(s);
        return NULL;
    }
    struct gate_handler met = {.cls = s, .on_head = metrics_on_head};
    if (cfg->metrics_addr && *cfg->metrics_addr && strcmp(cfg->metrics_addr, "off") != 0 &&
        start_listener(s, "PLIMSOLL_METRICS_ADDR", cfg->metrics_addr, LIM_PENDING_CONNECTIONS, LIM_METRICS_PER_PEER, 1,
                       &met, &s->metrics_gate, &s->metrics_port, err) < 0) {
        srv_free(s);
        return NULL;
    }
    return s;
}

uint16_t srv_port(const struct srv *s) { return s->port; }
uint16_t srv_metrics_port(const struct srv *s) { return s->metrics_port; }
/* Handlers running, and connections whose request or answer is still in flight. */
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
    if (s->workers_ok) /* every request a worker holds finishes; its answer has nowhere to go */
        workers_fini(&s->workers);
    gate_free(s->gate);
    gate_free(s->metrics_gate);
    slots_fini(&s->decode);
    describe_cache_free(s->cfg.env.describe_cache);
    free(s);
}
