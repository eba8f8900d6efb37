/* err.h: the one error object every fallible cross-file call fills.
 * Owns: nothing (fixed-size, never allocates, so it works out of memory and in the worker).
 * Invariant: a refusal (nothing ran) carries a non-zero `refusal`; an error that may follow
 * execution carries PLM_REFUSAL_NONE. The two never merge: only src/wire maps them to Connect. */
#pragma once
#include <stdarg.h>
#include <stdbool.h>

enum plm_err_kind {
    PLM_E_NONE = 0,
    PLM_E_INVALID,         /* malformed or out-of-bounds request            -> invalid_argument */
    PLM_E_PROTOCOL_UNSET,  /* protocol 0                                     -> invalid_argument */
    PLM_E_PROTOCOL,        /* another protocol number                        -> unimplemented */
    PLM_E_UNSUPPORTED,     /* the provider structurally cannot do it         -> unimplemented */
    PLM_E_DISABLED,        /* no provider configured                         -> failed_precondition */
    PLM_E_ISOLATION,       /* current tier below the floor                   -> failed_precondition */
    PLM_E_ENVIRONMENT,     /* software rule cannot be met                    -> failed_precondition */
    PLM_E_CAPACITY,        /* admission shed                                 -> resource_exhausted */
    PLM_E_UNAUTHENTICATED, /* no or bad credential                           -> unauthenticated */
    PLM_E_PERMISSION,      /* scope or grant not available                   -> permission_denied */
    PLM_E_MISMATCH,        /* evidence below floor on an answer (client)     -> data_loss */
    PLM_E_DEADLINE,        /*                                                -> deadline_exceeded */
    PLM_E_CANCELED,        /*                                                -> canceled */
    PLM_E_UNAVAILABLE,     /*                                                -> unavailable */
    PLM_E_INTERNAL,        /* infrastructure fault; detail logged, never sent -> internal */
    PLM_E_NOT_FOUND,       /* no such session for this caller                -> not_found */
    PLM_E_ENDED,           /* the session has ended (sessions.md §2.2 step 8) -> failed_precondition */
};

/* Numbers equal plimsoll.v1.NotDispatchedReason on the wire. */
enum plm_refusal {
    PLM_REFUSAL_NONE = 0, /* not a refusal: the call may have run */
    PLM_REFUSAL_REQUEST = 1,
    PLM_REFUSAL_PERMISSION = 2,
    PLM_REFUSAL_PROTOCOL = 3,
    PLM_REFUSAL_UNSUPPORTED = 4,
    PLM_REFUSAL_ISOLATION = 5,
    PLM_REFUSAL_CAPACITY = 6,
    PLM_REFUSAL_ENVIRONMENT = 7,
};

struct plm_err {
    int errnum;                /* errno at the failure, 0 if none */
    enum plm_err_kind kind;
    enum plm_refusal refusal;  /* PLM_REFUSAL_NONE unless provably nothing ran */
    char msg[512];             /* "outer: inner: cause", truncated, never allocated */
};

/* Fills err (if non-NULL) and returns -1, so callers write `return plm_err_set(...)`. */
int plm_err_set(struct plm_err *err, int errnum, enum plm_err_kind kind, enum plm_refusal refusal,
                const char *fmt, ...) __attribute__((format(printf, 5, 6)));
/* A refusal: provably nothing ran, so the answer carries NotDispatched `why`. An infrastructure
 * kind (PLM_E_INTERNAL) never claims that: it is stored as a failure whatever `why` says. */
int plm_refuse(struct plm_err *err, enum plm_err_kind kind, enum plm_refusal why, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
/* A failure: the call may have run, or the infrastructure broke; never marked not dispatched. */
int plm_fail(struct plm_err *err, int errnum, enum plm_err_kind kind, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
/* What counters and audit lines use: the error's own mark and kind, never where it was raised. */
bool plm_err_is_refusal(const struct plm_err *err);
/* Prefixes the existing message with "context: ", keeping kind and refusal; returns -1. */
int plm_err_wrap(struct plm_err *err, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void plm_err_clear(struct plm_err *err);

/* The short names of wire.md §3.3 ("request", "isolation", ...); "unknown" for NONE. */
const char *plm_refusal_name(enum plm_refusal r);
