/* gate.c: see gate.h.
 * Waiting for "more bytes than already peeked" uses SO_RCVLOWAT: epoll reports the socket
 * readable only once more than the bytes already looked at are buffered (or the peer closed),
 * so a trickling peer costs one wake-up per byte it sends, never a busy loop. The low-water
 * mark is reset to 1 before the socket is handed to MHD. */
#include "gate.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "../core/clock.h"
#include "../core/limits.h"
#include "httphead.h"

#define PEER_BUCKETS 1024u
#define ID_LISTEN UINT32_MAX
#define ID_STOP (UINT32_MAX - 1)

struct peer_key {
    unsigned char a[16]; /* IPv6, or IPv4 as ::ffff:a.b.c.d */
};

struct peer {
    struct peer *next;
    struct peer_key key;
    unsigned n;
};

struct pending {
    int fd; /* -1: free slot */
    uint64_t deadline_ms;
    struct peer_key key;
    struct sockaddr_storage addr;
    socklen_t alen;
};

struct gate {
    struct gate_config cfg;
    struct MHD_Daemon *mhd;
    int ep, stop_fd;
    pthread_t thread;
    bool running;
    pthread_mutex_t mu; /* the peer table */
    struct peer *buckets[PEER_BUCKETS];
    struct pending *pend;
    unsigned n_pending;
    uint64_t accept_paused_until; /* 0: accepting */
    char buf[LIM_HEADER_MAX + 1];
};

static __thread bool started_in_add; /* MHD reported STARTED inside our MHD_add_connection */

static void key_of(const struct sockaddr *sa, struct peer_key *k)
{
    memset(k, 0, sizeof *k);
    if (sa->sa_family == AF_INET6) {
        memcpy(k->a, &((const struct sockaddr_in6 *)sa)->sin6_addr, 16);
    } else if (sa->sa_family == AF_INET) {
        k->a[10] = k->a[11] = 0xff;
        memcpy(k->a + 12, &((const struct sockaddr_in *)sa)->sin_addr, 4);
    }
}

static unsigned bucket_of(const struct peer_key *k)
{
    uint32_t h = 2166136261u;
    for (int i = 0; i < 16; i++)
        h = (h ^ k->a[i]) * 16777619u;
    return h % PEER_BUCKETS;
}

/* Counts one more connection of k unless it already has per_peer. */
static bool peer_acquire(struct gate *g, const struct peer_key *k)
{
    bool ok = false;
    pthread_mutex_lock(&g->mu);
    struct peer **slot = &g->buckets[bucket_of(k)], *p = *slot;
    while (p && memcmp(&p->key, k, sizeof *k) != 0)
        p = p->next;
    if (!p && (p = calloc(1, sizeof *p))) {
        p->key = *k;
        p->next = *slot;
        *slot = p;
    }
    if (p && p->n < g->cfg.per_peer) {
        p->n++;
        ok = true;
    }
    pthread_mutex_unlock(&g->mu);
    return ok;
}

static void peer_release(struct gate *g, const struct peer_key *k)
{
    pthread_mutex_lock(&g->mu);
    struct peer **pp = &g->buckets[bucket_of(k)];
    while (*pp && memcmp(&(*pp)->key, k, sizeof *k) != 0)
        pp = &(*pp)->next;
    if (*pp && (*pp)->n > 0 && --(*pp)->n == 0) {
        struct peer *dead = *pp;
        *pp = dead->next;
        free(dead);
    }
    pthread_mutex_unlock(&g->mu);
}

void gate_notify_connection(void *cls, struct MHD_Connection *conn, void **socket_context,
                            enum MHD_ConnectionNotificationCode toe)
{
    struct gate *g = cls;
    if (toe == MHD_CONNECTION_NOTIFY_STARTED) {
        *socket_context = g; /* counted: release on CLOSED */
        started_in_add = true;
        return;
    }
    if (toe != MHD_CONNECTION_NOTIFY_CLOSED || !*socket_context)
        return;
    *socket_context = NULL;
    const union MHD_ConnectionInfo *ci = MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
    if (ci && ci->client_addr) {
        struct peer_key k;
        key_of(ci->client_addr, &k);
        peer_release(g, &k);
    }
}

/* A short fixed answer, then close. What the peer already sent is read and dropped first
 * (bounded), so the close is a FIN after the answer rather than a reset that could discard it. */
static void refuse_and_close(int fd, unsigned status, const char *reason, const char *why)
{
    char msg[512];
    int body = snprintf(msg, sizeof msg, "%s\n", why);
    char out[768];
    int n = snprintf(out, sizeof out,
                     "HTTP/1.1 %u %s\r\nContent-Type: text/plain; charset=utf-8\r\nConnection: close\r\n"
                     "Content-Length: %d\r\n\r\n%s",
                     status, reason, body, msg);
    if (n > 0)
        (void)!send(fd, out, (size_t)n, MSG_NOSIGNAL | MSG_DONTWAIT);
    shutdown(fd, SHUT_WR);
    char scratch[4096];
    for (int i = 0; i < 16 && recv(fd, scratch, sizeof scratch, MSG_DONTWAIT) > 0; i++)
        ;
    close(fd);
}

static void drop(struct gate *g, unsigned i, unsigned status, const char *reason, const char *why)
{
    struct pending *p = &g->pend[i];
    epoll_ctl(g->ep, EPOLL_CTL_DEL, p->fd, NULL);
    if (status)
        refuse_and_close(p->fd, status, reason, why);
    else
        close(p->fd);
    peer_release(g, &p->key);
    p->fd = -1;
    g->n_pending--;
}

static void on_accept(struct gate *g)
{
    for (;;) {
        struct sockaddr_storage ss;
        socklen_t sl = sizeof ss;
        int fd = accept4(g->cfg.listen_fd, (struct sockaddr *)&ss, &sl, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0) {
            /* Out of descriptors (or another transient failure): the backlog stays readable, so
             * stop watching it for a moment instead of spinning; expire() resumes it. */
            if (errno != EAGAIN && errno != EINTR && errno != ECONNABORTED) {
                struct epoll_event l = {.events = 0, .data.u32 = ID_LISTEN};
                epoll_ctl(g->ep, EPOLL_CTL_MOD, g->cfg.listen_fd, &l);
                g->accept_paused_until = clock_mono_ms() + 100;
            }
            return;
        }
        struct peer_key k;
        key_of((struct sockaddr *)&ss, &k);
        if (!peer_acquire(g, &k)) {
            refuse_and_close(fd, 429, "Too Many Requests", "too many connections from this address");
            continue;
        }
        unsigned i = 0;
        while (i < g->cfg.max_pending && g->pend[i].fd >= 0)
            i++;
        if (i == g->cfg.max_pending) {
            peer_release(g, &k);
            refuse_and_close(fd, 503, "Service Unavailable", "too many connections waiting for their headers");
            continue;
        }
        struct pending *p = &g->pend[i];
        *p = (struct pending){.fd = fd, .key = k, .addr = ss, .alen = sl,
                              .deadline_ms = clock_mono_ms() + g->cfg.header_ms};
        struct epoll_event ev = {.events = EPOLLIN | EPOLLRDHUP, .data.u32 = i};
        if (epoll_ctl(g->ep, EPOLL_CTL_ADD, fd, &ev) < 0) {
            close(fd);
            peer_release(g, &k);
            p->fd = -1;
            continue;
        }
        g->n_pending++;
    }
}

static void hand_over(struct gate *g, unsigned i)
{
    struct pending *p = &g->pend[i];
    int fd = p->fd, one = 1;
    epoll_ctl(g->ep, EPOLL_CTL_DEL, fd, NULL);
    setsockopt(fd, SOL_SOCKET, SO_RCVLOWAT, &one, sizeof one);
    struct peer_key k = p->key;
    p->fd = -1;
    g->n_pending--;
    started_in_add = false;
    /* MHD closes the socket itself when it cannot take it. */
    if (MHD_add_connection(g->mhd, fd, (struct sockaddr *)&p->addr, p->alen) != MHD_YES && !started_in_add)
        peer_release(g, &k);
}

static void on_readable(struct gate *g, unsigned i)
{
    struct pending *p = &g->pend[i];
    ssize_t n = recv(p->fd, g->buf, sizeof g->buf, MSG_PEEK | MSG_DONTWAIT);
    if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR)) {
        drop(g, i, 0, NULL, NULL);
        return;
    }
    if (n < 0)
        return;
    struct httphead h;
    switch (httphead_check(g->buf, (size_t)n, &h)) {
    case HTTPHEAD_OK: hand_over(g, i); return;
    case HTTPHEAD_BAD: drop(g, i, 400, "Bad Request", h.why); return;
    case HTTPHEAD_TOO_LARGE: drop(g, i, 431, "Request Header Fields Too Large", h.why); return;
    case HTTPHEAD_MORE: break;
    }
    /* Wake again only when more than what was looked at has arrived (or the peer closes). */
    int lowat = (int)n + 1;
    setsockopt(p->fd, SOL_SOCKET, SO_RCVLOWAT, &lowat, sizeof lowat);
}

static int expire(struct gate *g)
{
    uint64_t now = clock_mono_ms(), next = UINT64_MAX;
    if (g->accept_paused_until) {
        if (now >= g->accept_paused_until) {
            struct epoll_event l = {.events = EPOLLIN, .data.u32 = ID_LISTEN};
            epoll_ctl(g->ep, EPOLL_CTL_MOD, g->cfg.listen_fd, &l);
            g->accept_paused_until = 0;
        } else {
            next = g->accept_paused_until;
        }
    }
    for (unsigned i = 0; i < g->cfg.max_pending && g->n_pending; i++) {
        struct pending *p = &g->pend[i];
        if (p->fd < 0)
            continue;
        if (p->deadline_ms <= now)
            drop(g, i, 408, "Request Timeout", "request headers not complete within 5 s");
        else if (p->deadline_ms < next)
            next = p->deadline_ms;
    }
    return next == UINT64_MAX ? -1 : (int)(next - now + 1);
}

static void *gate_main(void *arg)
{
    struct gate *g = arg;
    struct epoll_event evs[64];
    for (;;) {
        int timeout = expire(g);
        int n = epoll_wait(g->ep, evs, 64, timeout);
        for (int k = 0; k < n; k++) {
            uint32_t id = evs[k].data.u32;
            if (id == ID_STOP)
                return NULL;
            if (id == ID_LISTEN)
                on_accept(g);
            else if (id < g->cfg.max_pending && g->pend[id].fd >= 0)
                on_readable(g, id);
        }
    }
}

struct gate *gate_new(const struct gate_config *cfg, struct plm_err *err)
{
    struct gate *g = calloc(1, sizeof *g);
    if (!g) {
        plm_fail(err, 12, PLM_E_INTERNAL, "%s: out of memory", cfg->name);
        return NULL;
    }
    g->cfg = *cfg;
    if (!g->cfg.header_ms)
        g->cfg.header_ms = LIM_HEADER_READ_MS;
    pthread_mutex_init(&g->mu, NULL);
    g->ep = g->stop_fd = -1;
    g->pend = calloc(cfg->max_pending, sizeof *g->pend);
    if (!g->pend) {
        free(g);
        plm_fail(err, 12, PLM_E_INTERNAL, "%s: out of memory", cfg->name);
        return NULL;
    }
    for (unsigned i = 0; i < cfg->max_pending; i++)
        g->pend[i].fd = -1;
    return g;
}

int gate_run(struct gate *g, struct MHD_Daemon *mhd, struct plm_err *err)
{
    g->mhd = mhd;
    g->ep = epoll_create1(EPOLL_CLOEXEC);
    g->stop_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    int fl = g->cfg.listen_fd;
    struct epoll_event l = {.events = EPOLLIN, .data.u32 = ID_LISTEN}, s = {.events = EPOLLIN, .data.u32 = ID_STOP};
    if (g->ep < 0 || g->stop_fd < 0 || epoll_ctl(g->ep, EPOLL_CTL_ADD, fl, &l) < 0 ||
        epoll_ctl(g->ep, EPOLL_CTL_ADD, g->stop_fd, &s) < 0)
        return plm_fail(err, errno, PLM_E_INTERNAL, "%s: epoll: %s", g->cfg.name, strerror(errno));
    /* the accept loop drains the backlog until EAGAIN: the listening socket must not block */
    int flags = fcntl(fl, F_GETFL);
    if (flags < 0 || fcntl(fl, F_SETFL, flags | O_NONBLOCK) < 0)
        return plm_fail(err, errno, PLM_E_INTERNAL, "%s: fcntl: %s", g->cfg.name, strerror(errno));
    if (pthread_create(&g->thread, NULL, gate_main, g) != 0)
        return plm_fail(err, 0, PLM_E_INTERNAL, "%s: cannot start the accept thread", g->cfg.name);
    g->running = true;
    return 0;
}

void gate_stop(struct gate *g)
{
    if (!g || !g->running)
        return;
    uint64_t one = 1;
    (void)!write(g->stop_fd, &one, sizeof one);
    pthread_join(g->thread, NULL);
    g->running = false;
    for (unsigned i = 0; i < g->cfg.max_pending; i++)
        if (g->pend[i].fd >= 0)
            drop(g, i, 0, NULL, NULL);
    close(g->cfg.listen_fd);
    g->cfg.listen_fd = -1;
}

void gate_free(struct gate *g)
{
    if (!g)
        return;
    gate_stop(g);
    if (g->cfg.listen_fd >= 0)
        close(g->cfg.listen_fd);
    if (g->ep >= 0)
        close(g->ep);
    if (g->stop_fd >= 0)
        close(g->stop_fd);
    for (unsigned b = 0; b < PEER_BUCKETS; b++)
        for (struct peer *p = g->buckets[b], *next; p; p = next) {
            next = p->next;
            free(p);
        }
    pthread_mutex_destroy(&g->mu);
    free(g->pend);
    free(g);
}
