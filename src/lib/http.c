/* http.c: the client's one transport, a Connect unary POST over libcurl, plus where the URL and
 * the bearer token come from.
 * Owns: the curl handle, the header list, the response buffer and the token bytes.
 * Trusts: nothing from the server; the body is capped at LIM_RESPONSE_MAX while it arrives.
 * Invariant: no redirects, no proxy, http/https only, one 360 s deadline; the token appears only
 * in the Authorization header and is wiped from our memory and from the header list afterwards. */
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include <curl/curl.h>

#include "../core/buf.h"
#include "../core/cleanup.h"
#include "../core/cleanup_curl.h"
#include "../core/limits.h"
#include "client.h"

int cli_request_id(char out[33])
{
    uint8_t raw[16];
    size_t got = 0;
    while (got < sizeof raw) {
        ssize_t n = getrandom(raw + got, sizeof raw - got, 0);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            return -1;
        }
        got += (size_t)n;
    }
    static const char hexd[] = "0123456789abcdef";
    for (size_t i = 0; i < sizeof raw; i++) {
        out[2 * i] = hexd[raw[i] >> 4];
        out[2 * i + 1] = hexd[raw[i] & 15];
    }
    out[32] = '\0';
    return 0;
}

const char *cli_base_url(const char *flag)
{
    if (flag && *flag)
        return flag;
    const char *env = getenv("PLIMSOLL_URL");
    if (env && *env)
        return env;
    return CLI_DEFAULT_URL;
}

/* ---- token ---- */

void cli_token_free(char *tok)
{
    if (tok) {
        explicit_bzero(tok, strlen(tok));
        free(tok);
    }
}

/* Trims blanks and line ends around the token in place and checks it is visible ASCII
 * (wire.md §8.1: the header must split into exactly "Bearer" and the token). */
static int token_clean(const char *buf, size_t len, char **out, const char *what, struct plm_err *err)
{
    size_t start = 0;
    while (start < len && isspace((unsigned char)buf[start]))
        start++;
    while (len > start && isspace((unsigned char)buf[len - 1]))
        len--;
    if (len == start)
        return plm_fail(err, 0, PLM_E_INVALID, "%s is empty", what);
    for (size_t i = start; i < len; i++)
        if (buf[i] < 0x21 || buf[i] > 0x7e)
            return plm_fail(err, 0, PLM_E_INVALID,
                            "%s holds a character that is not visible ASCII", what);
    char *tok = malloc(len - start + 1);
    if (!tok)
        return plm_fail(err, ENOMEM, PLM_E_INTERNAL, "out of memory");
    memcpy(tok, buf + start, len - start);
    tok[len - start] = '\0';
    *out = tok;
    return 0;
}

int cli_token_load(const char *token_file, char **out, struct plm_err *err)
{
    *out = NULL;
    if (!token_file) {
        const char *env = getenv("PLIMSOLL_TOKEN");
        if (!env || !*env)
            return 0;
        size_t n = strnlen(env, LIM_TOKEN_MAX + 1);
        if (n > LIM_TOKEN_MAX)
            return plm_fail(err, 0, PLM_E_INVALID, "$PLIMSOLL_TOKEN is longer than %u bytes",
                            (unsigned)LIM_TOKEN_MAX);
        return token_clean(env, n, out, "$PLIMSOLL_TOKEN", err);
    }
    cleanup_close int fd = open(token_file, O_RDONLY | O_CLOEXEC | O_NOCTTY);
    if (fd < 0)
        return plm_fail(err, errno, PLM_E_INVALID, "token file `%s`: %s", token_file,
                        strerror(errno));
    char buf[LIM_TOKEN_MAX + 2];
    size_t len = 0;
    for (;;) {
        ssize_t n = read(fd, buf + len, sizeof buf - len);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            int e = errno;
            explicit_bzero(buf, sizeof buf);
            return plm_fail(err, e, PLM_E_INVALID, "token file `%s`: %s", token_file,
                            strerror(e));
        }
        if (n == 0)
            break;
        len += (size_t)n;
        if (len == sizeof buf) {
            explicit_bzero(buf, sizeof buf);
            return plm_fail(err, 0, PLM_E_INVALID, "token file `%s` is larger than %u bytes",
                            token_file, (unsigned)LIM_TOKEN_MAX);
        }
    }
    char what[64 + 16];
    snprintf(what, sizeof what, "token file `%.64s`", token_file);
    int r = token_clean(buf, len, out, what, err);
    explicit_bzero(buf, sizeof buf);
    return r;
}

/* ---- the POST ---- */

struct sink {
    struct plm_buf b; /* capped at the client's response limit (wire.md §5.3) */
    bool overflow;
};

static size_t on_body(char *ptr, size_t size, size_t nmemb, void *userdata)
{
    struct sink *s = userdata;
    size_t n = size * nmemb; /* curl guarantees size == 1 */
    /* The cap is checked before any allocation; beyond it the transfer is aborted. */
    if (n > LIM_RESPONSE_MAX - s->b.len) {
        s->overflow = true;
        return 0;
    }
    return plm_buf_add(&s->b, ptr, n) ? n : 0;
}

static bool header_is(const char *line, size_t len, const char *name, const char **value, size_t *vlen)
{
    size_t nl = strlen(name);
    if (len <= nl || line[nl] != ':' || strncasecmp(line, name, nl) != 0)
        return false;
    const char *v = line + nl + 1;
    const char *end = line + len;
    while (v < end && (*v == ' ' || *v == '\t'))
        v++;
    while (end > v && (end[-1] == '\r' || end[-1] == '\n' || end[-1] == ' ' || end[-1] == '\t'))
        end--;
    *value = v;
    *vlen = (size_t)(end - v);
    return true;
}

static void set_header(char **slot, const char *v, size_t n)
{
    free(*slot);
    *slot = strndup(v, n);
}

static size_t on_header(char *line, size_t size, size_t nitems, void *userdata)
{
    struct cli_http_answer *a = userdata;
    size_t len = size * nitems;
    const char *v;
    size_t n;
    /* A new status line starts a new response (a 1xx interim answer came before): forget what
     * the interim one said. */
    if (len >= 5 && memcmp(line, "HTTP/", 5) == 0) {
        free(a->content_type);
        free(a->request_id_echo);
        free(a->not_dispatched);
        a->content_type = a->request_id_echo = a->not_dispatched = NULL;
        a->request_id_n = 0;
        return len;
    }
    if (header_is(line, len, "Content-Type", &v, &n)) {
        /* Two content types make the answer malformed: keep none. */
        if (a->content_type)
            set_header(&a->content_type, "", 0);
        else
            set_header(&a->content_type, v, n);
    } else if (header_is(line, len, "Plimsoll-Request-Id", &v, &n)) {
        if (a->request_id_n++ == 0)
            set_header(&a->request_id_echo, v, n);
    } else if (header_is(line, len, "Plimsoll-Not-Dispatched", &v, &n)) {
        set_header(&a->not_dispatched, v, n);
    }
    return len;
}

void cli_http_answer_done(struct cli_http_answer *a)
{
    free(a->content_type);
    free(a->request_id_echo);
    free(a->not_dispatched);
    free(a->body);
    memset(a, 0, sizeof *a);
}

/* Failures that provably happen before any request byte leaves: nothing reached the daemon. */
static bool curl_never_sent(CURLcode c)
{
    switch (c) {
    case CURLE_UNSUPPORTED_PROTOCOL:
    case CURLE_URL_MALFORMAT:
    case CURLE_COULDNT_RESOLVE_PROXY:
    case CURLE_COULDNT_RESOLVE_HOST:
    case CURLE_COULDNT_CONNECT:
    case CURLE_SSL_CONNECT_ERROR:
    case CURLE_PEER_FAILED_VERIFICATION:
    case CURLE_SSL_CERTPROBLEM:
    case CURLE_SSL_CACERT_BADFILE:
        return true;
    default:
        return false;
    }
}

/* The headers carry the bearer token: wiped before they are freed. */
static void headers_wipe_free(struct curl_slist *h)
{
    for (struct curl_slist *i = h; i; i = i->next)
        explicit_bzero(i->data, strlen(i->data));
    curl_slist_free_all(h);
}
DEFINE_CLEANUP(struct curl_slist, headers_wipe_free)

/* Stage 1: the base URL without trailing slashes, then the path. NULL out of memory. */
static char *request_url(const struct cli_conn *c, const char *path)
{
    size_t ulen = strlen(c->url);
    while (ulen > 0 && c->url[ulen - 1] == '/')
        ulen--;
    char *url = NULL;
    return asprintf(&url, "%.*s%s", (int)ulen, c->url, path) < 0 ? NULL : url;
}

/* Appends one header; false out of memory (*hdrs kept as it was). */
static bool header_add(struct curl_slist **hdrs, const char *line)
{
    struct curl_slist *n = curl_slist_append(*hdrs, line);
    if (n)
        *hdrs = n;
    return n != NULL;
}

/* Stage 2: the fixed headers, the request id and the bearer token. NULL out of memory. */
static struct curl_slist *request_headers(const struct cli_conn *c, const char *request_id)
{
    struct curl_slist *hdrs cleanup_(headers_wipe_free) = NULL;
    char rid[64];
    snprintf(rid, sizeof rid, "Plimsoll-Request-Id: %s", request_id);
    const char *fixed[] = {"Content-Type: application/json", "Connect-Protocol-Version: 1",
                           "Accept-Encoding: identity", "Expect:", rid};
    for (size_t i = 0; i < sizeof fixed / sizeof fixed[0]; i++)
        if (!header_add(&hdrs, fixed[i]))
            return NULL;
    if (c->token) {
        cleanup_free char *auth = NULL;
        if (asprintf(&auth, "Authorization: Bearer %s", c->token) < 0)
            return NULL;
        bool added = header_add(&hdrs, auth);
        explicit_bzero(auth, strlen(auth));
        if (!added)
            return NULL;
    }
    return take_ptr(&hdrs);
}

/* Stage 3: one POST of body, no redirects, no proxy, the client's deadline and response cap;
 * the answer's body into sink, its headers into ans. */
static void request_configure(CURL *h, const struct cli_conn *c, const char *url, char *errbuf,
                              struct curl_slist *hdrs, const char *body, size_t len, struct sink *sink,
                              struct cli_http_answer *ans)
{
    curl_easy_setopt(h, CURLOPT_URL, url);
    curl_easy_setopt(h, CURLOPT_ERRORBUFFER, errbuf);
    curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(h, CURLOPT_PROTOCOLS_STR, "http,https");
    curl_easy_setopt(h, CURLOPT_REDIR_PROTOCOLS_STR, "http,https");
    curl_easy_setopt(h, CURLOPT_FOLLOWLOCATION, 0L);
    /* "" disables every proxy, including the *_proxy environment variables (wire.md §5.3). */
    curl_easy_setopt(h, CURLOPT_PROXY, "");
    curl_easy_setopt(h, CURLOPT_NOPROXY, "*");
    curl_easy_setopt(h, CURLOPT_TIMEOUT, CLI_TIMEOUT_S);
    curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT, 30L);
    curl_easy_setopt(h, CURLOPT_HTTP_VERSION, (long)CURL_HTTP_VERSION_1_1);
    curl_easy_setopt(h, CURLOPT_USERAGENT, "plimsoll-cli/" CLI_VERSION);
    if (c->ca)
        curl_easy_setopt(h, CURLOPT_CAINFO, c->ca);
    curl_easy_setopt(h, CURLOPT_HTTPHEADER, hdrs);
    curl_easy_setopt(h, CURLOPT_POST, 1L);
    curl_easy_setopt(h, CURLOPT_POSTFIELDS, body);
    curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)len);
    curl_easy_setopt(h, CURLOPT_MAXFILESIZE_LARGE, (curl_off_t)LIM_RESPONSE_MAX);
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, sink);
    curl_easy_setopt(h, CURLOPT_HEADERFUNCTION, on_header);
    curl_easy_setopt(h, CURLOPT_HEADERDATA, ans);
}

/* Stage 4a: a failed transfer: the answer keeps only its time and whether nothing was sent. */
static int request_failed(CURLcode rc, const char *url, const char *errbuf, bool overflow,
                          struct cli_http_answer *ans, struct plm_err *err)
{
    double elapsed = ans->elapsed_s;
    cli_http_answer_done(ans);
    ans->elapsed_s = elapsed;
    ans->not_sent = curl_never_sent(rc);
    if (overflow || rc == CURLE_FILESIZE_EXCEEDED)
        return plm_fail(err, 0, PLM_E_UNAVAILABLE, "response larger than %u bytes; aborted",
                        (unsigned)LIM_RESPONSE_MAX);
    return plm_fail(err, 0, PLM_E_UNAVAILABLE, "%s: %s", url, errbuf[0] ? errbuf : curl_easy_strerror(rc));
}

/* Stage 4b: the body (an empty one as "") handed to the answer. */
static int request_take_body(struct sink *sink, struct cli_http_answer *ans, struct plm_err *err)
{
    size_t got_len = sink->b.len;
    char *got = plm_buf_take(&sink->b, NULL);
    if (!got && !(got = calloc(1, 1))) {
        cli_http_answer_done(ans);
        return plm_fail(err, ENOMEM, PLM_E_INTERNAL, "out of memory");
    }
    ans->body = got;
    ans->body_len = got_len;
    return 0;
}

int cli_http_post(const struct cli_conn *c, const char *path, const char *body, size_t len,
                  const char *request_id, struct cli_http_answer *ans, struct plm_err *err)
{
    memset(ans, 0, sizeof *ans);
    if (c->transport)
        return c->transport->post(c->transport->ctx, c, path, body, len, request_id, ans, err);
    cleanup_free char *url = request_url(c, path);
    if (!url)
        return plm_fail(err, ENOMEM, PLM_E_INTERNAL, "out of memory");
    CURL *h cleanup_curl = curl_easy_init();
    if (!h)
        return plm_fail(err, 0, PLM_E_INTERNAL, "curl_easy_init failed");
    struct curl_slist *hdrs cleanup_(headers_wipe_free) = request_headers(c, request_id);
    if (!hdrs)
        return plm_fail(err, ENOMEM, PLM_E_INTERNAL, "out of memory");

    struct sink sink = {.b = {.max = LIM_RESPONSE_MAX}};
    char errbuf[CURL_ERROR_SIZE] = "";
    request_configure(h, c, url, errbuf, hdrs, body, len, &sink, ans);
    CURLcode rc = curl_easy_perform(h);
    curl_easy_getinfo(h, CURLINFO_TOTAL_TIME, &ans->elapsed_s);
    if (rc != CURLE_OK) {
        plm_buf_done(&sink.b);
        return request_failed(rc, url, errbuf, sink.overflow, ans, err);
    }
    curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &ans->status);
    return request_take_body(&sink, ans, err);
}
