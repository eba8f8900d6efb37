/* track.c: every sandbox this daemon created, from its create answer to its delete, and the
 * request for an early reconcile (a create that answered without an ID). The reconcile itself is
 * reconcile.c's.
 * Invariant: a sandbox is tracked from the moment its ID is known until a delete succeeded, so
 * the reconcile never kills a live run's VM, and a failed delete leaves it for the reconcile. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

int e2b_track(struct e2b_state *s, const char *id)
{
    pthread_mutex_lock(&s->mu);
    if (s->n_tracked == s->cap_tracked) {
        size_t nc = s->cap_tracked ? s->cap_tracked * 2 : 16;
        char(*nv)[64] = realloc(s->tracked, nc * sizeof *nv);
        if (!nv) {
            pthread_mutex_unlock(&s->mu);
            return -1;
        }
        s->tracked = nv, s->cap_tracked = nc;
    }
    snprintf(s->tracked[s->n_tracked++], 64, "%s", id);
    pthread_mutex_unlock(&s->mu);
    return 0;
}

void e2b_untrack(struct e2b_state *s, const char *id)
{
    pthread_mutex_lock(&s->mu);
    for (size_t i = 0; i < s->n_tracked; i++)
        if (!strcmp(s->tracked[i], id)) {
            memcpy(s->tracked[i], s->tracked[--s->n_tracked], 64);
            break;
        }
    pthread_mutex_unlock(&s->mu);
}

bool e2b_is_tracked(struct e2b_state *s, const char *id)
{
    bool found = false;
    pthread_mutex_lock(&s->mu);
    for (size_t i = 0; i < s->n_tracked && !found; i++)
        found = !strcmp(s->tracked[i], id);
    pthread_mutex_unlock(&s->mu);
    return found;
}

void e2b_reconcile_soon(struct e2b_state *s, int delay_s)
{
    pthread_mutex_lock(&s->rmu);
    int64_t at = e2b_mono_ms() + (int64_t)delay_s * 1000;
    if (!s->reconcile_at_ms || at < s->reconcile_at_ms)
        s->reconcile_at_ms = at;
    pthread_cond_signal(&s->rcv);
    pthread_mutex_unlock(&s->rmu);
}
