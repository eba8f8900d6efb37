/* broker.c: the per-run grant broker core (providers.md §5.3, §5.6).
 * Owns: a frozen copy of the run's profile, the run's credential, a small pool of libcurl easy
 * handles (one per call slot, so connections are reused), the breaker state and the trace.
 * Trusts: nothing from the guest (method, target, body are hostile) and nothing from the upstream
 * (status, headers and body are bounded and sanitised before the guest sees them).
 * Invariants:
 *  - The checks run in the order of broker.h, all before any byte goes upstream; the target that
 *    was matched is the exact byte string sent (route.h), so there is no decode-after-check gap.
 *  - Only Accept, Content-Type and Authorization are chosen by us; curl adds Host and
 *    Content-Length; nothing from the guest becomes a header, and nothing from the upstream but
 *    status, body and a sanitised Content-Type reaches the guest.
 *  - The credential lives in `cred` and the two prepared header lists; both are wiped on free.
 *    It never enters a reply, a trace row, an error message or a log line.
 * Locking: `mu` guards every mutable field (inflight, budgets, caps, breaker, trace, pool);
 * it is never held across network I/O. `ended` is also an atomic so that libcurl's progress
 * callback can cancel a transfer without the lock. */
#include "../core/clock.h"
#include "broker.h"

#include <curl/curl.h>
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "jwt.h"
#include "route.h"

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

static pthread_once_t curl_once = PTHREAD_ONCE_INIT;
static CURLcode curl_init_rc = CURLE_FAILED_INIT;
static void curl_init(void)
{
    curl_init_rc = curl_global_init(CURL_GLOBAL_DEFAULT);
}

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

/* ---- header lists -------------------------------------------------------------------- */

static void slist_free_wiped(struct curl_slist *l)
{
    for (struct curl_slist *i = l; i; i = i->next)
        if (i->data)
            explicit_bzero(i->data, strlen(i->data));
    curl_slist_free_all(l);
}

/* The complete header set of §5.3 step 11. "Content-Type:" and "Expect:" with no value delete
 * the headers libcurl would otherwise add on its own (a form Content-Type on an empty POST, a
 * 100-continue handshake on large bodies). */
static struct curl_slist *build_headers(const struct brk_secret *cred, bool with_body)
{
    struct curl_slist *l = NULL, *t;
    const char *fixed[] = {"Accept: application/json",
                           with_body ? "Content-Type: application/json" : "Content-Type:", "Expect:"};
    for (size_t i = 0; i < 3; i++) {
        t = curl_slist_append(l, fixed[i]);
        if (!t) {
            slist_free_wiped(l);
            return NULL;
        }
        l = t;
    }
    if (brk_secret_isset(cred)) {
        static const char pre[] = "Authorization: Bearer ";
        size_t n = sizeof pre - 1 + cred->len + 1;
        char *h = malloc(n);
        if (!h) {
            slist_free_wiped(l);
            return NULL;
        }
        memcpy(h, pre, sizeof pre - 1);
        memcpy(h + sizeof pre - 1, cred->data, cred->len + 1);
        t = curl_slist_append(l, h);
        explicit_bzero(h, n);
        free(h);
        if (!t) {
            slist_free_wiped(l);
            return NULL;
        }
        l = t;
    }
    return l;
}

/* ---- run lifecycle ------------------------------------------------------------------- */

struct brk_run *brk_run_new(const struct brk_profile *p, const char *caller, uint32_t budget_ms, struct plm_err *err)
{
    if (!p)
        return plm_err_set(err, 0, PLM_E_INTERNAL, PLM_REFUSAL_NONE, "grant: no profile"), NULL;
    if (budget_ms == 0 || budget_ms > BRK_BUDGET_MS_MAX)
        return plm_err_set(err, 0, PLM_E_INVALID, PLM_REFUSAL_REQUEST, "grant: run budget %u ms is outside 1..%u ms",
                           budget_ms, BRK_BUDGET_MS_MAX),
               NULL;
    /* A subject-bound minter checks the subject before anything else (§5.2). */
    if (p->token_type == BRK_TOKEN_JWT && !brk_subject_ok(caller))
        return plm_err_set(err, 0, PLM_E_PERMISSION, PLM_REFUSAL_PERMISSION,
                           "grant token: minting a per-caller credential requires a stable "
                           "authenticated subject"),
               NULL;
    /* Defence in depth: the RPC layer selected the profile for this caller already. */
    if (!brk_profile_caller_allowed(p, caller))
        return plm_err_set(err, 0, PLM_E_PERMISSION, PLM_REFUSAL_PERMISSION,
                           "grant_profile \"%s\" is not available to this caller", p->name),
               NULL;
    pthread_once(&curl_once, curl_init);
    if (curl_init_rc != CURLE_OK)
        return plm_err_set(err, 0, PLM_E_INTERNAL, PLM_REFUSAL_NONE, "grant: libcurl did not initialise"), NULL;

    struct brk_run *r = calloc(1, sizeof *r);
    if (!r)
        return plm_err_set(err, ENOMEM, PLM_E_INTERNAL, PLM_REFUSAL_NONE, "grant: out of memory"), NULL;
    pthread_mutex_init(&r->mu, NULL);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&r->idle, &ca);
    pthread_condattr_destroy(&ca);
    atomic_init(&r->ended, false);
    atomic_init(&r->refs, 1u);
    r->call_timeout_ms = BRK_CALL_TIMEOUT_MS;
    r->connect_timeout_ms = BRK_CONNECT_TIMEOUT_MS;
    r->probe_timeout_ms = BRK_PROBE_TIMEOUT_MS;

    r->g = brk_profile_clone(p, false);
    r->cap_used = calloc(p->n_caps ? p->n_caps : 1, sizeof *r->cap_used);
    if (!r->g || !r->cap_used) {
        brk_run_free(r);
        return plm_err_set(err, ENOMEM, PLM_E_INTERNAL, PLM_REFUSAL_NONE, "grant: out of memory"), NULL;
    }

    /* Mint once per run, before dispatch (§5.2). */
    if (p->token_type == BRK_TOKEN_STATIC) {
        if (!brk_token_ok(p->secret.data, p->secret.len) ||
            brk_secret_set(&r->cred, p->secret.data, p->secret.len) < 0) {
            brk_run_free(r);
            return plm_err_set(err, 0, PLM_E_PERMISSION, PLM_REFUSAL_PERMISSION,
                               "grant token: the static token is not usable"),
                   NULL;
        }
    } else if (p->token_type == BRK_TOKEN_JWT) {
        struct brk_jwt_params jp = {
            .key = &p->secret,
            .issuer = p->jwt_issuer,
            .audience = p->jwt_audience,
            .subject = caller,
            .scopes = (const char *const *)p->scopes,
            .n_scopes = p->n_scopes,
            .now_unix = (int64_t)time(NULL),
            /* token.ttl_sec when the profile sets it, else the run's time budget (§5.2) */
            .ttl_s = p->jwt_ttl_s ? p->jwt_ttl_s : (budget_ms + 999) / 1000,
            .key_id = p->jwt_key_id,
        };
        if (brk_jwt_mint(&jp, &r->cred, err) < 0) {
            brk_run_free(r);
            return NULL;
        }
    }
    r->hdr_body = build_headers(&r->cred, true);
    r->hdr_empty = build_headers(&r->cred, false);
    if (!r->hdr_body || !r->hdr_empty) {
        brk_run_free(r);
        return plm_err_set(err, ENOMEM, PLM_E_INTERNAL, PLM_REFUSAL_NONE, "grant: out of memory"), NULL;
    }
    return r;
}

void brk_run_set_timeouts_for_test(struct brk_run *run, uint32_t call_ms, uint32_t probe_ms)
{
    pthread_mutex_lock(&run->mu);
    run->call_timeout_ms = call_ms;
    run->connect_timeout_ms = call_ms < BRK_CONNECT_TIMEOUT_MS ? call_ms : BRK_CONNECT_TIMEOUT_MS;
    run->probe_timeout_ms = probe_ms;
    pthread_mutex_unlock(&run->mu);
}

void brk_run_caps_seed(struct brk_run *r, const uint32_t *used, size_t n)
{
    pthread_mutex_lock(&r->mu);
    for (size_t i = 0; i < n && i < r->g->n_caps; i++)
        r->cap_used[i] = used[i];
    pthread_mutex_unlock(&r->mu);
}

void brk_run_caps_read(struct brk_run *r, uint32_t *used, size_t n)
{
    pthread_mutex_lock(&r->mu);
    for (size_t i = 0; i < n && i < r->g->n_caps; i++)
        used[i] = r->cap_used[i];
    pthread_mutex_unlock(&r->mu);
}

const char *brk_run_profile_name(const struct brk_run *run)
{
    return run ? run->g->name : "";
}

void brk_run_end(struct brk_run *run)
{
    if (!run)
        return;
    pthread_mutex_lock(&run->mu);
    atomic_store(&run->ended, true);
    struct timespec deadline;
    clock_gettime(CLOCK_MONOTONIC, &deadline);
    deadline.tv_sec += BRK_END_WAIT_MS / 1000;
    deadline.tv_nsec += (long)(BRK_END_WAIT_MS % 1000) * 1000000L;
    if (deadline.tv_nsec >= 1000000000L) {
        deadline.tv_sec++;
        deadline.tv_nsec -= 1000000000L;
    }
    while (run->inflight > 0)
        if (pthread_cond_timedwait(&run->idle, &run->mu, &deadline) == ETIMEDOUT)
            break;
    pthread_mutex_unlock(&run->mu);
}

void brk_run_free(struct brk_run *run)
{
    if (!run)
        return;
    brk_run_end(run);
    brk_run_release(run);
}

void brk_run_hold(struct brk_run *run)
{
    atomic_fetch_add(&run->refs, 1u);
}

void brk_run_release(struct brk_run *run)
{
    if (!run || atomic_fetch_sub(&run->refs, 1u) != 1u)
        return;
    /* Holders never keep a call open past their release, but a caller without a hold could
     * still be inside brk_call; it was cancelled by End, so this wait is bounded. */
    pthread_mutex_lock(&run->mu);
    while (run->inflight > 0)
        pthread_cond_wait(&run->idle, &run->mu);
    pthread_mutex_unlock(&run->mu);
    for (size_t i = 0; i < run->n_pool; i++)
        curl_easy_cleanup(run->pool[i]);
    slist_free_wiped(run->hdr_body);
    slist_free_wiped(run->hdr_empty);
    brk_secret_done(&run->cred);
    brk_profile_free(run->g);
    free(run->cap_used);
    free(run->rows);
    pthread_cond_destroy(&run->idle);
    pthread_mutex_destroy(&run->mu);
    free(run);
}

/* ---- bookkeeping (all under mu) ------------------------------------------------------ */

static void release_slot_locked(struct brk_run *r)
{
    r->inflight--;
    pthread_cond_broadcast(&r->idle);
}

static void deny(struct brk_run *r, struct brk_reply *out, int status, const char *msg)
{
    pthread_mutex_lock(&r->mu);
    r->denied++;
    release_slot_locked(r);
    pthread_mutex_unlock(&r->mu);
    answer(out, status, msg);
}

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

/* ---- libcurl ------------------------------------------------------------------------- */

static CURL *handle_get(struct brk_run *r)
{
    CURL *h = NULL;
    pthread_mutex_lock(&r->mu);
    if (r->n_pool > 0)
        h = r->pool[--r->n_pool];
    pthread_mutex_unlock(&r->mu);
    if (h)
        curl_easy_reset(h); /* options back to defaults; the connection cache stays */
    else
        h = curl_easy_init();
    return h;
}

static void handle_put(struct brk_run *r, CURL *h)
{
    if (!h)
        return;
    pthread_mutex_lock(&r->mu);
    if (r->n_pool < BRK_CONCURRENCY) {
        r->pool[r->n_pool++] = h;
        h = NULL;
    }
    pthread_mutex_unlock(&r->mu);
    if (h)
        curl_easy_cleanup(h);
}

struct xfer {
    struct brk_run *run;
    uint8_t *buf; /* NULL when discarding (probes) */
    size_t len, cap;
    bool keep;
};

/* Caps the body at BRK_RESPONSE_MAX whatever the framing (chunked, close-delimited): one byte
 * more aborts the transfer, and the call answers 502 (§5.3 step 14). */
static size_t on_write(char *data, size_t size, size_t n, void *ud)
{
    struct xfer *x = ud;
    size_t add = size * n; /* size is always 1 for body data */
    if (add > BRK_RESPONSE_MAX - x->len)
        return 0;
    if (x->keep) {
        if (x->len + add > x->cap) {
            size_t cap = x->cap ? x->cap : 16384;
            while (cap < x->len + add)
                cap *= 2;
            if (cap > BRK_RESPONSE_MAX)
                cap = BRK_RESPONSE_MAX;
            uint8_t *b = realloc(x->buf, cap);
            if (!b)
                return 0;
            x->buf = b;
            x->cap = cap;
        }
        memcpy(x->buf + x->len, data, add);
    }
    x->len += add;
    return add;
}

/* End cancels in-flight calls: libcurl calls this at least about once a second, even on a
 * silent socket, and a non-zero return aborts the transfer. */
static int on_progress(void *ud, curl_off_t dt, curl_off_t dn, curl_off_t ut, curl_off_t un)
{
    (void)dt, (void)dn, (void)ut, (void)un;
    struct xfer *x = ud;
    return atomic_load(&x->run->ended) ? 1 : 0;
}

/* The hardened options every upstream request gets. */
static void setup(CURL *h, const char *url, struct curl_slist *headers, struct xfer *x, uint32_t timeout_ms,
                  uint32_t connect_ms)
{
    curl_easy_setopt(h, CURLOPT_URL, url);
    curl_easy_setopt(h, CURLOPT_PROTOCOLS_STR, "http,https");
    curl_easy_setopt(h, CURLOPT_REDIR_PROTOCOLS_STR, "http,https");
    curl_easy_setopt(h, CURLOPT_FOLLOWLOCATION, 0L); /* a 3xx goes back to the guest as is */
    curl_easy_setopt(h, CURLOPT_MAXREDIRS, 0L);
    curl_easy_setopt(h, CURLOPT_PROXY, ""); /* proxy environment variables ignored */
    curl_easy_setopt(h, CURLOPT_NOPROXY, "*");
    curl_easy_setopt(h, CURLOPT_PATH_AS_IS, 1L); /* the checked target is the sent target */
    curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(h, CURLOPT_SSL_VERIFYPEER, 1L);
    curl_easy_setopt(h, CURLOPT_SSL_VERIFYHOST, 2L);
    curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, (long)timeout_ms);
    curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS, (long)(connect_ms < timeout_ms ? connect_ms : timeout_ms));
    curl_easy_setopt(h, CURLOPT_HTTPHEADER, headers);
    curl_easy_setopt(h, CURLOPT_MAXFILESIZE_LARGE, (curl_off_t)BRK_RESPONSE_MAX);
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_write);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, x);
    curl_easy_setopt(h, CURLOPT_NOPROGRESS, 0L);
    curl_easy_setopt(h, CURLOPT_XFERINFOFUNCTION, on_progress);
    curl_easy_setopt(h, CURLOPT_XFERINFODATA, x);
}

static char *join_url(const char *origin, const char *target, size_t tlen)
{
    size_t olen = strlen(origin);
    char *u = malloc(olen + tlen + 1);
    if (!u)
        return NULL;
    memcpy(u, origin, olen);
    memcpy(u + olen, target, tlen);
    u[olen + tlen] = '\0';
    return u;
}

/* GET <health> with the run's token and the probe timeout; neither traced nor charged.
 * Returns the status (0 on any transport failure) and the Retry-After seconds. */
static int probe(struct brk_run *r, CURL *h, long long *retry_after)
{
    *retry_after = 0;
    char *url = join_url(r->g->origin, r->g->health.path, r->g->health.len);
    if (!url)
        return 0;
    struct xfer x = {.run = r, .keep = false};
    pthread_mutex_lock(&r->mu);
    uint32_t t = r->probe_timeout_ms;
    pthread_mutex_unlock(&r->mu);
    setup(h, url, r->hdr_empty, &x, t, t);
    curl_easy_setopt(h, CURLOPT_HTTPGET, 1L);
    CURLcode rc = curl_easy_perform(h);
    free(url);
    long code = 0;
    curl_off_t ra = 0;
    curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &code);
    curl_easy_getinfo(h, CURLINFO_RETRY_AFTER, &ra);
    *retry_after = (long long)ra;
    return rc == CURLE_OK ? (int)code : 0;
}

/* Step 8. Returns true when the call may go ahead. */
static bool breaker_allows(struct brk_run *r, CURL **h)
{
    pthread_mutex_lock(&r->mu);
    uint64_t now = clock_mono_ms();
    if (r->open_until_ms == 0 || now >= r->open_until_ms) {
        r->open_until_ms = 0;
        r->quota_trip = false;
        pthread_mutex_unlock(&r->mu);
        return true;
    }
    /* One elected caller per second may probe, and only after a 503 trip (a 429 is a quota:
     * probing cannot end it early). */
    bool elect = r->g->has_health && !r->quota_trip && !r->probing && (!r->probed || now - r->last_probe_ms >= 1000);
    if (!elect) {
        r->shed++;
        pthread_mutex_unlock(&r->mu);
        return false;
    }
    r->probing = r->probed = true;
    r->last_probe_ms = now;
    pthread_mutex_unlock(&r->mu);

    if (!*h)
        *h = handle_get(r);
    long long ra = 0;
    int st = *h ? probe(r, *h, &ra) : 0;

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
    return ok;
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

/* ---- the call ------------------------------------------------------------------------ */

void brk_call(struct brk_run *r, const char *method, const char *raw_target, const uint8_t *body, size_t body_len,
              struct brk_reply *out)
{
    *out = (struct brk_reply){0};
    /* 1. no broker */
    if (!r) {
        answer(out, 503, BRK_MSG_NO_BROKER);
        return;
    }
    pthread_mutex_lock(&r->mu);
    /* 2. ended */
    if (atomic_load(&r->ended)) {
        r->denied++;
        pthread_mutex_unlock(&r->mu);
        answer(out, 503, BRK_MSG_ENDED);
        return;
    }
    /* 3. a slot, never waited for; does not spend the budget */
    if (r->inflight >= BRK_CONCURRENCY) {
        r->denied++;
        pthread_mutex_unlock(&r->mu);
        answer(out, 429, BRK_MSG_CAPACITY);
        return;
    }
    r->inflight++;
    /* 4. budget: count first, so refused attempts spend it too */
    if (r->calls < UINT32_MAX)
        r->calls++;
    bool over = r->calls > r->g->max_calls;
    pthread_mutex_unlock(&r->mu);
    if (over) {
        deny(r, out, 429, BRK_MSG_BUDGET);
        return;
    }

    /* 5-6. method and raw target against the allowlist; the first match names the row */
    const char *m = method ? method : "";
    const char *t = raw_target ? raw_target : "";
    size_t mlen = strnlen(m, BRK_METHOD_MAX + 1), tlen = strnlen(t, BRK_TARGET_MAX + 1);
    long idx = brk_route_find(r->g->routes, r->g->n_routes, m, mlen, t, tlen);
    if (idx < 0) {
        deny(r, out, 403, BRK_MSG_FORBIDDEN);
        return;
    }
    const struct brk_route *route = &r->g->routes[idx];

    /* 7. route caps: every capped entry the call matches is charged, all or nothing */
    if (r->g->n_caps > 0) {
        size_t segs = 0;
        brk_target_ok(t, tlen, &segs);
        long hit[BRK_ROUTES_MAX];
        size_t n_hit = 0;
        for (size_t i = 0; i < r->g->n_routes; i++) {
            long c = r->g->route_cap[i];
            if (c < 0 || !brk_route_match(&r->g->routes[i], route->method, t, tlen, segs))
                continue;
            bool seen = false;
            for (size_t k = 0; k < n_hit; k++)
                seen |= hit[k] == c;
            if (!seen)
                hit[n_hit++] = c;
        }
        pthread_mutex_lock(&r->mu);
        bool spent = false;
        for (size_t k = 0; k < n_hit; k++)
            spent |= r->cap_used[hit[k]] >= r->g->caps[hit[k]].max;
        if (!spent)
            for (size_t k = 0; k < n_hit; k++)
                r->cap_used[hit[k]]++;
        pthread_mutex_unlock(&r->mu);
        if (spent) {
            deny(r, out, 429, BRK_MSG_ROUTE_BUDGET);
            return;
        }
    }

    /* 8. circuit breaker (may probe the health route) */
    CURL *h = NULL;
    if (!breaker_allows(r, &h)) {
        handle_put(r, h);
        pthread_mutex_lock(&r->mu);
        release_slot_locked(r);
        pthread_mutex_unlock(&r->mu);
        answer(out, 503, BRK_MSG_SHED);
        return;
    }

    /* 9. body */
    if (body_len > BRK_BODY_MAX) {
        handle_put(r, h);
        deny(r, out, 413, BRK_MSG_TOO_LARGE);
        return;
    }
    if (!body && body_len > 0) { /* API misuse by a transport: fail closed, send nothing */
        handle_put(r, h);
        deny(r, out, 502, BRK_MSG_UPSTREAM);
        return;
    }

    /* 10-11. URL = origin + the target exactly as checked; the prepared header set */
    char *url = join_url(r->g->origin, t, tlen);
    if (!h)
        h = handle_get(r);
    pthread_mutex_lock(&r->mu);
    /* 12. ended meanwhile: as late as possible */
    bool ended = atomic_load(&r->ended);
    uint32_t call_ms = r->call_timeout_ms, conn_ms = r->connect_timeout_ms;
    if (ended)
        r->denied++;
    pthread_mutex_unlock(&r->mu);
    if (ended) {
        free(url);
        handle_put(r, h);
        pthread_mutex_lock(&r->mu);
        release_slot_locked(r);
        pthread_mutex_unlock(&r->mu);
        answer(out, 503, BRK_MSG_ENDED);
        return;
    }

    /* 13. the round trip */
    struct xfer x = {.run = r, .keep = true};
    CURLcode rc = CURLE_FAILED_INIT;
    long code = 0;
    curl_off_t ra = 0;
    const char *ct = NULL;
    uint64_t t0 = clock_mono_us();
    if (url && h) {
        setup(h, url, body_len > 0 ? r->hdr_body : r->hdr_empty, &x, call_ms, conn_ms);
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
        rc = curl_easy_perform(h);
        curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &code);
        curl_easy_getinfo(h, CURLINFO_RETRY_AFTER, &ra);
        curl_easy_getinfo(h, CURLINFO_CONTENT_TYPE, &ct);
    }
    uint64_t lat = clock_mono_us() - t0;
    free(url);

    /* 14. failures: a row with Delivered=false, and 502 with none of the upstream's body */
    if (rc != CURLE_OK || code < 100 || code > 599) {
        handle_put(r, h);
        free(x.buf);
        pthread_mutex_lock(&r->mu);
        record_locked(r, (size_t)idx, (int)code, false, body_len, 0, lat);
        release_slot_locked(r);
        pthread_mutex_unlock(&r->mu);
        answer(out, 502, BRK_MSG_UPSTREAM);
        return;
    }

    /* 15-16. success: the status, body and a sanitised Content-Type, nothing else */
    out->status = (int)code;
    out->body = x.len ? x.buf : NULL;
    out->len = x.len;
    if (!x.len)
        free(x.buf);
    set_content_type(out, ct); /* before handle_put: ct points into the handle */
    handle_put(r, h);
    pthread_mutex_lock(&r->mu);
    record_locked(r, (size_t)idx, (int)code, true, body_len, x.len, lat);
    if (code == 429 || code == 503)
        trip_locked(r, (long long)ra, code == 429);
    release_slot_locked(r);
    pthread_mutex_unlock(&r->mu);
}

/* ---- trace --------------------------------------------------------------------------- */

void brk_trace_done(struct brk_trace *t)
{
    if (!t)
        return;
    for (size_t i = 0; t->rows && i < t->n_rows; i++)
        free(t->rows[i].route);
    free(t->rows);
    *t = (struct brk_trace){0};
}

bool brk_trace_empty(const struct brk_trace *t)
{
    return !t || (t->n_rows == 0 && t->allowed == 0 && t->denied == 0 && t->shed == 0 && t->dropped == 0);
}

int brk_run_trace(struct brk_run *r, struct brk_trace *out, struct plm_err *err)
{
    *out = (struct brk_trace){0};
    if (!r)
        return 0;
    pthread_mutex_lock(&r->mu);
    int rc = 0;
    out->allowed = r->allowed;
    out->denied = r->denied;
    out->shed = r->shed;
    out->dropped = r->dropped;
    if (r->n_rows > 0) {
        out->rows = calloc(r->n_rows, sizeof *out->rows);
        if (!out->rows)
            rc = -1;
        for (size_t i = 0; rc == 0 && i < r->n_rows; i++) {
            const struct row *w = &r->rows[i];
            const struct brk_route *rt = &r->g->routes[w->route];
            struct brk_trace_row *o = &out->rows[i];
            o->route = strdup(rt->path);
            if (!o->route) {
                rc = -1;
                break;
            }
            out->n_rows++;
            o->seq = w->seq;
            o->method = brk_method_name(rt->method);
            o->status = w->status;
            o->delivered = w->delivered;
            o->req_bytes = w->req_bytes;
            o->resp_bytes = w->resp_bytes;
            o->latency_us = w->latency_us;
        }
    }
    pthread_mutex_unlock(&r->mu);
    if (rc < 0) {
        brk_trace_done(out);
        return plm_err_set(err, ENOMEM, PLM_E_INTERNAL, PLM_REFUSAL_NONE, "grant trace: out of memory");
    }
    return 0;
}
