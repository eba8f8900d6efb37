/* jsrt.h: the engine side of one worker: QuickJS runtime, Node-like globals, the event loop.
 * jsrt_new runs in the zygote, before any guest code exists; everything else runs confined in a
 * worker (after its filter), where guest code may reach it. */
#pragma once
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct jsrt_out {
    uint8_t *data;   /* LIM_OUTPUT_MAX bytes, allocated before the run */
    uint32_t len;
    bool truncated;  /* bytes were dropped past the cap; never an in-band marker */
};

/* Ends the run: sends the result and exits the process. Never returns. */
typedef void jsrt_finish_fn(int32_t exit_code, bool timed_out, const struct jsrt_out *out,
                            const struct jsrt_out *err);

/* A grant's transport (worker.c): frames one HOST_CALL and blocks until its HOST_REPLY. Method
 * and path are text without NUL within their caps (the caller checked), body_len is at most
 * QF_HOST_BODY_MAX. Fills out; exits the process when the socket or the monitor fails. */
struct jsrt_host_reply {
    uint32_t status;     /* 100..599, or 0 with deadline */
    bool deadline;       /* the run's deadline passed during the call: end the run timed out */
    const uint8_t *body; /* body_len bytes inside buf */
    uint32_t body_len;   /* at most QF_HOST_REPLY_MAX */
    void *buf;           /* malloc'd storage behind body (free()), or NULL */
};
typedef void jsrt_host_fn(uint32_t call_no, const uint8_t *method, size_t method_len, const uint8_t *path,
                          size_t path_len, const uint8_t *body, size_t body_len, struct jsrt_host_reply *out);

struct jsrt;
/* Zygote, once, before any fork: runtime with the memory cap and stack limit, context, globals
 * (the prelude evaluated), warm-up, then a collection. Workers inherit it copy-on-write. No
 * guest code has run in it. Returns NULL on failure (the zygote then exits). */
struct jsrt *jsrt_new(uint32_t memory_mb, size_t js_stack_bytes, jsrt_finish_fn *finish);
/* Worker, after its walls are up and before READY: makes the inherited engine this worker's own
 * (stack top measured here, Math.random seeded with `seed`, which the zygote drew from
 * getrandom for this worker alone) and pre-copies the pages a small run writes. Returns 0, or
 * -1 (the worker then exits without reading a request). */
int jsrt_adopt(struct jsrt *r, uint64_t seed);
/* Runs `code` (NUL-terminated, len bytes) to completion, error, exit or deadline, then calls
 * finish. Never returns. With a grant (host != NULL) it first installs the native global
 * __plimsoll_host_send and evaluates `client` (NUL-terminated, client_len bytes) as a classic
 * script, inside the same deadline; without one neither exists. */
__attribute__((noreturn)) void jsrt_run(struct jsrt *r, const char *code, size_t len, uint32_t timeout_ms,
                                        const char *client, size_t client_len, jsrt_host_fn *host);

/* Sessions: whether the run ended through process.exit (finish was reached from inside guest
 * code, so the engine's stack is not clean and the worker must exit). */
bool jsrt_exit_called(const struct jsrt *r);
/* Sessions: after a run that finished with a clean stack (completion or an uncaught error at the
 * top level), makes the engine ready for the next run in the same context. */
void jsrt_next_run(struct jsrt *r);
/* Sessions: a run prints its completion value (console.dir form) when it is not undefined. */
void jsrt_set_session(struct jsrt *r, bool session);
