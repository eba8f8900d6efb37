/* module.h: module runs (issue 21, providers.md §3.6) as far as the core knows them: the request's
 * bounds, the parameter table a worker reads (params.txt) and the PLSM record it writes back.
 * Providers use these; the worker (src/module/) implements the other side of both formats.
 * Trusts: nothing. The PLSM decoder reads bytes a guest-side worker wrote: fixed layout, every
 * length checked against the bytes left and against what the request allows, no allocation larger
 * than the record itself. */
#pragma once
#include <stddef.h>
#include <stdint.h>

#include "err.h"
#include "request.h"

#define PLM_MODULE_ROWS_MAX 100000u          /* (spec) rows in one run */
#define PLM_MODULE_WIDTH_MAX 64u             /* (spec) values in one row */
#define PLM_MODULE_RATIO_MAX 1000000.0       /* (spec) end_time / step */
#define PLM_MODULE_RESULT_MAX 8388608u       /* (spec) MaxModuleResultBytes */
#define PLM_PLSM_HEADER 20u                  /* "PLSM", version, rows, width, params */
#define PLM_PLSM_WIDTH_MAX 65536u            /* (spec) outputs per step in a record */
#define PLM_MODULE_PARAMS_FILE "params.txt"
#define PLM_MODULE_RESULTS_FILE "results.bin"

/* floor(end/step) + 2 for a request that passed plm_module_check (so end/step <= 1e6). */
uint64_t plm_module_max_steps(double end_time, double step);

/* The module checks of providers.md §3.6 in order (model, rows, width, values, end_time, step,
 * ratio, result bound); every failure PLM_E_INVALID marked `request`. */
int plm_module_check(const struct plm_request *r, struct plm_err *err);

/* Writes x in the shortest of %.15g/%.16g/%.17g that reads back (strtod) as the same bits; -0 and
 * subnormals included. buf needs 32 bytes; returns the length. x must be finite. */
size_t plm_module_fmt_double(double x, char buf[32]);

/* params.txt for r: one line per row, values separated by one space, '\n' after each line.
 * malloc'd into *out (*len bytes, NUL-terminated); -1 out of memory. */
int plm_module_params_text(const struct plm_request *r, char **out, size_t *len);

/* Decodes a PLSM record for request r into out (runs, width; the caller sets outcome and the
 * rest). NaNs are canonicalised to 0x7ff8000000000000. -1 with a short reason in why (static text)
 * when the record is not exactly what r allows: magic, version 1, rows = r's rows, params = r's
 * width, 1 <= width <= 65536, per row a status <= max steps with status x width doubles, nothing
 * truncated, nothing trailing. On -1 out is left empty. */
int plm_plsm_decode(const uint8_t *p, size_t n, const struct plm_request *r, struct plm_module_result *out,
                    const char **why);

/* Frees the runs of a module result (not detail/out/err). */
void plm_module_runs_free(struct plm_module_result *m);

/* ---- a module run as a project (module_project.c; docker and microvm run it that way) ---- */

/* The project a module run becomes: file params.txt, optionally pre_step, then the worker step
 * `exec WORKER --model MODELS_DIR/<model> params.txt results.bin END STEP 8388608`, artifact
 * results.bin. `project` points into the plan itself: do not copy a plan. */
struct plm_module_plan {
    struct plm_request project;
    struct plm_file files[1];
    const char *steps[2];
    const char *arts[1];
    size_t worker_step; /* the worker step's index among the project's steps */
    char *params;       /* params.txt (malloc'd) */
    size_t params_len;
    char cmd[512];
};

/* Builds the plan of r (already validated: plm_module_check). -1 with err (internal) when the
 * command does not fit or out of memory. */
int plm_module_plan_make(struct plm_module_plan *pl, const struct plm_request *r, const char *worker,
                         const char *models_dir, const char *pre_step, struct plm_err *err);
void plm_module_plan_done(struct plm_module_plan *pl);

/* The outcome table of providers.md §3.6 over the project the run became (step: the worker
 * step's index): the runner's own outcome passes through; worker exit 0 decodes results.bin
 * (protocol_error when it does not decode), 1-3 is setup_failed "the worker refused the request:
 * <its message>", 4 is -1 with err invalid_argument (code ran: no refusal mark), anything else is
 * protocol_error. Takes the step's stdout/stderr (capped) into m. -1 also out of memory. */
int plm_module_outcome(const struct plm_request *r, struct plm_project_result *pr, size_t step,
                       struct plm_module_result *m, struct plm_err *err);

/* SHA-256 (lowercase hex) over each run's status (i32 LE) then its outputs (f64 LE), in order:
 * the checksum the startup proofs and the black-box tests pin (docs/modules.md). "" on failure. */
void plm_module_checksum(const struct plm_module_result *m, char hex[65]);
/* The model names a listing step printed (one per line, guest bytes): those matching the model id
 * rule, the first cap of them copied into models. Returns how many matched (the card says so). */
size_t plm_module_read_models(const struct plm_bytes *out, char (*models)[65], size_t cap, size_t *kept);

/* Frees everything in m (runs, detail, stdout, stderr). */
void plm_module_result_free(struct plm_module_result *m);
