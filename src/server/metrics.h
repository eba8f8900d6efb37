/* metrics.h: the Prometheus text listener (wire.md §15), on its own address, behind its own gate;
 * a scrape needs the `metrics` scope (docs/decisions.md). */
#pragma once
#include "gate.h"
#include "rpc.h"
#include "server.h"

/* Answers one request of the metrics listener (GET /metrics, after the Host check). */
void metrics_answer(const struct srv_config *cfg, struct gate_req *rq);
void metrics_shed(const char *reason);
/* Logs a readiness failure's detail at most once every 30 s (the answer itself never holds it). */
void metrics_readyz_failed(const char *detail);
