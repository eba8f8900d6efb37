/* request.h: the transport-agnostic run request and result.
 * A plm_request borrows every pointer from whoever decoded it (the wire layer); it owns nothing.
 * A plm_result owns its buffers once a provider filled it; plm_result_done() frees them. Strings
 * are NUL-terminated UTF-8; guest output is bytes with a length. */
#pragma once
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tier.h"

enum plm_kind {
    PLM_KIND_NONE = 0,
    PLM_KIND_JAVASCRIPT,
    PLM_KIND_PROJECT,
    PLM_KIND_MODULE,
    PLM_KIND_CELL,
};
/* "javascript", "project", "module", "cell", or "" for none (the digest's `kind`). */
const char *plm_kind_name(enum plm_kind k);

struct plm_file {
    const char *path;
    const char *content;
};

struct plm_row {
    const double *values;
    size_t n_values;
};

struct plm_request {
    uint32_t protocol;
    const char *minimum_isolation; /* as sent; "" = no floor */
    const char *trace_id;          /* as sent; filtered by plm_trace_id_ok() before logging */
    int32_t timeout_ms;            /* as sent; clamp with plm_clamp_timeout() */
    const char *software_mode;     /* "" when no rule */
    const char *const *software_identities;
    size_t n_software_identities;
    enum plm_kind kind;
    struct {
        const char *code;
        const char *grant_profile;
    } js;
    struct {
        const struct plm_file *files;
        size_t n_files;
        const char *const *steps;
        size_t n_steps;
        const char *const *artifacts;
        size_t n_artifacts;
        const char *grant_profile;
    } project;
    struct {
        const char *model;
        double end_time, step;
        const struct plm_row *rows;
        size_t n_rows;
    } module;
    struct {
        const char *language;
        const char *code;
        const struct plm_file *files;
        size_t n_files;
    } cell;
};

struct plm_bytes {
    uint8_t *data;
    size_t len;
};

struct plm_js_result {
    struct plm_bytes out, err;
    int32_t exit_code;
    bool timed_out, out_truncated, err_truncated;
};

struct plm_step_result {
    char *command;
    struct plm_bytes out, err;
    int32_t exit_code;
    bool timed_out, out_truncated, err_truncated;
    int64_t duration_ms;
};

struct plm_artifact {
    char *path;
    struct plm_bytes content;
};

/* Numbers equal plimsoll.v1.ProjectOutcome. */
enum plm_outcome {
    PLM_OUTCOME_UNSPECIFIED = 0,
    PLM_OUTCOME_COMPLETED = 1,
    PLM_OUTCOME_SETUP_FAILED = 2,
    PLM_OUTCOME_TIMED_OUT = 3,
    PLM_OUTCOME_PROTOCOL_ERROR = 4,
};

struct plm_project_result {
    struct plm_step_result *steps;
    size_t n_steps;
    enum plm_outcome outcome;
    char *detail;
    struct plm_artifact *artifacts;
    size_t n_artifacts;
    bool artifacts_truncated;
};

struct plm_module_run {
    int32_t status;
    double *outputs;
    size_t n_outputs;
};

struct plm_module_result {
    struct plm_module_run *runs;
    size_t n_runs;
    int32_t width;
    enum plm_outcome outcome;
    char *detail;
    struct plm_bytes out, err;
};

struct plm_cell_result {
    struct plm_bytes out, err;
    int32_t exit_code;
    bool timed_out, out_truncated, err_truncated, interpreter_started, interpreter_ended;
};

struct plm_result {
    enum plm_kind kind; /* PLM_KIND_NONE: no result */
    /* The one thing a provider states about where it ran: the tier it measured for this run.
     * Left unset it is PLM_TIER_UNKNOWN (0), which meets no floor: a provider that forgets fails
     * closed. The four strings below are the server's (plm_result_stamp), never a provider's. */
    enum plm_tier tier;
    char *sandbox;
    char *isolation;
    char *environment;
    char *software_identity;
    int64_t duration_ms;
    struct plm_js_result js;
    struct plm_project_result project;
    struct plm_module_result module;
    struct plm_cell_result cell;
};

/* Frees everything a provider put into r and zeroes it. Safe on a zeroed or half-built result. */
void plm_result_done(struct plm_result *r);
void plm_bytes_done(struct plm_bytes *b);

/* The server's one stamp on an answer: which sandbox ran it, at r->tier (what the provider measured
 * for this run), in which environment and software identity (what Describe, or the session's open,
 * states; NULL software_identity = ""). Replaces whatever r held in these fields. -1: out of memory
 * (r keeps what was set; plm_result_done frees it). */
int plm_result_stamp(struct plm_result *r, const char *sandbox, const char *environment, const char *software_identity);

/* trace_id is kept only when it is [A-Za-z0-9._:-]{1,64}; otherwise it is silently dropped. */
bool plm_trace_id_ok(const char *s);

/* timeout_ms <= 0 -> def; clamp to [1, ceiling] and to LIM_TIMEOUT_MS_MAX. */
uint32_t plm_clamp_timeout(int32_t requested_ms, uint32_t def_ms, uint32_t ceiling_ms);
