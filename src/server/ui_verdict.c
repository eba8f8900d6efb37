/* ui_verdict.c: the admission interlock of the UI page, computed by the daemon itself.
 * Owns: nothing beyond the verdict struct the caller passes in.
 * Trusts: the floor is a query parameter from the browser: it is parsed by the same
 * tier_parse_floor the Run path uses, and compared by the same tier_check_floor against the
 * provider's current tier, so the page cannot drift from what a Run would get.
 * Invariant: a refusal's card is printed by the CLI's card printer (card.c) from the very
 * outcome a client would classify: nothing about the card is written twice. */
#include <stdio.h>
#include <string.h>

#include "../card/card.h"
#include "../wire/connect_error.h"
#include "ui.h"

int ui_verdict(struct plm_provider *p, const char *floor, struct ui_verdict *v, struct plm_err *err)
{
    memset(v, 0, sizeof *v);
    enum plm_tier want = PLM_TIER_UNKNOWN;
    if (tier_parse_floor(floor, &want, err) < 0)
        return -1;
    enum plm_tier actual = p->ops->tier(p);
    v->floor = want == PLM_TIER_UNKNOWN ? "" : tier_name(want);
    v->tier = tier_name(actual);
    struct plm_err refusal = {0};
    if (want == PLM_TIER_UNKNOWN) {
        v->admitted = true;
        snprintf(v->state, sizeof v->state, "none");
        snprintf(v->headline, sizeof v->headline, "No floor chosen: every run is admitted at the proven tier %s.",
                 v->tier);
        snprintf(v->detail, sizeof v->detail,
                 "Choose a required floor to see whether this daemon would admit or refuse a run.");
        return 0;
    }
    if (tier_check_floor(actual, want, &refusal) == 0) {
        v->admitted = true;
        snprintf(v->state, sizeof v->state, "admitted");
        snprintf(v->headline, sizeof v->headline, "Admitted: the actual wall %s meets the floor %s.", v->tier,
                 v->floor);
        snprintf(v->detail, sizeof v->detail,
                 "A run asking for at least %s is dispatched to %s; its answer carries a run record stating the "
                 "tier that ran.", v->floor, p->ops->name);
        return 0;
    }
    snprintf(v->state, sizeof v->state, "refused");
    snprintf(v->headline, sizeof v->headline,
             "Run refused before dispatch: actual wall %s is below the floor %s.", v->tier, v->floor);
    snprintf(v->detail, sizeof v->detail,
             "No runtime evidence exists because the code did not start. The daemon answers %s (%s): %s",
             wire_connect_code(refusal.kind), plm_refusal_name(refusal.refusal), refusal.msg);

    /* The outcome a client classifies from that answer: bound, marked not dispatched. */
    struct cli_outcome o = {.verdict = CLI_V_REFUSED, .refusal = (int)refusal.refusal, .bound = true};
    snprintf(o.code, sizeof o.code, "%s", wire_connect_code(refusal.kind));
    snprintf(o.message, sizeof o.message, "%s", refusal.msg);
    struct cli_run_report rep = {.request_id = NULL, .floor = v->floor, .o = &o, .resp = NULL,
                                 .elapsed_s = -1, .exit_status = cli_exit_status(&o, NULL)};
    FILE *m = fmemopen(v->card, sizeof v->card - 1, "w");
    if (m) {
        cli_card_print(m, &rep);
        fclose(m);
    }
    return 0;
}
