/* provider.c: the one release path of a provider, and the startup-progress hook. */
#include "provider.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

static plm_progress_fn progress_hook; /* set once at startup, read from any thread: atomics */

void plm_progress_set(plm_progress_fn fn)
{
    __atomic_store_n(&progress_hook, fn, __ATOMIC_RELEASE);
}

void plm_progress(const char *provider, const char *step, const char *fmt, ...)
{
    plm_progress_fn fn = __atomic_load_n(&progress_hook, __ATOMIC_ACQUIRE);
    if (!fn)
        return;
    char detail[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(detail, sizeof detail, fmt, ap);
    va_end(ap);
    fn(provider, step, detail);
}

void plm_provider_free(struct plm_provider *p)
{
    if (!p)
        return;
    if (p->ops && p->ops->destroy)
        p->ops->destroy(p);
    free(p);
}
