/* profiles.h: the grant profiles of PLIMSOLL_GRANTS_FILE (providers.md §5.1; format in
 * docs/grants.md), loaded once and immutable afterwards.
 *
 * Owns: every profile and its secrets. Invariant: a loaded profile passed every rule of §5.1 at
 * load, and nothing changes it later, so the check "again before every run" holds by
 * construction; a run works on its own deep copy (brk_run_new), so even freeing the profiles
 * while runs are live is safe. Secrets (static tokens, JWT keys) are read from the environment at
 * load, live only in struct brk_secret, and are wiped when the profiles are freed.
 * Thread-safety: read-only after load; any number of threads may read concurrently. */
#pragma once
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "../core/err.h"
#include "route.h"
#include "secret.h"

#define BRK_MAX_CALLS_DEFAULT 256u
#define BRK_MAX_CALLS_MAX 100000u
#define BRK_GRANTS_FILE_MAX (1u * 1024 * 1024) /* bytes in PLIMSOLL_GRANTS_FILE (our cap) */
#define BRK_PROFILES_MAX 1024                  /* profiles in one file (our cap) */
#define BRK_ROUTES_MAX 256                     /* allow entries per profile (our cap) */
#define BRK_CALLERS_MAX 1024                   /* allowed_callers per profile (our cap) */
#define BRK_SCOPES_MAX 64                      /* scopes per profile (our cap) */
#define BRK_STRING_MAX 256                     /* caller ids, scopes, issuer, audience (our cap) */
#define BRK_GLOBAL_MAX 64                      /* bytes in the JS global name (our cap) */
#define BRK_PREAMBLE_MAX (64u * 1024)          /* bytes of preamble JS (our cap) */
#define BRK_JWT_SECRET_MIN 32                  /* HS256 key bytes, RFC 7518 §3.2 */

enum brk_token_type {
    BRK_TOKEN_NONE = 0, /* no "token": no Authorization header is sent */
    BRK_TOKEN_STATIC,   /* a fixed bearer token read from an environment variable */
    BRK_TOKEN_JWT,      /* an HS256 JWT minted per run, sub = the caller */
};

/* The reference's advice keys (docs/grants.md, "Keys kept for the reference"): validated and
 * kept; this daemon computes no advice, so they change nothing at run time. */
enum brk_advice { BRK_ADVICE_OFF = 0, BRK_ADVICE_OPERATOR, BRK_ADVICE_CALLER };
enum brk_retention { BRK_RETENTION_NONE = 0, BRK_RETENTION_AGGREGATE, BRK_RETENTION_DETAILED };
#define BRK_CATALOG_MAX 1024   /* catalog routes per profile (our cap) */
#define BRK_BATCH_MAX 256      /* batch_of entries per profile, and singles per entry (our cap) */
#define BRK_JWT_TTL_MAX 86400u /* token.ttl_sec (our cap: a day) */

/* batch_of: one route that fetches in one call what `singles` fetch one by one. */
struct brk_batch {
    struct brk_route batch;
    struct brk_route *singles;
    size_t n_singles;
};

/* A per-route call cap (§5.3 step 7), keyed by METHOD and lower-cased path. */
struct brk_cap {
    enum brk_method method;
    char *path_lower; /* owned */
    uint32_t max;     /* 1..BRK_MAX_CALLS_MAX */
};

struct brk_profile {
    char *name;               /* [A-Za-z0-9._-], 1..LIM_GRANT_PROFILE_MAX bytes */
    char *origin;             /* canonical "scheme://host[:port]", lower-case scheme and host */
    struct brk_route *routes; /* the allowlist, in file order; empty = deny all */
    size_t n_routes;
    long *route_cap;      /* per route: index into caps, or -1 */
    struct brk_cap *caps; /* distinct capped (METHOD, lower path) keys */
    size_t n_caps;
    char **callers; /* allowed_callers, non-empty */
    size_t n_callers;
    bool any_caller; /* allowed_callers lists "*": every authenticated caller */
    char **scopes; /* requested scopes, may be empty */
    size_t n_scopes;
    enum brk_token_type token_type;
    struct brk_secret secret; /* STATIC: the bearer token; JWT: the HMAC key; else unset */
    char *token_env;          /* the variable it came from (a name, not a secret) */
    char *jwt_issuer;         /* JWT only */
    char *jwt_audience;       /* JWT only */
    uint32_t jwt_ttl_s;       /* JWT only: token.ttl_sec; 0 = the run's time budget */
    char *jwt_key_id;         /* JWT only: token.key_id, the "kid" header; NULL = none */
    uint32_t max_calls;       /* 1..BRK_MAX_CALLS_MAX (0 in the file means the default 256) */
    bool has_health;
    struct brk_route health; /* a concrete GET route when has_health */
    char *global;            /* JS identifier, default "host" */
    char *preamble;          /* JS appended after the client; "" when absent */
    /* profile_ref.c: keys of the reference's file with no run-time effect here (yet) */
    struct brk_route *catalog; /* "catalog": the API's full route list (grants nothing) */
    size_t n_catalog;
    struct brk_batch *batch_of; /* "batch_of" */
    size_t n_batch_of;
    enum brk_advice advice;
    enum brk_retention advice_retention;
    bool allow_in_sessions; /* sessions do not exist yet; kept for when they do */
};

struct brk_profiles {
    struct brk_profile *v;
    size_t n;
};

/* The environment lookup the loader uses; NULL selects getenv(). */
typedef const char *(*brk_getenv_fn)(const char *name);

/* Loads and validates the file. Any problem fails the whole load (fail closed) with
 * PLM_E_INVALID and a message naming the file, the profile and the field, e.g.
 * `grants file "/etc/g.json": profile "acme": base_url: must not have a path`. */
struct brk_profiles *brk_profiles_load(const char *path, brk_getenv_fn getenv_fn, struct plm_err *err);
/* The same from a buffer (len bytes of JSON); messages start at `profile "..."`. A
 * preamble_file is refused here (there is no grants directory to resolve it in). */
struct brk_profiles *brk_profiles_parse(const char *json, size_t len, brk_getenv_fn getenv_fn, struct plm_err *err);
/* The same with `dir` as the grants file's directory, in which preamble_file resolves. */
struct brk_profiles *brk_profiles_parse_in(const char *json, size_t len, const char *dir, brk_getenv_fn getenv_fn,
                                           struct plm_err *err);
/* Wipes every secret and frees everything. Accepts NULL. */
void brk_profiles_free(struct brk_profiles *ps);

/* The profile `name` if `caller` is listed in its allowed_callers; NULL when the profiles, the
 * name or the caller is missing or empty, the name is unknown, or the caller is not allowed. The
 * cases are indistinguishable on purpose: report them all with brk_profile_select's words. */
const struct brk_profile *brk_profile_for(const struct brk_profiles *ps, const char *name, const char *caller);
/* brk_profile_for with the refusal of wire.md §11.2 step 13: PLM_E_PERMISSION, refusal
 * permission, `grant_profile "<name>" is not available to this caller` in every case. */
int brk_profile_select(const struct brk_profiles *ps, const char *name, const char *caller,
                       const struct brk_profile **out, struct plm_err *err);
bool brk_profile_caller_allowed(const struct brk_profile *p, const char *caller);

/* A deep copy; with_secret false leaves the copy's secret unset. NULL out of memory. */
struct brk_profile *brk_profile_clone(const struct brk_profile *p, bool with_secret);
/* profile_ref.c: parses catalog, batch_of, advice, advice_retention, allow_in_sessions and
 * preamble_file (into p->preamble, resolved in dir, which may be NULL) from profile object o.
 * 0; -1 with the field in field[] and the reason in why[]; -2 out of memory. */
int brk_ref_keys_parse(const void *o, const char *dir, struct brk_profile *p, char *field, size_t fcap, char *why,
                       size_t wcap);
void brk_ref_keys_done(struct brk_profile *p);
int brk_ref_keys_copy(struct brk_profile *dst, const struct brk_profile *src); /* -1 out of memory */
const char *brk_advice_name(enum brk_advice a);
const char *brk_retention_name(enum brk_retention r);

/* Frees a clone (wiping its secret). Accepts NULL. */
void brk_profile_free(struct brk_profile *p);
