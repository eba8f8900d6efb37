/* row_proto.h: what the worker (worker.c) and a model process (model_main.c) say to each other
 * over the model's stdin and stdout, one process per row. Both sides are ours; the model side runs
 * after exec under the worker's limits and seccomp filter (rowbox.c).
 *
 * stdin, written whole by the worker before it reads anything (at most 24 + 64 x 8 bytes, under
 * PIPE_BUF, so it never blocks):
 *   u32 mode (ROW_DESCRIBE or ROW_RUN), u32 n_params, f64 end_time, f64 step, n_params x f64
 * stdout:
 *   ROW_DESCRIBE: u32 width, u32 n_params the model takes (exactly 8 bytes)
 *   ROW_RUN:      width doubles per output point, point-major; the number of points is the row's
 *                 status (at most floor(end/step) + 2)
 * All little-endian host order (both sides are the same static build on the same machine).
 * Exit status: ROW_EXIT_OK, ROW_EXIT_NOMEM (an allocation failed: the row's memory cap),
 * ROW_EXIT_PARAMS (the model refused the parameter values); anything else is a model failure. */
#pragma once
#include <stdint.h>

#define ROW_DESCRIBE 0u
#define ROW_RUN 1u
#define ROW_HEADER 24u
#define ROW_PARAMS_MAX 64u
#define ROW_EXIT_OK 0
#define ROW_EXIT_NOMEM 3
#define ROW_EXIT_PARAMS 4

/* The row statuses the worker records for a row that did not complete (docs/modules.md). */
#define ROW_ST_CRASHED (-1)   /* killed by a signal not listed here, or an unexpected exit */
#define ROW_ST_NOMEM (-2)     /* the model could not allocate within the row's memory cap */
#define ROW_ST_BADOUT (-3)    /* output not whole points, more points than allowed, or a bad describe */
#define ROW_ST_CPU (-4)       /* the row's CPU time limit */
#define ROW_ST_PARAMS (-5)    /* the model refused these parameter values */
#define ROW_ST_SYSCALL (-6)   /* a system call outside the row's seccomp allowlist */
#define ROW_ST_START (-7)     /* the row's process could not be started (fork, pipe, exec) */
