/* guestio.h: guest-facing HTTP, parsed outside the daemon (docs/privsep.md).
 *
 * A listener that guest code can write to (the docker grant socket; later the e2b guard and the
 * microvm channel) hands its listening socket to gio_server_start(). From then on the daemon
 * only accepts: each accepted connection goes to a confined helper process (plimsoll-guestio:
 * its own uid when the daemon is root, no capabilities, no environment, only its channel and
 * the guest connections, seccomp allow-list), which parses the HTTP/1.1 request under the
 * limits below and forwards one canonical CALL frame (method, raw target, body) over a
 * socketpair. The daemon decodes that frame strictly, calls the handler on a thread of its
 * own, and sends the reply back for the helper to write. Nothing the guest wrote is parsed in
 * the daemon.
 *
 * Failure is closed: if the helper dies, breaks the frame protocol, or holds a connection past
 * its deadlines, the daemon kills it, answers 503 to every connection still waiting for an
 * answer (and closes the rest), and spawns a new helper for the next connection (at most
 * GIO_RESTART_MAX times per server, then every connection gets 503).
 *
 * The answers the guest can receive without the handler: 400 malformed request line or header,
 * 411 Transfer-Encoding, 431 head over head_max, 505 HTTP version, 503 out of memory or the
 * helper failed, 502 a handler status outside 200..599. A connection that sends no complete
 * head (or body) in time is closed without an answer. */
#pragma once
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "../core/err.h"
#include "../core/provider.h"
#include "frame.h"

#define GIO_CONN_CAP 256u                /* the most conn_max may be (the e2b guard's 256) */
#define GIO_HEAD_CAP (16u * 1024)        /* the most head_max may be */
#define GIO_DRAIN_MAX (4u * 1024 * 1024) /* read and dropped after answering an oversized upload */
#define GIO_RESTART_MAX 16u              /* helpers spawned per server after the first */
#define GIO_GRACE_MS 2000u               /* slack on the helper's own deadlines before it is killed */
#define GIO_HELLO_MS 5000u               /* a new helper must be confined and say HELLO by then */
/* The helper's ids when the daemon is root: the user "plimsoll-guestio" when it exists, else
 * this uid and gid (outside the systemd bands, distinct from the docker guest's default 61000). */
#define GIO_HELPER_USER "plimsoll-guestio"
#define GIO_HELPER_UID 61010u

struct gio_limits {
    unsigned conn_max; /* connections served at once; more wait in the listen backlog */
    uint32_t head_max; /* request line + headers, at most GIO_HEAD_CAP */
    uint32_t body_max; /* body bytes forwarded, at most GIO_BODY_MAX (frame.h); the rest dropped */
    uint32_t head_ms;  /* from accept to a complete head */
    uint32_t read_ms;  /* from accept to a complete request */
    uint32_t write_ms; /* to write the answer */
    /* Guard mode (the e2b egress guard) when set: only POST to exactly this path (else 404), the
     * credential header's value and the parsed JSON body come as GCALL frames to h.guard, and
     * body_max may be up to GIO_GBODY_MAX. NULL: plain HTTP, CALL frames to h.call. */
    const char *guard_path;
    /* 0: at most GIO_RESTART_MAX helpers after the first, ever (a per-run listener). Else the
     * budget of GIO_RESTART_MAX refills every restart_window_ms (a listener that lives as long
     * as the daemon). */
    uint32_t restart_window_ms;
};

/* The handler: `call` runs on a daemon thread per request with NUL-terminated, verbatim method
 * and target (checked only for the byte classes of frame.h) and the body; it must fill out
 * (status, malloc'd body and content_type or NULL). hold/release (both or neither) follow
 * struct plm_host_api: taken under the server's lock before a call thread starts, released
 * after `call` returns; with them gio_server_stop does not wait for calls in flight. */
struct gio_handler {
    void (*call)(void *ctx, const char *method, const char *target, const uint8_t *body, size_t len,
                 struct plm_host_reply *out);
    /* guard mode instead of call: one decoded GCALL (pointers valid during the call) */
    void (*guard)(void *ctx, const struct gio_gcall *g, struct plm_host_reply *out);
    void (*hold)(void *ctx);
    void (*release)(void *ctx);
    void *ctx;
};

struct gio_server;

/* Takes ownership of listen_fd (a listening SOCK_STREAM socket; closed on failure too), spawns
 * the helper and waits for its HELLO. helper_path NULL means the installed helper (beside the
 * daemon binary, else the build tree's); tests pass another. */
int gio_server_start(int listen_fd, const struct gio_limits *lim, const struct gio_handler *h, const char *helper_path,
                     struct gio_server **out, struct plm_err *err);
/* Stops accepting, kills and reaps the helper, closes the listener and every connection (no
 * answer), and returns; a call thread still inside the handler finishes on its own when the
 * handler has hold/release, else this waits for it. NULL-safe. */
void gio_server_stop(struct gio_server *s);

struct gio_stats {
    pid_t helper_pid;    /* the live helper, 0 when none */
    unsigned live;       /* connections held (the conn_max cap) */
    unsigned helpers;    /* helpers spawned, the first included */
    unsigned failures;   /* helpers that died or were killed while serving */
    unsigned violations; /* of those, killed by us: a protocol violation or an overdue connection */
    int last_status;     /* wait status of the last helper reaped, -1 before any */
};
void gio_server_stats(struct gio_server *s, struct gio_stats *out);

/* ---- a guest byte stream (stream.c): a microvm's channel -------------------------------------- */
/* The guest writes frames to a socket the daemon also writes to; a helper in stream mode is the
 * only reader. gio_stream_open takes guest_fd (a descriptor of that socket for the helper: the
 * daemon keeps its own for writing and never reads it), spawns the helper and hands it over. */
struct gio_stream;
int gio_stream_open(int guest_fd, const char *helper_path, struct gio_stream **out, struct plm_err *err);
/* The next frame before deadline_ms (CLOCK_MONOTONIC): 1 with *p and *len (one canonical guest
 * frame, for the caller's strict decoder; valid until the next call), 0 when the guest's side
 * ended (*why: enum gio_end), -1 with err: errnum ETIMEDOUT at the deadline (the helper lives
 * on), EPIPE when the helper died or broke the protocol (it is reaped; every later call fails). */
int gio_stream_next(struct gio_stream *s, int64_t deadline_ms, const uint8_t **p, size_t *len, int *why,
                    struct plm_err *err);
pid_t gio_stream_pid(const struct gio_stream *s); /* -1 once reaped */
/* false once the helper has exited (it is reaped then) or the stream ended or failed. */
bool gio_stream_alive(struct gio_stream *s);
void gio_stream_close(struct gio_stream *s);      /* kills and reaps the helper; NULL-safe */

/* Threads of every server in the process (monitors and call threads, detached ones included). */
unsigned gio_threads(void);
/* Waits up to timeout_ms for gio_threads() to reach 0; true when it did. */
bool gio_quiesce(uint32_t timeout_ms);
