/* broker_run.h: the per-run broker state shared by the files of the broker core (private to
 * src/broker; transports see only broker.h).
 *   broker.c       the run's lifecycle (new, end, hold, release) and its trace
 *   broker_http.c  libcurl: the prepared header sets, the handle pool, one hardened transfer
 *   broker_call.c  brk_call: the checks of broker.h in order, then the round trip
 * broker.c and broker_call.c both call down to broker_http.c, which calls neither. */
#pragma once
#include <curl/curl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "broker.h"

struct row {
    uint32_t seq;
    uint32_t route; /* index into g->routes */
    int status;
    bool delivered;
    uint64_t req_bytes, resp_bytes, latency_us;
};

struct brk_run {
    pthread_mutex_t mu;
    pthread_cond_t idle;          /* signalled whenever inflight drops */
    struct brk_profile *g;        /* frozen deep copy, no secrets; immutable */
    struct brk_secret cred;       /* the run's bearer token; unset for a token-less profile */
    struct curl_slist *hdr_body;  /* headers for a call with a body (carry the token) */
    struct curl_slist *hdr_empty; /* headers without a body, and for probes */
    atomic_bool ended;
    atomic_uint refs; /* the owner's (brk_run_free) plus one per brk_run_hold */
    uint32_t inflight;
    uint32_t calls;     /* budget: every attempt that got past the capacity check */
    uint32_t *cap_used; /* per g->caps */
    /* circuit breaker */
    uint64_t open_until_ms; /* monotonic; closed when now >= it */
    bool quota_trip;        /* the window came from a 429: no probing until it ends */
    bool probing;           /* an elected probe is in flight */
    bool probed;
    uint64_t last_probe_ms;
    /* trace */
    struct row *rows; /* BRK_TRACE_ROWS, allocated on the first record */
    size_t n_rows;
    uint64_t seq, allowed, denied, shed, dropped;
    /* libcurl handles not in use */
    CURL *pool[BRK_CONCURRENCY];
    size_t n_pool;
    uint32_t call_timeout_ms, connect_timeout_ms, probe_timeout_ms;
};

/* ---- broker_http.c ---- */

/* The complete header set of broker.h step 11, with the run's credential when it has one; NULL
 * when out of memory. Released with brk_headers_free, which wipes the credential first. */
struct curl_slist *brk_headers_build(const struct brk_secret *cred, bool with_body);
void brk_headers_free(struct curl_slist *l);

/* A pooled handle with its options reset (the connection cache stays), or a new one; NULL when
 * out of memory. brk_handle_put returns it to the pool or frees it; NULL is a no-op. */
CURL *brk_handle_get(struct brk_run *r);
void brk_handle_put(struct brk_run *r, CURL *h);

/* One transfer's response body: capped at BRK_RESPONSE_MAX, kept or discarded (probes). */
struct brk_xfer {
    struct brk_run *run;
    uint8_t *buf; /* NULL when discarding */
    size_t len, cap;
    bool keep;
};
/* Frees the kept body still owned (cleanup attribute target). */
void brk_xfer_done(struct brk_xfer *x);

/* The hardened options every upstream request gets. */
void brk_http_setup(CURL *h, const char *url, struct curl_slist *headers, struct brk_xfer *x, uint32_t timeout_ms,
                    uint32_t connect_ms);
/* origin + target, NUL-terminated; NULL when out of memory. */
char *brk_join_url(const char *origin, const char *target, size_t tlen);
/* GET <health> with the run's token and the probe timeout; neither traced nor charged.
 * Returns the status (0 on any transport failure) and the Retry-After seconds. */
int brk_probe(struct brk_run *r, CURL *h, long long *retry_after);
