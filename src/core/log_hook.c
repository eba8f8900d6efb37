/* log_hook.c: the log hook of log_hook.h. */
#include "log_hook.h"

#include <stddef.h>

static plm_log_fn log_hook; /* set once at startup, read from any thread: atomics */

void plm_log_set(plm_log_fn fn)
{
    __atomic_store_n(&log_hook, fn, __ATOMIC_RELEASE);
}

void plm_log(const char *level, const char *event, const char *fields)
{
    plm_log_fn fn = __atomic_load_n(&log_hook, __ATOMIC_ACQUIRE);
    if (fn)
        fn(level, event, fields ? fields : "");
}
