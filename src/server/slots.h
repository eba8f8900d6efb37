/* slots.h: decode slots (wire.md §11.1 step 4): at most `total` request bodies held at once,
 * and at most `per_caller` of them for one principal, taken after authentication and before
 * the first body byte (issue 12 finding 2), so one caller trickling bodies cannot hold them
 * all. Sheds, never queues. Thread-safe. */
#pragma once
#include <pthread.h>
#include <stdbool.h>

struct slots_holder {
    char id[128];
    unsigned n;
};

struct slots {
    pthread_mutex_t mu;
    unsigned total, per_caller, used;
    struct slots_holder *v; /* `total` entries; id[0] == 0 with n == 0 is free */
};

enum slots_verdict { SLOTS_OK, SLOTS_FULL, SLOTS_CALLER_FULL };

int slots_init(struct slots *s, unsigned total, unsigned per_caller);
void slots_fini(struct slots *s);
enum slots_verdict slots_acquire(struct slots *s, const char *caller);
void slots_release(struct slots *s, const char *caller);
