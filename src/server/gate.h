/* gate.h: the front of a listener (issue 12 findings 3 and 6; issue 14 TLS). One thread accepts
 * every connection itself and keeps it for its whole life: it reads the client's bytes (after a
 * TLS handshake when the listener has a certificate), checks EVERY request head strictly
 * (httphead.h) before libmicrohttpd sees it, and relays the request to MHD over a socketpair
 * (MHD_add_connection), then MHD's answer back (relay.c). So:
 *   - each head must arrive within LIM_HEADER_READ_MS (5 s) of its first byte (of the accept,
 *     for the first one), each body within LIM_BODY_READ_MS (30 s) of its head, and a
 *     connection between requests is closed after LIM_IDLE_MS (2 min);
 *   - a connection waiting for a head or idle between requests costs a table entry and its
 *     buffers, never a thread or an MHD connection: after RELAY_PARK_MS without a request its
 *     MHD connection is given back, and a new one is made for its next request;
 *   - keep-alive connections carry many requests, one at a time: the next head is read only
 *     once the answer to the previous one is complete (no pipelining reaches MHD);
 *   - at most per_peer connections per peer address exist at once; the one over is answered
 *     429 and closed; at most max_conns connections in all (503 beyond).
 * Owns: the listening socket, every client socket, our end of each socketpair, the peer table.
 * MHD owns its end of each socketpair once MHD_add_connection took it. */
#pragma once
#include <microhttpd.h>
#include <sys/socket.h>

#include "../core/err.h"
#include "tls.h"

struct gate;

struct gate_config {
    int listen_fd;           /* bound, listening; the gate owns it from gate_new on */
    unsigned max_conns;      /* connections held at once */
    unsigned per_peer;       /* connections per peer address */
    unsigned header_ms;      /* 0: LIM_HEADER_READ_MS */
    struct tls_store *tls;   /* NULL: plain HTTP; not owned */
    const char *name;        /* for log lines: "rpc", "metrics" */
};

/* Stops accepting; closes idle connections at once and the others as soon as their answer is
 * out. Returns at once (the gate's thread does the work). */
void gate_quiesce(struct gate *g);
/* Connections with a request or an answer in flight (for the drain). */
unsigned gate_busy(const struct gate *g);
/* Stops the thread and closes every connection. */
void gate_stop(struct gate *g);
/* After gate_stop and after MHD stopped. */
void gate_free(struct gate *g);

/* The gate of a listener is created before its MHD daemon and attached to it afterwards. */
struct gate *gate_new(const struct gate_config *cfg, struct plm_err *err);
int gate_run(struct gate *g, struct MHD_Daemon *mhd, struct plm_err *err);
