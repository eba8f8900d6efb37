/* rpc.h: the Connect procedures behind the HTTP layer: decode, the Run check order of wire.md
 * §11.2, dispatch, record stamping and encoding. Knows nothing of HTTP. */
#pragma once
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "../core/admission.h"
#include "../core/provider.h"
#include "auth.h"

#define PLM_PROTOCOL 3

enum rpc_fmt { RPC_JSON, RPC_PROTO };

/* Host calls of granted runs, per profile (the loaded profiles' order), added when a grant ends. */
struct rpc_host_calls {
    atomic_uint_fast64_t allowed, denied, shed;
};

struct rpc_counters {
    atomic_uint_fast64_t dispatched; /* runs handed to the provider */
    atomic_uint_fast64_t failed;     /* infrastructure failures of dispatched runs */
    atomic_uint_fast64_t refused;    /* refusals before dispatch */
    struct rpc_host_calls *host_calls; /* one per loaded grant profile, or NULL */
};

struct brk_profiles;
struct sess_svc;
struct ui_ring;
struct describe_cache;

struct rpc_env {
    struct plm_provider *provider;
    const struct brk_profiles *grants; /* NULL: no PLIMSOLL_GRANTS_FILE */
    struct adm *adm;
    struct rpc_counters *counters;
    struct sess_svc *sessions; /* NULL: sessions off (session_rpc.h) */
    struct ui_ring *ring; /* PLIMSOLL_UI=1: the last run cards for the page (ui_ring.h); else NULL */
    struct spend *spend;  /* the paid allowance (core/spend.h); NULL: the provider bills nothing */
    struct describe_cache *describe_cache; /* describe.h; NULL: Describe is encoded on every call */
};

struct rpc_answer {
    unsigned status;
    enum rpc_fmt fmt;   /* content type of a 200; errors are always JSON */
    char *body;         /* malloc'd */
    size_t len;
    bool pre_handler;   /* written before a procedure handler ran: add Plimsoll-Not-Dispatched */
    enum plm_refusal header_reason;
};

/* Fills ans with a Connect error for err; internal errors are logged under a fresh id and the
 * message replaced (wire.md §7.3). */
void rpc_error(struct rpc_answer *ans, const struct plm_err *err, const char *request_id);

/* One procedure call: who asks, what it sent, and its context. The context ends when the caller's
 * deadline (the Connect-Timeout-Ms header, from the moment its head arrived) passes or when the
 * caller went away (its connection closed); a procedure asks rpc_call_ended at the points the
 * spec names (sessions.md §2.1 steps 10 and 12, §2.2 step 7, §2.3 steps 3 and 5) and bounds its
 * waits by rpc_call_left_ms. The pointers must outlive the call. */
#define RPC_NO_DEADLINE UINT64_MAX
struct rpc_call {
    const struct principal *who;
    const char *request_id;
    enum rpc_fmt fmt;
    const char *body;
    size_t len;
    uint64_t deadline_ms;            /* CLOCK_MONOTONIC ms; RPC_NO_DEADLINE: none */
    bool (*caller_gone)(void *cls);  /* NULL: never known gone (tests, the loop thread) */
    void *gone_cls;
};
/* A call with no deadline and no way to learn the caller went away. */
struct rpc_call rpc_call_plain(const struct principal *who, const char *request_id, enum rpc_fmt fmt,
                               const char *body, size_t len);
/* 0 while the caller still waits; else -1 with err a refusal marked capacity (nothing was done
 * by the check): canceled (the caller went away) or deadline_exceeded (its deadline passed). */
int rpc_call_ended(const struct rpc_call *c, struct plm_err *err);
/* Milliseconds left before the deadline at `now` (UINT64_MAX without one, 0 once passed). */
uint64_t rpc_call_left_ms(const struct rpc_call *c, uint64_t now);
/* The Connect-Timeout-Ms value (the Connect protocol: 1 to 10 ASCII digits, nothing else, no sign
 * or space inside); -1 otherwise. */
int rpc_parse_timeout_ms(const char *v, size_t n, uint64_t *ms);

/* Every procedure has this one signature (the HTTP route table, http.c). */
typedef void rpc_proc_fn(const struct rpc_env *env, const struct rpc_call *call, struct rpc_answer *ans);

rpc_proc_fn rpc_run;
/* Run in two halves, so the HTTP loop can answer refusals itself and hand only admitted runs to
 * a worker thread: rpc_run_begin decodes, checks and admits (no provider call, nothing that
 * waits) and returns NULL with ans filled when it answered; otherwise rpc_run_finish dispatches
 * (provider, grant) and answers, and rpc_run_abandon gives an unfinished run's slot back. The
 * call is copied; what it points at must outlive the run. rpc_run is both at once. */
struct rpc_run;
struct rpc_run *rpc_run_begin(const struct rpc_env *env, const struct rpc_call *call, struct rpc_answer *ans);
void rpc_run_finish(struct rpc_run *r, struct rpc_answer *ans);
void rpc_run_abandon(struct rpc_run *r);
rpc_proc_fn rpc_describe;
