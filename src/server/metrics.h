/* metrics.h: the Prometheus text listener (wire.md §15), on its own address, behind its own gate;
 * a scrape needs the `metrics` scope (docs/decisions.md). */
#pragma once
#include <microhttpd.h>

#include "gate.h"
#include "rpc.h"
#include "server.h"

struct MHD_Daemon *metrics_start(struct gate *g, const struct srv_config *cfg);
void metrics_shed(const char *reason);
/* Logs a readiness failure's detail at most once every 30 s (the answer itself never holds it). */
void metrics_readyz_failed(const char *detail);
