/* guard.h: the e2b egress guard (providers.md §5.4): the daemon's HTTP listener that a granted
 * guest reaches through E2B's egress proxy. E2B's per-sandbox network rule injects the header
 * X-Plimsoll-E2B-Guard: <per-run token> outside the VM, so the guest never holds the token; the
 * guard authenticates each call by it and hands (method, raw target, body) to that run's broker
 * core (plm_host_api.call), which applies every rule of the grant.
 *
 * The listener speaks plain HTTP/1.1, parsed in the confined guestio helper (docs/privsep.md):
 * the public https endpoint of E2B_GUARD_URL is a TLS terminator in front of PLIMSOLL_GUARD_ADDR
 * (docs/e2b.md).
 *
 * Handler order (spec): POST to the exact path, no query (else 404); token lookup (401
 * {"error":"unknown or expired egress guard credential"}, or "missing egress guard credential"
 * without the header); an admission slot, 64 at once (else 503 Retry-After: 1); the body, at most
 * 2 MiB (else 413); the JSON {method, path[, body]} (else 400); the broker's answer (a status
 * outside 200..599 becomes 502). The helper answers 404, a missing header and malformed HTTP
 * itself; the daemon (guard.c) decides the rest on the helper's canonical GCALL frame.
 *
 * The body parser (guestio/guardparse.c) is pure, fuzzed on its own, and runs only in the helper. */
#pragma once
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "../../core/err.h"
#include "../../core/provider.h"
#include "../../guestio/guardparse.h" /* the header name, the body cap, the body parser */

#define E2B_GUARD_DEFAULT_PATH "/v1/e2b/guard"
#define E2B_GUARD_TOKEN_LEN 68 /* "crg_" + 64 hex */
#define E2B_GUARD_INFLIGHT 64
#define E2B_GUARD_CONN_MAX 256
#define E2B_GUARD_TIMEOUT_S 30 /* an idle or slow connection is dropped after this */

/* ---- guard.c -------------------------------------------------------------------------------- */
/* true for "crg_" + 64 lower-case hex. */
bool e2b_guard_token_ok(const char *t, size_t len);
struct e2b_guard;
/* Listens on addr (host:port, [v6]:port) and serves path. */
int e2b_guard_start(const char *addr, const char *path, struct e2b_guard **out, struct plm_err *err);
uint16_t e2b_guard_port(const struct e2b_guard *g);
/* Stops the listener; waits for calls in flight. NULL-safe. */
void e2b_guard_stop(struct e2b_guard *g);
/* A fresh token for this run's api (copied; its cb_ctx is held by each call in flight). */
int e2b_guard_register(struct e2b_guard *g, const struct plm_host_api *api, char token[E2B_GUARD_TOKEN_LEN + 1],
                       struct plm_err *err);
/* api NULL: a session's credential (E2B_SESSION_GRANTS=session), registered for the session's life
 * with no grant: the guard answers it 403 until e2b_guard_lend gives it one call's api, and again
 * after e2b_guard_unlend takes it back (the call's broker, held by calls in flight, ends with the
 * call). Lending to an unknown or already lent credential is an error. */
int e2b_guard_lend(struct e2b_guard *g, const char *token, const struct plm_host_api *api, struct plm_err *err);
void e2b_guard_unlend(struct e2b_guard *g, const char *token);
/* After this, the token gets 401. The token buffer is wiped. */
void e2b_guard_unregister(struct e2b_guard *g, char token[E2B_GUARD_TOKEN_LEN + 1]);
