/* session_svc.c: the session service: the registry, one timer thread (idle suspend, the claim
 * rule, lifetime expiry, tombstone collection; sessions.md §4.3), Describe's fields and shutdown.
 * Owns: the registry and, through it, every open session's provider handle and concurrency slot.
 * Invariant: a timer acts only with the session's turn held and only for its own generation, so
 * it never interleaves with a call and a stale timer does nothing. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../core/clock.h"
#include "log.h"
#include "session_int.h"

int sess_check_protocol(uint32_t p, struct plm_err *err)
{
    if (p == 0)
        return plm_refuse(err, PLM_E_PROTOCOL_UNSET, PLM_REFUSAL_PROTOCOL,
                          "protocol must be stated; this daemon serves protocol %d", PLM_PROTOCOL);
    if (p != PLM_PROTOCOL)
        return plm_refuse(err, PLM_E_PROTOCOL, PLM_REFUSAL_PROTOCOL,
                          "this daemon serves protocol %d and the request states %u; nothing ran", PLM_PROTOCOL, p);
    return 0;
}

void sess_error(struct rpc_answer *ans, const struct plm_err *err, const char *request_id,
                const struct wire_session_details *d)
{
    const char *code = wire_connect_code(err->kind);
    char msg[600];
    enum plm_refusal refusal = err->refusal;
    if (strcmp(code, "internal") == 0) {
        char id[17];
        log_internal_error(request_id, err->msg, id);
        snprintf(msg, sizeof msg, "internal error %s; the daemon's log holds its detail", id);
        refusal = PLM_REFUSAL_NONE;
    } else {
        snprintf(msg, sizeof msg, "%s", err->msg);
    }
    free(ans->body);
    ans->body = wire_session_error_json(code, msg, refusal, d, &ans->len);
    ans->status = wire_connect_status(code);
    ans->fmt = RPC_JSON;
    if (!ans->body) {
        ans->status = 500;
        ans->len = 0;
    }
}

void sess_not_found(struct rpc_answer *ans, const char *request_id)
{
    static const char text[] = "no such session for this caller";
    struct plm_err err;
    plm_refuse(&err, PLM_E_NOT_FOUND, PLM_REFUSAL_REQUEST, "%s", text);
    struct wire_session_details d = {.ended = PLM_END_NOT_FOUND, .ended_detail = text};
    sess_error(ans, &err, request_id, &d);
}

void sess_log(const char *event, const char *request_id, const struct sreg_session *s, json_t *extra)
{
    json_t *f = json_object();
    if (request_id && *request_id)
        json_object_set_new(f, "request_id", json_string(request_id));
    json_object_set_new(f, "caller", json_string(s->caller));
    json_object_set_new(f, "session", json_string(s->fp)); /* the fingerprint, never the id */
    if (extra) {
        json_object_update(f, extra);
        json_decref(extra);
    }
    log_event("info", event, f);
}

void sess_arm_idle(struct sess_svc *svc, struct sreg_session *s, uint64_t now_ms)
{
    uint64_t period = s->idle_ms;
    if (period == 0) {
        bool claimed = sreg_is_claimed(svc->reg, s);
        period = claimed ? 0 : SREG_CLAIM_WINDOW_MS; /* idle 0 and claimed: only the lifetime */
    }
    uint64_t due = period ? now_ms + period : s->deadline_ms;
    if (due > s->deadline_ms)
        due = s->deadline_ms;
    sreg_arm(svc->reg, s, due);
}

int sess_turn_take(struct sess_svc *svc, struct sreg_session *s, const struct rpc_call *call, struct plm_err *err)
{
    if (rpc_call_ended(call, err) < 0)
        return -1;
    uint64_t left = rpc_call_left_ms(call, clock_mono_ms());
    if (sreg_turn_take(svc->reg, s, left < SESS_TURN_WAIT_MS ? left : SESS_TURN_WAIT_MS, err) < 0)
        return -1;
    if (rpc_call_ended(call, err) < 0) { /* it went away while it waited */
        sreg_turn_give(svc->reg, s);
        return -1;
    }
    return 0;
}

void sess_closer_begin(struct sess_svc *svc)
{
    pthread_mutex_lock(&svc->mu);
    svc->closers++;
    pthread_mutex_unlock(&svc->mu);
}

void sess_closer_done(struct sess_svc *svc)
{
    pthread_mutex_lock(&svc->mu);
    svc->closers--;
    pthread_cond_broadcast(&svc->cv);
    pthread_mutex_unlock(&svc->mu);
}

static void give_slot(struct sess_svc *svc, struct sreg_session *s)
{
    bool holds;
    bool suspended = sreg_is_suspended(svc->reg, s, &holds);
    if (holds) {
        adm_release(svc->adm, s->caller);
        sreg_set_suspended(svc->reg, s, suspended, false);
    }
}

int sess_cover_paid(struct sess_svc *svc, struct spend_meter *m, uint64_t use_ms, uint64_t idle_ms,
                    struct plm_err *err)
{
    if (!svc->spend || !m->s)
        return 0;
    return spend_meter_cover(m, use_ms + idle_ms + svc->billing_teardown_ms, err);
}

void sess_stop_paid(struct spend_meter *m)
{
    if (m->s)
        spend_meter_stop(m);
}

void sess_svc_set_spend(struct sess_svc *svc, struct spend *spend, uint32_t billing_teardown_ms)
{
    if (!svc)
        return;
    svc->spend = billing_teardown_ms ? spend : NULL;
    svc->billing_teardown_ms = billing_teardown_ms;
}

void sess_end_now(struct sess_svc *svc, struct sreg_session *s, enum plm_session_end why, const char *detail)
{
    sreg_set_end(svc->reg, s, why, detail);
    struct plm_session *h = sreg_take_handle(svc->reg, s);
    if (h) {
        struct plm_err err = {0};
        if (svc->provider->ops->session_close(svc->provider, h, &err) < 0)
            log_event("warning", "session_close_failed",
                      json_pack("{s:s, s:s}", "session", s->fp, "detail", err.msg));
    }
    give_slot(svc, s); /* only once the sandbox is gone (§3.3) */
    sess_stop_paid(&s->meter); /* it bills no more */
    json_t *x = json_object();
    if (s->meter.s)
        json_object_set_new(x, "paid_seconds", json_real((double)s->meter.charged_ms / 1000.0));
    json_object_set_new(x, "reason", json_string(plm_session_end_name(sreg_end_of(svc->reg, s, NULL, 0))));
    sess_log("session_ended", NULL, s, x);
}

/* One due timer (§4.3). */
static void on_timer(struct sess_svc *svc, struct sreg_session *s, uint64_t gen, uint64_t now)
{
    if (!sreg_gen_current(svc->reg, s, gen))
        return; /* stale: a call ran since it was armed */
    if (!sreg_turn_try(svc->reg, s)) {
        sreg_arm(svc->reg, s, now + SESS_RETRY_MS); /* a call holds the turn: try again */
        return;
    }
    if (sreg_end_of(svc->reg, s, NULL, 0) != PLM_END_NONE) {
        sreg_turn_give(svc->reg, s);
        return;
    }
    if (now >= s->deadline_ms) {
        sess_end_now(svc, s, PLM_END_EXPIRED, "the session's lifetime passed");
        sreg_turn_give(svc->reg, s);
        return;
    }
    if (!sreg_is_claimed(svc->reg, s)) {
        /* never named by a request: closed, not suspended */
        sess_end_now(svc, s, PLM_END_UNCLAIMED, "no request named the session before its first idle timeout");
        sreg_turn_give(svc->reg, s);
        return;
    }
    bool holds;
    const struct plm_provider_ops *ops = svc->provider->ops;
    if (s->idle_ms > 0 && !sreg_is_suspended(svc->reg, s, &holds) && ops->session_suspend) {
        struct plm_err err = {0};
        bool keeps_memory = false;
        if (ops->session_suspend(svc->provider, s->handle, &keeps_memory, &err) < 0) {
            /* a failed suspend is tried again, but a metered session still runs and bills: it
             * must cover another idle period or it is closed (§3.3) */
            struct plm_err perr = {0};
            if (sess_cover_paid(svc, &s->meter, 0, s->idle_ms, &perr) < 0)
                sess_end_now(svc, s, PLM_END_BOUNDARY_FAILED, "a failed suspend left it running past its paid time");
            else
                sreg_arm(svc->reg, s, now + s->idle_ms);
        } else {
            sess_stop_paid(&s->meter); /* a suspended sandbox bills nothing */
            if (holds && !keeps_memory)
                adm_release(svc->adm, s->caller);
            sreg_set_suspended(svc->reg, s, true, holds && keeps_memory);
            sreg_arm(svc->reg, s, s->deadline_ms); /* still ends at its lifetime */
            sess_log("session_suspended", NULL, s, NULL);
        }
    } else if (spend_meter_running(&s->meter)) {
        /* metered and never suspended (a provider without suspend): it bills on, so it covers
         * another idle period from now or ends (§3.3) */
        struct plm_err perr = {0};
        if (sess_cover_paid(svc, &s->meter, 0, s->idle_ms, &perr) < 0)
            sess_end_now(svc, s, PLM_END_CLOSED, "its paid time ran out while it stayed running");
        else
            sreg_arm(svc->reg, s, now + s->idle_ms < s->deadline_ms ? now + s->idle_ms : s->deadline_ms);
    } else {
        sreg_arm(svc->reg, s, s->deadline_ms);
    }
    sreg_turn_give(svc->reg, s);
}

void sess_svc_tick(struct sess_svc *svc, uint64_t now_ms)
{
    struct sreg_due due[32];
    size_t n;
    do {
        n = sreg_due(svc->reg, now_ms, due, sizeof due / sizeof *due);
        for (size_t i = 0; i < n; i++) {
            on_timer(svc, due[i].s, due[i].gen, now_ms);
            sreg_put(svc->reg, due[i].s);
        }
    } while (n == sizeof due / sizeof *due);
}

static void *timer_main(void *arg)
{
    struct sess_svc *svc = arg;
    pthread_mutex_lock(&svc->mu);
    while (!svc->stop) {
        struct timespec until = clock_mono_after(200); /* timers are checked five times a second */
        pthread_cond_timedwait(&svc->cv, &svc->mu, &until);
        if (svc->stop)
            break;
        pthread_mutex_unlock(&svc->mu);
        sess_svc_tick(svc, clock_mono_ms());
        pthread_mutex_lock(&svc->mu);
    }
    pthread_mutex_unlock(&svc->mu);
    return NULL;
}

struct sess_svc *sess_svc_new(const struct plm_session_config *cfg, struct plm_provider *p, struct adm *adm,
                              struct plm_err *err)
{
    if (!p->ops->session_open || !p->ops->session_close) {
        plm_fail(err, 0, PLM_E_INVALID, "SANDBOX_MAX_SESSIONS=%u, but provider %s keeps no sessions; unset it or choose quickjs, docker, microvm or e2b",
                    cfg->max_sessions, p->ops->name);
        return NULL;
    }
    struct sess_svc *svc = calloc(1, sizeof *svc);
    if (!svc) {
        plm_fail(err, ENOMEM, PLM_E_INTERNAL, "out of memory");
        return NULL;
    }
    svc->cfg = *cfg;
    svc->provider = p;
    svc->adm = adm;
    svc->reg = sreg_new(&(struct sreg_cfg){.max_sessions = cfg->max_sessions, .per_caller = cfg->per_caller,
                                           .per_owner = cfg->per_owner});
    pthread_mutex_init(&svc->mu, NULL);
    clock_cond_init(&svc->cv);
    if (!svc->reg || pthread_create(&svc->thread, NULL, timer_main, svc) != 0) {
        plm_fail(err, ENOMEM, PLM_E_INTERNAL, "cannot start the session timer");
        sess_svc_free(svc);
        return NULL;
    }
    svc->thread_started = true;
    return svc;
}

void sess_svc_shutdown(struct sess_svc *svc)
{
    if (!svc)
        return;
    /* Opens from now on are refused; a later call (sess_svc_free) sweeps again for an open that
     * was already past that check. */
    __atomic_store_n(&svc->shut, true, __ATOMIC_RELEASE);
    if (svc->thread_started) {
        pthread_mutex_lock(&svc->mu);
        svc->stop = true;
        pthread_cond_signal(&svc->cv);
        pthread_mutex_unlock(&svc->mu);
        pthread_join(svc->thread, NULL);
        svc->thread_started = false;
    }
    if (!svc->reg)
        return;
    struct sreg_session *all[256];
    size_t n;
    do { /* every live session ends SHUTDOWN once its call in flight (if any) is over */
        n = sreg_all(svc->reg, all, sizeof all / sizeof *all);
        size_t ended = 0;
        for (size_t i = 0; i < n; i++) {
            /* The turn, however long the call in flight takes (each call is bounded by the 5-minute
             * ceiling): a sandbox is never closed under a running call. Queued waiters and the
             * call itself then find the session ended. */
            while (!sreg_turn_try(svc->reg, all[i])) {
                struct timespec ts = {0, 50 * 1000 * 1000};
                nanosleep(&ts, NULL);
            }
            if (all[i]->handle) {
                sess_end_now(svc, all[i], PLM_END_SHUTDOWN, "the daemon is shutting down");
                ended++;
            }
            sreg_remove(svc->reg, all[i]);
            sreg_turn_give(svc->reg, all[i]);
            sreg_put(svc->reg, all[i]);
        }
        (void)ended;
    } while (n == sizeof all / sizeof *all);
}

void sess_svc_free(struct sess_svc *svc)
{
    if (!svc)
        return;
    sess_svc_shutdown(svc);
    pthread_mutex_lock(&svc->mu); /* a close thread left alone still ends its session (shutdown waited for its turn) */
    while (svc->closers)
        pthread_cond_wait(&svc->cv, &svc->mu);
    pthread_mutex_unlock(&svc->mu);
    sreg_free(svc->reg);
    pthread_cond_destroy(&svc->cv);
    pthread_mutex_destroy(&svc->mu);
    free(svc);
}

uint32_t sess_svc_open_count(struct sess_svc *svc)
{
    struct sreg_counts c;
    sreg_counts(svc->reg, &c);
    return c.open;
}

bool sess_svc_env(const struct sess_svc *svc, struct plm_payload_env *e)
{
    memset(e, 0, sizeof *e);
    if (!svc)
        return false;
    if (svc->provider->ops->session_env)
        svc->provider->ops->session_env(svc->provider, e);
    return true;
}

void sess_svc_describe(const struct sess_svc *svc, Plimsoll__V1__DescribeResponse *m)
{
    struct plm_payload_env e;
    if (!sess_svc_env(svc, &e))
        return;
    m->supports_sessions = true;
    m->session_lifetime_ms = (uint32_t)svc->cfg.lifetime_ms;
    m->session_idle_timeout_ms = (uint32_t)svc->cfg.idle_ms;
    m->max_sessions_per_caller = svc->cfg.per_caller;
    m->max_sessions_per_owner = svc->cfg.per_owner;
    /* built with the wire layer's own allocator so protobuf_c_message_free_unpacked frees it */
    struct plm_describe d = {.sandbox = "", .policy = "", .javascript = e};
    Plimsoll__V1__DescribeResponse *tmp = wire_describe_to_pb(&d, PLM_PROTOCOL);
    if (tmp) {
        m->session_environment = tmp->javascript_environment;
        tmp->javascript_environment = NULL;
        protobuf_c_message_free_unpacked(&tmp->base, NULL);
    }
}
