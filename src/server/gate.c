/* gate.c: see gate.h. This file accepts connections, keeps the per-peer table and the timers,
 * runs the thread and takes the workers' answers back; conn.c handles one connection.
 * Epoll events carry the slot's generation beside its index (event_id): an event that was
 * already in a batch for a connection closed earlier in the same batch, whose slot a new
 * connection then took, no longer matches and is dropped.
 * Timers: every connection has at most one deadline (conn_deadline). Rather than a heap, the
 * thread keeps `next_timer`, a time before which no deadline falls, lowered whenever a
 * connection's deadline moves earlier (gate_timer_at); only when it passes is the table scanned
 * (deadlines are seconds apart, so that is rare).
 * The peer table is gate_peer.c's, the hand-over to a worker gate_work.c's: conn.c calls those,
 * never this file, so the two files do not call each other. */
#include "gate_int.h"

#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "../core/clock.h"
#include "../core/limits.h"

#define ID_LISTEN UINT64_MAX
#define ID_WAKE (UINT64_MAX - 1)
#define ID_DONE (UINT64_MAX - 2)
enum { GATE_CMD_NONE, GATE_CMD_QUIESCE, GATE_CMD_STOP };

/* A short fixed answer on a plain connection refused at accept, then close. What the peer
 * already sent is read and dropped first (bounded), so the close is a FIN after the answer
 * rather than a reset that could discard it. A TLS connection is closed without a word. */
static void refuse_at_accept(struct gate *g, int fd, unsigned status, const char *reason, const char *why)
{
    if (!g->cfg.tls) {
        char out[512];
        int n = snprintf(out, sizeof out,
                         "HTTP/1.1 %u %s\r\nContent-Type: text/plain; charset=utf-8\r\nConnection: close\r\n"
                         "Content-Length: %zu\r\n\r\n%s\n",
                         status, reason, strlen(why) + 1, why);
        if (n > 0)
            (void)!send(fd, out, (size_t)n, MSG_NOSIGNAL | MSG_DONTWAIT);
        shutdown(fd, SHUT_WR);
        for (int i = 0; i < 16 && recv(fd, g->scratch, sizeof g->scratch, MSG_DONTWAIT) > 0; i++)
            ;
    }
    close(fd);
}

/* A connection joins this loop's table (the loop owns it from here on). */
static void adopt(struct gate *g, int fd, const struct peer_key *k)
{
    if (g->n_conns == g->cap) {
        gate_peer_release(g, k);
        refuse_at_accept(g, fd, 503, "Service Unavailable", "too many connections");
        return;
    }
    unsigned i = 0;
    while (g->conns[i].st != C_FREE)
        i++;
    struct conn *c = &g->conns[i];
    bool queued = c->again; /* a closed predecessor may still be on the again list */
    uint32_t gen = c->gen + 1;
    memset(c, 0, sizeof *c);
    c->again = queued;
    c->gen = gen;
    c->fd = fd;
    c->key = *k;
    socklen_t ll = sizeof c->local;
    if (getsockname(fd, (struct sockaddr *)&c->local, &ll) < 0)
        c->local.ss_family = AF_UNSPEC;
    if (g->cfg.tls && !(c->tls = tls_conn_new(g->cfg.tls, fd))) {
        gate_peer_release(g, k);
        close(fd);
        return;
    }
    g->n_conns++;
    conn_start(g, c);
}

/* The lead's: hands the connection to the next loop in turn (or keeps it). */
static void hand_off(struct gate *g, int fd, const struct peer_key *k)
{
    struct gate *to = g->loops[g->rr++ % g->n_loops];
    if (to == g) {
        adopt(g, fd, k);
        return;
    }
    pthread_mutex_lock(&to->done_mu);
    if (to->inbox_n == to->inbox_cap) {
        unsigned cap = to->inbox_cap ? 2 * to->inbox_cap : 64;
        struct handoff *p = realloc(to->inbox, cap * sizeof *p);
        if (!p) {
            pthread_mutex_unlock(&to->done_mu);
            adopt(g, fd, k); /* out of memory: keep it here */
            return;
        }
        to->inbox = p;
        to->inbox_cap = cap;
    }
    to->inbox[to->inbox_n++] = (struct handoff){.fd = fd, .key = *k};
    pthread_mutex_unlock(&to->done_mu);
    uint64_t one = 1;
    (void)!write(to->done_fd, &one, sizeof one);
}

static void on_accept(struct gate *g)
{
    for (;;) {
        struct sockaddr_storage ss;
        socklen_t sl = sizeof ss;
        int fd = accept4(g->cfg.listen_fd, (struct sockaddr *)&ss, &sl, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0) {
            /* Out of descriptors (or another transient failure): the backlog stays readable, so
             * stop watching it for a moment instead of spinning; the timer resumes it. */
            if (errno != EAGAIN && errno != EINTR && errno != ECONNABORTED) {
                epoll_ctl(g->ep, EPOLL_CTL_DEL, g->cfg.listen_fd, NULL);
                g->accept_paused_until = clock_mono_ms() + 100;
                gate_timer_at(g, g->accept_paused_until);
            }
            return;
        }
        /* an answer is one write, but a 100 Continue and its final answer are two */
        int one = 1;
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        struct peer_key k;
        gate_peer_key((struct sockaddr *)&ss, &k);
        if (!gate_peer_acquire(g, &k)) {
            refuse_at_accept(g, fd, 429, "Too Many Requests", "too many connections from this address");
            continue;
        }
        hand_off(g, fd, &k);
    }
}

static void resume_accept(struct gate *g)
{
    struct epoll_event l = {.events = EPOLLIN, .data.u64 = ID_LISTEN};
    if (epoll_ctl(g->ep, EPOLL_CTL_ADD, g->cfg.listen_fd, &l) == 0)
        g->accept_paused_until = 0;
}

static void run_timers(struct gate *g)
{
    uint64_t now = clock_mono_ms();
    if (now < g->next_timer)
        return;
    g->next_timer = UINT64_MAX;
    if (g->accept_paused_until) {
        if (now >= g->accept_paused_until && g->listening)
            resume_accept(g);
        else
            gate_timer_at(g, g->accept_paused_until);
    }
    for (unsigned i = 0; i < g->cap; i++) {
        struct conn *c = &g->conns[i];
        if (c->st == C_FREE)
            continue;
        uint64_t d = conn_deadline(g, c);
        if (d <= now)
            conn_expire(g, c, now);
        if (c->st != C_FREE)
            gate_timer_at(g, conn_deadline(g, c));
    }
}

static void stop_listening(struct gate *g)
{
    if (!g->listening)
        return;
    epoll_ctl(g->ep, EPOLL_CTL_DEL, g->cfg.listen_fd, NULL);
    close(g->cfg.listen_fd);
    g->cfg.listen_fd = -1;
    g->listening = false;
}

/* Returns false when the thread must end. */
static bool on_command(struct gate *g)
{
    uint64_t v;
    (void)!read(g->wake_fd, &v, sizeof v);
    int cmd = atomic_load(&g->cmd);
    if (cmd == GATE_CMD_STOP)
        return false;
    if (cmd == GATE_CMD_QUIESCE && !g->draining) {
        g->draining = true;
        stop_listening(g);
        for (unsigned i = 0; i < g->cap; i++)
            if (g->conns[i].st != C_FREE)
                conn_drain(g, &g->conns[i]);
    }
    return true;
}

/* Answers from the worker threads, in the order they finished. */
static void on_done(struct gate *g)
{
    uint64_t v;
    (void)!read(g->done_fd, &v, sizeof v);
    pthread_mutex_lock(&g->done_mu);
    struct gate_req *list = g->done_head;
    g->done_head = NULL;
    unsigned n_in = g->inbox_n;
    struct handoff in[64];
    if (n_in > 64)
        n_in = 64; /* the rest on the next turn: the eventfd is written again below */
    if (n_in) { /* the inbox is NULL until the first hand-off: no memcpy from NULL (UBSan) */
        memcpy(in, g->inbox, n_in * sizeof *in);
        memmove(g->inbox, g->inbox + n_in, (g->inbox_n - n_in) * sizeof *in);
        g->inbox_n -= n_in;
    }
    bool more = g->inbox_n > 0;
    pthread_mutex_unlock(&g->done_mu);
    if (more) {
        uint64_t one = 1;
        (void)!write(g->done_fd, &one, sizeof one);
    }
    for (unsigned i = 0; i < n_in; i++) {
        if (g->draining) {
            gate_peer_release(g, &in[i].key);
            close(in[i].fd);
        } else {
            adopt(g, in[i].fd, &in[i].key);
        }
    }
    while (list) {
        struct gate_req *rq = list;
        list = rq->next;
        struct conn *c = rq->conn_index < g->cap ? &g->conns[rq->conn_index] : NULL;
        if (c && c->gen == rq->conn_gen && c->st == C_WORK)
            conn_on_done(g, c, rq);
        else
            gate_req_free(g, rq); /* its connection closed meanwhile */
    }
}

static void *gate_main(void *arg)
{
    struct gate *g = arg;
    struct epoll_event evs[64];
    for (;;) {
        run_timers(g);
        int timeout = -1;
        if (g->again_head)
            timeout = 0;
        else if (g->next_timer != UINT64_MAX) {
            uint64_t now = clock_mono_ms();
            timeout = g->next_timer <= now ? 0 : (int)(g->next_timer - now + 1);
        }
        int n = epoll_wait(g->ep, evs, 64, timeout);
        for (int k = 0; k < n; k++) {
            uint64_t id = evs[k].data.u64;
            if (id == ID_WAKE) {
                if (!on_command(g))
                    return NULL;
            } else if (id == ID_LISTEN) {
                on_accept(g);
            } else if (id == ID_DONE) {
                on_done(g);
            } else {
                unsigned i = (unsigned)(id & 0xffffffffu);
                if (i < g->cap && g->conns[i].st != C_FREE && g->conns[i].gen == (uint32_t)(id >> 32))
                    conn_on_event(g, &g->conns[i], evs[k].events);
            }
        }
        /* connections that stopped on their byte budget with more to move */
        unsigned head = g->again_head;
        g->again_head = 0;
        while (head) {
            struct conn *c = &g->conns[head - 1];
            head = g->again_next[head - 1];
            c->again = false;
            if (c->st != C_FREE)
                conn_pump(g, c);
        }
    }
}

static struct gate *loop_new(const struct gate_config *cfg, unsigned cap)
{
    struct gate *g = calloc(1, sizeof *g);
    if (!g)
        return NULL;
    g->cfg = *cfg;
    if (!g->cfg.header_ms)
        g->cfg.header_ms = LIM_HEADER_READ_MS;
    g->ep = g->wake_fd = g->done_fd = -1;
    pthread_mutex_init(&g->done_mu, NULL);
    pthread_mutex_init(&g->peer_mu, NULL);
    g->cap = cap;
    g->next_timer = UINT64_MAX;
    g->conns = calloc(g->cap, sizeof *g->conns);
    g->again_next = calloc(g->cap, sizeof *g->again_next);
    if (!g->conns || !g->again_next) {
        free(g->conns);
        free(g->again_next);
        free(g);
        return NULL;
    }
    return g;
}

static void loop_free(struct gate *g);

struct gate *gate_new(const struct gate_config *cfg, struct plm_err *err)
{
    unsigned n = cfg->loops ? cfg->loops : 1, total = cfg->max_conns ? cfg->max_conns : 1;
    unsigned cap = (total + n - 1) / n; /* connections are handed out in turn: each loop holds a share */
    struct gate *lead = loop_new(cfg, cap);
    if (lead)
        lead->loops = calloc(n, sizeof *lead->loops);
    if (!lead || !lead->loops) {
        if (lead)
            loop_free(lead);
        plm_fail(err, ENOMEM, PLM_E_INTERNAL, "%s: out of memory", cfg->name);
        return NULL;
    }
    lead->lead = lead;
    lead->loops[lead->n_loops++] = lead;
    struct gate_config fc = *cfg;
    fc.listen_fd = -1; /* only the lead accepts */
    while (lead->n_loops < n) {
        struct gate *f = loop_new(&fc, cap);
        if (!f) {
            lead->cfg.listen_fd = -1; /* a failed gate_new leaves the socket to its caller */
            gate_free(lead);
            plm_fail(err, ENOMEM, PLM_E_INTERNAL, "%s: out of memory", cfg->name);
            return NULL;
        }
        f->lead = lead;
        lead->loops[lead->n_loops++] = f;
    }
    return lead;
}

static int loop_run(struct gate *g, struct plm_err *err)
{
    g->ep = epoll_create1(EPOLL_CLOEXEC);
    g->wake_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    g->done_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    int fl = g->cfg.listen_fd;
    struct epoll_event l = {.events = EPOLLIN, .data.u64 = ID_LISTEN}, s = {.events = EPOLLIN, .data.u64 = ID_WAKE},
                       d = {.events = EPOLLIN, .data.u64 = ID_DONE};
    if (g->ep < 0 || g->wake_fd < 0 || g->done_fd < 0 || (fl >= 0 && epoll_ctl(g->ep, EPOLL_CTL_ADD, fl, &l) < 0) ||
        epoll_ctl(g->ep, EPOLL_CTL_ADD, g->wake_fd, &s) < 0 || epoll_ctl(g->ep, EPOLL_CTL_ADD, g->done_fd, &d) < 0)
        return plm_fail(err, errno, PLM_E_INTERNAL, "%s: epoll: %s", g->cfg.name, strerror(errno));
    if (fl >= 0) { /* the accept loop drains the backlog until EAGAIN: the socket must not block */
        int flags = fcntl(fl, F_GETFL);
        if (flags < 0 || fcntl(fl, F_SETFL, flags | O_NONBLOCK) < 0)
            return plm_fail(err, errno, PLM_E_INTERNAL, "%s: fcntl: %s", g->cfg.name, strerror(errno));
        g->listening = true;
    }
    if (pthread_create(&g->thread, NULL, gate_main, g) != 0)
        return plm_fail(err, 0, PLM_E_INTERNAL, "%s: cannot start a loop thread", g->cfg.name);
    g->running = true;
    return 0;
}

int gate_run(struct gate *lead, struct plm_err *err)
{
    /* the followers first: the lead hands connections to them as soon as it runs */
    for (unsigned i = lead->n_loops; i-- > 0;)
        if (loop_run(lead->loops[i], err) < 0)
            return -1;
    return 0;
}

static void command(struct gate *g, int cmd)
{
    atomic_store(&g->cmd, cmd);
    uint64_t one = 1;
    (void)!write(g->wake_fd, &one, sizeof one);
}

void gate_quiesce(struct gate *lead)
{
    for (unsigned i = 0; lead && i < lead->n_loops; i++)
        if (lead->loops[i]->running)
            command(lead->loops[i], GATE_CMD_QUIESCE);
}

unsigned gate_busy(const struct gate *lead)
{
    unsigned n = 0;
    for (unsigned i = 0; lead && i < lead->n_loops; i++)
        n += atomic_load(&lead->loops[i]->n_busy);
    return n;
}

static void loop_stop(struct gate *g)
{
    if (g->running) {
        command(g, GATE_CMD_STOP);
        pthread_join(g->thread, NULL);
        g->running = false;
    }
}

void gate_stop(struct gate *lead)
{
    if (!lead)
        return;
    for (unsigned i = 0; i < lead->n_loops; i++)
        loop_stop(lead->loops[i]);
    for (unsigned k = 0; k < lead->n_loops; k++) {
        struct gate *g = lead->loops[k];
        for (unsigned i = 0; i < g->cap; i++)
            if (g->conns[i].st != C_FREE)
                conn_close(g, &g->conns[i]);
        for (unsigned i = 0; i < g->inbox_n; i++) { /* handed over, never adopted */
            gate_peer_release(g, &g->inbox[i].key);
            close(g->inbox[i].fd);
        }
        g->inbox_n = 0;
    }
    if (lead->cfg.listen_fd >= 0)
        close(lead->cfg.listen_fd);
    lead->cfg.listen_fd = -1;
    lead->listening = false;
}

static void loop_free(struct gate *g)
{
    if (g->ep >= 0)
        close(g->ep);
    if (g->wake_fd >= 0)
        close(g->wake_fd);
    if (g->done_fd >= 0)
        close(g->done_fd);
    for (struct gate_req *rq = g->done_head, *next; rq; rq = next) { /* answers nobody will take */
        next = rq->next;
        gate_req_free(g, rq);
    }
    pthread_mutex_destroy(&g->done_mu);
    pthread_mutex_destroy(&g->peer_mu);
    free(g->inbox);
    free(g->conns);
    free(g->again_next);
    free(g);
}

void gate_free(struct gate *lead)
{
    if (!lead)
        return;
    gate_stop(lead);
    for (unsigned i = 1; i < lead->n_loops; i++)
        loop_free(lead->loops[i]);
    gate_peers_free(lead);
    free(lead->loops);
    loop_free(lead);
}
