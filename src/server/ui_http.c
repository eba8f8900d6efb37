/* ui_http.c: the HTTP side of the UI page: its paths, its authentication (the same as
 * Describe's), its security headers and its answers.
 * Owns: each answer's buffer until libmicrohttpd takes it.
 * Trusts: nothing from the browser: the only input is the `floor` query parameter, parsed by
 * the Run path's own tier_parse_floor; every other query parameter is ignored.
 * Invariant: every answer carries the strict CSP below and no-store; no path under the UI runs
 * code or changes state (GET and HEAD only). */
#include <jansson.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

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

static enum MHD_Result ui_send(struct MHD_Connection *conn, unsigned status, const char *ctype, void *body, size_t len,
                               enum MHD_ResponseMemoryMode mode)
{
    struct MHD_Response *resp = MHD_create_response_from_buffer(len, body, mode);
    if (!resp) {
        if (mode == MHD_RESPMEM_MUST_FREE)
            free(body);
        return MHD_NO;
    }
    MHD_add_response_header(resp, "Content-Type", ctype);
    MHD_add_response_header(resp, "Content-Security-Policy", UI_CSP);
    MHD_add_response_header(resp, "X-Content-Type-Options", "nosniff");
    MHD_add_response_header(resp, "X-Frame-Options", "DENY");
    MHD_add_response_header(resp, "Referrer-Policy", "no-referrer");
    MHD_add_response_header(resp, "Cross-Origin-Opener-Policy", "same-origin");
    MHD_add_response_header(resp, "Cross-Origin-Resource-Policy", "same-origin");
    MHD_add_response_header(resp, "Cache-Control", "no-store");
    if (status == 401)
        MHD_add_response_header(resp, "WWW-Authenticate", "Bearer");
    if (status == 405)
        MHD_add_response_header(resp, "Allow", "GET, HEAD");
    enum MHD_Result rc = MHD_queue_response(conn, status, resp);
    MHD_destroy_response(resp);
    return rc;
}

static enum MHD_Result send_text(struct MHD_Connection *conn, unsigned status, const char *text)
{
    return ui_send(conn, status, "text/plain; charset=utf-8", (void *)text, strlen(text), MHD_RESPMEM_PERSISTENT);
}

static enum MHD_Result send_json(struct MHD_Connection *conn, unsigned status, json_t *j)
{
    char *body = j ? json_dumps(j, JSON_COMPACT) : NULL;
    json_decref(j);
    if (!body)
        return send_text(conn, 500, "out of memory\n");
    return ui_send(conn, status, "application/json", body, strlen(body), MHD_RESPMEM_MUST_FREE);
}

struct auth_count {
    unsigned n;
    const char *value;
};

static enum MHD_Result count_authorization(void *cls, enum MHD_ValueKind kind, const char *key, const char *value)
{
    (void)kind;
    struct auth_count *c = cls;
    if (strcasecmp(key, MHD_HTTP_HEADER_AUTHORIZATION) == 0) {
        c->n++;
        c->value = value;
    }
    return MHD_YES;
}

/* Describe's rule: a valid bearer token (or open mode) holding the run scope; more than one
 * Authorization header is refused, as on the RPC paths. */
static int authorize(const struct srv_config *cfg, struct MHD_Connection *conn, struct plm_err *err)
{
    struct auth_count c = {0, NULL};
    MHD_get_connection_values(conn, MHD_HEADER_KIND, count_authorization, &c);
    struct principal who;
    if (auth_authenticate(cfg->auth, c.n == 1 ? c.value : NULL, c.n, &who, err) < 0 ||
        auth_require_run_scope(&who, err) < 0)
        return -1;
    return 0;
}

static const struct ui_asset *asset(const char *url)
{
    for (size_t i = 0; i < ui_assets_n; i++)
        if (strcmp(url, ui_assets[i].path) == 0)
            return &ui_assets[i];
    return NULL;
}

static enum MHD_Result verdict_json(const struct srv_config *cfg, struct MHD_Connection *conn, const char *floor)
{
    struct ui_verdict v;
    struct plm_err err = {0};
    if (ui_verdict(cfg->env.provider, floor, &v, &err) < 0)
        return send_json(conn, 400, json_pack("{s:s, s:s}", "error", "invalid_floor", "message", err.msg));
    return send_json(conn, 200,
                     json_pack("{s:s, s:s, s:b, s:s, s:s, s:s, s:s}", "floor", v.floor, "tier", v.tier, "admitted",
                               v.admitted, "state", v.state, "headline", v.headline, "detail", v.detail, "card",
                               v.card));
}

static enum MHD_Result page(const struct srv_config *cfg, struct MHD_Connection *conn, const char *floor)
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
    if (!html)
        return send_text(conn, 500, "out of memory\n");
    return ui_send(conn, status, "text/html; charset=utf-8", html, len, MHD_RESPMEM_MUST_FREE);
}

enum MHD_Result ui_answer(const struct srv_config *cfg, struct MHD_Connection *conn, const char *method,
                          const char *url)
{
    if (strcmp(method, "GET") != 0 && strcmp(method, "HEAD") != 0)
        return send_text(conn, 405, "the UI is read-only: GET and HEAD only\n");
    struct plm_err err = {0};
    if (authorize(cfg, conn, &err) < 0) {
        unsigned status = wire_connect_status(wire_connect_code(err.kind));
        return send_text(conn, status == 403 ? 403 : 401,
                         status == 403 ? "this token lacks the code:run scope the UI requires, as Describe does\n"
                                       : "the UI needs the same bearer token as Describe (Authorization: Bearer ...)\n");
    }
    const struct ui_asset *a = asset(url);
    if (a)
        return ui_send(conn, 200, a->content_type, (void *)a->data, a->len, MHD_RESPMEM_PERSISTENT);
    const char *floor = MHD_lookup_connection_value(conn, MHD_GET_ARGUMENT_KIND, "floor");
    if (!floor)
        floor = "";
    if (strcmp(url, "/ui/verdict") == 0)
        return verdict_json(cfg, conn, floor);
    if (strcmp(url, "/") == 0 || strcmp(url, "/ui") == 0 || strcmp(url, "/ui/") == 0)
        return page(cfg, conn, floor);
    return send_text(conn, 404, "no such UI path\n");
}
