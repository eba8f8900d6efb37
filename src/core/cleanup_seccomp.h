/* cleanup_seccomp.h: scope-bound ownership of a libseccomp filter context (header-only glue for
 * the confinement code; core's own library never includes it). */
#pragma once
#include <seccomp.h>

#include "cleanup.h"

/* scmp_filter_ctx is itself a pointer type, so the cleanup takes its address directly. */
static inline void cleanup_fn_seccomp_release(scmp_filter_ctx *ctx)
{
    if (*ctx) {
        int saved = errno;
        seccomp_release(*ctx);
        errno = saved;
    }
}
#define cleanup_seccomp __attribute__((cleanup(cleanup_fn_seccomp_release)))
