/* client_js.c: generates the guest-side JS client and the node preload module (client_js.h).
 * Trusts: the profile (validated at load) but still embeds every variable string only as an
 * ASCII-only JS string literal (brk_sbuf_js_string), so no name or route can break out of its
 * literal. Invariant: the inputs are the route templates, the global name and the preamble;
 * nothing here can reach a credential, so the generated text cannot contain one. */
#include "client_js.h"

#include <stdlib.h>
#include <string.h>

#include "../core/validate.h"
#include "text.h"

/* The client body. It expects `G` (the global name) and `ROUTES` ([{m, p}]) before it. */
static const char client_body[] =
    "var send = globalThis.__plimsoll_host_send;\n"
    "try { delete globalThis.__plimsoll_host_send; } catch (e) {}\n"
    "function permitted(m, p) {\n"
    "  if (typeof p !== \"string\" || p.charAt(0) !== \"/\") return false;\n"
    "  try { if (decodeURIComponent(p) !== p || encodeURI(p) !== p) return false; }\n"
    "  catch (e) { return false; }\n"
    "  if (/[\\\\?#\\u0000-\\u001f\\u007f]/.test(p)) return false;\n"
    "  var segs = p.split(\"/\").slice(1);\n"
    "  for (var i = 0; i < segs.length; i++)\n"
    "    if (segs[i] === \".\" || segs[i] === \"..\") return false;\n"
    "  for (var r = 0; r < ROUTES.length; r++) {\n"
    "    if (ROUTES[r].m !== m) continue;\n"
    "    var ps = ROUTES[r].p.split(\"/\").slice(1);\n"
    "    if (ps.length !== segs.length) continue;\n"
    "    var ok = true;\n"
    "    for (var k = 0; ok && k < ps.length; k++)\n"
    "      ok = ps[k] === \"*\" ? segs[k].length > 0 : ps[k] === segs[k];\n"
    "    if (ok) return true;\n"
    "  }\n"
    "  return false;\n"
    "}\n"
    "function call(method, path, body) {\n"
    "  try {\n"
    "    var m = String(method).toUpperCase();\n"
    "    if (!permitted(m, path))\n"
    "      return Promise.reject(new Error(\"host api call not permitted by sandbox capability: \" +\n"
    "                                      m + \" \" + String(path)));\n"
    "    var payload = body === undefined ? undefined : JSON.stringify(body);\n"
    "    if (typeof send !== \"function\")\n"
    "      return Promise.reject(new Error(\"host api broker unavailable\"));\n"
    "    return Promise.resolve(send(m, path, payload)).then(function (res) {\n"
    "      var status = res.status, text = res.body === undefined ? \"\" : String(res.body), value;\n"
    "      try { value = JSON.parse(text); } catch (e) { value = text; }\n"
    "      if (status >= 200 && status <= 299) return value;\n"
    "      throw new Error(\"host api \" + status + \": \" + text);\n"
    "    });\n"
    "  } catch (e) {\n"
    "    return Promise.reject(e);\n"
    "  }\n"
    "}\n"
    "var api = Object.freeze({\n"
    "  call: call,\n"
    "  get: function (p) { return call(\"GET\", p); },\n"
    "  put: function (p, b) { return call(\"PUT\", p, b); },\n"
    "  post: function (p, b) { return call(\"POST\", p, b); },\n"
    "  patch: function (p, b) { return call(\"PATCH\", p, b); },\n"
    "  del: function (p) { return call(\"DELETE\", p); }\n"
    "});\n"
    "Object.defineProperty(globalThis, G, {value: api, writable: false, enumerable: false,\n"
    "                                      configurable: false});\n";

/* __plimsoll_host_send for node over the per-run unix socket (providers.md §5.4, §5.5). The
 * agent is off, so no idle keep-alive socket holds the process open after the guest is done. */
static const char node_send[] =
    "import http from \"node:http\";\n"
    "const SOCKET = process.env.HOST_API_SOCKET || \"/run/host-api.sock\";\n"
    "globalThis.__plimsoll_host_send = function (method, path, body) {\n"
    "  return new Promise(function (resolve, reject) {\n"
    "    var headers = {\"content-type\": \"application/json\"};\n"
    "    if (body !== undefined) headers[\"content-length\"] = Buffer.byteLength(body);\n"
    "    var req = http.request({socketPath: SOCKET, method: method, path: path, headers: headers,\n"
    "                            agent: false}, function (res) {\n"
    "      var chunks = [];\n"
    "      res.on(\"data\", function (c) { chunks.push(c); });\n"
    "      res.on(\"end\", function () {\n"
    "        resolve({status: res.statusCode, body: Buffer.concat(chunks).toString(\"utf8\")});\n"
    "      });\n"
    "      res.on(\"error\", function () { reject(new Error(\"host api unavailable\")); });\n"
    "    });\n"
    "    req.on(\"error\", function () { reject(new Error(\"host api broker unavailable\")); });\n"
    "    if (body !== undefined) req.write(body);\n"
    "    req.end();\n"
    "  });\n"
    "};\n";

static void add_client(struct brk_sbuf *b, const char *global, const struct brk_route *routes, size_t n)
{
    brk_sbuf_str(b, "(function () {\n\"use strict\";\nvar G = ");
    brk_sbuf_js_string(b, global, strlen(global));
    brk_sbuf_str(b, ";\nvar ROUTES = [");
    for (size_t i = 0; i < n; i++) {
        brk_sbuf_str(b, i ? ",\n  {\"m\": " : "\n  {\"m\": ");
        const char *m = brk_method_name(routes[i].method);
        brk_sbuf_js_string(b, m, strlen(m));
        brk_sbuf_str(b, ", \"p\": ");
        brk_sbuf_js_string(b, routes[i].path, routes[i].len);
        brk_sbuf_str(b, "}");
    }
    brk_sbuf_str(b, "];\n");
    brk_sbuf_str(b, client_body);
    brk_sbuf_str(b, "})();\n");
}

char *brk_client_js_parts(const char *global, const struct brk_route *routes, size_t n_routes, const char *preamble)
{
    if (!global || !plm_utf8_ok(global, strlen(global)))
        return NULL;
    if (preamble && !plm_utf8_ok(preamble, strlen(preamble)))
        return NULL;
    struct brk_sbuf b = {0};
    add_client(&b, global, routes, n_routes);
    if (preamble && *preamble) {
        brk_sbuf_str(&b, preamble);
        brk_sbuf_str(&b, "\n");
    }
    return brk_sbuf_take(&b);
}

char *brk_client_js(const struct brk_profile *p)
{
    if (!p)
        return strdup("");
    return brk_client_js_parts(p->global, p->routes, p->n_routes, p->preamble);
}

char *brk_node_preload(const struct brk_profile *p)
{
    if (!p)
        return strdup("");
    if (!p->global || !plm_utf8_ok(p->global, strlen(p->global)))
        return NULL;
    struct brk_sbuf b = {0};
    brk_sbuf_str(&b, node_send);
    add_client(&b, p->global, p->routes, p->n_routes);
    if (p->preamble && *p->preamble) {
        /* indirect eval: global scope, script semantics, exactly as the quickjs transport runs
         * the preamble appended to the client */
        brk_sbuf_str(&b, "(0, eval)(");
        brk_sbuf_js_string(&b, p->preamble, strlen(p->preamble));
        brk_sbuf_str(&b, ");\n");
    }
    return brk_sbuf_take(&b);
}
