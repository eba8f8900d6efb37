/* gate_int.h: the gate's inside, shared by gate.c (accepting, the peer table, timers, the
 * thread) and relay.c (one connection's bytes in both directions). Everything here is touched
 * only by the gate's own thread, except the atomics. */
#pragma once
#include <microhttpd.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/socket.h>

#include "../core/limits.h"
#include "gate.h"
#include "respframe.h"
#include "tls.h"

#define RELAY_IN_MAX (LIM_HEADER_MAX + 1024u) /* client -> MHD: a whole head fits, or body chunks */
#define RELAY_OUT_MAX (32u * 1024)            /* MHD -> client */
#define RELAY_PARK_MS 1000u   /* an idle keep-alive connection gives its MHD connection back */
#define RELAY_LINGER_MS 2000u /* after our last byte: read and drop what the peer still sends */

struct peer_key {
    unsigned char a[16]; /* IPv6, or IPv4 as ::ffff:a.b.c.d */
};

/* Where a connection's request stream is (client -> MHD direction). */
enum conn_state {
    C_FREE,   /* table slot unused */
    C_HEAD,   /* reading a request head (none, part of one, or a whole one to check) */
    C_BODY,   /* forwarding body_left more body bytes */
    C_ANSWER, /* the request is forwarded; its answer is not complete yet */
    C_REFUSE, /* writing our own refusal, then linger */
    C_LINGER  /* our side is shut: dropping what the peer still sends, until EOF or a deadline */
};

struct conn {
    enum conn_state st;
    int cfd, mfd; /* the client's socket; our end of the socketpair to MHD (-1: none, parked) */
    struct tls_conn *tls; /* NULL: plain */
    bool hs_done, client_eof, mhd_eof, mhd_dead, mhd_shut, rf_unknown, busy, again;
    unsigned ev_c, ev_m; /* registered epoll masks (0: not registered) */
    struct peer_key key;
    struct sockaddr_storage addr;
    socklen_t alen;
    char *in;  /* plaintext from the client; the first in_ok bytes are checked and go to MHD */
    size_t in_len, in_cap, in_ok;
    size_t scanned; /* bytes of the current head already searched for its end */
    char *out; /* bytes for the client (MHD's answers, or our refusal) */
    size_t out_len, out_off, out_cap;
    unsigned long long body_left;
    unsigned answers_due; /* requests forwarded whose final answer has not been seen */
    struct respframe rf;
    uint64_t head_from; /* this head's 5 s run from here (0: no byte of it yet) */
    uint64_t body_from, idle_from, last_write, linger_from;
    size_t lingered;
};

struct gate {
    struct gate_config cfg;
    struct MHD_Daemon *mhd;
    int ep, wake_fd;
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
    char scratch[4096];
};

/* relay.c */
void relay_start(struct gate *g, struct conn *c);    /* a new connection in the table */
void relay_pump(struct gate *g, struct conn *c);     /* move what can move; set epoll interest */
void relay_on_event(struct gate *g, struct conn *c, bool mhd_side, uint32_t events);
uint64_t relay_deadline(const struct gate *g, const struct conn *c); /* UINT64_MAX: none */
void relay_expire(struct gate *g, struct conn *c, uint64_t now);
void relay_drain(struct gate *g, struct conn *c);    /* quiesce: close it if idle */
void relay_close(struct gate *g, struct conn *c);    /* releases everything the connection holds */
/* gate.c */
void gate_peer_release(struct gate *g, const struct peer_key *k);
void gate_timer_at(struct gate *g, uint64_t when);
