/* tls.c: see tls.h. */
#include "../core/cleanup.h"
#include "tls.h"

#include <errno.h>
#include <gnutls/gnutls.h>
#include <gnutls/x509.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#define TLS_READ_AHEAD (16u * 1024 + 512) /* one whole record and the header of the next */

/* TLS 1.2 and 1.3 only, GnuTLS's NORMAL suites otherwise; the server's preference order. */
#define TLS_PRIORITY "NORMAL:-VERS-ALL:+VERS-TLS1.3:+VERS-TLS1.2:%SERVER_PRECEDENCE"

struct tls_creds {
    gnutls_certificate_credentials_t x;
    atomic_uint refs;
};

struct tls_store {
    pthread_mutex_t mu; /* cur */
    struct tls_creds *cur;
    gnutls_priority_t prio;
    char *cert_path, *key_path;
};

struct tls_conn {
    gnutls_session_t s;
    struct tls_creds *creds;
    bool send_pending; /* a send returned AGAIN: the next one repeats it (GnuTLS's rule) */
    int fd;
    /* Read ahead: GnuTLS asks for a record's 5-byte header, then its body, two recv calls per
     * record; one recv into this buffer serves both. Allocated only while it holds bytes, so an
     * idle connection costs nothing here. */
    unsigned char *ahead;
    size_t ahead_off, ahead_len;
};

static void ahead_release(struct tls_conn *c)
{
    free(c->ahead);
    c->ahead = NULL;
    c->ahead_off = c->ahead_len = 0;
}

/* GnuTLS's pull: from the read-ahead first, else one recv of up to a whole record. */
static ssize_t conn_pull(gnutls_transport_ptr_t p, void *data, size_t len)
{
    struct tls_conn *c = p;
    if (c->ahead_len > c->ahead_off) {
        size_t n = c->ahead_len - c->ahead_off < len ? c->ahead_len - c->ahead_off : len;
        memcpy(data, c->ahead + c->ahead_off, n);
        c->ahead_off += n;
        if (c->ahead_off == c->ahead_len)
            ahead_release(c);
        return (ssize_t)n;
    }
    if (len >= TLS_READ_AHEAD) { /* as large as the buffer: straight into GnuTLS's */
        ssize_t r = recv(c->fd, data, len, MSG_DONTWAIT);
        if (r < 0)
            gnutls_transport_set_errno(c->s, errno);
        return r;
    }
    if (!(c->ahead = malloc(TLS_READ_AHEAD))) {
        gnutls_transport_set_errno(c->s, ENOMEM);
        return -1;
    }
    ssize_t r = recv(c->fd, c->ahead, TLS_READ_AHEAD, MSG_DONTWAIT);
    if (r <= 0) {
        int e = errno;
        ahead_release(c);
        if (r < 0)
            gnutls_transport_set_errno(c->s, e);
        return r;
    }
    c->ahead_len = (size_t)r;
    return conn_pull(p, data, len);
}

/* GnuTLS asks this before some reads: bytes are ready when the read-ahead holds some. */
static int conn_pull_timeout(gnutls_transport_ptr_t p, unsigned int ms)
{
    struct tls_conn *c = p;
    if (c->ahead_len > c->ahead_off)
        return 1;
    struct pollfd pf = {.fd = c->fd, .events = POLLIN};
    int r = poll(&pf, 1, ms == GNUTLS_INDEFINITE_TIMEOUT ? -1 : (int)ms);
    if (r < 0)
        gnutls_transport_set_errno(c->s, errno);
    return r;
}

static void creds_unref(struct tls_creds *c)
{
    if (c && atomic_fetch_sub(&c->refs, 1) == 1) {
        gnutls_certificate_free_credentials(c->x);
        free(c);
    }
}

static int load_file(const char *var, const char *path, gnutls_datum_t *d, struct plm_err *err)
{
    int rc = gnutls_load_file(path, d);
    if (rc < 0) {
        /* GnuTLS says only "error loading file": errno still holds the reason */
        int e = errno;
        return plm_fail(err, e, PLM_E_INVALID, "%s=%s: cannot read it: %s", var, path,
                        e ? strerror(e) : gnutls_strerror(rc));
    }
    return 0;
}

static struct tls_creds *load_pair(const char *cert_path, const char *key_path, struct plm_err *err)
{
    gnutls_datum_t cert = {0}, key = {0};
    struct tls_creds *c = NULL;
    if (load_file("PLIMSOLL_TLS_CERT", cert_path, &cert, err) < 0 || load_file("PLIMSOLL_TLS_KEY", key_path, &key, err) < 0)
        goto out;
    /* The certificate alone first, so an error names the file that is wrong. */
    gnutls_x509_crt_t *list = NULL;
    unsigned n = 0;
    int rc = gnutls_x509_crt_list_import2(&list, &n, &cert, GNUTLS_X509_FMT_PEM, 0);
    if (rc < 0) {
        plm_fail(err, 0, PLM_E_INVALID, "PLIMSOLL_TLS_CERT=%s: not a PEM certificate: %s", cert_path, gnutls_strerror(rc));
        goto out;
    }
    for (unsigned i = 0; i < n; i++)
        gnutls_x509_crt_deinit(list[i]);
    gnutls_free(list);
    gnutls_x509_privkey_t pk;
    if ((rc = gnutls_x509_privkey_init(&pk)) >= 0) {
        rc = gnutls_x509_privkey_import(pk, &key, GNUTLS_X509_FMT_PEM);
        gnutls_x509_privkey_deinit(pk);
    }
    if (rc < 0) {
        plm_fail(err, 0, PLM_E_INVALID, "PLIMSOLL_TLS_KEY=%s: not a PEM private key: %s", key_path, gnutls_strerror(rc));
        goto out;
    }
    if (!(c = calloc(1, sizeof *c)) || gnutls_certificate_allocate_credentials(&c->x) < 0) {
        free(c);
        c = NULL;
        plm_fail(err, ENOMEM, PLM_E_INTERNAL, "TLS: out of memory");
        goto out;
    }
    /* checks that the key belongs to the certificate */
    rc = gnutls_certificate_set_x509_key_mem2(c->x, &cert, &key, GNUTLS_X509_FMT_PEM, NULL, 0);
    if (rc < 0) {
        gnutls_certificate_free_credentials(c->x);
        free(c);
        c = NULL;
        if (rc == GNUTLS_E_CERTIFICATE_KEY_MISMATCH)
            plm_fail(err, 0, PLM_E_INVALID, "PLIMSOLL_TLS_KEY=%s does not match PLIMSOLL_TLS_CERT=%s", key_path, cert_path);
        else
            plm_fail(err, 0, PLM_E_INVALID, "PLIMSOLL_TLS_CERT=%s, PLIMSOLL_TLS_KEY=%s: %s", cert_path, key_path,
                     gnutls_strerror(rc));
        goto out;
    }
    atomic_init(&c->refs, 1);
out:
    gnutls_free(cert.data);
    if (key.data) {
        memset(key.data, 0, key.size);
        gnutls_free(key.data);
    }
    return c;
}

DEFINE_CLEANUP(struct tls_store, tls_store_free)

struct tls_store *tls_store_new(const char *cert_path, const char *key_path, struct plm_err *err)
{
    struct tls_store *t cleanup_(tls_store_free) = calloc(1, sizeof *t);
    if (!t || !(t->cert_path = strdup(cert_path)) || !(t->key_path = strdup(key_path))) {
        plm_fail(err, ENOMEM, PLM_E_INTERNAL, "TLS: out of memory");
        return NULL;
    }
    pthread_mutex_init(&t->mu, NULL);
    int rc = gnutls_priority_init2(&t->prio, TLS_PRIORITY, NULL, 0);
    if (rc < 0) {
        t->prio = NULL;
        plm_fail(err, 0, PLM_E_INTERNAL, "TLS: priority string: %s", gnutls_strerror(rc));
        return NULL;
    }
    if (!(t->cur = load_pair(cert_path, key_path, err)))
        return NULL;
    return take_ptr(&t);
}

int tls_store_reload(struct tls_store *t, struct plm_err *err)
{
    struct tls_creds *fresh = load_pair(t->cert_path, t->key_path, err);
    if (!fresh)
        return -1;
    pthread_mutex_lock(&t->mu);
    struct tls_creds *old = t->cur;
    t->cur = fresh;
    pthread_mutex_unlock(&t->mu);
    creds_unref(old); /* freed once the last session that uses it ends */
    return 0;
}

void tls_store_free(struct tls_store *t)
{
    if (!t)
        return;
    creds_unref(t->cur);
    if (t->prio)
        gnutls_priority_deinit(t->prio);
    free(t->cert_path);
    free(t->key_path);
    pthread_mutex_destroy(&t->mu);
    free(t);
}

struct tls_conn *tls_conn_new(struct tls_store *t, int fd)
{
    struct tls_conn *c = calloc(1, sizeof *c);
    if (!c)
        return NULL;
    if (gnutls_init(&c->s, GNUTLS_SERVER | GNUTLS_NONBLOCK | GNUTLS_NO_SIGNAL) < 0) {
        free(c);
        return NULL;
    }
    pthread_mutex_lock(&t->mu);
    c->creds = t->cur;
    atomic_fetch_add(&c->creds->refs, 1);
    pthread_mutex_unlock(&t->mu);
    static const gnutls_datum_t h1 = {(unsigned char *)"http/1.1", 8};
    if (gnutls_priority_set(c->s, t->prio) < 0 || gnutls_credentials_set(c->s, GNUTLS_CRD_CERTIFICATE, c->creds->x) < 0 ||
        gnutls_alpn_set_protocols(c->s, &h1, 1, 0) < 0) {
        tls_conn_free(c);
        return NULL;
    }
    gnutls_certificate_server_set_request(c->s, GNUTLS_CERT_IGNORE);
    /* reads through the read-ahead (conn_pull), writes straight to the socket (GnuTLS's own) */
    c->fd = fd;
    gnutls_transport_set_ptr2(c->s, c, (gnutls_transport_ptr_t)(intptr_t)fd); /* as set_int does */
    gnutls_transport_set_pull_function(c->s, conn_pull);
    gnutls_transport_set_pull_timeout_function(c->s, conn_pull_timeout);
    return c;
}

void tls_conn_free(struct tls_conn *c)
{
    if (!c)
        return;
    gnutls_deinit(c->s);
    creds_unref(c->creds);
    ahead_release(c);
    free(c);
}

int tls_conn_handshake(struct tls_conn *c)
{
    for (;;) {
        int rc = gnutls_handshake(c->s);
        if (rc == GNUTLS_E_SUCCESS)
            return 1;
        if (rc == GNUTLS_E_AGAIN)
            return TLS_AGAIN;
        if (rc == GNUTLS_E_INTERRUPTED || !gnutls_error_is_fatal(rc))
            continue; /* a warning alert: the handshake goes on */
        /* tell the peer why (protocol_version for TLS 1.1 and older), if it can go out now */
        (void)gnutls_alert_send_appropriate(c->s, rc);
        return TLS_FAIL;
    }
}

bool tls_conn_wants_write(const struct tls_conn *c) { return gnutls_record_get_direction(c->s) == 1; }

ssize_t tls_conn_recv(struct tls_conn *c, void *buf, size_t n)
{
    for (;;) {
        ssize_t r = gnutls_record_recv(c->s, buf, n);
        if (r >= 0)
            return r;
        if (r == GNUTLS_E_AGAIN)
            return TLS_AGAIN;
        if (r == GNUTLS_E_INTERRUPTED)
            continue;
        if (r == GNUTLS_E_PREMATURE_TERMINATION)
            return 0; /* closed without close_notify: an end, as with plain TCP */
        return TLS_FAIL; /* renegotiation attempts included: this server does not renegotiate */
    }
}

bool tls_conn_pending(const struct tls_conn *c)
{
    return gnutls_record_check_pending(c->s) > 0 || c->ahead_len > c->ahead_off;
}

ssize_t tls_conn_send(struct tls_conn *c, const void *buf, size_t n)
{
    for (;;) {
        ssize_t r = c->send_pending ? gnutls_record_send(c->s, NULL, 0) : gnutls_record_send(c->s, buf, n);
        if (r >= 0) {
            c->send_pending = false;
            return r;
        }
        if (r == GNUTLS_E_AGAIN) {
            c->send_pending = true;
            return TLS_AGAIN;
        }
        if (r == GNUTLS_E_INTERRUPTED)
            continue;
        return TLS_FAIL;
    }
}

void tls_conn_bye(struct tls_conn *c) { (void)gnutls_bye(c->s, GNUTLS_SHUT_WR); }
