/* ui_http.c: the HTTP side of the UI page: its paths, its authentication (the same as
 * Describe's), its security headers and its answers.
 * Owns: each answer's buffer until the gate takes it.
 * Trusts: nothing from the browser: the only input is the `floor` query parameter, parsed by
 * the Run path's own tier_parse_floor; every other query parameter is ignored.
 * Invariant: every answer carries the strict CSP below and no-store; no path under the UI runs
 * code or changes state (GET and HEAD only). */
#include <jansson.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "../core/limits.h"
#include "../wire/connect_error.h"
#include "auth.h"
#include "ui.h"

/* Same-origin files only: no inline script or style, no frames, no plugins, no other origin. */
#define UI_CSP                                                                                              \
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; "         \
    "form-action 'self'; base-uri 'none'; frame-ancestors 'none'"

bool ui_route(const char *url)
{
    return strcmp(url, "/") == 0 || strcmp(url, "/ui") == 0 || strncmp(url, "/ui/", 4) == 0;
}

static void ui_send(struct gate_req *rq, unsigned status, const char *ctype, char *body, size_t len, bool owned)
{
    struct gate_resp *rs = &rq->resp;
    gate_resp_set(rs, status, ctype, body, len, owned);
    gate_resp_header(rs, "Content-Security-Policy", UI_CSP);
    gate_resp_header(rs, "X-Content-Type-Options", "nosniff");
    gate_resp_header(rs, "X-Frame-Options", "DENY");
    gate_resp_header(rs, "Referrer-Policy", "no-referrer");
    gate_resp_header(rs, "Cross-Origin-Opener-Policy", "same-origin");
    gate_resp_header(rs, "Cross-Origin-Resource-Policy", "same-origin");
    gate_resp_header(rs, "Cache-Control", "no-store");
    if (status == 401)
        gate_resp_header(rs, "WWW-Authenticate", "Bearer");
    if (status == 405)
        gate_resp_header(rs, "Allow", "GET, HEAD");
}

static void send_text(struct gate_req *rq, unsigned status, const char *text)
{
    ui_send(rq, status, "text/plain; charset=utf-8", (char *)text, strlen(text), false);
}

static void send_json(struct gate_req *rq, unsigned status, json_t *j)
{
    char *body = j ? json_dumps(j, JSON_COMPACT) : NULL;
    json_decref(j);
    if (!body) {
        send_text(rq, 500, "out of memory\n");
        return;
    }
    ui_send(rq, status, "application/json", body, strlen(body), true);
}

/* Describe's rule: a valid bearer token (or open mode) holding the run scope; more than one
 * Authorization header is refused, as on the RPC paths. */
static int authorize(const struct srv_config *cfg, const struct gate_req *rq, struct plm_err *err)
{
    char buf[LIM_TOKEN_MAX + 16];
    unsigned n = 0;
    const char *v = gate_req_header_str(rq, "Authorization", buf, sizeof buf, &n);
    struct principal who;
    if (auth_authenticate(cfg->auth, v, n, &who, err) < 0 || auth_require_run_scope(&who, err) < 0)
        return -1;
    return 0;
}

/* The value of `floor` in the query ("" when absent). The head check refused every '%', so
 * there is nothing to decode; a value too long for any tier name is kept short and refused. */
static void floor_of(const char *query, char *out, size_t cap)
{
    out[0] = 0;
    for (const char *p = query; p && *p;) {
        size_t n = strcspn(p, "&");
        if (n >= 6 && strncmp(p, "floor=", 6) == 0) {
            size_t vl = n - 6 < cap - 1 ? n - 6 : cap - 1;
            memcpy(out, p + 6, vl);
            out[vl] = 0;
            return;
        }
        p += n;
        if (*p == '&')
            p++;
    }
}

static const struct ui_asset *asset(const char *url)
{
    for (size_t i = 0; i < ui_assets_n; i++)
        if (strcmp(url, ui_assets[i].path) == 0)
            return &ui_assets[i];
    return NULL;
}

static void verdict_json(const struct srv_config *cfg, struct gate_req *rq, const char *floor)
{
    struct ui_verdict v;
    struct plm_err err = {0};
    if (ui_verdict(cfg->env.provider, floor, &v, &err) < 0) {
        send_json(rq, 400, json_pack("{s:s, s:s}", "error", "invalid_floor", "message", err.msg));
        return;
    }
    send_json(rq, 200,
              json_pack("{s:s, s:s, s:b, s:s, s:s, s:s, s:s}", "floor", v.floor, "tier", v.tier, "admitted",
                        v.admitted, "state", v.state, "headline", v.headline, "detail", v.detail, "card", v.card));
}

static void page(const struct srv_config *cfg, struct gate_req *rq, const char *floor)
{
    struct ui_verdict v;
    struct plm_err err = {0};
    const char *floor_error = NULL;
    unsigned status = 200;
    if (ui_verdict(cfg->env.provider, floor, &v, &err) < 0) {
        /* Show the page with no floor and say why the one asked for was not understood. */
        floor_error = "That floor is not one of process, container, kernel or vm; showing no floor.";
        status = 400;
        ui_verdict(cfg->env.provider, "", &v, &err);
    }
    size_t len = 0;
    char *html = ui_page(cfg, &v, floor_error, &len);
    if (!html) {
        send_text(rq, 500, "out of memory\n");
        return;
    }
    ui_send(rq, status, "text/html; charset=utf-8", html, len, true);
}

void ui_answer(const struct srv_config *cfg, struct gate_req *rq)
{
    const char *method = rq->method, *url = rq->path;
    if (strcmp(method, "GET") != 0 && strcmp(method, "HEAD") != 0) {
        send_text(rq, 405, "the UI is read-only: GET and HEAD only\n");
        return;
    }
    struct plm_err err = {0};
    if (authorize(cfg, rq, &err) < 0) {
        unsigned status = wire_connect_status(wire_connect_code(err.kind));
        send_text(rq, status == 403 ? 403 : 401,
                  status == 403 ? "this token lacks the code:run scope the UI requires, as Describe does\n"
                                : "the UI needs the same bearer token as Describe (Authorization: Bearer ...)\n");
        return;
    }
    const struct ui_asset *a = asset(url);
    if (a) {
        ui_send(rq, 200, a->content_type, (char *)a->data, a->len, false);
        return;
    }
    char floor[32];
    floor_of(rq->query, floor, sizeof floor);
    if (strcmp(url, "/ui/verdict") == 0)
        verdict_json(cfg, rq, floor);
    else if (strcmp(url, "/") == 0 || strcmp(url, "/ui") == 0 || strcmp(url, "/ui/") == 0)
        page(cfg, rq, floor);
    else
        send_text(rq, 404, "no such UI path\n");
}
