/* sweep.c: the provider's background threads. It calls down to the pool (launch.c) and the
 * removal queue (reap.c); neither calls back.
 * Owns: the reaper threads that drain the removal queue (reap.c) (every container a run used is removed there,
 * off the request path: a force removal of a container that is still exiting costs dockerd
 * 150-600 ms); one maintenance thread for the periodic sweep of labelled containers past their
 * deadline, the periodic preflight refresh (so the tier reacts to dockerd going away without
 * waiting for /readyz); DOCK_FILLERS threads for the warm pool's refill.
 * Trusts: dockerd's container list only after type checks; a label it cannot parse is skipped.
 * Invariant: only containers carrying DOCK_LABEL are ever touched by the sweep, and only once
 * their deadline is DOCK_REAP_GRACE_S in the past, so a live run of another instance on the same
 * dockerd is never reaped; a queued container is retried until dockerd answers, and the queue
 * is drained (one attempt each) before dock_bg_stop() returns. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "internal.h"

#define TICK_MS 1000
#define REFRESH_MS 5000
#define SWEEP_MS 60000

static void *reaper_main(void *arg)
{
    struct dock_state *s = arg;
    pthread_mutex_lock(&s->mu);
    for (;;) {
        while (!s->n_pending && !s->stop_reap)
            pthread_cond_wait(&s->reap_cv, &s->mu);
        if (!s->n_pending)
            break; /* stopping, and nothing is left */
        char id[65];
        memcpy(id, s->pending[--s->n_pending], sizeof id);
        bool stopping = s->stop_reap;
        pthread_mutex_unlock(&s->mu);
        struct plm_err e = {0};
        /* Stopping, nothing retries later: a dockerd slowed by load (a force removal past the
         * 10 s call deadline) gets the spec's three tries instead of one, or the container
         * outlives us until a later start's deadline sweep. */
        int r = dock_container_remove(&s->eng, id, stopping ? 3 : 1, &e);
        pthread_mutex_lock(&s->mu);
        if (r < 0 && !stopping && s->n_pending < s->cap_pending) {
            /* dockerd away: keep it, and do not spin while it stays away */
            memcpy(s->pending[s->n_pending++], id, sizeof id);
            struct timespec ts = clock_mono_after(1000);
            pthread_cond_timedwait(&s->cv, &s->mu, &ts);
        }
    }
    pthread_mutex_unlock(&s->mu);
    return NULL;
}

int dock_sweep(struct dock_state *s, struct plm_err *err)
{
    json_t *list;
    /* filters={"label":["org.plimsoll.sandbox"]}, URL-encoded */
    if (dock_call_json(&s->eng, "GET",
                       DOCK_API "/containers/json?all=1&filters=%7B%22label%22%3A%5B%22" DOCK_LABEL "%22%5D%7D", NULL,
                       200, 10000, 8 * 1024 * 1024, &list, err) < 0)
        return -1;
    int64_t now = clock_unix_ms() / 1000;
    size_t i;
    json_t *c;
    int reaped = 0;
    json_array_foreach(list, i, c)
    {
        const char *id = json_string_value(json_object_get(c, "Id"));
        json_t *labels = json_object_get(c, "Labels");
        const char *dl = json_string_value(json_object_get(labels, DOCK_LABEL_DEADLINE));
        if (!id || !dock_id_ok(id) || !json_object_get(labels, DOCK_LABEL) || !dl)
            continue;
        char *end;
        errno = 0;
        long long d = strtoll(dl, &end, 10);
        if (errno || *end || end == dl)
            continue;
        if (now > d + DOCK_REAP_GRACE_S && dock_container_remove(&s->eng, id, 1, err) == 0)
            reaped++;
    }
    json_decref(list);
    return reaped;
}

static void *bg_main(void *arg)
{
    struct dock_state *s = arg;
    int64_t next_refresh = (int64_t)clock_mono_ms() + REFRESH_MS, next_sweep = (int64_t)clock_mono_ms() + SWEEP_MS;
    pthread_mutex_lock(&s->mu);
    while (!s->stop) {
        pthread_mutex_unlock(&s->mu);
        int64_t now = (int64_t)clock_mono_ms();
        if (now >= next_refresh) {
            struct plm_err e = {0};
            dock_preflight(s, &e); /* updates readiness and the verified runtime either way */
            next_refresh = now + REFRESH_MS;
        }
        if (now >= next_sweep) {
            struct plm_err e = {0};
            dock_sweep(s, &e);
            next_sweep = now + SWEEP_MS;
        }
        pthread_mutex_lock(&s->mu);
        if (s->stop)
            break;
        struct timespec ts = clock_mono_after(TICK_MS);
        pthread_cond_timedwait(&s->cv, &s->mu, &ts);
    }
    pthread_mutex_unlock(&s->mu);
    return NULL;
}

/* One of DOCK_FILLERS: tops the pool up when kicked (a box was taken) or every tick (a failed
 * start, a box aged out, readiness came back). Each runs one cold start at a time, so up to
 * DOCK_FILLERS are in flight per kind while the pool is short: back to back, runs drain it faster
 * than one start at a time refills it. */
static void *filler_main(void *arg)
{
    struct dock_state *s = arg;
    pthread_mutex_lock(&s->mu);
    while (!s->stop) {
        s->fill_kick = false;
        pthread_mutex_unlock(&s->mu);
        dock_pool_fill(s);
        pthread_mutex_lock(&s->mu);
        if (s->stop || s->fill_kick)
            continue; /* a kick while we were filling is not lost */
        struct timespec ts = clock_mono_after(TICK_MS);
        pthread_cond_timedwait(&s->fill_cv, &s->mu, &ts);
    }
    pthread_mutex_unlock(&s->mu);
    return NULL;
}

int dock_bg_start(struct dock_state *s, struct plm_err *err)
{
    if (s->bg_started)
        return 0;
    for (int i = 0; i < DOCK_REAPERS; i++) {
        int r = pthread_create(&s->reapers[i], NULL, reaper_main, s);
        if (r != 0) {
            dock_bg_stop(s);
            return plm_fail(err, r, PLM_E_INTERNAL, "start a docker reaper thread: %s", strerror(r));
        }
        pthread_mutex_lock(&s->mu);
        s->n_reapers++;
        pthread_mutex_unlock(&s->mu);
    }
    int r = pthread_create(&s->bg, NULL, bg_main, s);
    if (r != 0) {
        dock_bg_stop(s);
        return plm_fail(err, r, PLM_E_INTERNAL, "start the docker background thread: %s", strerror(r));
    }
    s->bg_started = true;
    for (int i = 0; i < DOCK_FILLERS; i++) {
        r = pthread_create(&s->fillers[i], NULL, filler_main, s);
        if (r != 0) {
            dock_bg_stop(s);
            return plm_fail(err, r, PLM_E_INTERNAL, "start a docker pool filler thread: %s", strerror(r));
        }
        pthread_mutex_lock(&s->mu);
        s->n_fillers++;
        pthread_mutex_unlock(&s->mu);
    }
    return 0;
}

void dock_bg_stop(struct dock_state *s)
{
    pthread_mutex_lock(&s->mu);
    s->stop = true;
    pthread_cond_broadcast(&s->cv);
    pthread_cond_broadcast(&s->fill_cv);
    int nf = s->n_fillers;
    pthread_mutex_unlock(&s->mu);
    if (s->bg_started)
        pthread_join(s->bg, NULL);
    s->bg_started = false;
    /* a filler in a cold start finishes it and parks or releases the box; none starts another */
    for (int i = 0; i < nf; i++)
        pthread_join(s->fillers[i], NULL);
    pthread_mutex_lock(&s->mu);
    s->n_fillers = 0;
    pthread_mutex_unlock(&s->mu);
    /* The pool's containers go through the reapers too; then they drain the queue and stop. */
    dock_pool_drain(s);
    pthread_mutex_lock(&s->mu);
    s->stop_reap = true;
    pthread_cond_broadcast(&s->reap_cv);
    int n = s->n_reapers;
    pthread_mutex_unlock(&s->mu);
    for (int i = 0; i < n; i++)
        pthread_join(s->reapers[i], NULL);
    /* Whatever is still queued (no reaper ever ran, or dockerd was away): one last attempt each. */
    pthread_mutex_lock(&s->mu);
    s->n_reapers = 0;
    while (s->n_pending) {
        char id[65];
        memcpy(id, s->pending[--s->n_pending], sizeof id);
        pthread_mutex_unlock(&s->mu);
        struct plm_err e = {0};
        dock_container_remove(&s->eng, id, 1, &e);
        pthread_mutex_lock(&s->mu);
    }
    pthread_mutex_unlock(&s->mu);
}
