/* hostsock.h: the docker transport of a grant (providers.md §5.4): a per-run unix socket in a
 * private host directory, served over HTTP/1.1 by the daemon, bind-mounted into the run's
 * container at DOCK_HS_SOCK_IN next to the client preload at DOCK_HS_PRELOAD_IN.
 *
 * The transport only carries bytes: every guest request becomes one host_api->call() with the
 * method and the request target exactly as received (no decoding, no normalisation: the broker
 * checks raw targets), and the answer goes back as status + Content-Length + body. Every rule of
 * the grant lives behind `call` (src/broker); the only answers this file makes up itself are the
 * HTTP framing errors below and the connection limit, each before `call` is reached:
 *     400 malformed request line or header    411 Transfer-Encoding (no chunked uploads)
 *     431 header section over 16 KiB         505 an HTTP version other than 1.0 / 1.1
 *     503 the request parser failed (the helper died or misbehaved), or out of memory/threads
 *     502 `call` answered a status outside 200..599 (a 1xx cannot be a final answer)
 * At most DOCK_HS_CONN_MAX connections are served at once; more wait unaccepted in the listen
 * backlog (DOCK_HS_BACKLOG) until one ends, and past that the guest's connect(2) fails. A
 * connection that sends no complete head in time is closed without an answer.
 * A body is read up to DOCK_HS_BODY_MAX + 1 bytes and handed on as read: the broker answers 413
 * past DOCK_HS_BODY_MAX, so an oversized upload is refused in the broker's check order. Every
 * response closes its connection (no keep-alive: the node client uses agent:false anyway).
 *
 * The guest's bytes are never parsed in the daemon: the listener is handed to a guestio server
 * (src/guestio, docs/privsep.md), whose confined helper process reads and parses the HTTP and
 * forwards one canonical frame per request; if the helper fails, the requests it held get 503
 * and a new helper takes the next connection. hostsock.c owns the directory and the socket. */
#pragma once
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "../../core/err.h"
#include "../../core/provider.h"

#define DOCK_HS_SOCK_IN "/run/host-api.sock"        /* (spec) where the guest finds the socket */
#define DOCK_HS_PRELOAD_IN "/run/plimsoll-host.mjs" /* the node preload, mounted read-only */
#define DOCK_HS_ENV "HOST_API_SOCKET"               /* (spec) the variable naming the socket */
#define DOCK_HS_CONN_MAX 32                         /* (spec) connections at once */
#define DOCK_HS_BACKLOG 64                          /* connections waiting for one of those */
#define DOCK_HS_HEAD_MAX (16u * 1024)               /* (spec) request line + headers */
#define DOCK_HS_BODY_MAX (1u * 1024 * 1024)         /* (spec §5.3) the broker refuses more */
#define DOCK_HS_HEAD_MS 5000u                       /* (spec) read header */
#define DOCK_HS_READ_MS 10000u                      /* (spec) read the whole request */
#define DOCK_HS_WRITE_MS 30000u                     /* (spec) write the answer */
#define DOCK_HS_DIR_PREFIX "plimsoll-broker-"

/* ---- hostsock.c ---------------------------------------------------------------------------- */
/* Timeouts, all in ms; a NULL limits pointer means the spec's DOCK_HS_*_MS. Tests shorten them. */
struct dock_hs_limits {
    uint32_t head_ms, read_ms, write_ms;
};

struct dock_hostsock;
struct gio_server;

/* The directory under which each run's private directory is made: `configured` when non-empty,
 * else $RUNTIME_DIRECTORY (its first entry), else /run/plimsoll (created 0700), else /tmp. A
 * candidate must be an absolute directory, not a symlink; all but /tmp must belong to this
 * euid and be writable by no one else. dockerd must see the same path: a daemon with a private
 * /tmp (systemd PrivateTmp) needs one of the first three. */
int dock_hs_base_dir(const char *configured, char *out, size_t cap, struct plm_err *err);

/* Removes run directories under base that a daemon which died left behind: ours (this euid),
 * older than min_age_s, whose socket nobody listens on. Another daemon's live ones are kept.
 * Returns how many went. */
int dock_hs_sweep(const char *base, unsigned min_age_s);

/* Makes <base>/plimsoll-broker-XXXXXX (0700) holding host-api.sock (0666, listening) and
 * host-api.mjs (0444, api->node_preload), and starts serving. api is copied (the caller's may be
 * freed once the run returns); its cb_ctx is used under the hold/release contract of provider.h.
 * Everything made is undone on failure. */
int dock_hostsock_start(const char *base, const struct plm_host_api *api, const struct dock_hs_limits *lim,
                        struct dock_hostsock **out, struct plm_err *err);
/* The same served from <dir>/<stem>.sock and <dir>/<stem>.mjs in a directory the caller owns and
 * keeps (a session's, mounted into its container once at open: session_grant.c); stop removes
 * the two files, never dir. A name already there is an error and is left alone. */
int dock_hostsock_start_in(const char *dir, const char *stem, const struct plm_host_api *api,
                           const struct dock_hs_limits *lim, struct dock_hostsock **out, struct plm_err *err);
/* Host paths of the socket and the preload file (valid until dock_hostsock_stop). */
const char *dock_hostsock_sock_path(const struct dock_hostsock *hs);
const char *dock_hostsock_preload_path(const struct dock_hostsock *hs);
/* Ends serving, on every run's every exit path: no new call begins; the listener is closed;
 * the socket, the preload and the directory are removed; live connections are shut down and
 * their threads joined, except a thread inside `call` that holds cb_ctx (api->hold non-NULL),
 * which finishes on its own (its answer then has no reader) and releases. Without hold/release
 * it waits for such a call to return. NULL-safe. */
void dock_hostsock_stop(struct dock_hostsock *hs);
/* Threads of every server in the process that are still running (guestio monitors and call
 * threads, detached ones included). */
unsigned dock_hostsock_threads(void);
/* Waits up to timeout_ms for dock_hostsock_threads() to reach 0; true when it did. */
bool dock_hostsock_quiesce(uint32_t timeout_ms);

/* Tests: the guestio helper executable every later start spawns (NULL: the installed one). */
void dock_hostsock_set_helper(const char *path);
/* Tests: the guestio server behind a live socket (its helper's pid and counters). */
struct gio_server *dock_hostsock_gio(const struct dock_hostsock *hs);
