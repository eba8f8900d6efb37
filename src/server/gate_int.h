/* gate_int.h: the gate's inside, shared by gate.c (accepting, the peer table, timers, the
 * thread, completions) and conn.c (one connection's requests and answers). Everything here is
 * touched only by the gate's own thread, except the atomics and the completion list (done_mu). */
#pragma once
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/socket.h>

#include "../core/limits.h"
#include "gate.h"
#include "tls.h"

#define CONN_IN_MAX (LIM_HEADER_MAX + 1024u) /* a whole head fits, plus what follows it */
#define CONN_OUT_HIGH (64u * 1024)           /* answers queued beyond this: read no further head */
#define GATE_PARK_MS 1000u   /* an idle keep-alive connection gives its buffers back */
#define GATE_LINGER_MS 2000u /* after our last byte: read and drop what the peer still sends */

struct peer_key {
    unsigned char a[16]; /* IPv6, or IPv4 as ::ffff:a.b.c.d */
};

enum conn_state {
    C_FREE,    /* table slot unused */
    C_HEAD,    /* reading a request head (none, part of one, or a whole one to check) */
    C_BODY,    /* reading the body of rq */
    C_WORK,    /* the request is with a worker thread; its answer comes back as a completion */
    C_DISCARD, /* answered before its body: dropping discard_left body bytes */
    C_CLOSING, /* the last answer is queued: write it, then linger */
    C_LINGER   /* our side is shut: dropping what the peer still sends, until EOF or a deadline */
};

struct conn {
    enum conn_state st;
    uint32_t gen; /* bumped on every reuse of the slot: an event or completion for an earlier
                     connection in this slot is recognised and dropped */
    int fd;
    struct tls_conn *tls; /* NULL: plain */
    bool hs_done, client_eof, busy, again;
    bool body_to_work; /* C_BODY: the handler asked for a worker once the body is in */
    bool drained; /* this pump's read came back short (and TLS holds nothing decrypted): the
                     socket held no more then, and epoll (level-triggered) reports whatever
                     arrives after; no second recv just to hear EAGAIN */
    unsigned ev; /* registered epoll mask (0: not registered) */
    struct peer_key key;
    struct sockaddr_storage local; /* the address the client reached */
    char *in; /* plaintext from the client not consumed yet */
    size_t in_len, in_cap;
    size_t scanned; /* bytes of the current head already searched for its end */
    char *out; /* bytes for the client */
    size_t out_len, out_off, out_cap;
    struct gate_req *rq; /* C_BODY: the request whose body is read */
    unsigned long long discard_left;
    uint64_t head_from; /* this head's 5 s run from here (0: no byte of it yet) */
    uint64_t body_from, idle_from, last_write, linger_from;
    size_t lingered;
};

struct handoff { /* an accepted connection on its way to the loop that will own it */
    int fd;
    struct peer_key key;
};

/* One loop: a thread, its epoll and its own table of connections. A listener has cfg.loops of
 * them; the first (the lead) accepts, counts peers and hands each connection to a loop in turn. */
struct gate {
    struct gate_config cfg;
    struct gate *lead;     /* the listener's first loop (itself for the lead) */
    struct gate **loops;   /* lead only: every loop, the lead first */
    unsigned n_loops, rr;  /* lead only */
    pthread_mutex_t peer_mu; /* lead only: the peer table (loops close connections too) */
    struct handoff *inbox; /* under done_mu: connections the lead handed to this loop */
    unsigned inbox_n, inbox_cap;
    int ep, wake_fd, done_fd;
    pthread_t thread;
    bool running, listening, draining;
    atomic_int cmd; /* GATE_CMD_* from another thread */
    struct peer *buckets[1024];
    struct conn *conns;
    unsigned n_conns, cap;
    uint64_t accept_paused_until; /* 0: accepting */
    uint64_t next_timer;          /* no deadline falls before this (UINT64_MAX: none) */
    unsigned again_head;          /* connections to pump again before sleeping (index + 1; 0: none) */
    unsigned *again_next;
    atomic_uint n_busy;           /* connections with a request or answer in flight */
    pthread_mutex_t done_mu;      /* completions from worker threads */
    struct gate_req *done_head;
    char date[40];                /* "Date: ...\r\n" for the current second */
    int64_t date_sec;
    char scratch[4096];
};

/* conn.c */
void conn_start(struct gate *g, struct conn *c);   /* a new connection in the table */
void conn_pump(struct gate *g, struct conn *c);    /* move what can move; set epoll interest */
void conn_on_event(struct gate *g, struct conn *c, uint32_t events);
void conn_on_done(struct gate *g, struct conn *c, struct gate_req *rq); /* a worker's answer */
uint64_t conn_deadline(const struct gate *g, const struct conn *c); /* UINT64_MAX: none */
void conn_expire(struct gate *g, struct conn *c, uint64_t now);
void conn_drain(struct gate *g, struct conn *c);   /* quiesce: close it if idle */
void conn_close(struct gate *g, struct conn *c);   /* releases everything the connection holds */
void gate_req_free(struct gate *g, struct gate_req *rq); /* the handler's done, then the memory */
/* No connection's deadline falls before `when` any more than before this call (gate.c's timers). */
static inline void gate_timer_at(struct gate *g, uint64_t when)
{
    if (when < g->next_timer)
        g->next_timer = when;
}
/* gate_peer.c: the per-peer count (the lead's table, under its peer_mu) */
void gate_peer_key(const struct sockaddr *sa, struct peer_key *k);
bool gate_peer_acquire(struct gate *lead, const struct peer_key *k); /* false: k has per_peer already */
void gate_peer_release(struct gate *loop, const struct peer_key *k);
void gate_peers_free(struct gate *lead);
/* gate_work.c. GATE_WORK: 0, or -1 when no worker could take it (nothing changed) */
int gate_submit(struct gate *g, struct conn *c, struct gate_req *rq);
