/* worker.h: one QuickJS worker, from the zygote's fork to its exit (worker.c). */
#pragma once
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "confine.h"

/* Exit statuses of a worker that ends without a RESULT (the monitor reports an
 * infrastructure error for each; none of them follows guest code). */
#define WK_EXIT_CONFINE 120  /* a confinement step failed: no request was read */
#define WK_EXIT_ENGINE 121   /* the engine could not start: no request was read */
#define WK_EXIT_PROTOCOL 122 /* the monitor's frame was malformed */
#define WK_EXIT_IO 123       /* the socket failed */
#define WK_EXIT_MEMORY 125   /* no memory for a request or a host reply (124 is a timeout's) */

struct jsrt;
struct wk_params {
    pid_t monitor_pid;          /* the daemon: our parent through CLONE_PARENT */
    struct wk_limits limits;
    struct sock_fprog filter;   /* generated once by the zygote (cf_filter_export) */
    struct jsrt *engine;        /* built once by the zygote; each worker has its own copy */
    uint64_t seed;              /* drawn by the zygote for the next worker only */
};

/* Zygote, once: the engine every worker inherits (jsrt_new with the worker's finish). */
struct jsrt *wk_engine_new(uint32_t memory_mb);
/* Confines, adopts the inherited engine, says READY, serves exactly one request, exits. */
__attribute__((noreturn)) void wk_worker_main(int sock, const struct wk_params *p);
