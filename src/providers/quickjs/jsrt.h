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

/* Zygote: compiles the prelude to bytecode once (malloc'd). Returns 0 or -1. */
int jsrt_compile_prelude(uint8_t **bc, size_t *len);

struct jsrt;
/* Worker, before READY: runtime with the memory cap and stack limit, context, globals.
 * Returns NULL on failure (the worker then exits without reading a request). */
struct jsrt *jsrt_new(uint32_t memory_mb, size_t js_stack_bytes, const uint8_t *bc, size_t bc_len,
                      jsrt_finish_fn *finish);
/* Runs `code` (NUL-terminated, len bytes) to completion, error, exit or deadline, then calls
 * finish. Never returns. */
__attribute__((noreturn)) void jsrt_run(struct jsrt *r, const char *code, size_t len,
                                        uint32_t timeout_ms);
