/* engine.c: the Docker Engine API over the pinned unix socket, with libcurl.
 * Owns: one curl easy handle per call (and one per attach connection); nothing global but
 * curl_global_init, done by the constructor.
 * Trusts: nothing dockerd says. Replies are size-capped while they arrive, parsed as JSON with
 * duplicate keys refused, and every field is type-checked where it is read; the attach stream
 * goes through the framing decoder of frames.c.
 * Invariant: no request leaves this process except over the pinned socket: no proxy (from the
 * environment or anywhere), no redirects, no protocol but plain HTTP/1.1 on that socket. */
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "../../core/buf.h"
#include "internal.h"

int dock_random(void *buf, size_t n)
{
    uint8_t *p = buf;
    while (n) {
        ssize_t r = getrandom(p, n, 0);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            return -1;
        p += r, n -= (size_t)r;
    }
    return 0;
}

void dock_hex(const uint8_t *p, size_t n, char *out)
{
    static const char hex[] = "0123456789abcdef";
    for (size_t i = 0; i < n; i++) {
        out[2 * i] = hex[p[i] >> 4];
        out[2 * i + 1] = hex[p[i] & 15];
    }
    out[2 * n] = 0;
}

bool dock_id_ok(const char *id)
{
    size_t n = 0;
    for (; id[n]; n++)
        if (!((id[n] >= '0' && id[n] <= '9') || (id[n] >= 'a' && id[n] <= 'f')))
            return false;
    return n == 64;
}

void dock_reply_done(struct dock_reply *r)
{
    free(r->body);
    memset(r, 0, sizeof *r);
}

static CURL *handle(const struct dock_engine *e, long timeout_ms)
{
    CURL *c = curl_easy_init();
    if (!c)
        return NULL;
    curl_easy_setopt(c, CURLOPT_UNIX_SOCKET_PATH, e->sock);
    curl_easy_setopt(c, CURLOPT_PROXY, ""); /* never a proxy, whatever the environment says */
    curl_easy_setopt(c, CURLOPT_NOPROXY, "*");
    curl_easy_setopt(c, CURLOPT_FOLLOWLOCATION, 0L);
    curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L); /* called from many threads */
    curl_easy_setopt(c, CURLOPT_PROTOCOLS_STR, "http");
    curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, timeout_ms);
    curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT_MS, timeout_ms < 5000 ? timeout_ms : 5000L);
    return c;
}

struct sink {
    struct plm_buf b; /* capped at the call's reply_max */
    bool over;
};

static size_t on_body(char *p, size_t size, size_t n, void *ud)
{
    struct sink *s = ud;
    size_t len = size * n;
    if (s->b.max && len > s->b.max - s->b.len) {
        s->over = true;
        return 0; /* aborts the transfer: a reply past its cap is never buffered */
    }
    return plm_buf_add(&s->b, p, len) ? len : 0;
}

int dock_call(const struct dock_engine *e, const char *method, const char *path, const char *json_body, long timeout_ms,
              size_t reply_max, struct dock_reply *out, struct plm_err *err)
{
    memset(out, 0, sizeof *out);
    CURL *c cleanup_curl = handle(e, timeout_ms);
    if (!c)
        return plm_fail(err, ENOMEM, PLM_E_INTERNAL, "curl_easy_init failed");
    char url[1200];
    snprintf(url, sizeof url, "http://docker%s", path);
    struct sink s = {.b = {.max = reply_max}};
    struct curl_slist *hdrs cleanup_slist = NULL;
    hdrs = curl_slist_append(hdrs, "Content-Type: application/json");
    hdrs = curl_slist_append(hdrs, "Expect:");
    curl_easy_setopt(c, CURLOPT_URL, url);
    curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, method);
    curl_easy_setopt(c, CURLOPT_HTTPHEADER, hdrs);
    if (json_body) {
        curl_easy_setopt(c, CURLOPT_POSTFIELDS, json_body);
        curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)strlen(json_body));
    } else if (strcmp(method, "POST") == 0) {
        curl_easy_setopt(c, CURLOPT_POSTFIELDS, "");
        curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)0);
    }
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, &s);
    CURLcode cr = curl_easy_perform(c);
    curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &out->status);
    out->len = s.b.len;
    out->body = plm_buf_take(&s.b, NULL); /* NULL when nothing came (or after a failure) */
    if (!out->body)
        out->len = 0;
    if (s.over || cr != CURLE_OK)
        dock_reply_done(out); /* a failed call hands back no body */
    if (s.over)
        return plm_fail(err, EMSGSIZE, PLM_E_INTERNAL, "%s %s: dockerd's reply exceeds %zu bytes", method, path,
                        reply_max);
    if (cr != CURLE_OK) {
        bool down = cr == CURLE_COULDNT_CONNECT || cr == CURLE_OPERATION_TIMEDOUT || cr == CURLE_GOT_NOTHING ||
                    cr == CURLE_RECV_ERROR || cr == CURLE_SEND_ERROR;
        return plm_fail(err, 0, down ? PLM_E_UNAVAILABLE : PLM_E_INTERNAL, "dockerd on %s: %s %s: %s", e->sock, method,
                        path, curl_easy_strerror(cr));
    }
    return 0;
}

/* dockerd's {"message": "..."} as a short printable string, for our own error messages. */
static void docker_message(const struct dock_reply *r, char *buf, size_t cap)
{
    buf[0] = 0;
    json_t *j = r->body ? json_loadb(r->body, r->len, 0, NULL) : NULL;
    const char *m = j ? json_string_value(json_object_get(j, "message")) : NULL;
    size_t k = 0;
    for (const char *p = m ? m : ""; *p && k + 1 < cap && k < 200; p++)
        buf[k++] = (*p >= 0x20 && *p < 0x7f) ? *p : '?';
    buf[k] = 0;
    json_decref(j);
}

int dock_call_json(const struct dock_engine *e, const char *method, const char *path, const char *json_body, long want,
                   long timeout_ms, size_t reply_max, json_t **out, struct plm_err *err)
{
    *out = NULL;
    struct dock_reply r cleanup_reply = {0};
    if (dock_call(e, method, path, json_body, timeout_ms, reply_max, &r, err) < 0)
        return -1;
    if (r.status != want) {
        char msg[220];
        docker_message(&r, msg, sizeof msg);
        return plm_fail(err, 0, r.status == 404 ? PLM_E_ENVIRONMENT : PLM_E_INTERNAL, "%s %s: HTTP %ld%s%s", method,
                        path, r.status, *msg ? ": " : "", msg);
    }
    json_error_t je;
    json_t *j cleanup_json = r.body ? json_loadb(r.body, r.len, JSON_REJECT_DUPLICATES, &je) : NULL;
    if (!j || (!json_is_object(j) && !json_is_array(j)))
        return plm_fail(err, 0, PLM_E_INTERNAL, "%s %s: dockerd's reply is not a JSON document", method, path);
    *out = take_ptr(&j);
    return 0;
}

/* ---- attach ---------------------------------------------------------------------------------- */

static int send_all(struct dock_attach *a, const char *p, size_t n, int64_t deadline, struct plm_err *err)
{
    while (n) {
        size_t sent = 0;
        CURLcode cr = curl_easy_send(a->curl, p, n, &sent);
        if (cr == CURLE_AGAIN) {
            struct pollfd pf = {a->fd, POLLOUT, 0};
            int64_t left = deadline - (int64_t)clock_mono_ms();
            if (left <= 0 || poll(&pf, 1, (int)left) == 0)
                return plm_fail(err, ETIMEDOUT, PLM_E_UNAVAILABLE, "attach: dockerd is not reading");
            continue;
        }
        if (cr != CURLE_OK)
            return plm_fail(err, 0, PLM_E_UNAVAILABLE, "attach: %s", curl_easy_strerror(cr));
        p += sent, n -= sent;
    }
    return 0;
}

/* Connects and upgrades; on failure a may hold a handle that the caller (dock_attach_open)
 * closes, once. */
static int attach_handshake(const struct dock_engine *e, const char *id, struct dock_attach *a, struct plm_err *err)
{
    int64_t deadline = (int64_t)clock_mono_ms() + 10000;
    a->curl = handle(e, 10000);
    if (!a->curl)
        return plm_fail(err, ENOMEM, PLM_E_INTERNAL, "curl_easy_init failed");
    /* CONNECT_ONLY: libcurl connects to the socket and hands it over; the upgraded (hijacked)
     * stream is then spoken directly, which libcurl's HTTP layer cannot do. */
    curl_easy_setopt(a->curl, CURLOPT_URL, "http://docker/");
    curl_easy_setopt(a->curl, CURLOPT_CONNECT_ONLY, 1L);
    CURLcode cr = curl_easy_perform(a->curl);
    curl_socket_t fd = CURL_SOCKET_BAD;
    if (cr == CURLE_OK)
        cr = curl_easy_getinfo(a->curl, CURLINFO_ACTIVESOCKET, &fd);
    if (cr != CURLE_OK || fd == CURL_SOCKET_BAD)
        return plm_fail(err, 0, PLM_E_UNAVAILABLE, "dockerd on %s: attach: %s", e->sock, curl_easy_strerror(cr));
    a->fd = fd;
    char req[512];
    int n = snprintf(req, sizeof req,
                     "POST " DOCK_API "/containers/%s/attach?stream=1&stdin=1&stdout=1&stderr=1 HTTP/1.1\r\n"
                     "Host: docker\r\nContent-Type: text/plain\r\nConnection: Upgrade\r\nUpgrade: tcp\r\n\r\n",
                     id);
    if (send_all(a, req, (size_t)n, deadline, err) < 0)
        return -1;
    /* The reply header, capped; what follows it already belongs to the stream. */
    char hdr[8192];
    size_t have = 0;
    char *end = NULL;
    while (!end) {
        if (have == sizeof hdr - 1)
            return plm_fail(err, EMSGSIZE, PLM_E_INTERNAL, "attach: reply header too long");
        size_t got = 0;
        cr = curl_easy_recv(a->curl, hdr + have, sizeof hdr - 1 - have, &got);
        if (cr == CURLE_AGAIN) {
            struct pollfd pf = {a->fd, POLLIN, 0};
            int64_t left = deadline - (int64_t)clock_mono_ms();
            if (left <= 0 || poll(&pf, 1, (int)left) == 0)
                return plm_fail(err, ETIMEDOUT, PLM_E_UNAVAILABLE, "attach: no reply from dockerd");
            continue;
        }
        if (cr != CURLE_OK || got == 0)
            return plm_fail(err, 0, PLM_E_UNAVAILABLE, "attach: connection closed by dockerd");
        have += got;
        hdr[have] = 0;
        end = strstr(hdr, "\r\n\r\n");
    }
    if (strncmp(hdr, "HTTP/1.1 101 ", 13) != 0 && strncmp(hdr, "HTTP/1.1 200 ", 13) != 0) {
        char line[80];
        snprintf(line, sizeof line, "%.*s", (int)strcspn(hdr, "\r\n"), hdr);
        for (char *p = line; *p; p++)
            if (*p < 0x20 || *p >= 0x7f)
                *p = '?';
        return plm_fail(err, 0, PLM_E_INTERNAL, "attach %s: %s", id, line);
    }
    size_t used = (size_t)(end + 4 - hdr);
    a->pend_len = have - used;
    memcpy(a->pend, hdr + used, a->pend_len);
    return 0;
}

int dock_attach_open(const struct dock_engine *e, const char *id, struct dock_attach *a, struct plm_err *err)
{
    memset(a, 0, sizeof *a);
    a->fd = -1;
    if (attach_handshake(e, id, a, err) < 0) {
        dock_attach_close(a);
        return -1;
    }
    return 0;
}

int dock_attach_pump(struct dock_attach *a, struct dock_io *io, int64_t deadline_ms, struct plm_err *err)
{
    uint8_t buf[65536];
    if (a->pend_len) {
        size_t n = a->pend_len;
        a->pend_len = 0;
        if (dock_mux_feed(&a->mux, a->pend, n, io->sink, io->ctx) < 0)
            return plm_fail(err, EPROTO, PLM_E_INTERNAL, "malformed attach stream from dockerd");
    }
    for (;;) {
        if (a->eof)
            return 1;
        if (io->stop && io->stop(io->ctx))
            return 0;
        /* stdin first: send what is left, then half-close so the guest sees EOF */
        bool want_out = !a->in_closed && (io->in_off < io->in_len || io->close_in);
        if (!a->in_closed && io->in_off == io->in_len && io->close_in) {
            shutdown(a->fd, SHUT_WR);
            a->in_closed = true;
            want_out = false;
        }
        int64_t left = deadline_ms - (int64_t)clock_mono_ms();
        if (left <= 0)
            return 0;
        struct pollfd pf = {a->fd, (short)(POLLIN | (want_out ? POLLOUT : 0)), 0};
        int pr = poll(&pf, 1, left > 1000 ? 1000 : (int)left);
        if (pr < 0 && errno != EINTR)
            return plm_fail(err, errno, PLM_E_INTERNAL, "attach: poll: %s", strerror(errno));
        if (pr <= 0)
            continue;
        if (want_out && (pf.revents & POLLOUT)) {
            size_t chunk = io->in_len - io->in_off < sizeof buf ? io->in_len - io->in_off : sizeof buf;
            size_t sent = 0;
            CURLcode cr = chunk ? curl_easy_send(a->curl, io->in + io->in_off, chunk, &sent) : CURLE_OK;
            if (cr == CURLE_OK)
                io->in_off += sent;
            else if (cr != CURLE_AGAIN)
                a->in_closed = true; /* the guest closed its stdin or exited: keep reading output */
        }
        if (pf.revents & (POLLIN | POLLHUP | POLLERR)) {
            size_t got = 0;
            CURLcode cr = curl_easy_recv(a->curl, buf, sizeof buf, &got);
            if (cr == CURLE_AGAIN)
                continue;
            if (cr != CURLE_OK)
                return plm_fail(err, 0, PLM_E_UNAVAILABLE, "attach: %s", curl_easy_strerror(cr));
            if (got == 0) {
                a->eof = true;
                if (!dock_mux_idle(&a->mux))
                    return plm_fail(err, EPROTO, PLM_E_INTERNAL, "attach stream from dockerd ended inside a frame");
                return 1;
            }
            if (dock_mux_feed(&a->mux, buf, got, io->sink, io->ctx) < 0)
                return plm_fail(err, EPROTO, PLM_E_INTERNAL, "malformed attach stream from dockerd");
        }
    }
}

bool dock_attach_stirred(const struct dock_attach *a)
{
    if (a->fd < 0 || a->eof || a->pend_len)
        return true;
    struct pollfd pf = {a->fd, POLLIN | POLLRDHUP, 0};
    return poll(&pf, 1, 0) != 0;
}

void dock_attach_close(struct dock_attach *a)
{
    if (a->curl)
        curl_easy_cleanup(a->curl); /* closes the socket */
    a->curl = NULL;
    a->fd = -1;
}

/* ---- containers ------------------------------------------------------------------------------ */

int dock_container_create(const struct dock_engine *e, const char *name, json_t *spec, char id[65], struct plm_err *err)
{
    char *body cleanup_free = json_dumps(spec, JSON_COMPACT);
    if (!body)
        return plm_fail(err, ENOMEM, PLM_E_INTERNAL, "out of memory encoding the container spec");
    char path[160];
    snprintf(path, sizeof path, DOCK_API "/containers/create?name=%s", name);
    json_t *j cleanup_json = NULL;
    if (dock_call_json(e, "POST", path, body, 201, 30000, 64 * 1024, &j, err) < 0)
        return plm_err_wrap(err, "create container");
    const char *v = json_string_value(json_object_get(j, "Id"));
    if (!v || !dock_id_ok(v))
        return plm_fail(err, 0, PLM_E_INTERNAL, "create container: dockerd returned no valid Id");
    memcpy(id, v, 65);
    return 0;
}

int dock_container_start(const struct dock_engine *e, const char *id, struct plm_err *err)
{
    char path[160];
    snprintf(path, sizeof path, DOCK_API "/containers/%s/start", id);
    struct dock_reply r;
    if (dock_call(e, "POST", path, NULL, 30000, 64 * 1024, &r, err) < 0)
        return plm_err_wrap(err, "start container");
    long st = r.status;
    char msg[220];
    docker_message(&r, msg, sizeof msg);
    dock_reply_done(&r);
    if (st != 204 && st != 304)
        return plm_fail(err, 0, PLM_E_INTERNAL, "start container: HTTP %ld: %s", st, msg);
    return 0;
}

int dock_container_wait(const struct dock_engine *e, const char *id, long timeout_ms, int64_t *code,
                        struct plm_err *err)
{
    char path[160];
    snprintf(path, sizeof path, DOCK_API "/containers/%s/wait?condition=not-running", id);
    json_t *j;
    if (dock_call_json(e, "POST", path, NULL, 200, timeout_ms, 64 * 1024, &j, err) < 0)
        return plm_err_wrap(err, "wait for container");
    json_t *sc = json_object_get(j, "StatusCode");
    json_t *we = json_object_get(j, "Error");
    int r = 0;
    if (!json_is_integer(sc) || (we && !json_is_null(we)))
        r = plm_fail(err, 0, PLM_E_INTERNAL, "wait for container: dockerd reported no exit status");
    else
        *code = json_integer_value(sc);
    json_decref(j);
    return r;
}

int dock_container_remove(const struct dock_engine *e, const char *id, int attempts, struct plm_err *err)
{
    char path[160];
    snprintf(path, sizeof path, DOCK_API "/containers/%s?force=1&v=1", id);
    for (int i = 0; i < attempts; i++) {
        if (i)
            sleep((unsigned)i); /* (spec) pauses of 1 s and 2 s */
        struct dock_reply r;
        if (dock_call(e, "DELETE", path, NULL, 10000, 64 * 1024, &r, err) < 0)
            continue;
        long st = r.status;
        dock_reply_done(&r);
        if (st == 204 || st == 404)
            return 0;
        plm_fail(err, 0, PLM_E_INTERNAL, "remove container %.12s: HTTP %ld", id, st);
    }
    return -1;
}

int dock_container_inspect(const struct dock_engine *e, const char *id, json_t **out, struct plm_err *err)
{
    char path[160];
    snprintf(path, sizeof path, DOCK_API "/containers/%s/json", id);
    return dock_call_json(e, "GET", path, NULL, 200, 10000, 1024 * 1024, out, err);
}
