/* workers.c: see workers.h. A thread is started when an item arrives and no thread is idle;
 * threads stay (a burst of runs pays thread creation once). */
#include "workers.h"

#include <stdlib.h>

static void *worker_main(void *arg)
{
    struct workers *w = arg;
    pthread_mutex_lock(&w->mu);
    for (;;) {
        while (!w->head && !w->stop) {
            w->idle++;
            pthread_cond_wait(&w->cv, &w->mu);
            w->idle--;
        }
        struct work_item *it = w->head;
        if (!it)
            break; /* stopping, nothing left */
        w->head = it->next;
        if (!w->head)
            w->tail = NULL;
        w->queued--;
        pthread_mutex_unlock(&w->mu);
        it->fn(it);
        pthread_mutex_lock(&w->mu);
    }
    w->threads--;
    pthread_cond_broadcast(&w->gone);
    pthread_mutex_unlock(&w->mu);
    return NULL;
}

int workers_init(struct workers *w, unsigned max)
{
    *w = (struct workers){.max = max ? max : 1};
    if (pthread_mutex_init(&w->mu, NULL) != 0)
        return -1;
    if (pthread_cond_init(&w->cv, NULL) != 0 || pthread_cond_init(&w->gone, NULL) != 0)
        return -1;
    return 0;
}

static bool start_thread(struct workers *w)
{
    pthread_attr_t a;
    pthread_t t;
    if (pthread_attr_init(&a) != 0)
        return false;
    pthread_attr_setdetachstate(&a, PTHREAD_CREATE_DETACHED);
    bool ok = pthread_create(&t, &a, worker_main, w) == 0;
    pthread_attr_destroy(&a);
    return ok;
}

int workers_submit(struct workers *w, struct work_item *it)
{
    it->next = NULL;
    pthread_mutex_lock(&w->mu);
    if (w->stop) {
        pthread_mutex_unlock(&w->mu);
        return -1;
    }
    if (w->tail)
        w->tail->next = it;
    else
        w->head = it;
    w->tail = it;
    w->queued++;
    /* More items waiting than idle threads to take them: one more thread, within max. When
     * none can start, the item waits for a thread to finish (at least one exists or starts). */
    if (w->queued > w->idle && w->threads < w->max && start_thread(w))
        w->threads++;
    pthread_cond_signal(&w->cv);
    bool stranded = w->threads == 0; /* not one thread could start */
    if (stranded) {
        w->head = w->tail = NULL;
        w->queued = 0;
    }
    pthread_mutex_unlock(&w->mu);
    return stranded ? -1 : 0;
}

void workers_fini(struct workers *w)
{
    pthread_mutex_lock(&w->mu);
    w->stop = true;
    pthread_cond_broadcast(&w->cv);
    while (w->threads)
        pthread_cond_wait(&w->gone, &w->mu);
    pthread_mutex_unlock(&w->mu);
    pthread_cond_destroy(&w->cv);
    pthread_cond_destroy(&w->gone);
    pthread_mutex_destroy(&w->mu);
}
