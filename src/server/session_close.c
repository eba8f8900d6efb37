/* session_close.c: CloseSession (sessions.md §2.3), its wait bounded by the caller's context.
 * The sandbox is closed on a thread of its own (the closer) while the handler waits for it to be
 * gone, until the caller's deadline passes or the caller goes away. Then the answer is the
 * context's code, unmarked ("still ending; close it again"), and the entry stays: the closer ends
 * the session and gives its turn back, and a later close collects the count (checklist item 37).
 * Owns: one close_job per close that got the turn; the handler frees it when it waited to the
 * end, the closer when the handler gave up first (the `abandoned` hand-over, under the job's
 * mutex). Invariant: the turn is held from step 3 until the entry is removed or the closer
 * finished, so no call and no timer touches the session while its sandbox goes. */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../core/clock.h"
#include "log.h"
#include "session_int.h"

#define CLOSE_POLL_MS 100u /* how often a waiting close asks whether its caller is still there */

struct close_job {
    struct sess_svc *svc;
    struct sreg_session *s;
    pthread_t thread;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    bool gone;      /* the closer is done: the sandbox is gone */
    bool abandoned; /* the handler stopped waiting: the closer gives the turn back and frees */
};

static void job_free(struct close_job *j)
{
    pthread_cond_destroy(&j->cv);
    pthread_mutex_destroy(&j->mu);
    free(j);
}

/* The closer's end when nobody waits for it any more: the turn goes back (the entry stays, ended
 * CLOSED, for a later close to collect), then the service may be freed. */
static void closer_left_alone(struct close_job *j)
{
    struct sess_svc *svc = j->svc;
    sreg_turn_give(svc->reg, j->s);
    sreg_put(svc->reg, j->s);
    job_free(j);
    sess_closer_done(svc);
}

static void *closer_main(void *arg)
{
    struct close_job *j = arg;
    sess_end_now(j->svc, j->s, PLM_END_CLOSED, "closed by its caller"); /* 4, 5: waits for the sandbox */
    pthread_mutex_lock(&j->mu);
    j->gone = true;
    bool abandoned = j->abandoned;
    pthread_cond_signal(&j->cv);
    pthread_mutex_unlock(&j->mu);
    if (abandoned)
        closer_left_alone(j);
    return NULL;
}

static struct close_job *job_start(struct sess_svc *svc, struct sreg_session *s)
{
    struct close_job *j = calloc(1, sizeof *j);
    if (!j)
        return NULL;
    *j = (struct close_job){.svc = svc, .s = s};
    pthread_mutex_init(&j->mu, NULL);
    clock_cond_init(&j->cv);
    sess_closer_begin(svc);
    if (pthread_create(&j->thread, NULL, closer_main, j) != 0) {
        sess_closer_done(svc);
        job_free(j);
        return NULL;
    }
    return j;
}

/* Step 5: 0 once the sandbox is gone (the job is freed, the turn still held); -1 with err the
 * context's code, unmarked, when the caller's context ended first: then the closer owns the job,
 * the turn and the handler's reference to the entry. */
static int wait_gone(struct close_job *j, const struct rpc_call *call, struct plm_err *err)
{
    pthread_mutex_lock(&j->mu);
    for (;;) {
        if (j->gone)
            break;
        struct plm_err ended = {0};
        if (rpc_call_ended(call, &ended) < 0) {
            sess_log("session_close_left_ending", call->request_id, j->s,
                     json_pack("{s:s}", "code", ended.kind == PLM_E_CANCELED ? "canceled" : "deadline_exceeded"));
            j->abandoned = true;
            pthread_t t = j->thread;
            pthread_mutex_unlock(&j->mu);
            pthread_detach(t);
            return plm_fail(err, 0, ended.kind,
                            "the session is still ending; close it again to collect its count");
        }
        uint64_t now = clock_mono_ms(), left = rpc_call_left_ms(call, now);
        struct timespec until = clock_mono_at(now + (left < CLOSE_POLL_MS ? left : CLOSE_POLL_MS));
        pthread_cond_timedwait(&j->cv, &j->mu, &until);
    }
    pthread_mutex_unlock(&j->mu);
    pthread_join(j->thread, NULL);
    sess_closer_done(j->svc);
    job_free(j);
    return 0;
}

/* Steps 4 and 5: the sandbox closed and gone, or -1 when the caller's context ended first (then
 * the turn is the closer's). Without a thread for the closer, the close waits here unbounded. */
static int close_sandbox(struct sess_svc *svc, struct sreg_session *s, const struct rpc_call *call,
                         struct plm_err *err)
{
    if (!s->handle)
        return 0; /* it had already ended: nothing to wait for */
    struct close_job *j = job_start(svc, s);
    if (!j) {
        sess_end_now(svc, s, PLM_END_CLOSED, "closed by its caller");
        return 0;
    }
    return wait_gone(j, call, err);
}

static void answer_closed(struct sess_svc *svc, struct sreg_session *s, const struct rpc_call *call,
                          struct rpc_answer *ans)
{
    sreg_remove(svc->reg, s); /* 6 */
    uint64_t calls;
    char last[PLM_HEX_SHA256];
    sreg_chain_get(svc->reg, s, &calls, last);
    enum plm_session_end end = sreg_end_of(svc->reg, s, NULL, 0);
    sreg_turn_give(svc->reg, s);
    Plimsoll__V1__CloseSessionResponse out = PLIMSOLL__V1__CLOSE_SESSION_RESPONSE__INIT;
    out.session = s->fp;
    out.calls = calls;
    out.last_record_sha256 = last;
    out.ended = (Plimsoll__V1__SessionEnd)(end == PLM_END_NONE ? PLM_END_CLOSED : end);
    json_t *x = json_object();
    json_object_set_new(x, "calls", json_integer((json_int_t)calls));
    json_object_set_new(x, "ended", json_string(plm_session_end_name((enum plm_session_end)out.ended)));
    sess_log("session_closed", call->request_id, s, x);
    rpc_encode(ans, &out.base, call->fmt, call->request_id);
}

/* Steps 3 to 6 on a found entry. Returns false when the entry's reference went to the closer
 * (the caller's context ended first); otherwise it stays the caller's to put. */
static bool close_found(struct sess_svc *svc, struct sreg_session *s, const struct rpc_call *call,
                        struct rpc_answer *ans)
{
    struct plm_err err = {0};
    if (sess_turn_take(svc, s, call, &err) < 0) { /* 3 */
        sess_error(ans, &err, call->request_id, NULL);
        return true;
    }
    if (sreg_is_removed(svc->reg, s)) { /* another close collected it while this one waited */
        sreg_turn_give(svc->reg, s);
        sess_not_found(ans, call->request_id);
        return true;
    }
    sreg_arm(svc->reg, s, 0); /* 4 */
    if (close_sandbox(svc, s, call, &err) < 0) {
        sess_error(ans, &err, call->request_id, NULL);
        return false;
    }
    answer_closed(svc, s, call, ans);
    return true;
}

void rpc_close_session(const struct rpc_env *env, const struct rpc_call *call, struct rpc_answer *ans)
{
    struct plm_err err = {0};
    Plimsoll__V1__CloseSessionRequest *m = (void *)rpc_decode(&plimsoll__v1__close_session_request__descriptor,
                                                              call->fmt, call->body, call->len, NULL, &err);
    if (!m) {
        rpc_decode_failed(ans, &err, call->request_id);
        return;
    }
    struct sess_svc *svc = env->sessions;
    struct sreg_session *s = NULL;
    if (sess_check_protocol(m->protocol, &err) < 0) /* 1 */
        sess_error(ans, &err, call->request_id, NULL);
    else if (!svc || !(s = sreg_lookup(svc->reg, m->session_id, call->who->id, clock_mono_ms()))) /* 2, 3 */
        sess_not_found(ans, call->request_id);
    else if (!close_found(svc, s, call, ans))
        s = NULL; /* the closer puts it */
    if (s)
        sreg_put(svc->reg, s);
    protobuf_c_message_free_unpacked(&m->base, NULL);
}
