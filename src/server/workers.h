/* workers.h: the threads that run what may block (a provider call, /readyz's preflight, the UI
 * page, a large body's decode), so a listener's loop thread never does (gate.h).
 * Threads are started on demand, up to `max`, and kept; beyond `max` items wait in order.
 * Owns: its threads. Not the items: each is embedded in its owner's struct (no allocation). */
#pragma once
#include <pthread.h>
#include <stdbool.h>

struct work_item {
    void (*fn)(struct work_item *w);
    struct work_item *next;
};

struct workers {
    pthread_mutex_t mu;
    pthread_cond_t cv, gone;
    struct work_item *head, *tail;
    unsigned threads, idle, queued, max;
    bool stop;
};

int workers_init(struct workers *w, unsigned max);
/* 0, or -1 when the item could not be queued (stopping); the caller then still owns it. */
int workers_submit(struct workers *w, struct work_item *it);
/* Runs what is queued, then ends every thread (waits for items in progress). */
void workers_fini(struct workers *w);
