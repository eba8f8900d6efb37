/* seccomp_table.h: the worker's syscall allow-list, as data (STYLE.md §6), in the rows of
 * confine/filter.h. The zygote builds the filter from it (confine.c loads it in each worker) and
 * the evidence card prints it, so what we claim is what we set. Everything not listed kills the
 * worker (SCMP_ACT_KILL_PROCESS). */
#pragma once
#include <stddef.h>

#include "../../confine/filter.h"

/* The worker's one descriptor: its socket to the monitor (the rows' CF_FD_ONLY). */
#define WK_SOCK_FD 3

extern const struct cf_row wk_allow[];
extern const size_t wk_allow_len;

/* Builds the filter context from the table (default kill, bad arch kills, native arch only).
 * Returns NULL on any failure: the caller fails closed. Does not load it. */
scmp_filter_ctx wk_filter_build(void);
