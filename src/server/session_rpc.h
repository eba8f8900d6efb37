/* session_rpc.h: OpenSession, SessionRun and CloseSession (sessions.md §2) and the service behind
 * them: the registry, the idle/claim/lifetime timer thread, Describe's session fields and the
 * shutdown that ends every session. Knows nothing of libmicrohttpd.
 * With sessions off (env->sessions NULL) OpenSession answers unimplemented/unsupported and the
 * other two find no session (not_found), as the reference does (sessions.md open question 1). */
#pragma once
#include <stdint.h>

#include "session_limits.h"
#include "../wire/convert.h"
#include "rpc.h"

struct sess_svc;

/* Starts the timer thread. The provider must implement session_open and session_close. */
struct sess_svc *sess_svc_new(const struct plm_session_config *cfg, struct plm_provider *p, struct adm *adm,
                              struct plm_err *err);
/* The startup session smoke test (sessions.md §7) on one real session, driven through the
 * provider's session ops: cells keep a value per stated language, a snippet's exit status is a
 * result, suspend keeps state consistent, close ends it. < 0: sessions must not be offered. */
int sess_svc_smoke_test(struct sess_svc *s, struct plm_err *err);
/* The paid allowance (core/spend.h) when the provider bills by the second (teardown > 0): opens and
 * calls reserve paid time and a running session is charged while it runs. Before serving. */
struct spend;
void sess_svc_set_spend(struct sess_svc *s, struct spend *spend, uint32_t billing_teardown_ms);
/* Ends every session (SHUTDOWN), closing each sandbox, and stops the timer thread. Idempotent. */
void sess_svc_shutdown(struct sess_svc *s);
/* Shuts down if needed and frees. NULL-safe. */
void sess_svc_free(struct sess_svc *s);
/* Describe fields 15-20 (left false/zero when s is NULL). */
void sess_svc_describe(const struct sess_svc *s, Plimsoll__V1__DescribeResponse *m);
/* The session environment Describe states (field 18), zeroed first; false when s is NULL. The
 * other session fields come from the configuration, fixed for the service's life. */
bool sess_svc_env(const struct sess_svc *s, struct plm_payload_env *e);
/* Runs the due timers now (tests drive time through this; the thread calls it too). */
void sess_svc_tick(struct sess_svc *s, uint64_t now_ms);
/* Open sessions, for tests and metrics. */
uint32_t sess_svc_open_count(struct sess_svc *s);

rpc_proc_fn rpc_open_session;  /* §2.1; its context: steps 10 and 12 (item 14) */
rpc_proc_fn rpc_session_run;   /* §2.2; its context: step 7, and the dispatch's timeout */
rpc_proc_fn rpc_close_session; /* §2.3; its context: steps 3 and 5 (item 37) */
