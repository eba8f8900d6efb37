/* gate.h: the front door of a listener (issue 12 findings 3 and 6). One thread accepts every
 * connection itself and holds it, on epoll, without a thread of its own, until the request head
 * is complete: it peeks (MSG_PEEK, so the bytes stay in the socket for libmicrohttpd to read),
 * checks the head strictly (httphead.h) and only then hands the socket to MHD with
 * MHD_add_connection. So:
 *   - the head must arrive within LIM_HEADER_READ_MS (5 s) in total, whatever the trickle rate;
 *     a slow or malformed head costs the daemon a file descriptor and a slot in the pending
 *     table, never a thread or an MHD connection, and /healthz is never queued behind it;
 *   - at most per_peer connections per peer address exist at once (pending plus inside MHD);
 *     the connection over the cap is answered 429 and closed;
 *   - at most max_pending connections wait for their head; beyond that 503 and close.
 * Owns: the listening socket, every pending socket, the peer table. Thread-safe: MHD reports a
 * closed connection from its threads through gate_notify_connection. */
#pragma once
#include <microhttpd.h>
#include <sys/socket.h>

#include "../core/err.h"

struct gate;

struct gate_config {
    int listen_fd;           /* bound, listening; the gate owns it from gate_new on */
    unsigned max_pending;    /* connections waiting for a complete head */
    unsigned per_peer;       /* connections per peer address, pending and in MHD */
    unsigned header_ms;      /* 0: LIM_HEADER_READ_MS */
    const char *name;        /* for log lines: "rpc", "metrics" */
};

/* MHD's MHD_OPTION_NOTIFY_CONNECTION callback; cls is the gate. */
void gate_notify_connection(void *cls, struct MHD_Connection *conn, void **socket_context,
                            enum MHD_ConnectionNotificationCode toe);
/* Stops accepting and closes every pending connection; connections inside MHD go on. */
void gate_stop(struct gate *g);
/* After gate_stop and after MHD stopped (it may still report closed connections until then). */
void gate_free(struct gate *g);

/* The gate of a listener is created before its MHD daemon (whose notify callback needs it)
 * and attached to it afterwards. */
struct gate *gate_new(const struct gate_config *cfg, struct plm_err *err);
int gate_run(struct gate *g, struct MHD_Daemon *mhd, struct plm_err *err);
