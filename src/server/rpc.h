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

void rpc_run(const struct rpc_env *env, const struct principal *who, const char *request_id, enum rpc_fmt fmt,
             const char *body, size_t len, struct rpc_answer *ans);
/* Run in two halves, so the HTTP loop can answer refusals itself and hand only admitted runs to
 * a worker thread: rpc_run_begin decodes, checks and admits (no provider call, nothing that
 * waits) and returns NULL with ans filled when it answered; otherwise rpc_run_finish dispatches
 * (provider, grant) and answers, and rpc_run_abandon gives an unfinished run's slot back. `who`
 * and `request_id` must outlive the run. rpc_run is both at once. */
struct rpc_run;
struct rpc_run *rpc_run_begin(const struct rpc_env *env, const struct principal *who, const char *request_id,
                              enum rpc_fmt fmt, const char *body, size_t len, struct rpc_answer *ans);
void rpc_run_finish(struct rpc_run *r, struct rpc_answer *ans);
void rpc_run_abandon(struct rpc_run *r);
void rpc_describe(const struct rpc_env *env, enum rpc_fmt fmt, const char *body, size_t len,
                  const char *request_id, struct rpc_answer *ans);
void rpc_session_unsupported(struct rpc_answer *ans, const char *request_id);
