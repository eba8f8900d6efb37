/* broker_http.c: the broker's libcurl layer (broker_run.h): the prepared header sets, the pool of
 * easy handles (one per call slot, so connections are reused) and the hardened options of every
 * upstream transfer. Calls nothing else of the broker core: broker.c and broker_call.c call down
 * to it.
 * Invariants: nothing from the guest becomes a header; the credential is in the header lists
 * only, and they are wiped before they are freed. */
#include "broker_run.h"

#include <stdlib.h>
#include <string.h>

#include "../core/cleanup.h"

/* ---- header lists -------------------------------------------------------------------- */

void brk_headers_free(struct curl_slist *l)
{
    for (struct curl_slist *i = l; i; i = i->next)
        if (i->data)
            explicit_bzero(i->data, strlen(i->data));
    curl_slist_free_all(l);
}
DEFINE_CLEANUP(struct curl_slist, brk_headers_free)

/* "Authorization: Bearer <token>" appended to l; NULL when out of memory (l is then unchanged). */
static struct curl_slist *append_bearer(struct curl_slist *l, const struct brk_secret *cred)
{
    static const char pre[] = "Authorization: Bearer ";
    size_t n = sizeof pre - 1 + cred->len + 1;
    cleanup_free char *h = malloc(n);
    if (!h)
        return NULL;
    memcpy(h, pre, sizeof pre - 1);
    memcpy(h + sizeof pre - 1, cred->data, cred->len + 1);
    struct curl_slist *t = curl_slist_append(l, h);
    explicit_bzero(h, n);
    return t;
}

/* "Content-Type:" and "Expect:" with no value delete the headers libcurl would otherwise add on
 * its own (a form Content-Type on an empty POST, a 100-continue handshake on large bodies). */
struct curl_slist *brk_headers_build(const struct brk_secret *cred, bool with_body)
{
    struct curl_slist *l cleanup_(brk_headers_free) = NULL;
    const char *fixed[] = {"Accept: application/json",
                           with_body ? "Content-Type: application/json" : "Content-Type:", "Expect:"};
    for (size_t i = 0; i < 3; i++) {
        struct curl_slist *t = curl_slist_append(l, fixed[i]);
        if (!t)
            return NULL;
        l = t;
    }
    if (brk_secret_isset(cred)) {
        struct curl_slist *t = append_bearer(l, cred);
        if (!t)
            return NULL;
        l = t;
    }
    return take_ptr(&l);
}

/* ---- handles ------------------------------------------------------------------------- */

CURL *brk_handle_get(struct brk_run *r)
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

void brk_handle_put(struct brk_run *r, CURL *h)
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

/* ---- one transfer -------------------------------------------------------------------- */

void brk_xfer_done(struct brk_xfer *x)
{
    free(x->buf);
    x->buf = NULL;
}

/* Caps the body at BRK_RESPONSE_MAX whatever the framing (chunked, close-delimited): one byte
 * more aborts the transfer, and the call answers 502 (broker.h step 14). */
static size_t on_write(char *data, size_t size, size_t n, void *ud)
{
    struct brk_xfer *x = ud;
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
    struct brk_xfer *x = ud;
    return atomic_load(&x->run->ended) ? 1 : 0;
}

void brk_http_setup(CURL *h, const char *url, struct curl_slist *headers, struct brk_xfer *x, uint32_t timeout_ms,
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

char *brk_join_url(const char *origin, const char *target, size_t tlen)
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

int brk_probe(struct brk_run *r, CURL *h, long long *retry_after)
{
    *retry_after = 0;
    cleanup_free char *url = brk_join_url(r->g->origin, r->g->health.path, r->g->health.len);
    if (!url)
        return 0;
    struct brk_xfer x = {.run = r, .keep = false};
    pthread_mutex_lock(&r->mu);
    uint32_t t = r->probe_timeout_ms;
    pthread_mutex_unlock(&r->mu);
    brk_http_setup(h, url, r->hdr_empty, &x, t, t);
    curl_easy_setopt(h, CURLOPT_HTTPGET, 1L);
    CURLcode rc = curl_easy_perform(h);
    long code = 0;
    curl_off_t ra = 0;
    curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &code);
    curl_easy_getinfo(h, CURLINFO_RETRY_AFTER, &ra);
    *retry_after = (long long)ra;
    return rc == CURLE_OK ? (int)code : 0;
}
