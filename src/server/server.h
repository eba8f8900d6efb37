/* server.h: the HTTP listener (the gate, gate.h) for the RPC procedures, /healthz and /readyz,
 * and the separate metrics listener. */
#pragma once
#include <stdbool.h>
#include <stdint.h>

#include "../core/err.h"
#include "rpc.h"
#include "tls.h"

struct srv;

struct srv_config {
    const char *addr;         /* host:port, [v6]:port or :port; port 0 picks a free port */
    const char *metrics_addr; /* same forms, or NULL/"off" */
    struct auth *auth;
    struct rpc_env env;
    unsigned max_decode;      /* requests whose bodies are held at once (2 x max concurrent) */
    unsigned max_decode_per_caller; /* of those, one caller's; 0: half of max_decode */
    unsigned max_connections; /* worker threads: requests in a waiting handler at once */
    unsigned per_peer;        /* connections per peer address; 0: LIM_CONN_PER_PEER */
    bool ui; /* PLIMSOLL_UI=1: serve the read-only page (ui.h) on GET /, /ui and /ui/... */
    const char *allowed_hosts; /* PLIMSOLL_ALLOWED_HOSTS (hostcheck.h); NULL: none */
    struct tls_store *tls;    /* PLIMSOLL_TLS_CERT/_KEY on both listeners; NULL: plain; not owned */
};

struct srv *srv_start(const struct srv_config *cfg, struct plm_err *err);
uint16_t srv_port(const struct srv *s);
uint16_t srv_metrics_port(const struct srv *s);
/* Stops accepting new connections; requests in flight go on (srv_active counts them). */
void srv_quiesce(struct srv *s);
/* Requests currently inside a procedure handler. */
unsigned srv_active(const struct srv *s);
void srv_free(struct srv *s);

/* Parses host:port forms into a bound, listening, CLOEXEC socket; the variable name is used in errors. */
int srv_listen(const char *var, const char *addr, struct plm_err *err);
