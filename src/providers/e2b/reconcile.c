/* reconcile.c: the reconcile thread (providers.md §6: at start and periodically, untracked
 * sandboxes of our instance older than 60 s are deleted) and the last-resort delete of everything
 * still tracked (SIGTERM, destroy).
 * Owns: the reconcile thread (joined by e2b_reconciler_stop). */
#include <string.h>
#include <time.h>

#include "internal.h"

void e2b_delete_all(struct e2b_state *s)
{
    for (;;) {
        char id[64];
        pthread_mutex_lock(&s->mu);
        bool any = s->n_tracked > 0;
        if (any)
            memcpy(id, s->tracked[s->n_tracked - 1], 64);
        pthread_mutex_unlock(&s->mu);
        if (!any)
            return;
        e2b_delete(s, id); /* untracks either way; a failure is logged */
    }
}

void e2b_shutdown_sweep(struct e2b_state *s)
{
    e2b_delete_all(s);
    /* Every run of ours has ended: any sandbox with our instance label now is an orphan (a
     * delete that failed three times, a create whose answer was lost), whatever its age. */
    if (atomic_load(&s->proven)) {
        struct plm_err err = {0};
        if (e2b_reconcile_once(s, 0, &err) < 0)
            e2b_log("warning", "e2b_reconcile_failed", "\"detail\":\"the shutdown sweep could not list sandboxes\"");
    }
}

static void *reconciler(void *arg)
{
    struct e2b_state *s = arg;
    int64_t next = e2b_mono_ms() + (int64_t)s->reconcile_s * 1000;
    pthread_mutex_lock(&s->rmu);
    while (!s->stopping) {
        int64_t due = next;
        if (s->reconcile_at_ms && s->reconcile_at_ms < due)
            due = s->reconcile_at_ms;
        int64_t now = e2b_mono_ms();
        if (now < due) {
            struct timespec ts = clock_mono_at((uint64_t)due); /* due > now >= 0 */
            pthread_cond_timedwait(&s->rcv, &s->rmu, &ts);
            continue;
        }
        if (s->reconcile_at_ms && s->reconcile_at_ms <= now)
            s->reconcile_at_ms = 0;
        next = now + (int64_t)s->reconcile_s * 1000;
        pthread_mutex_unlock(&s->rmu);
        struct plm_err err = {0};
        if (e2b_reconcile_once(s, E2B_ORPHAN_AGE_S, &err) < 0)
            e2b_log("warning", "e2b_reconcile_failed", "\"detail\":\"%s\"", "listing sandboxes failed");
        pthread_mutex_lock(&s->rmu);
    }
    pthread_mutex_unlock(&s->rmu);
    return NULL;
}

int e2b_reconciler_start(struct e2b_state *s, struct plm_err *err)
{
    if (s->reconciler_started)
        return 0;
    int e = pthread_create(&s->reconciler, NULL, reconciler, s);
    if (e)
        return plm_fail(err, e, PLM_E_INTERNAL, "e2b: cannot start the reconcile thread");
    s->reconciler_started = true;
    return 0;
}

void e2b_reconciler_stop(struct e2b_state *s)
{
    if (!s->reconciler_started)
        return;
    pthread_mutex_lock(&s->rmu);
    s->stopping = true;
    pthread_cond_signal(&s->rcv);
    pthread_mutex_unlock(&s->rmu);
    pthread_join(s->reconciler, NULL);
    s->reconciler_started = false;
}
