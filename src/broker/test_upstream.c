/* test_upstream.c: the scripted loopback upstream of test_upstream.h (tests only).
 * Trusts: the broker under test only as far as HTTP/1.1 framing; anything malformed closes the
 * connection. Invariant: every request that reaches a handler is counted before it is answered,
 * so a test that waited for a count knows the request is on the upstream side. */
#include "test_upstream.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

struct tu_conn {
    struct tu_conn *next;
    struct tu *tu;
    int fd;
    pthread_t th;
};

static bool stopping(struct tu *tu)
{
    pthread_mutex_lock(&tu->mu);
    bool s = tu->stop;
    pthread_mutex_unlock(&tu->mu);
    return s;
}

static bool send_all(int fd, const char *p, size_t n)
{
    while (n > 0) {
        ssize_t w = send(fd, p, n, MSG_NOSIGNAL);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return false;
        p += w;
        n -= (size_t)w;
    }
    return true;
}

/* One send per answer: split writes would meet Nagle and delayed ACKs (40 ms per call). */
static bool reply(int fd, const char *status_line, const char *extra_headers, const char *body)
{
    char msg[2048];
    size_t blen = body ? strlen(body) : 0;
    int n = snprintf(msg, sizeof msg, "HTTP/1.1 %s\r\n%sContent-Length: %zu\r\n\r\n%s", status_line,
                     extra_headers ? extra_headers : "", blen, body ? body : "");
    return n > 0 && (size_t)n < sizeof msg && send_all(fd, msg, (size_t)n);
}

/* Waits until the peer closes (or the server stops). */
static void wait_close(struct tu *tu, int fd)
{
    while (!stopping(tu)) {
        struct pollfd p = {.fd = fd, .events = POLLIN};
        int r = poll(&p, 1, 50);
        if (r > 0) {
            char b[4096];
            ssize_t n = recv(fd, b, sizeof b, 0);
            if (n <= 0)
                return;
        }
    }
}

/* Reads one request; returns false on close or malformed framing. */
static bool read_request(int fd, char *buf, size_t cap, size_t *have, struct tu_req *rq)
{
    char *end;
    for (;;) {
        buf[*have] = '\0';
        end = strstr(buf, "\r\n\r\n");
        if (end)
            break;
        if (*have >= cap - 1)
            return false;
        ssize_t n = recv(fd, buf + *have, cap - 1 - *have, 0);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return false;
        *have += (size_t)n;
    }
    size_t head_len = (size_t)(end - buf) + 4;
    *rq = (struct tu_req){0};
    char *sp1 = memchr(buf, ' ', head_len);
    if (!sp1)
        return false;
    char *sp2 = memchr(sp1 + 1, ' ', head_len - (size_t)(sp1 + 1 - buf));
    char *eol = strstr(buf, "\r\n");
    if (!sp2 || sp2 > eol)
        return false;
    snprintf(rq->method, sizeof rq->method, "%.*s", (int)(sp1 - buf), buf);
    snprintf(rq->target, sizeof rq->target, "%.*s", (int)(sp2 - sp1 - 1), sp1 + 1);
    size_t content_length = 0;
    size_t hl = 0;
    for (char *line = eol + 2; line < end;) {
        char *le = strstr(line, "\r\n");
        size_t ll = (size_t)(le - line);
        if (ll > 15 && strncasecmp(line, "content-length:", 15) == 0)
            content_length = strtoul(line + 15, NULL, 10);
        for (size_t i = 0; i < ll && hl + 2 < sizeof rq->headers; i++) {
            char c = line[i];
            char *colon = memchr(line, ':', ll);
            if (colon && line + i < colon && c >= 'A' && c <= 'Z')
                c = (char)(c - 'A' + 'a');
            rq->headers[hl++] = c;
        }
        if (hl + 1 < sizeof rq->headers)
            rq->headers[hl++] = '\n';
        rq->headers[hl] = '\0';
        line = le + 2;
    }
    if (content_length > 8u * 1024 * 1024)
        return false;
    rq->body = malloc(content_length + 1);
    if (!rq->body)
        return false;
    size_t got = *have - head_len < content_length ? *have - head_len : content_length;
    memcpy(rq->body, buf + head_len, got);
    size_t rest_off = head_len + got;
    while (got < content_length) {
        ssize_t n = recv(fd, rq->body + got, content_length - got, 0);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0) {
            free(rq->body);
            rq->body = NULL;
            return false;
        }
        got += (size_t)n;
    }
    rq->body[content_length] = '\0';
    rq->body_len = content_length;
    /* keep any pipelined bytes */
    memmove(buf, buf + rest_off, *have - rest_off);
    *have -= rest_off;
    return true;
}

static bool respond(struct tu *tu, int fd, const struct tu_req *rq)
{
    const char *t = rq->target;
    char hdr[256];
    if (strcmp(t, "/health") == 0) {
        pthread_mutex_lock(&tu->mu);
        int st = tu->health_status;
        pthread_mutex_unlock(&tu->mu);
        char line[64];
        snprintf(line, sizeof line, "%d Health", st);
        return reply(fd, line, "Content-Type: text/plain\r\n", "health");
    }
    if (strcmp(t, "/v1/redirect") == 0)
        return reply(fd, "302 Found", "Location: http://evil.example/steal\r\n", "moved");
    if (strcmp(t, "/v1/busy") == 0 || strcmp(t, "/v1/quota") == 0) {
        pthread_mutex_lock(&tu->mu);
        snprintf(hdr, sizeof hdr, "Retry-After: %s\r\nContent-Type: text/plain\r\n", tu->retry_after);
        pthread_mutex_unlock(&tu->mu);
        return reply(fd, t[4] == 'b' ? "503 Busy" : "429 Slow Down", hdr, "try later");
    }
    if (strcmp(t, "/v1/big") == 0) {
        static const char head[] = "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                                   "Content-Length: 5242880\r\n\r\n";
        char chunk[1024];
        memset(chunk, 'x', sizeof chunk);
        if (send_all(fd, head, sizeof head - 1))
            send_all(fd, chunk, sizeof chunk);
        wait_close(tu, fd);
        return false;
    }
    if (strcmp(t, "/v1/endless") == 0) {
        static const char head[] = "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                                   "Transfer-Encoding: chunked\r\n\r\n";
        if (!send_all(fd, head, sizeof head - 1))
            return false;
        static char chunk[65536 + 16];
        size_t n = (size_t)snprintf(chunk, sizeof chunk, "%x\r\n", 65536);
        memset(chunk + n, 'y', 65536);
        memcpy(chunk + n + 65536, "\r\n", 2);
        for (int i = 0; i < 1024 && !stopping(tu); i++) /* at most 64 MiB */
            if (!send_all(fd, chunk, n + 65536 + 2))
                break;
        return false;
    }
    if (strcmp(t, "/v1/hang") == 0) {
        wait_close(tu, fd);
        return false;
    }
    if (strcmp(t, "/v1/slow") == 0) {
        pthread_mutex_lock(&tu->mu);
        while (tu->hold && !tu->stop)
            pthread_cond_wait(&tu->cv, &tu->mu);
        pthread_mutex_unlock(&tu->mu);
        return reply(fd, "200 OK", "Content-Type: application/json\r\n", "{\"slow\":true}");
    }
    if (strcmp(t, "/v1/ctype-bad") == 0)
        return reply(fd, "200 OK", "Content-Type: text/\x01plain\r\n", "odd");
    if (strcmp(t, "/v1/no-ctype") == 0)
        return reply(fd, "200 OK", "", "bare");
    if (strcmp(t, "/v1/status-999") == 0)
        return reply(fd, "999 Odd", "Content-Type: text/plain\r\n", "odd");
    if (strcmp(t, "/v1/text") == 0)
        return reply(fd, "200 OK", "Content-Type: text/plain\r\n", "plain text");
    if (strncmp(t, "/v1/", 4) == 0)
        return reply(fd, "200 OK",
                     "Content-Type: application/json\r\nSet-Cookie: session=upstream-secret\r\n"
                     "X-Upstream: 1\r\n",
                     "{\"ok\":true}");
    return reply(fd, "404 Not Found", "Content-Type: text/plain\r\n", "no");
}

static void *conn_main(void *arg)
{
    struct tu_conn *c = arg;
    struct tu *tu = c->tu;
    size_t cap = 65536, have = 0;
    char *buf = malloc(cap);
    while (buf && !stopping(tu)) {
        struct tu_req rq;
        if (!read_request(c->fd, buf, cap, &have, &rq))
            break;
        pthread_mutex_lock(&tu->mu);
        tu->hits++;
        struct tu_req copy = rq;
        if (tu->n_reqs < TU_MAX_REQS) {
            tu->reqs[tu->n_reqs++] = copy;
            rq.body = NULL; /* owned by the log now */
        }
        pthread_cond_broadcast(&tu->cv);
        pthread_mutex_unlock(&tu->mu);
        bool keep = respond(tu, c->fd, &copy);
        free(rq.body);
        if (!keep)
            break;
    }
    free(buf);
    shutdown(c->fd, SHUT_RDWR);
    return NULL;
}

static void *accept_main(void *arg)
{
    struct tu *tu = arg;
    while (!stopping(tu)) {
        struct pollfd p = {.fd = tu->lfd, .events = POLLIN};
        if (poll(&p, 1, 50) <= 0)
            continue;
        int fd = accept4(tu->lfd, NULL, NULL, SOCK_CLOEXEC);
        if (fd < 0)
            continue;
        struct tu_conn *c = calloc(1, sizeof *c);
        if (!c) {
            close(fd);
            continue;
        }
        int one = 1;
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        c->tu = tu;
        c->fd = fd;
        pthread_mutex_lock(&tu->mu);
        c->next = tu->conns;
        tu->conns = c;
        pthread_mutex_unlock(&tu->mu);
        pthread_create(&c->th, NULL, conn_main, c);
    }
    return NULL;
}

int tu_start(struct tu *tu)
{
    memset(tu, 0, sizeof *tu);
    pthread_mutex_init(&tu->mu, NULL);
    pthread_cond_init(&tu->cv, NULL);
    tu->health_status = 200;
    snprintf(tu->retry_after, sizeof tu->retry_after, "10");
    tu->lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (tu->lfd < 0)
        return -1;
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t al = sizeof a;
    if (bind(tu->lfd, (struct sockaddr *)&a, sizeof a) < 0 || listen(tu->lfd, 128) < 0 ||
        getsockname(tu->lfd, (struct sockaddr *)&a, &al) < 0)
        return -1;
    tu->port = ntohs(a.sin_port);
    snprintf(tu->origin, sizeof tu->origin, "http://127.0.0.1:%u", tu->port);
    return pthread_create(&tu->acceptor, NULL, accept_main, tu) == 0 ? 0 : -1;
}

void tu_stop(struct tu *tu)
{
    pthread_mutex_lock(&tu->mu);
    tu->stop = true;
    pthread_cond_broadcast(&tu->cv);
    pthread_mutex_unlock(&tu->mu);
    pthread_join(tu->acceptor, NULL);
    close(tu->lfd);
    struct tu_conn *c = tu->conns;
    while (c) {
        struct tu_conn *next = c->next;
        shutdown(c->fd, SHUT_RDWR);
        pthread_join(c->th, NULL);
        close(c->fd);
        free(c);
        c = next;
    }
    tu->conns = NULL;
    tu_reset(tu);
    pthread_cond_destroy(&tu->cv);
    pthread_mutex_destroy(&tu->mu);
}

size_t tu_count(struct tu *tu, const char *target)
{
    pthread_mutex_lock(&tu->mu);
    size_t n = 0;
    if (!target)
        n = tu->hits;
    else
        for (size_t i = 0; i < tu->n_reqs; i++)
            n += strcmp(tu->reqs[i].target, target) == 0;
    pthread_mutex_unlock(&tu->mu);
    return n;
}

bool tu_wait_count(struct tu *tu, const char *target, size_t n, unsigned ms)
{
    for (unsigned waited = 0; waited <= ms; waited += 5) {
        if (tu_count(tu, target) >= n)
            return true;
        struct timespec ts = {0, 5 * 1000000L};
        nanosleep(&ts, NULL);
    }
    return false;
}

void tu_set_hold(struct tu *tu, bool hold)
{
    pthread_mutex_lock(&tu->mu);
    tu->hold = hold;
    pthread_cond_broadcast(&tu->cv);
    pthread_mutex_unlock(&tu->mu);
}

void tu_reset(struct tu *tu)
{
    pthread_mutex_lock(&tu->mu);
    for (size_t i = 0; i < tu->n_reqs; i++)
        free(tu->reqs[i].body);
    tu->n_reqs = 0;
    tu->hits = 0;
    tu->health_status = 200;
    snprintf(tu->retry_after, sizeof tu->retry_after, "10");
    pthread_mutex_unlock(&tu->mu);
}
