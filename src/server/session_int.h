/* session_int.h: what the session files of src/server share (session_svc.c, session_rpc.c,
 * session_run.c). Private to src/server. */
#pragma once
#include <pthread.h>
#include <time.h>

#include "../core/session_registry.h"
#include "../wire/connect_error.h"
#include "../wire/session_error.h"
#include "rpc_int.h"
#include "session_rpc.h"

#define SESS_CALL_CEILING_MS 300000u  /* §2.2 step 11: the 5-minute RPC ceiling */
#define SESS_TURN_WAIT_MS 300000u     /* a waiter gives up after the RPC ceiling */
#define SESS_RETRY_MS 1000u           /* a timer finding the turn busy tries again after this */
#define SESS_MIN_IDLE_MS 1000u
#define SESS_OPEN_PAID_MS 120000u     /* §3.3: a metered open reserves 2 min + idle + teardown */

struct sess_svc {
    struct sreg *reg;
    struct plm_session_config cfg;
    struct plm_provider *provider;
    struct adm *adm;
    struct spend *spend;          /* NULL: the provider bills nothing (sess_svc_set_spend) */
    uint32_t billing_teardown_ms; /* what a sandbox bills past its last moment of use */
    pthread_mutex_t mu;
    pthread_cond_t cv;
    bool stop, thread_started, shut;
    pthread_t thread;
    unsigned closers; /* under mu: close threads still running (session_close.c); freed after */
};

/* Protocol number check shared by the three procedures (§2 step 1). */
int sess_check_protocol(uint32_t p, struct plm_err *err);
/* A Connect error with session details; internal errors are logged and replaced (wire.md §7.3). */
void sess_error(struct rpc_answer *ans, const struct plm_err *err, const char *request_id,
                const struct wire_session_details *d);
/* The lookup miss of §2.2 step 2 / §2.3 step 2. */
void sess_not_found(struct rpc_answer *ans, const char *request_id);
/* The turn for a call or a close (§2.2 step 7, §2.3 step 3): refused (capacity, nothing done)
 * when the caller already gave up; the wait is bounded by the caller's deadline as well as by the
 * RPC ceiling, and a caller found gone once the turn came gives it back, refused likewise. */
int sess_turn_take(struct sess_svc *svc, struct sreg_session *s, const struct rpc_call *call, struct plm_err *err);
/* A close thread starts and ends (session_close.c); sess_svc_free waits for every one. */
void sess_closer_begin(struct sess_svc *svc);
void sess_closer_done(struct sess_svc *svc);
/* Arms the entry's next timer: the idle (or claim) period from now, never past its lifetime. */
void sess_arm_idle(struct sess_svc *svc, struct sreg_session *s, uint64_t now_ms);
/* Ends a live session for `why` with its turn held: closes the sandbox, then gives back its slot. */
void sess_end_now(struct sess_svc *svc, struct sreg_session *s, enum plm_session_end why, const char *detail);
/* Paid time (sessions.md §3.3): a metered session's reservation made to reach `use_ms` (the open's
 * 2 minutes or the call's timeout) plus its idle time and the provider's teardown from now. 0 when
 * the provider bills nothing; a refusal is capacity, marked. The turn is held. */
int sess_cover_paid(struct sess_svc *svc, struct spend_meter *m, uint64_t use_ms, uint64_t idle_ms,
                    struct plm_err *err);
/* Charges a metered session's running time and holds nothing more (suspend, end); logs nothing. */
void sess_stop_paid(struct spend_meter *m);
/* The audit line of a session event. */
void sess_log(const char *event, const char *request_id, const struct sreg_session *s, json_t *extra);
