/* broker_call.c: brk_call, the one guest call through the broker (providers.md §5.3), as the
 * named stages of broker.h's check order; then the round trip and the delivery of its answer.
 * Trusts: nothing from the guest (method, target, body are hostile) and nothing from the upstream
 * (status, headers and body are bounded and sanitised before the guest sees them).
 * Ownership: a call's slot and libcurl handle are one `struct lease`, released at scope exit on
 * every path: the handle back to the pool first, then the slot (brk_run_release frees the pool
 * once no slot is held, so the order is what keeps the pool alive). */
#include "../core/clock.h"
#include "broker_run.h"

#include <stdlib.h>
#include <string.h>

#include "../core/cleanup.h"
#include "route.h"

/* ---- replies ------------------------------------------------------------------------- */

void brk_reply_done(struct brk_reply *r)
{
    if (!r)
        return;
    free(r->body);
    free(r->ct_owned);
    *r = (struct brk_reply){0};
}

/* A broker answer: "<msg>\n" as text/plain. Out of memory leaves the body empty; the status
 * still tells the guest what happened. */
static void answer(struct brk_reply *out, int status, const char *msg)
{
    size_t n = strlen(msg);
    out->status = status;
    out->content_type = BRK_CT_TEXT;
    out->body = malloc(n + 1);
    if (out->body) {
        memcpy(out->body, msg, n);
        out->body[n] = '\n';
        out->len = n + 1;
    }
}

/* The content type the guest sees: the upstream's when it is non-empty, short and free of
 * control characters; otherwise application/octet-stream. */
static void set_content_type(struct brk_reply *out, const char *ct)
{
    out->content_type = BRK_CT_OCTET;
    if (!ct || !*ct)
        return;
    size_t n = strlen(ct);
    if (n > 255)
        return;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)ct[i];
        if (c < 0x20 || c >= 0x7f)
            return;
    }
    out->ct_owned = strdup(ct);
    if (out->ct_owned)
        out->content_type = out->ct_owned;
}

/* ---- bookkeeping (all under mu) ------------------------------------------------------ */

static void record_locked(struct brk_run *r, size_t route, int status, bool delivered, uint64_t req, uint64_t resp,
                          uint64_t lat_us)
{
    r->allowed++;
    uint64_t seq = ++r->seq;
    if (!r->rows)
        r->rows = calloc(BRK_TRACE_ROWS, sizeof *r->rows);
    if (!r->rows || r->n_rows >= BRK_TRACE_ROWS) {
        r->dropped++;
        return;
    }
    r->rows[r->n_rows++] = (struct row){
        .seq = (uint32_t)seq,
        .route = (uint32_t)route,
        .status = status,
        .delivered = delivered,
        .req_bytes = req,
        .resp_bytes = resp,
        .latency_us = lat_us,
    };
}

/* Opens (or widens; a window never shrinks) the breaker for retry_after seconds. */
static void trip_locked(struct brk_run *r, long long retry_after_s, bool quota)
{
    if (retry_after_s < BRK_RETRY_AFTER_MIN_S)
        retry_after_s = BRK_RETRY_AFTER_MIN_S;
    if (retry_after_s > BRK_RETRY_AFTER_MAX_S)
        retry_after_s = BRK_RETRY_AFTER_MAX_S;
    uint64_t now = clock_mono_ms(), until = now + (uint64_t)retry_after_s * 1000u;
    if (r->open_until_ms <= now)
        r->quota_trip = false; /* a fresh window: only this trip's cause counts */
    if (until > r->open_until_ms)
        r->open_until_ms = until;
    if (quota)
        r->quota_trip = true;
}

/* ---- the lease: one slot and one handle ---------------------------------------------- */

struct lease {
    struct brk_run *r;
    CURL *h;     /* NULL until the breaker's probe or the round trip takes one */
    bool slot;   /* one of the run's BRK_CONCURRENCY slots is held */
    bool denied; /* the call was refused after taking its slot: counted as denied */
};

static void lease_end(struct lease *l)
{
    brk_handle_put(l->r, l->h);
    if (!l->slot)
        return;
    pthread_mutex_lock(&l->r->mu);
    if (l->denied)
        l->r->denied++;
    l->r->inflight--;
    pthread_cond_broadcast(&l->r->idle);
    pthread_mutex_unlock(&l->r->mu);
}

/* A stage's refusal: the status and message the guest gets; status 0 lets the call go on. */
struct verdict {
    int status;
    const char *msg;
};
#define GO_ON ((struct verdict){0, NULL})

static struct verdict refuse(struct lease *l, int status, const char *msg)
{
    l->denied = true;
    return (struct verdict){status, msg};
}

/* ---- the checks, in broker.h's order ------------------------------------------------- */

/* Steps 2-4: not ended, a slot (never waited for; does not spend the budget), then the budget,
 * counted first so that refused attempts spend it too. */
/* noinline: inlined into brk_call under ASan, GCC 12 reports a false stringop-overflow on the
 * atomic load below (-Werror stops the sanitizer build). */
__attribute__((noinline)) static struct verdict admit(struct lease *l)
{
    struct brk_run *r = l->r;
    struct verdict v = GO_ON;
    pthread_mutex_lock(&r->mu);
    if (atomic_load(&r->ended)) {
        r->denied++;
        v = (struct verdict){503, BRK_MSG_ENDED};
    } else if (r->inflight >= BRK_CONCURRENCY) {
        r->denied++;
        v = (struct verdict){429, BRK_MSG_CAPACITY};
    } else {
        r->inflight++;
        l->slot = true;
        if (r->calls < UINT32_MAX)
            r->calls++;
        if (r->calls > r->g->max_calls)
            v = refuse(l, 429, BRK_MSG_BUDGET);
    }
    pthread_mutex_unlock(&r->mu);
    return v;
}

/* Step 7: every capped entry the call matches is charged, all or nothing. */
static struct verdict charge_caps(struct lease *l, const struct brk_route *route, const char *t, size_t tlen)
{
    const struct brk_profile *g = l->r->g;
    if (g->n_caps == 0)
        return GO_ON;
    size_t segs = 0;
    brk_target_ok(t, tlen, &segs);
    long hit[BRK_ROUTES_MAX];
    size_t n_hit = 0;
    for (size_t i = 0; i < g->n_routes; i++) {
        long c = g->route_cap[i];
        if (c < 0 || !brk_route_match(&g->routes[i], route->method, t, tlen, segs))
            continue;
        bool seen = false;
        for (size_t k = 0; k < n_hit; k++)
            seen |= hit[k] == c;
        if (!seen)
            hit[n_hit++] = c;
    }
    struct brk_run *r = l->r;
    pthread_mutex_lock(&r->mu);
    bool spent = false;
    for (size_t k = 0; k < n_hit; k++)
        spent |= r->cap_used[hit[k]] >= g->caps[hit[k]].max;
    if (!spent)
        for (size_t k = 0; k < n_hit; k++)
            r->cap_used[hit[k]]++;
    pthread_mutex_unlock(&r->mu);
    return spent ? refuse(l, 429, BRK_MSG_ROUTE_BUDGET) : GO_ON;
}

/* Step 8: the circuit breaker. While it is open, one elected caller per second may probe the
 * health route, and only after a 503 trip (a 429 is a quota: probing cannot end it early). */
static struct verdict breaker(struct lease *l)
{
    struct brk_run *r = l->r;
    pthread_mutex_lock(&r->mu);
    uint64_t now = clock_mono_ms();
    if (r->open_until_ms == 0 || now >= r->open_until_ms) {
        r->open_until_ms = 0;
        r->quota_trip = false;
        pthread_mutex_unlock(&r->mu);
        return GO_ON;
    }
    bool elect = r->g->has_health && !r->quota_trip && !r->probing && (!r->probed || now - r->last_probe_ms >= 1000);
    if (!elect) {
        r->shed++;
        pthread_mutex_unlock(&r->mu);
        return (struct verdict){503, BRK_MSG_SHED};
    }
    r->probing = r->probed = true;
    r->last_probe_ms = now;
    pthread_mutex_unlock(&r->mu);

    l->h = brk_handle_get(r);
    long long ra = 0;
    int st = l->h ? brk_probe(r, l->h, &ra) : 0;

    pthread_mutex_lock(&r->mu);
    r->probing = false;
    bool ok = st >= 200 && st <= 299;
    if (ok) {
        r->open_until_ms = 0;
        r->quota_trip = false;
    } else {
        trip_locked(r, ra, st == 429);
        r->shed++;
    }
    pthread_mutex_unlock(&r->mu);
    return ok ? GO_ON : (struct verdict){503, BRK_MSG_SHED};
}

/* Step 9. A body pointer missing for a non-zero length is API misuse by a transport: fail
 * closed, send nothing. */
static struct verdict check_body(struct lease *l, const uint8_t *body, size_t body_len)
{
    if (body_len > BRK_BODY_MAX)
        return refuse(l, 413, BRK_MSG_TOO_LARGE);
    if (!body && body_len > 0)
        return refuse(l, 502, BRK_MSG_UPSTREAM);
    return GO_ON;
}

/* Step 12: ended meanwhile, checked as late as possible; reads the timeouts under the same lock. */
static struct verdict still_running(struct lease *l, uint32_t *call_ms, uint32_t *conn_ms)
{
    struct brk_run *r = l->r;
    pthread_mutex_lock(&r->mu);
    bool ended = atomic_load(&r->ended);
    *call_ms = r->call_timeout_ms;
    *conn_ms = r->connect_timeout_ms;
    pthread_mutex_unlock(&r->mu);
    return ended ? refuse(l, 503, BRK_MSG_ENDED) : GO_ON;
}

/* ---- the round trip ------------------------------------------------------------------ */

struct trip {
    CURLcode rc;
    long code;
    curl_off_t retry_after;
    const char *ct; /* points into the handle: read it before the handle goes back */
    uint64_t latency_us;
};

/* Step 13: the method's own request shape, with the prepared header set; a route that takes a
 * body always sends one (possibly empty), so libcurl never turns it into a GET. */
static struct trip round_trip(struct lease *l, const struct brk_route *route, const char *url, const uint8_t *body,
                              size_t body_len, struct brk_xfer *x, uint32_t call_ms, uint32_t conn_ms)
{
    struct trip tr = {.rc = CURLE_FAILED_INIT};
    uint64_t t0 = clock_mono_us();
    CURL *h = l->h;
    if (url && h) {
        brk_http_setup(h, url, body_len > 0 ? l->r->hdr_body : l->r->hdr_empty, x, call_ms, conn_ms);
        bool send_body =
            body_len > 0 || route->method == BRK_M_POST || route->method == BRK_M_PUT || route->method == BRK_M_PATCH;
        if (send_body) {
            curl_easy_setopt(h, CURLOPT_POSTFIELDS, body_len > 0 ? (const char *)body : "");
            curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)body_len);
            curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, brk_method_name(route->method));
        } else if (route->method == BRK_M_GET) {
            curl_easy_setopt(h, CURLOPT_HTTPGET, 1L);
        } else {
            curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, brk_method_name(route->method));
        }
        tr.rc = curl_easy_perform(h);
        curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &tr.code);
        curl_easy_getinfo(h, CURLINFO_RETRY_AFTER, &tr.retry_after);
        curl_easy_getinfo(h, CURLINFO_CONTENT_TYPE, &tr.ct);
    }
    tr.latency_us = clock_mono_us() - t0;
    return tr;
}

/* Steps 14-16: a failure is a row with Delivered=false and 502 with none of the upstream's body;
 * a success hands the guest the status, body and a sanitised Content-Type, nothing else, and a
 * 429 or 503 trips the breaker. */
static void deliver(struct lease *l, size_t idx, const struct trip *tr, struct brk_xfer *x, size_t body_len,
                    struct brk_reply *out)
{
    bool ok = tr->rc == CURLE_OK && tr->code >= 100 && tr->code <= 599;
    if (ok) {
        out->status = (int)tr->code;
        out->len = x->len;
        out->body = x->len ? take_ptr(&x->buf) : NULL;
        set_content_type(out, tr->ct);
    }
    pthread_mutex_lock(&l->r->mu);
    record_locked(l->r, idx, (int)tr->code, ok, body_len, ok ? x->len : 0, tr->latency_us);
    if (ok && (tr->code == 429 || tr->code == 503))
        trip_locked(l->r, (long long)tr->retry_after, tr->code == 429);
    pthread_mutex_unlock(&l->r->mu);
    if (!ok)
        answer(out, 502, BRK_MSG_UPSTREAM);
}

/* ---- the call ------------------------------------------------------------------------ */

/* What the checks settled for the round trip. */
struct call {
    const char *target; /* the raw target, exactly as checked and as sent */
    size_t tlen;
    long idx;  /* the matched allow entry, the trace row's route */
    char *url; /* origin + target; NULL when out of memory (the trip then fails with 502) */
    uint32_t call_ms, conn_ms;
};

/* Steps 2-12 in order; the first refusal is the answer. */
static struct verdict checks(struct lease *l, const char *method, const char *raw_target, const uint8_t *body,
                             size_t body_len, struct call *c)
{
    struct brk_run *r = l->r;
    struct verdict v = admit(l); /* 2-4 */
    if (v.status)
        return v;
    /* 5-6. method and raw target against the allowlist; the first match names the row */
    const char *m = method ? method : "";
    c->target = raw_target ? raw_target : "";
    size_t mlen = strnlen(m, BRK_METHOD_MAX + 1);
    c->tlen = strnlen(c->target, BRK_TARGET_MAX + 1);
    c->idx = brk_route_find(r->g->routes, r->g->n_routes, m, mlen, c->target, c->tlen);
    if (c->idx < 0)
        return refuse(l, 403, BRK_MSG_FORBIDDEN);
    v = charge_caps(l, &r->g->routes[c->idx], c->target, c->tlen); /* 7 */
    if (!v.status)
        v = breaker(l); /* 8 */
    if (!v.status)
        v = check_body(l, body, body_len); /* 9 */
    if (v.status)
        return v;
    /* 10-11. the URL and a handle (the prepared header set is the run's) */
    c->url = brk_join_url(r->g->origin, c->target, c->tlen);
    if (!l->h)
        l->h = brk_handle_get(r);
    return still_running(l, &c->call_ms, &c->conn_ms); /* 12 */
}

void brk_call(struct brk_run *r, const char *method, const char *raw_target, const uint8_t *body, size_t body_len,
              struct brk_reply *out)
{
    *out = (struct brk_reply){0};
    if (!r) { /* 1. no broker */
        answer(out, 503, BRK_MSG_NO_BROKER);
        return;
    }
    __attribute__((cleanup(lease_end))) struct lease l = {.r = r};
    struct call c = {0};
    struct verdict v = checks(&l, method, raw_target, body, body_len, &c);
    cleanup_free char *url = c.url;
    if (v.status) {
        answer(out, v.status, v.msg);
        return;
    }
    __attribute__((cleanup(brk_xfer_done))) struct brk_xfer x = {.run = r, .keep = true};
    struct trip tr = round_trip(&l, &r->g->routes[c.idx], url, body, body_len, &x, c.call_ms, c.conn_ms); /* 13 */
    deliver(&l, (size_t)c.idx, &tr, &x, body_len, out);                                                   /* 14-16 */
}
