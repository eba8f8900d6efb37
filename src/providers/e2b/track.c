/* track.c: every sandbox this daemon created, from its create answer to its delete; the
 * reconcile thread (providers.md §6: at start and periodically, untracked sandboxes of our
 * instance older than 60 s are deleted); the last-resort delete of everything still tracked
 * (SIGTERM, destroy); and the small utilities the provider's files share.
 * Invariant: a sandbox is tracked from the moment its ID is known until a delete succeeded, so
 * the reconcile never kills a live run's VM, and a failed delete leaves it for the reconcile. */
#include <errno.h>
#include <jansson.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>

#include "internal.h"

int64_t e2b_mono_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int e2b_random_hex(char *out, size_t nbytes)
{
    uint8_t b[64];
    if (nbytes > sizeof b)
        return -1;
    size_t got = 0;
    while (got < nbytes) {
        ssize_t r = getrandom(b + got, nbytes - got, 0);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            return -1;
        got += (size_t)r;
    }
    for (size_t i = 0; i < nbytes; i++)
        snprintf(out + 2 * i, 3, "%02x", b[i]);
    explicit_bzero(b, sizeof b);
    return 0;
}

/* The daemon's log format (one JSON object per line: ts, level, event, fields), written with one
 * write so lines of different threads never interleave. fmt gives the extra fields as JSON text;
 * callers pass only IDs, numbers and fixed words, never tokens or bodies. */
void e2b_log(const char *level, const char *event, const char *fmt, ...)
{
    char fields[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(fields, sizeof fields, fmt, ap);
    va_end(ap);
    json_error_t je;
    char wrapped[1100];
    snprintf(wrapped, sizeof wrapped, "{%s}", fields);
    json_t *o = json_loads(wrapped, 0, &je);
    if (!json_is_object(o)) {
        json_decref(o);
        o = json_object();
    }
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    char tbuf[40];
    struct tm tm;
    gmtime_r(&ts.tv_sec, &tm);
    strftime(tbuf, sizeof tbuf, "%Y-%m-%dT%H:%M:%S", &tm);
    char stamp[80];
    snprintf(stamp, sizeof stamp, "%.40s.%03dZ", tbuf, (int)(ts.tv_nsec / 1000000));
    json_t *line = json_pack("{s:s, s:s, s:s, s:s}", "ts", stamp, "level", level, "event", event, "provider", "e2b");
    json_object_update(line, o);
    json_decref(o);
    char *text = json_dumps(line, JSON_COMPACT | JSON_PRESERVE_ORDER);
    json_decref(line);
    if (text) {
        size_t n = strlen(text);
        text[n] = '\n';
        fwrite(text, 1, n + 1, stderr);
        fflush(stderr);
        free(text);
    }
}

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

void e2b_reconcile_soon(struct e2b_state *s, int delay_s)
{
    pthread_mutex_lock(&s->rmu);
    int64_t at = e2b_mono_ms() + (int64_t)delay_s * 1000;
    if (!s->reconcile_at_ms || at < s->reconcile_at_ms)
        s->reconcile_at_ms = at;
    pthread_cond_signal(&s->rcv);
    pthread_mutex_unlock(&s->rmu);
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
            struct timespec ts;
            clock_gettime(CLOCK_MONOTONIC, &ts);
            int64_t wait = due - now;
            ts.tv_sec += wait / 1000;
            ts.tv_nsec += (wait % 1000) * 1000000;
            if (ts.tv_nsec >= 1000000000)
                ts.tv_sec++, ts.tv_nsec -= 1000000000;
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
        return plm_err_set(err, e, PLM_E_INTERNAL, PLM_REFUSAL_NONE, "e2b: cannot start the reconcile thread");
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
