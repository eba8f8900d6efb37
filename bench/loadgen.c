/* loadgen.c: a closed-loop HTTP/1.1 load generator for plimsolld on loopback.
 * Each of C threads keeps one keep-alive connection and sends the same POST for D seconds;
 * every round trip is timed. Prints requests/s, p50, p90, p99 and the status-code histogram as one
 * JSON line. No third-party code: the figures are ours end to end.
 *
 * usage: loadgen HOST PORT PATH BODYFILE CONTENT_TYPE CONCURRENCY SECONDS [EXPECT_STATUS]
 *        (set env LOADGEN_TOKEN to add an Authorization header; LOADGEN_TLS_CA=<CA file> speaks
 *        https (GnuTLS, the certificate checked against that CA): the handshake is made once per
 *        connection and is not part of any request's time, so the figure is TLS per request on
 *        keep-alive) */
#include <arpa/inet.h>
#include <gnutls/gnutls.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

static gnutls_certificate_credentials_t tls_creds; /* NULL: plain HTTP */

struct conn {
    int fd;
    gnutls_session_t s;
};

static ssize_t conn_read(struct conn *c, void *buf, size_t n)
{
    if (!c->s)
        return read(c->fd, buf, n);
    ssize_t r;
    do
        r = gnutls_record_recv(c->s, buf, n);
    while (r == GNUTLS_E_INTERRUPTED || r == GNUTLS_E_AGAIN);
    return r < 0 ? -1 : r;
}

static ssize_t conn_write(struct conn *c, const void *buf, size_t n)
{
    if (!c->s)
        return write(c->fd, buf, n);
    size_t done = 0;
    while (done < n) {
        ssize_t r = gnutls_record_send(c->s, (const char *)buf + done, n - done);
        if (r == GNUTLS_E_INTERRUPTED || r == GNUTLS_E_AGAIN)
            continue;
        if (r < 0)
            return -1;
        done += (size_t)r;
    }
    return (ssize_t)done;
}

static void conn_close(struct conn *c)
{
    if (c->s)
        gnutls_deinit(c->s);
    if (c->fd >= 0)
        close(c->fd);
    c->s = NULL;
    c->fd = -1;
}

struct worker {
    pthread_t t;
    const char *req;
    size_t req_len;
    struct sockaddr_in addr;
    double seconds;
    uint64_t *lat_ns;
    size_t n, cap;
    unsigned status_ok, status_other, errors, reconnects;
    int expect;
    const char *host;
};

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static int connect_to(const struct sockaddr_in *a, const char *host, struct conn *c)
{
    c->s = NULL;
    c->fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (c->fd < 0)
        return -1;
    int one = 1;
    setsockopt(c->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    if (connect(c->fd, (const struct sockaddr *)a, sizeof *a) < 0) {
        conn_close(c);
        return -1;
    }
    if (!tls_creds)
        return 0;
    int rc;
    if (gnutls_init(&c->s, GNUTLS_CLIENT) < 0) {
        c->s = NULL;
        conn_close(c);
        return -1;
    }
    gnutls_set_default_priority(c->s);
    gnutls_credentials_set(c->s, GNUTLS_CRD_CERTIFICATE, tls_creds);
    gnutls_session_set_verify_cert(c->s, host, 0);
    gnutls_transport_set_int(c->s, c->fd);
    do
        rc = gnutls_handshake(c->s);
    while (rc < 0 && !gnutls_error_is_fatal(rc));
    if (rc < 0) {
        fprintf(stderr, "loadgen: TLS handshake: %s\n", gnutls_strerror(rc));
        conn_close(c);
        return -1;
    }
    return 0;
}

/* Reads one response; returns its status, or -1 on a broken connection. */
static int read_response(struct conn *fd, char *buf, size_t cap, int *close_after)
{
    size_t have = 0;
    char *end = NULL;
    while (!end) {
        if (have == cap)
            return -1;
        ssize_t r = conn_read(fd, buf + have, cap - have);
        if (r <= 0)
            return -1;
        have += (size_t)r;
        end = memmem(buf, have, "\r\n\r\n", 4);
    }
    int status = atoi(buf + 9);
    size_t hdr = (size_t)(end - buf) + 4;
    size_t clen = 0;
    *close_after = 0;
    for (char *p = buf; p < end; p++) {
        if (strncasecmp(p, "\r\ncontent-length:", 17) == 0)
            clen = strtoul(p + 17, NULL, 10);
        if (strncasecmp(p, "\r\nconnection: close", 19) == 0)
            *close_after = 1;
    }
    size_t body_have = have - hdr;
    while (body_have < clen) {
        char tmp[65536];
        size_t want = clen - body_have < sizeof tmp ? clen - body_have : sizeof tmp;
        ssize_t r = conn_read(fd, tmp, want);
        if (r <= 0)
            return -1;
        body_have += (size_t)r;
    }
    return status;
}

static void *run(void *arg)
{
    struct worker *w = arg;
    char *buf = malloc(1 << 20);
    struct conn c = {.fd = -1};
    uint64_t stop = now_ns() + (uint64_t)(w->seconds * 1e9);
    while (now_ns() < stop) {
        if (c.fd < 0 && connect_to(&w->addr, w->host, &c) < 0) {
            w->errors++;
            usleep(1000);
            continue;
        }
        uint64_t t0 = now_ns();
        if (conn_write(&c, w->req, w->req_len) != (ssize_t)w->req_len) {
            conn_close(&c), w->errors++;
            continue;
        }
        int close_after = 0;
        int st = read_response(&c, buf, 1 << 20, &close_after);
        uint64_t dt = now_ns() - t0;
        if (st < 0) {
            conn_close(&c), w->errors++;
            continue;
        }
        if (close_after)
            conn_close(&c), w->reconnects++;
        if (st == w->expect)
            w->status_ok++;
        else
            w->status_other++;
        if (w->n == w->cap) {
            w->cap = w->cap ? w->cap * 2 : 65536;
            w->lat_ns = realloc(w->lat_ns, w->cap * sizeof *w->lat_ns);
        }
        w->lat_ns[w->n++] = dt;
    }
    conn_close(&c);
    free(buf);
    return NULL;
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

int main(int argc, char **argv)
{
    if (argc < 8) {
        fprintf(stderr, "usage: loadgen HOST PORT PATH BODYFILE CONTENT_TYPE CONCURRENCY SECONDS [EXPECT_STATUS]\n");
        return 2;
    }
    FILE *f = fopen(argv[4], "rb");
    if (!f) {
        perror(argv[4]);
        return 2;
    }
    char body[1 << 16];
    size_t blen = fread(body, 1, sizeof body, f);
    fclose(f);
    const char *ca = getenv("LOADGEN_TLS_CA");
    if (ca && *ca) {
        if (gnutls_certificate_allocate_credentials(&tls_creds) < 0 ||
            gnutls_certificate_set_x509_trust_file(tls_creds, ca, GNUTLS_X509_FMT_PEM) <= 0) {
            fprintf(stderr, "loadgen: LOADGEN_TLS_CA=%s: no CA certificate loaded\n", ca);
            return 2;
        }
    }
    const char *token = getenv("LOADGEN_TOKEN");
    char auth[512] = "";
    if (token)
        snprintf(auth, sizeof auth, "Authorization: Bearer %s\r\n", token);
    char *req = malloc(blen + 1024);
    int hl = snprintf(req, 1024,
                      "POST %s HTTP/1.1\r\nHost: %s\r\nContent-Type: %s\r\nConnect-Protocol-Version: 1\r\n"
                      "Plimsoll-Request-Id: 0123456789abcdef0123456789abcdef\r\n%sContent-Length: %zu\r\n\r\n",
                      argv[3], argv[1], argv[5], auth, blen);
    memcpy(req + hl, body, blen);
    int conc = atoi(argv[6]);
    double secs = atof(argv[7]);
    int expect = argc > 8 ? atoi(argv[8]) : 200;
    struct worker *w = calloc((size_t)conc, sizeof *w);
    for (int i = 0; i < conc; i++) {
        w[i].req = req;
        w[i].req_len = (size_t)hl + blen;
        w[i].addr.sin_family = AF_INET;
        w[i].addr.sin_port = htons((uint16_t)atoi(argv[2]));
        inet_pton(AF_INET, argv[1], &w[i].addr.sin_addr);
        w[i].seconds = secs;
        w[i].expect = expect;
        w[i].host = argv[1];
    }
    uint64_t t0 = now_ns();
    for (int i = 0; i < conc; i++)
        pthread_create(&w[i].t, NULL, run, &w[i]);
    size_t total = 0;
    unsigned ok = 0, other = 0, errors = 0, reconnects = 0;
    for (int i = 0; i < conc; i++) {
        pthread_join(w[i].t, NULL);
        total += w[i].n;
        ok += w[i].status_ok, other += w[i].status_other, errors += w[i].errors, reconnects += w[i].reconnects;
    }
    double elapsed = (double)(now_ns() - t0) / 1e9;
    uint64_t *all = malloc((total ? total : 1) * sizeof *all);
    size_t k = 0;
    for (int i = 0; i < conc; i++) {
        memcpy(all + k, w[i].lat_ns, w[i].n * sizeof *all);
        k += w[i].n;
        free(w[i].lat_ns);
    }
    qsort(all, total, sizeof *all, cmp_u64);
#define PCT(p) (total ? (double)all[(size_t)((double)(total - 1) * (p))] / 1000.0 : 0.0)
    printf("{\"path\":\"%s\",\"concurrency\":%d,\"seconds\":%.2f,\"requests\":%zu,\"rps\":%.0f,"
           "\"p50_us\":%.1f,\"p90_us\":%.1f,\"p99_us\":%.1f,\"expected_status\":%d,\"ok\":%u,\"other\":%u,"
           "\"errors\":%u,\"closed_by_server\":%u,\"tls\":%s}\n",
           argv[3], conc, elapsed, total, (double)total / elapsed, PCT(0.50), PCT(0.90), PCT(0.99), expect, ok,
           other, errors, reconnects, tls_creds ? "true" : "false");
    free(all);
    free(w);
    free(req);
    if (tls_creds)
        gnutls_certificate_free_credentials(tls_creds);
    return other || errors ? 1 : 0;
}
