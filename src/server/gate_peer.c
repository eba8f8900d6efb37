/* gate_peer.c: the per-peer connection count of a listener (gate.h: at most per_peer
 * connections per peer address). The lead loop's table, under its peer_mu: the lead counts a
 * connection in at accept, any loop counts it out when it closes it. */
#include "gate_int.h"

#include <netinet/in.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#define PEER_BUCKETS (sizeof ((struct gate *)0)->buckets / sizeof(struct peer *))

struct peer {
    struct peer *next;
    struct peer_key key;
    unsigned n;
};

void gate_peer_key(const struct sockaddr *sa, struct peer_key *k)
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
bool gate_peer_acquire(struct gate *lead, const struct peer_key *k)
{
    struct gate *g = lead;
    pthread_mutex_lock(&g->peer_mu);
    struct peer **slot = &g->buckets[bucket_of(k)], *p = *slot;
    while (p && memcmp(&p->key, k, sizeof *k) != 0)
        p = p->next;
    if (!p && (p = calloc(1, sizeof *p))) {
        p->key = *k;
        p->next = *slot;
        *slot = p;
    }
    bool ok = p && p->n < g->cfg.per_peer;
    if (ok)
        p->n++;
    pthread_mutex_unlock(&g->peer_mu);
    return ok;
}

void gate_peer_release(struct gate *loop, const struct peer_key *k)
{
    struct gate *g = loop->lead;
    pthread_mutex_lock(&g->peer_mu);
    struct peer **pp = &g->buckets[bucket_of(k)];
    while (*pp && memcmp(&(*pp)->key, k, sizeof *k) != 0)
        pp = &(*pp)->next;
    if (*pp && (*pp)->n > 0 && --(*pp)->n == 0) {
        struct peer *dead = *pp;
        *pp = dead->next;
        free(dead);
    }
    pthread_mutex_unlock(&g->peer_mu);
}

void gate_peers_free(struct gate *lead)
{
    for (unsigned b = 0; b < PEER_BUCKETS; b++)
        for (struct peer *p = lead->buckets[b], *next; p; p = next) {
            next = p->next;
            free(p);
        }
}
