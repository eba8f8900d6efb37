/* gate.h: the HTTP/1.1 server of a listener (issue 22: one HTTP layer). One thread per listener
 * accepts every connection and keeps it for its whole life: it reads the client's bytes (after a
 * TLS handshake when the listener has a certificate), checks EVERY request head strictly
 * (httphead.h), reads exactly the declared body, and hands the request to the listener's handler
 * (struct gate_handler). There is no second parser behind it. So:
 *   - each head must arrive within LIM_HEADER_READ_MS (5 s) of its first byte (of the accept,
 *     for the first one), each body within LIM_BODY_READ_MS (30 s) of its head, and a
 *     connection between requests is closed after LIM_IDLE_MS (2 min);
 *   - a connection waiting for a head or idle between requests costs a table entry (and its
 *     buffers for GATE_PARK_MS after its last request), never a thread;
 *   - keep-alive connections carry many requests, one at a time: the next head is parsed only
 *     once the answer to the previous one is queued, so pipelined requests are answered in order;
 *   - at most per_peer connections per peer address exist at once; the one over is answered
 *     429 and closed; at most max_conns connections in all (503 beyond).
 * A listener may have several loop threads (cfg.loops): the first accepts and hands each new
 * connection to a loop in turn, which keeps it for its whole life; the peer count is shared.
 * The loop thread never waits on a provider: a handler answers at once (a refusal, Describe,
 * /healthz) or returns GATE_WORK, and its `work` runs on a worker thread (workers.h); the
 * answer comes back through the gate's completion list.
 * Owns: the listening socket, every client socket, the peer table, every gate_req until the
 * handler's `done` ran. */
#pragma once
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#include "../core/err.h"
#include "tls.h"
#include "workers.h"

struct gate;

/* The answer to one request. The gate adds Content-Length, Date and Connection. */
struct gate_resp {
    unsigned status;
    char *body;      /* owned when body_owned (freed with free), else static */
    size_t len;
    bool body_owned;
    bool close;      /* close the connection after this answer */
    size_t hdr_len;
    char hdr[1536];  /* extra header lines, each "Name: value\r\n" */
};

/* One request, from its checked head to its queued answer. */
struct gate_req {
    char *head;                    /* owned copy of the head; the request line is cut by NULs */
    size_t head_len;
    const char *method, *path, *query; /* query: after '?', "" when none */
    bool is_head, http10, keep_alive, expect_continue;
    unsigned long long content_length;
    char *body;                    /* owned; content_length bytes once read (NULL when 0) */
    size_t body_len;
    const struct sockaddr_storage *local; /* the address this connection reached (Host check) */
    void *state;                   /* the handler's; released by its `done` */
    int peer_fd;                   /* GATE_WORK: the connection's socket, duplicated, so a worker can
                                      ask whether the client went away (gate_req_peer_gone); -1: none */
    struct gate_resp resp;
    /* the gate's own bookkeeping */
    struct gate *gate;
    unsigned conn_index;
    uint32_t conn_gen;
    struct work_item work;
    struct gate_req *next;
};

enum gate_next {
    GATE_ANSWER, /* resp is filled */
    GATE_BODY,   /* (on_head only) read the body, then call on_body */
    GATE_WORK    /* run `work` on a worker thread, which fills resp */
};

struct gate_handler {
    void *cls;
    enum gate_next (*on_head)(void *cls, struct gate_req *rq);
    enum gate_next (*on_body)(void *cls, struct gate_req *rq); /* GATE_ANSWER or GATE_WORK */
    void (*work)(void *cls, struct gate_req *rq);               /* on a worker thread */
    void (*done)(void *cls, struct gate_req *rq);               /* releases rq->state; any thread */
};

struct gate_config {
    int listen_fd;           /* bound, listening; the gate owns it once gate_new succeeded */
    unsigned max_conns;      /* connections held at once */
    unsigned per_peer;       /* connections per peer address */
    unsigned header_ms;      /* 0: LIM_HEADER_READ_MS */
    struct tls_store *tls;   /* NULL: plain HTTP; not owned */
    const char *name;        /* for log lines: "rpc", "metrics" */
    struct gate_handler handler;
    struct workers *workers; /* for GATE_WORK; not owned */
    unsigned loops;          /* loop threads sharing the listener's connections (0: 1) */
};

struct gate *gate_new(const struct gate_config *cfg, struct plm_err *err);
int gate_run(struct gate *g, struct plm_err *err);
/* Stops accepting; closes idle connections at once and the others as soon as their answer is
 * out. Returns at once (the gate's thread does the work). */
void gate_quiesce(struct gate *g);
/* Connections with a request or an answer in flight (for the drain). */
unsigned gate_busy(const struct gate *g);
/* Stops the thread and closes every connection. */
void gate_stop(struct gate *g);
/* After gate_stop and after the workers ended (no completion can arrive any more). */
void gate_free(struct gate *g);

/* For handlers: header lookups on a request and building an answer. */
/* How many times the field `name` occurs; val and vlen get the last one (trimmed). */
unsigned gate_req_header(const struct gate_req *rq, const char *name, const char **val, size_t *vlen);
/* The value of a field sent exactly once, as a NUL-terminated copy in buf (NULL otherwise, or
 * when it does not fit); *n gets the count when n is not NULL. */
const char *gate_req_header_str(const struct gate_req *rq, const char *name, char *buf, size_t cap, unsigned *n);
/* Whether the client went away: its connection half- or fully closed, or reset. Asked by the
 * socket's state (poll), so bytes it pipelined behind this request stay unread. False when the
 * request has no duplicate socket (answered on the loop, or no descriptor was left to make one). */
bool gate_req_peer_gone(const struct gate_req *rq);
void gate_resp_header(struct gate_resp *rs, const char *name, const char *value);
/* status, content type, body (owned: freed by the gate) */
void gate_resp_set(struct gate_resp *rs, unsigned status, const char *ctype, char *body, size_t len, bool owned);
void gate_resp_text(struct gate_resp *rs, unsigned status, const char *static_text);
