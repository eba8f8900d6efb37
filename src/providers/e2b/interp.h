/* interp.h: one long-lived cell interpreter in a session's sandbox (interp.c): started through
 * envd's process.Process/Start with stdin kept open, fed cells through process.Process/SendInput,
 * interrupted with process.Process/SendSignal, its output delimited by cellscan.h's markers. */
#pragma once
#include <stdbool.h>
#include <stdint.h>

#include "internal.h"

extern const char e2b_kernel_js[], e2b_kernel_py[];

struct e2b_interp;

struct e2b_cell_out {
    struct plm_bytes out, err;
    bool out_truncated, err_truncated, timed_out;
    bool ended; /* the interpreter is gone after this cell */
    int32_t exit_code;
    int64_t duration_ms;
};

/* Starts `node` (javascript) or `python3` (python) running its kernel in cwd and waits for its
 * ready marker. stream_ms bounds the process's stream (the session's remaining lifetime);
 * deadline_ms the wait. On failure nothing of the cell was sent: err is a refusal (environment
 * when the interpreter ended or never answered, capacity when the deadline passed) unless the
 * transport broke (then *transport is set: the caller checks whether the sandbox still exists). */
int e2b_interp_start(struct e2b_state *s, const struct e2b_sandbox *sb, const char *lang, const char *cwd,
                     long stream_ms, int64_t deadline_ms, struct e2b_interp **out, bool *transport,
                     struct plm_err *err);
/* False once its process or its stream is over. */
bool e2b_interp_alive(struct e2b_interp *it);
/* The interpreter's pid in the sandbox (envd's start event); -1 once it is over. */
int64_t e2b_interp_pid(struct e2b_interp *it);
/* One cell. 0: r filled (exit 124 + timed_out at the deadline, 153 past the 32 MiB output budget,
 * the interpreter's own exit status when it ended mid-cell). -1: an unmarked error (the code
 * may have run); the interpreter is then dead. */
int e2b_interp_cell(struct e2b_interp *it, const char *code, size_t len, int64_t deadline_ms,
                    struct e2b_cell_out *r, struct plm_err *err);
/* Stops and frees: SIGKILL through envd when kill9 and the process still runs, then the stream
 * is abandoned and its thread joined (bounded: about a second after the stream is told to stop). */
void e2b_interp_free(struct e2b_interp *it, bool kill9);
/* Lets the stream's thread stop without waiting (the sandbox is about to be deleted). */
void e2b_interp_stop(struct e2b_interp *it);
