/* cleanup.h: scope-bound ownership (crun/systemd style). Declare owned values with a cleanup
 * attribute and a sentinel; hand ownership on only with take_ptr()/take_fd()/take_pid(). */
#pragma once
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

static inline void cleanup_free_fn(void *p) { free(*(void **)p); }
static inline void cleanup_close_fn(int *fd)
{
    if (*fd >= 0) {
        int saved = errno;
        close(*fd);
        errno = saved;
    }
}
/* A child still owned at scope exit is killed and reaped: no orphan, no zombie. */
static inline void cleanup_pid_fn(pid_t *pid)
{
    if (*pid > 0) {
        int saved = errno;
        kill(*pid, SIGKILL);
        while (waitpid(*pid, NULL, 0) < 0 && errno == EINTR)
            ;
        errno = saved;
    }
}

#define cleanup_free __attribute__((cleanup(cleanup_free_fn)))
#define cleanup_close __attribute__((cleanup(cleanup_close_fn)))
#define cleanup_pid __attribute__((cleanup(cleanup_pid_fn)))

static inline void *take_ptr_impl(void **p)
{
    void *v = *p;
    *p = NULL;
    return v;
}
#define take_ptr(p) take_ptr_impl((void **)(p))
static inline int take_fd(int *fd)
{
    int v = *fd;
    *fd = -1;
    return v;
}
static inline pid_t take_pid(pid_t *pid)
{
    pid_t v = *pid;
    *pid = -1;
    return v;
}

/* DEFINE_CLEANUP(type, fn) makes `cleanup_fn_<fn>` and lets `__attribute__((cleanup(cleanup_fn_<fn>)))`
 * release a `type *` with fn(ptr) when the pointer is non-NULL. Layers that own foreign objects
 * (json_t, CURL, curl_slist, scmp_filter_ctx ...) declare their own one-liners with it next to the
 * library's header, so core stays free of those libraries:
 *   DEFINE_CLEANUP(json_t, json_decref)  then  json_t *v cleanup_(json_decref) = NULL; */
#define DEFINE_CLEANUP(type, fn)                                                                   \
    static inline void cleanup_fn_##fn(type **p)                                                   \
    {                                                                                              \
        if (*p) {                                                                                  \
            int saved_ = errno;                                                                    \
            fn(*p);                                                                                \
            errno = saved_;                                                                        \
        }                                                                                          \
    }
#define cleanup_(fn) __attribute__((cleanup(cleanup_fn_##fn)))

/* Other owned kinds with a named attribute, for the common cases. */
static inline void cleanup_fclose_fn(FILE **f)
{
    if (*f) {
        int saved = errno;
        fclose(*f);
        errno = saved;
    }
}
#define cleanup_fclose __attribute__((cleanup(cleanup_fclose_fn)))
