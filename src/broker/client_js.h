/* client_js.h: the guest-side JavaScript client of a grant (providers.md §5.5), as text.
 *
 * The guest sees globalThis[<global>] (default `host`), a frozen object with
 *     call(method, path[, body]), get(path), put(path, body), post(path, body),
 *     patch(path, body), del(path)
 * each returning a Promise. The body, when not undefined, is sent as JSON.stringify(body). A 2xx
 * answer resolves with the parsed JSON (or the raw text when it is not JSON); any other status
 * rejects with Error("host api <status>: <raw text>"), so broker refusals read, for example,
 * "host api 403: forbidden by sandbox capability allowlist\n". Before sending, the client applies
 * the gate of §5.5 against the route templates baked into the text (defence in depth; the broker
 * decides): a refused call rejects with
 * Error("host api call not permitted by sandbox capability: <METHOD> <path>") and sends nothing.
 * The text never contains a credential: it is generated from the route templates, the global
 * name (a JSON string literal, so it cannot inject code) and the preamble only.
 *
 * THE TRANSPORT CONTRACT. The client sends through one function the transport installs before
 * the client text runs:
 *
 *     globalThis.__plimsoll_host_send(method, path, body)
 *        method: the upper-cased method, e.g. "GET"
 *        path:   the raw target, exactly as the guest wrote it (already past the client gate)
 *        body:   a string (the JSON text) or undefined when there is no body
 *        returns {status: number, body: string}, or a Promise of it; a thrown error or a
 *        rejected Promise (e.g. Error("host api broker unavailable")) rejects the guest's call
 *
 * The client captures the function and deletes the global (when it is configurable), so later
 * guest code reaches the broker only through the client. It must hand (method, path, body) to
 * brk_call() unchanged and return brk_reply's status and body (as UTF-8 text) unchanged:
 *  - quickjs: a native function; the worker frames {method, path, body} to the daemon, whose
 *    brk_call answers {status, body} (it may return the object synchronously).
 *  - docker/node: brk_node_preload() implements it with node:http over the unix socket
 *    $HOST_API_SOCKET (default /run/host-api.sock).
 *
 * Every generator returns a malloc'd NUL-terminated string (free()), or NULL out of memory or
 * when an input is not valid UTF-8. */
#pragma once
#include <stddef.h>

#include "profiles.h"
#include "route.h"

/* The client for a profile as one classic script: the client, then the preamble on its own
 * lines. A NULL profile (a run without a grant) gives "". */
char *brk_client_js(const struct brk_profile *p);
/* The same from parts: global is used as given (JSON-quoted, never validated here), preamble
 * may be NULL. */
char *brk_client_js_parts(const char *global, const struct brk_route *routes, size_t n_routes, const char *preamble);
/* An ES module for `node --import` (docker snippets and every project step): installs
 * __plimsoll_host_send over node:http on the unix socket, then the client, then runs the
 * preamble at global scope with an indirect eval (script semantics, as under quickjs). A NULL
 * profile gives "" (the module is empty without a grant). */
char *brk_node_preload(const struct brk_profile *p);
