/* slots.c: see slots.h. At most `total` distinct holders exist, so a linear table suffices. */
#include "slots.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int slots_init(struct slots *s, unsigned total, unsigned per_caller)
{
    s->total = total ? total : 1;
    s->per_caller = per_caller ? per_caller : 1;
    s->used = 0;
    s->v = calloc(s->total, sizeof *s->v);
    if (!s->v)
        return -1;
    pthread_mutex_init(&s->mu, NULL);
    return 0;
}

void slots_fini(struct slots *s)
{
    if (!s->v)
        return;
    pthread_mutex_destroy(&s->mu);
    free(s->v);
    s->v = NULL;
}

static struct slots_holder *find(struct slots *s, const char *caller, bool create)
{
    struct slots_holder *free_slot = NULL;
    for (unsigned i = 0; i < s->total; i++) {
        if (s->v[i].n && strcmp(s->v[i].id, caller) == 0)
            return &s->v[i];
        if (!s->v[i].n && !free_slot)
            free_slot = &s->v[i];
    }
    if (create && free_slot)
        snprintf(free_slot->id, sizeof free_slot->id, "%s", caller);
    return create ? free_slot : NULL;
}

enum slots_verdict slots_acquire(struct slots *s, const char *caller)
{
    enum slots_verdict v = SLOTS_OK;
    pthread_mutex_lock(&s->mu);
    struct slots_holder *h = s->used < s->total ? find(s, caller, true) : NULL;
    if (s->used >= s->total || !h)
        v = SLOTS_FULL;
    else if (h->n >= s->per_caller)
        v = SLOTS_CALLER_FULL;
    else {
        h->n++;
        s->used++;
    }
    pthread_mutex_unlock(&s->mu);
    return v;
}

void slots_release(struct slots *s, const char *caller)
{
    pthread_mutex_lock(&s->mu);
    struct slots_holder *h = find(s, caller, false);
    if (h && h->n) {
        h->n--;
        s->used--;
    }
    pthread_mutex_unlock(&s->mu);
}
