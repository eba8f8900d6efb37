/* model.h: one compiled model, linked with model_main.c into its own static executable
 * (/models/<Name> in the module image). A model integrates with a fixed step and only IEEE basic
 * operations and sqrt (no other libm call, no FMA contraction: -ffp-contract=off), so a row's
 * doubles are the same bits on every run and under runc, runsc and the microvm guest.
 *
 * The step rule (model_main.c, shared by every model): n = floor(end/step) full steps of size
 * `step`, then one partial step of end - n*step when that is > 0. A point is emitted at t = 0 and
 * after every step (time k*step, the last one exactly end): n + 1 or n + 2 points. */
#pragma once
#include <stdint.h>

#include "model_io.h" /* model_emit, model_rk4: the leaf a model calls down to */

struct model {
    const char *name;
    uint32_t n_params, width;
    /* Checks params and sets up; returns ROW_EXIT_PARAMS to refuse the values, ROW_EXIT_NOMEM
     * when it could not allocate, 0 to go on. */
    int (*run)(const double *params, double end, double step, uint64_t n_full, double last_h,
               struct model_out *o);
};

extern const struct model MODEL; /* each model file defines it */
