/* ui.h: the read-only web page of PLIMSOLL_UI=1 (docs/ui.md): the admission interlock against
 * this daemon, its evidence card and the last run cards, on the RPC listener under the same
 * authentication as Describe. http.c hands it every GET of "/", "/ui" and "/ui/..." when on. */
#pragma once
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

#include "../core/err.h"
#include "../core/provider.h"
#include "gate.h"
#include "server.h"

/* True for the paths the UI serves ("/", "/ui", "/ui/..."). */
bool ui_route(const char *url);
/* Answers one request of a UI path completely (fills rq->resp); on a worker thread. */
void ui_answer(const struct srv_config *cfg, struct gate_req *rq);

/* ---- ui_verdict.c: the interlock, computed by the daemon's own comparison code ---- */
struct ui_verdict {
    const char *floor;   /* as asked, "" = none */
    const char *tier;    /* the provider's current proven tier */
    bool admitted;
    char state[16];      /* "admitted", "refused" or "none" (no floor chosen) */
    char headline[256];
    char detail[768];
    char card[2048];     /* refused: the card `plimsoll run --min-isolation FLOOR` prints; else "" */
};
/* -1 with err (PLM_E_INVALID) for a floor that is not "", process, container, kernel or vm. */
int ui_verdict(struct plm_provider *p, const char *floor, struct ui_verdict *v, struct plm_err *err);

/* ---- ui_html.c: escaping for HTML text and attribute values ---- */
/* Writes s HTML-escaped; control characters other than '\n' and '\t', and every byte of a
 * string that is not valid UTF-8, become \xNN (as the CLI prints them). NULL writes nothing. */
void ui_html(FILE *f, const char *s);

/* ---- ui_page.c ---- */
/* The whole page for `floor` into a malloc'd string (NULL out of memory). */
char *ui_page(const struct srv_config *cfg, const struct ui_verdict *v, const char *floor_error, size_t *len);

/* ---- ui_assets.c (generated from src/server/ui/ by embed.py) ---- */
struct ui_asset {
    const char *path;
    const char *content_type;
    const unsigned char *data;
    size_t len;
};
extern const struct ui_asset ui_assets[];
extern const size_t ui_assets_n;
