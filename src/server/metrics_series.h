/* metrics_series.h: the series GET /metrics serves (metrics_series.c); the listener, its gate and
 * the scope check stay in metrics.c. */
#pragma once
#include <stdint.h>

#include "../broker/broker.h"
#include "../broker/profiles.h"
#include "rpc.h"

/* A finished Run's verdict, as its audit line's outcome says. */
enum ms_verdict { MS_EXITED, MS_TIMED_OUT, MS_PROJECT, MS_REFUSED, MS_ERROR, MS_VERDICT_N };

/* Once at startup, before any run and after the grants file loaded (ps may be NULL): one
 * host-call series per profile and route. -1 out of memory. */
int metrics_series_init(const struct brk_profiles *ps);
void metrics_series_free(void);
/* Thread-safe. */
void metrics_note_run(enum ms_verdict v, uint64_t duration_us);
void metrics_note_host_calls(const struct brk_profile *p, const struct brk_trace *t);
/* The scrape's body (malloc'd), or NULL out of memory. */
char *metrics_render(const struct rpc_env *env);
