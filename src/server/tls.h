/* tls.h: TLS termination for the listeners' front (gate.h), with GnuTLS from Debian.
 * A tls_store holds the current certificate/key pair (PLIMSOLL_TLS_CERT, PLIMSOLL_TLS_KEY) and
 * the protocol policy: TLS 1.2 and 1.3 only, ALPN http/1.1 only (no HTTP/2 here).
 * tls_store_reload (SIGHUP) loads the pair again: new handshakes use the new pair, sessions
 * already open keep the credentials they started with (reference-counted), and a pair that does
 * not load is reported and the old one kept.
 * Owns: the credentials; each tls_conn holds one reference. Thread-safe: reload runs on the
 * signal thread while the gate threads start sessions. */
#pragma once
#include <stdbool.h>
#include <sys/types.h>

#include "../core/err.h"

struct tls_store;
struct tls_conn;

/* Loads and checks the pair; an error names the variable (unreadable file, not PEM, a key that
 * does not match the certificate). */
struct tls_store *tls_store_new(const char *cert_path, const char *key_path, struct plm_err *err);
int tls_store_reload(struct tls_store *t, struct plm_err *err);
void tls_store_free(struct tls_store *t);

/* A server session on a connected non-blocking socket (not owned: the caller closes it). NULL
 * out of memory. */
struct tls_conn *tls_conn_new(struct tls_store *t, int fd);
void tls_conn_free(struct tls_conn *c);

enum { TLS_AGAIN = -1, TLS_FAIL = -2 };
/* 1: done; TLS_AGAIN: call again when the socket is ready (tls_conn_wants_write says which
 * way); TLS_FAIL: give up the connection. */
int tls_conn_handshake(struct tls_conn *c);
bool tls_conn_wants_write(const struct tls_conn *c);
/* > 0 bytes; 0 the peer closed; TLS_AGAIN; TLS_FAIL. */
ssize_t tls_conn_recv(struct tls_conn *c, void *buf, size_t n);
/* Bytes read from the socket but not yet returned (decrypted, or read ahead): epoll cannot
 * report them, so the caller reads on. */
bool tls_conn_pending(const struct tls_conn *c);
/* > 0 bytes taken; TLS_AGAIN (call again later with the same bytes); TLS_FAIL. */
ssize_t tls_conn_send(struct tls_conn *c, const void *buf, size_t n);
/* Sends close_notify if it can without blocking. */
void tls_conn_bye(struct tls_conn *c);
