/* client_js_test.c: the generated guest client (providers.md §5.5; §8 items 39 and 57).
 * Without arguments: properties of the text (global quoted, routes and preamble in, no token).
 * With --node: runs the client and the node preload module under node and checks their
 * behaviour (exit 77 when node is not installed). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "client_js.h"
#include "unit.h"

static const char *TOKEN = "tok-never-in-guest-7f3a";

static const char *fake_getenv(const char *name)
{
    return strcmp(name, "ACME_TOKEN") == 0 ? TOKEN : NULL;
}

static struct brk_profiles *load(void)
{
    const char *doc =
        "{\"profiles\": {\"acme\": {\"base_url\": \"https://api.example\", "
        "\"allow\": [\"GET /v1/items/*\", \"POST /v1/items/*\", \"PUT /v1/items/*\", "
        "\"PATCH /v1/items/*\", \"DELETE /v1/items/*\", \"GET /v1/text\"], "
        "\"allowed_callers\": [\"alice\"], \"token\": {\"type\": \"static\", \"env\": \"ACME_TOKEN\"}, "
        "\"global\": \"acme\", \"preamble\": \"var preambleVar = 1; globalThis.preambleRan = typeof acme;\"}}}";
    struct plm_err err = {0};
    struct brk_profiles *ps = brk_profiles_parse(doc, strlen(doc), fake_getenv, &err);
    if (!ps)
        printf("# %s\n", err.msg);
    return ps;
}

static int write_file(const char *path, const char *a, const char *b, const char *c)
{
    FILE *f = fopen(path, "w");
    if (!f)
        return -1;
    fputs(a, f);
    if (b)
        fputs(b, f);
    if (c)
        fputs(c, f);
    return fclose(f);
}

/* Runs node, turning each "PASS x" / "FAIL x" line into a check; "DONE" must come last. */
static void run_node(const char *cmd)
{
    FILE *p = popen(cmd, "r");
    CHECK(p != NULL);
    if (!p)
        return;
    char line[1024];
    bool done = false;
    int n = 0;
    while (fgets(line, sizeof line, p)) {
        line[strcspn(line, "\n")] = '\0';
        if (strncmp(line, "PASS ", 5) == 0 || strncmp(line, "FAIL ", 5) == 0) {
            n++;
            unit_n++;
            if (line[0] == 'P') {
                printf("ok %d - js: %s\n", unit_n, line + 5);
            } else {
                unit_failed++;
                printf("not ok %d - js: %s\n", unit_n, line + 5);
            }
        } else if (strcmp(line, "DONE") == 0) {
            done = true;
        } else {
            printf("# node: %s\n", line);
        }
    }
    CHECK(pclose(p) == 0);
    CHECK(done && n > 0);
}

/* The client under node with a scripted __plimsoll_host_send. */
static const char harness_pre[] =
    "var sent = [];\n"
    "globalThis.__plimsoll_host_send = function (m, p, b) {\n"
    "  sent.push([m, p, b]);\n"
    "  if (p === '/v1/items/deny') return {status: 403, body: 'forbidden by sandbox capability allowlist\\n'};\n"
    "  if (p === '/v1/items/boom') throw new Error('host api broker unavailable');\n"
    "  if (p === '/v1/items/later') return Promise.resolve({status: 201, body: '[1,2]'});\n"
    "  if (p === '/v1/text') return {status: 200, body: 'plain words'};\n"
    "  return {status: 200, body: JSON.stringify({m: m, p: p, b: b === undefined ? null : b})};\n"
    "};\n";

static const char harness_post[] =
    "\nfunction report(name, ok) { console.log((ok ? 'PASS ' : 'FAIL ') + name); }\n"
    "async function expectReject(name, pr, msg) {\n"
    "  try { await pr; report(name, false); } catch (e) { report(name, e instanceof Error && e.message === msg); }\n"
    "}\n"
    "(async function () {\n"
    "  var h = globalThis.acme;\n"
    "  report('installed as globalThis[\"acme\"]', typeof h === 'object' && typeof h.get === 'function');\n"
    "  report('the send hook is removed', typeof globalThis.__plimsoll_host_send === 'undefined');\n"
    "  report('preamble ran after the client', globalThis.preambleRan === 'object' && preambleVar === 1);\n"
    "  report('no host global besides acme', typeof globalThis.host === 'undefined');\n"
    "  var r = await h.get('/v1/items/1');\n"
    "  report('get resolves parsed JSON', r.m === 'GET' && r.p === '/v1/items/1' && r.b === null);\n"
    "  r = await h.post('/v1/items/1', {a: 1});\n"
    "  report('post sends JSON.stringify(body)', r.m === 'POST' && r.b === '{\"a\":1}');\n"
    "  r = await h.put('/v1/items/2', [1]);\n"
    "  report('put', r.m === 'PUT' && r.b === '[1]');\n"
    "  r = await h.patch('/v1/items/2', 'x');\n"
    "  report('patch', r.m === 'PATCH' && r.b === '\"x\"');\n"
    "  r = await h.del('/v1/items/2');\n"
    "  report('del is DELETE without body', r.m === 'DELETE' && r.b === null);\n"
    "  r = await h.call('get', '/v1/items/3');\n"
    "  report('call upper-cases the method', r.m === 'GET');\n"
    "  r = await h.get('/v1/text');\n"
    "  report('non-JSON text resolves as text', r === 'plain words');\n"
    "  r = await h.get('/v1/items/later');\n"
    "  report('a Promise from the transport', Array.isArray(r) && r.length === 2);\n"
    "  await expectReject('non-2xx rejects with status and raw text', h.get('/v1/items/deny'),\n"
    "                     'host api 403: forbidden by sandbox capability allowlist\\n');\n"
    "  await expectReject('a throwing transport rejects', h.get('/v1/items/boom'), 'host api broker unavailable');\n"
    "  var before = sent.length;\n"
    "  var bad = ['/v1/items/a?b', '/v1/items/a#b', '/v1/items/%2e%2e', '/v1/items/%zz', '/v1/items/..',\n"
    "             '/v1/items/.', '/v1/items/a\\\\b', '/v1/items/a\\nb', '/v1/items/a b', '/v1/items/caf\\u00e9',\n"
    "             '/v1/items/[x]', '/v1/items/', '/v1/items', '/v1/items/a/b', 'v1/items/1', '/v1/other/1', ''];\n"
    "  for (var i = 0; i < bad.length; i++)\n"
    "    await expectReject('gate refuses ' + JSON.stringify(bad[i]), h.get(bad[i]),\n"
    "                       'host api call not permitted by sandbox capability: GET ' + bad[i]);\n"
    "  await expectReject('gate refuses a method', h.call('TRACE', '/v1/items/1'),\n"
    "                     'host api call not permitted by sandbox capability: TRACE /v1/items/1');\n"
    "  await expectReject('gate refuses a wrong method', h.post('/v1/text', {}),\n"
    "                     'host api call not permitted by sandbox capability: POST /v1/text');\n"
    "  await expectReject('gate refuses a non-string path', h.get(42),\n"
    "                     'host api call not permitted by sandbox capability: GET 42');\n"
    "  report('refused calls send nothing', sent.length === before);\n"
    "  var cyc = {}; cyc.self = cyc;\n"
    "  var p = h.post('/v1/items/1', cyc);\n"
    "  report('a bad body is a rejected Promise, not a throw', p instanceof Promise);\n"
    "  await p.then(function () { report('cyclic body rejects', false); }, function () { report('cyclic body rejects', "
    "true); });\n"
    "  h.get = null;\n"
    "  report('the client is frozen', typeof h.get === 'function');\n"
    "  report('pwned stays undefined', typeof globalThis.pwned === 'undefined');\n"
    "  console.log('DONE');\n"
    "})().catch(function (e) { console.log('FAIL harness: ' + e); });\n";

/* The preload module under node, against a unix-socket server that echoes what it received. */
static const char preload_main[] =
    "import http from 'node:http';\n"
    "function report(name, ok) { console.log((ok ? 'PASS ' : 'FAIL ') + name); }\n"
    "const sock = process.env.HOST_API_SOCKET;\n"
    "const srv = http.createServer(function (req, res) {\n"
    "  var chunks = [];\n"
    "  req.on('data', function (c) { chunks.push(c); });\n"
    "  req.on('end', function () {\n"
    "    if (req.url === '/v1/items/deny') {\n"
    "      res.writeHead(403, {'content-type': 'text/plain; charset=utf-8'});\n"
    "      return res.end('forbidden by sandbox capability allowlist\\n');\n"
    "    }\n"
    "    res.writeHead(200, {'content-type': 'application/json'});\n"
    "    res.end(JSON.stringify({method: req.method, url: req.url, ct: req.headers['content-type'],\n"
    "                            len: req.headers['content-length'] || null,\n"
    "                            body: Buffer.concat(chunks).toString('utf8')}));\n"
    "  });\n"
    "});\n"
    "srv.listen(sock, async function () {\n"
    "  try {\n"
    "    await import('./preload.mjs');\n"
    "    var h = globalThis.acme;\n"
    "    report('preload installs the client', typeof h === 'object');\n"
    "    report('preload ran the preamble at global scope', globalThis.preambleRan === 'object' && "
    "globalThis.preambleVar === 1);\n"
    "    var r = await h.post('/v1/items/1', {a: 'é'});\n"
    "    report('POST over the socket', r.method === 'POST' && r.url === '/v1/items/1');\n"
    "    report('JSON body and content-type', r.body === '{\"a\":\"é\"}' && r.ct === 'application/json' && r.len === "
    "'10');\n"
    "    r = await h.get('/v1/items/2');\n"
    "    report('GET without body', r.method === 'GET' && r.body === '' && r.len === null);\n"
    "    try { await h.get('/v1/items/deny'); report('403 rejects', false); }\n"
    "    catch (e) { report('403 rejects', e.message === 'host api 403: forbidden by sandbox capability "
    "allowlist\\n'); }\n"
    "  } catch (e) { report('preload harness: ' + e, false); }\n"
    "  srv.close();\n"
    "  console.log('DONE');\n"
    "});\n";

static int node_tests(struct brk_profiles *ps)
{
    if (system("command -v node >/dev/null 2>&1") != 0)
        UNIT_SKIP("node is not installed");
    char dir[] = "/tmp/plimsoll-client-js-XXXXXX";
    CHECK(mkdtemp(dir) != NULL);
    char path[256], path2[256], cmd[1024];

    char *client = brk_client_js(&ps->v[0]);
    snprintf(path, sizeof path, "%s/client.js", dir);
    CHECK(client && write_file(path, harness_pre, client, harness_post) == 0);
    snprintf(cmd, sizeof cmd, "node %s 2>&1", path);
    run_node(cmd);
    free(client);

    /* item 57: a hostile global name stays data */
    char *hostile = brk_client_js_parts("x\"];globalThis.pwned=true;//", ps->v[0].routes, ps->v[0].n_routes, NULL);
    snprintf(path, sizeof path, "%s/hostile.js", dir);
    CHECK(hostile && write_file(path, "globalThis.__plimsoll_host_send = function () {};\n", hostile,
                                "\nconsole.log((typeof globalThis.pwned === 'undefined' ? 'PASS' : 'FAIL') + ' hostile "
                                "global not executed');\n"
                                "console.log((typeof globalThis['x\"];globalThis.pwned=true;//'] === 'object' ? 'PASS' "
                                ": 'FAIL') + ' hostile global is just a name');\n"
                                "console.log('DONE');\n") == 0);
    snprintf(cmd, sizeof cmd, "node %s 2>&1", path);
    run_node(cmd);
    free(hostile);

    char *pre = brk_node_preload(&ps->v[0]);
    snprintf(path, sizeof path, "%s/preload.mjs", dir);
    snprintf(path2, sizeof path2, "%s/main.mjs", dir);
    CHECK(pre && write_file(path, pre, NULL, NULL) == 0 && write_file(path2, preload_main, NULL, NULL) == 0);
    snprintf(cmd, sizeof cmd, "HOST_API_SOCKET=%s/host-api.sock node %s 2>&1", dir, path2);
    run_node(cmd);
    free(pre);

    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    CHECK(system(cmd) == 0);
    return 0;
}

int main(int argc, char **argv)
{
    struct brk_profiles *ps = load();
    CHECK(ps != NULL);
    if (!ps)
        return unit_done();
    if (argc > 1 && strcmp(argv[1], "--node") == 0) {
        node_tests(ps);
        brk_profiles_free(ps);
        return unit_done();
    }

    /* a run without a grant gets nothing */
    char *s = brk_client_js(NULL);
    CHECK(s && *s == '\0');
    free(s);
    s = brk_node_preload(NULL);
    CHECK(s && *s == '\0');
    free(s);

    /* item 39: the global, the routes, the preamble; never the token */
    char *c = brk_client_js(&ps->v[0]);
    CHECK(c != NULL);
    CHECK(c && strstr(c, "var G = \"acme\";") != NULL);
    CHECK(c && strstr(c, "Object.defineProperty(globalThis, G,") != NULL);
    CHECK(c && strstr(c, "{\"m\": \"GET\", \"p\": \"/v1/items/*\"}") != NULL);
    CHECK(c && strstr(c, "{\"m\": \"DELETE\", \"p\": \"/v1/items/*\"}") != NULL);
    CHECK(c && strstr(c, "__plimsoll_host_send") != NULL);
    const char *pre_at = c ? strstr(c, "var preambleVar = 1;") : NULL;
    CHECK(pre_at && pre_at > strstr(c, "})();")); /* after the client */
    CHECK(c && strstr(c, TOKEN) == NULL);
    CHECK(c && strstr(c, "api.example") == NULL); /* not even the upstream's address */
    free(c);
    char *m = brk_node_preload(&ps->v[0]);
    CHECK(m && strncmp(m, "import http from \"node:http\";", 29) == 0);
    CHECK(m && strstr(m, "/run/host-api.sock") != NULL && strstr(m, "HOST_API_SOCKET") != NULL);
    CHECK(m && strstr(m, "globalThis.__plimsoll_host_send = function") != NULL);
    CHECK(m && strstr(m, "(0, eval)(\"var preambleVar = 1; globalThis.preambleRan = typeof acme;\");") != NULL);
    CHECK(m && strstr(m, TOKEN) == NULL);
    free(m);

    /* item 57: the global is a quoted literal; nothing in it can close the literal */
    c = brk_client_js_parts("x\"];globalThis.pwned=true;//", ps->v[0].routes, 1, NULL);
    CHECK(c && strstr(c, "var G = \"x\\u0022];globalThis.pwned=true;//\";") != NULL);
    CHECK(c && strstr(c, "x\"]") == NULL);
    free(c);
    c = brk_client_js_parts("a\xe2\x80\xa8</script>\xf0\x9f\x98\x80", NULL, 0, "");
    CHECK(c && strstr(c, "var G = \"a\\u2028\\u003c/script\\u003e\\ud83d\\ude00\";") != NULL);
    free(c);
    CHECK(brk_client_js_parts("\xff", NULL, 0, NULL) == NULL); /* not UTF-8: refused */
    CHECK(brk_client_js_parts("ok", NULL, 0, "\xc0\x80") == NULL);
    brk_profiles_free(ps);
    return unit_done();
}
