/* jsrt.h: the engine side of one worker: QuickJS runtime, Node-like globals, the event loop.
 * Runs confined (worker side of the wall); every function here may be reached by guest code. */
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

/* Zygote: compiles the prelude to bytecode once (malloc'd). Returns 0 or -1. */
int jsrt_compile_prelude(uint8_t **bc, size_t *len);

struct jsrt;
/* Worker, before READY: runtime with the memory cap and stack limit, context, globals.
 * Returns NULL on failure (the worker then exits without reading a request). */
struct jsrt *jsrt_new(uint32_t memory_mb, size_t js_stack_bytes, const uint8_t *bc, size_t bc_len,
                      jsrt_finish_fn *finish);
/* Runs `code` (NUL-terminated, len bytes) to completion, error, exit or deadline, then calls
 * finish. Never returns. With a grant (host != NULL) it first installs the native global
 * __plimsoll_host_send and evaluates `client` (NUL-terminated, client_len bytes) as a classic
 * script, inside the same deadline; without one neither exists. */
__attribute__((noreturn)) void jsrt_run(struct jsrt *r, const char *code, size_t len, uint32_t timeout_ms,
                                        const char *client, size_t client_len, jsrt_host_fn *host);
