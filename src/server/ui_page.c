/* ui_page.c: the HTML of the UI page: the interlock (gauge, floor form, verdict), the evidence
 * card and the last run cards. Server-rendered, so every read-only part works without
 * JavaScript; ui.js only makes the verdict live and the cards copyable.
 * Owns: the page buffer until it is handed to the caller.
 * Trusts: no string it prints: every one passes through ui_html().
 * Invariant: no inline script or style (the CSP forbids both); every form control has a label. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../card/card.h"
#include "../core/evidence.h"
#include "../wire/convert.h"
#include "ui.h"
#include "ui_ring.h"

#define H(s) ui_html(f, (s))

static void when(FILE *f, int64_t unix_ms)
{
    char buf[64] = "?";
    time_t t = (time_t)(unix_ms / 1000);
    struct tm tm;
    if (unix_ms > 0 && gmtime_r(&t, &tm))
        strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
    fputs(buf, f);
}

static void dl_row(FILE *f, const char *term, const char *value, const char *empty)
{
    fputs("<dt>", f);
    H(term);
    fputs("</dt><dd>", f);
    if (value && *value)
        H(value);
    else
        fprintf(f, "<span class=\"none\">%s</span>", empty);
    fputs("</dd>\n", f);
}

static void gauge(FILE *f, const struct ui_verdict *v)
{
    enum plm_tier actual = tier_parse(v->tier), floor = tier_parse(v->floor);
    fputs("<figure class=\"gauge\" aria-labelledby=\"gauge-cap\">\n<ol class=\"tiers\" id=\"gauge\">\n", f);
    for (int t = PLM_TIER_VM; t >= PLM_TIER_NONE; t--) {
        fprintf(f, "<li class=\"tier%s%s%s\" data-tier=\"%s\"><span class=\"tier-name\">%s</span>",
                t <= (int)actual ? " wall" : "", t == (int)actual ? " waterline" : "",
                t == (int)floor ? (floor > actual ? " floor floor-above" : " floor") : "", tier_name(t), tier_name(t));
        if (t == (int)actual)
            fputs("<span class=\"badge proven\">proven tier</span>", f);
        fputs("<span class=\"badge floor-mark\">floor</span></li>\n", f);
    }
    fputs("</ol>\n<figcaption id=\"gauge-cap\">Depth gauge: the waterline is the tier this daemon proved at startup, "
          "<strong>", f);
    H(v->tier);
    fputs("</strong>. The floor is <strong id=\"floor-cap\">", f);
    H(*v->floor ? v->floor : "not set");
    fputs("</strong>.</figcaption>\n</figure>\n", f);
}

static void interlock(FILE *f, const struct ui_verdict *v, const char *floor_error)
{
    fputs("<section id=\"interlock\" aria-labelledby=\"interlock-h\">\n<h2 id=\"interlock-h\">Admission interlock</h2>\n"
          "<div class=\"interlock\">\n", f);
    gauge(f, v);
    fputs("<div class=\"controls\">\n<form method=\"get\" action=\"/ui\" id=\"floor-form\">\n"
          "<label for=\"floor\">Required floor</label>\n<select id=\"floor\" name=\"floor\">\n", f);
    fprintf(f, "<option value=\"\"%s>none (no floor)</option>\n", *v->floor ? "" : " selected");
    for (int t = PLM_TIER_PROCESS; t <= PLM_TIER_VM; t++)
        fprintf(f, "<option value=\"%s\"%s>%s</option>\n", tier_name(t),
                strcmp(v->floor, tier_name(t)) == 0 ? " selected" : "", tier_name(t));
    fputs("</select>\n<button type=\"submit\" id=\"floor-submit\">Check admission</button>\n</form>\n", f);
    if (floor_error) {
        fputs("<p class=\"form-error\" role=\"alert\">", f);
        H(floor_error);
        fputs("</p>\n", f);
    }
    fprintf(f, "<div id=\"verdict\" class=\"verdict %s\" role=\"status\" aria-live=\"polite\" data-state=\"%s\">\n",
            v->state, v->state);
    fputs("<p class=\"headline\" id=\"verdict-headline\">", f);
    H(v->headline);
    fputs("</p>\n<p id=\"verdict-detail\">", f);
    H(v->detail);
    fprintf(f, "</p>\n<pre class=\"card\" id=\"verdict-card\"%s>", v->card[0] ? "" : " hidden");
    H(v->card);
    fputs("</pre>\n</div>\n</div>\n</div>\n</section>\n", f);
}

static void evidence(FILE *f, const struct plm_describe *d)
{
    fputs("<section id=\"evidence\" aria-labelledby=\"evidence-h\">\n<h2 id=\"evidence-h\">Evidence card</h2>\n", f);
    const struct plm_evidence *ev = d->evidence;
    fputs("<dl class=\"facts\">\n", f);
    dl_row(f, "provider", d->sandbox, "(empty)");
    dl_row(f, "proven tier", tier_name(d->tier), "(unknown)");
    dl_row(f, "engine identity", d->javascript.identity, "(none stated)");
    if (d->javascript.software_identity[0])
        dl_row(f, "software identity", d->javascript.software_identity, "");
    if (d->supports_project)
        dl_row(f, "project environment", d->project.identity, "(none stated)");
    dl_row(f, "runtime", ev ? ev->runtime : NULL, "(none)");
    dl_row(f, "runtime version", ev ? ev->runtime_version : NULL, "(none)");
    dl_row(f, "accelerator", NULL, "none stated by this provider");
    dl_row(f, "host kernel", ev ? ev->kernel_release : NULL, "(unknown)");
    fputs("<dt>checked</dt><dd>", f);
    if (ev && ev->checked_unix_ms)
        when(f, ev->checked_unix_ms);
    else
        fputs("<span class=\"none\">never</span>", f);
    fputs("</dd>\n", f);
    dl_row(f, "policy digest", d->policy, "(none stated)");
    fputs("</dl>\n", f);
    if (!ev) {
        fputs("<p class=\"warn\">This provider states no evidence card: it proved nothing at startup.</p>\n</section>\n", f);
        return;
    }
    size_t passed = 0;
    for (size_t i = 0; i < ev->n_checks; i++)
        passed += ev->checks[i].passed;
    fprintf(f, "<table class=\"probes\">\n<caption>Startup probes: %zu of %zu passed</caption>\n"
               "<thead><tr><th scope=\"col\">Probe</th><th scope=\"col\">Expected</th><th scope=\"col\">Observed</th>"
               "<th scope=\"col\">Outcome</th></tr></thead>\n<tbody>\n", passed, ev->n_checks);
    for (size_t i = 0; i < ev->n_checks; i++) {
        const struct plm_evidence_check *c = &ev->checks[i];
        fprintf(f, "<tr class=\"%s\"><th scope=\"row\"><code>", c->passed ? "pass" : "fail");
        H(c->name);
        fputs("</code></th><td>", f);
        H(c->expected);
        fputs("</td><td>", f);
        H(c->observed);
        fprintf(f, "</td><td>%s</td></tr>\n", c->passed ? "pass" : "FAIL");
    }
    fputs("</tbody>\n</table>\n", f);
    if (ev->n_confinement) {
        fputs("<h3>Host posture: confinement applied</h3>\n<ul class=\"confinement\">\n", f);
        for (size_t i = 0; i < ev->n_confinement; i++) {
            fputs("<li>", f);
            H(ev->confinement[i]);
            fputs("</li>\n", f);
        }
        fputs("</ul>\n", f);
    }
    /* The same text `plimsoll describe` prints, from the same printer. */
    Plimsoll__V1__DescribeResponse *pb = wire_describe_to_pb(d, PLM_PROTOCOL);
    char *text = NULL;
    size_t n = 0;
    FILE *m = pb ? open_memstream(&text, &n) : NULL;
    if (m) {
        cli_describe_print(m, pb);
        if (fclose(m) == 0) {
            fputs("<details><summary>As text (what <code>plimsoll describe</code> prints)</summary>\n"
                  "<pre class=\"card\" id=\"describe-text\">", f);
            H(text);
            fputs("</pre></details>\n", f);
        }
    }
    free(text);
    if (pb)
        protobuf_c_message_free_unpacked(&pb->base, NULL);
    fputs("</section>\n", f);
}

static const char *card_class(const char *verdict)
{
    if (strcmp(verdict, "ran") == 0)
        return "ran";
    if (strcmp(verdict, "refused") == 0)
        return "refused";
    if (strcmp(verdict, "evidence_mismatch") == 0 || strcmp(verdict, "record_mismatch") == 0)
        return "mismatch";
    return "error";
}

static void runs(FILE *f, struct ui_ring *ring)
{
    fputs("<section id=\"runs\" aria-labelledby=\"runs-h\">\n<h2 id=\"runs-h\">Recent runs</h2>\n", f);
    fprintf(f, "<p class=\"note\">The last %d runs this daemon answered, newest first, kept in memory only. "
               "No code, output or token is kept. <a href=\"/ui#runs\" id=\"refresh\">Refresh</a></p>\n",
            UI_RING_N);
    struct ui_run_card *cards = calloc(UI_RING_N, sizeof *cards);
    size_t n = cards ? ui_ring_snapshot(ring, cards, UI_RING_N) : 0;
    if (n == 0)
        fputs("<p id=\"no-runs\">No runs yet.</p>\n", f);
    else
        fputs("<ol class=\"cards\" id=\"run-cards\">\n", f);
    for (size_t i = 0; i < n; i++) {
        const struct ui_run_card *c = &cards[i];
        const char *cls = card_class(c->verdict);
        fprintf(f, "<li class=\"run %s\" data-verdict=\"%s\" data-request-id=\"", cls, cls);
        H(c->request_id);
        fputs("\">\n<h3>", f);
        H(c->verdict);
        fputs(" <span class=\"sub\">at ", f);
        when(f, c->unix_ms);
        fputs("</span></h3>\n<dl class=\"facts\">\n", f);
        dl_row(f, "caller", c->caller, "(open mode)");
        dl_row(f, "floor", c->floor, "(none)");
        dl_row(f, "tier", c->tier, "(none: no code ran or no answer)");
        dl_row(f, "record", c->record_sha256, "(none)");
        fputs("<dt>duration</dt><dd>", f);
        if (c->duration_ms >= 0)
            fprintf(f, "%lld ms", (long long)c->duration_ms);
        else
            fputs("<span class=\"none\">-</span>", f);
        fputs("</dd>\n</dl>\n", f);
        fprintf(f, "<pre class=\"card\" id=\"card-%zu\">", i);
        H(c->card);
        fprintf(f, "</pre>\n<button type=\"button\" class=\"copy\" data-copy=\"card-%zu\" hidden>Copy card</button>\n"
                   "</li>\n", i);
    }
    if (n)
        fputs("</ol>\n", f);
    free(cards);
    fputs("</section>\n", f);
}

char *ui_page(const struct srv_config *cfg, const struct ui_verdict *v, const char *floor_error, size_t *len)
{
    char *buf = NULL;
    *len = 0;
    FILE *f = open_memstream(&buf, len);
    if (!f)
        return NULL;
    struct plm_provider *p = cfg->env.provider;
    struct plm_describe d = {0};
    p->ops->describe(p, &d);
    fputs("<!doctype html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
          "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n<title>plimsoll: ", f);
    H(d.sandbox);
    fputs(" at ", f);
    H(tier_name(d.tier));
    fputs("</title>\n<link rel=\"stylesheet\" href=\"/ui/ui.css\">\n"
          "<link rel=\"icon\" href=\"/ui/favicon.svg\" type=\"image/svg+xml\">\n"
          "<script src=\"/ui/ui.js\" defer></script>\n</head>\n<body>\n"
          "<a class=\"skip\" href=\"#interlock\">Skip to the interlock</a>\n<header>\n<h1>plimsoll</h1>\n<p>", f);
    H(d.sandbox);
    fputs(" &middot; proven tier <strong id=\"proven-tier\">", f);
    H(tier_name(d.tier));
    fprintf(f, "</strong> &middot; protocol %d</p>\n</header>\n<main>\n", PLM_PROTOCOL);
    interlock(f, v, floor_error);
    evidence(f, &d);
    runs(f, cfg->env.ring);
    fputs("</main>\n<footer><p>Read-only. Runs are made through the API (<code>plimsoll run</code>, "
          "<code>plimsoll mcp</code>), never from this page.</p></footer>\n</body>\n</html>\n", f);
    if (fclose(f) != 0) {
        free(buf);
        return NULL;
    }
    return buf;
}
