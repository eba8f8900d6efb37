/* reap.c: the removal queue and the pool's kick, the two things the launch path asks of the
 * background threads (sweep.c). A leaf below both: launch.c queues and kicks here, sweep.c's
 * threads wait on what this signals, and nothing here calls either of them.
 * Owns: the queue's entries (s->pending, guarded by s->mu) until a reaper takes one.
 * Invariant: a container handed here is removed: by a reaper, inline when none runs yet or the
 * queue is full, or by dock_bg_stop()'s last pass; past that, by a later start's labelled sweep. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

#define PENDING_MAX 4096

void dock_queue_removal(struct dock_state *s, const char *id)
{
    pthread_mutex_lock(&s->mu);
    if (s->n_pending == s->cap_pending && s->cap_pending < PENDING_MAX) {
        size_t cap = s->cap_pending ? s->cap_pending * 2 : 16;
        void *q = reallocarray(s->pending, cap, sizeof *s->pending);
        if (q) {
            s->pending = q;
            s->cap_pending = cap;
        }
    }
    bool queued = s->n_pending < s->cap_pending;
    if (queued) {
        snprintf(s->pending[s->n_pending++], sizeof s->pending[0], "%s", id);
        pthread_cond_signal(&s->reap_cv);
    }
    bool reapers = s->n_reapers > 0;
    pthread_mutex_unlock(&s->mu);
    if (!queued || !reapers) {
        /* No reaper to hand it to (the startup proof runs before they exist, or the queue is
         * full): remove it here. If dockerd does not answer, it stays queued for the reapers or
         * for dock_bg_stop(); past that, the labelled sweep of a later start reaps it. */
        struct plm_err e = {0};
        if (dock_container_remove(&s->eng, id, queued ? 1 : 3, &e) == 0 && queued) {
            pthread_mutex_lock(&s->mu);
            for (size_t i = 0; i < s->n_pending; i++)
                if (!strcmp(s->pending[i], id)) {
                    memmove(&s->pending[i], &s->pending[i + 1], (s->n_pending - i - 1) * sizeof *s->pending);
                    s->n_pending--;
                    break;
                }
            pthread_mutex_unlock(&s->mu);
        }
    }
}

void dock_bg_kick(struct dock_state *s)
{
    pthread_mutex_lock(&s->mu);
    s->fill_kick = true;
    pthread_cond_broadcast(&s->fill_cv);
    pthread_mutex_unlock(&s->mu);
}
