/* status.c: the exit status a client reports for one call, from its verdict and (after a checked
 * run) the payload's result (docs/cli.md, docs/library.md).
 * Owns: nothing; pure functions. */
#include "client.h"

int cli_exit_status(const struct cli_outcome *o, const Plimsoll__V1__JavaScriptResult *js)
{
    switch (o->verdict) {
    case CLI_V_RAN: {
        if (!js)
            return CLI_EXIT_RECORD;
        int32_t code = js->exit_code;
        /* A timeout is never success, whatever the code field says. */
        if (js->timed_out && code == 0)
            code = 124;
        if (code < 0 || code >= CLI_EXIT_GUEST_OUT_OF_RANGE)
            return CLI_EXIT_GUEST_OUT_OF_RANGE;
        return code;
    }
    case CLI_V_REFUSED: return CLI_EXIT_REFUSED;
    case CLI_V_EVIDENCE_MISMATCH: return CLI_EXIT_EVIDENCE;
    case CLI_V_RECORD_MISMATCH: return CLI_EXIT_RECORD;
    case CLI_V_TRANSPORT: return CLI_EXIT_TRANSPORT;
    case CLI_V_ERROR: return CLI_EXIT_SERVER;
    }
    return CLI_EXIT_SERVER;
}


int cli_exit_status_project(const struct cli_outcome *o, const Plimsoll__V1__ProjectResult *p)
{
    if (o->verdict != CLI_V_RAN)
        return cli_exit_status(o, NULL);
    if (!p)
        return CLI_EXIT_RECORD;
    if (p->outcome == PLIMSOLL__V1__PROJECT_OUTCOME__PROJECT_OUTCOME_TIMED_OUT)
        return 124;
    if (p->outcome != PLIMSOLL__V1__PROJECT_OUTCOME__PROJECT_OUTCOME_COMPLETED)
        return 1;
    for (size_t i = 0; i < p->n_steps; i++) {
        const Plimsoll__V1__StepResult *st = p->steps[i];
        if (!st)
            continue;
        int32_t code = st->exit_code;
        if (st->timed_out && code == 0)
            code = 124;
        if (code != 0)
            return code < 0 || code >= CLI_EXIT_GUEST_OUT_OF_RANGE ? CLI_EXIT_GUEST_OUT_OF_RANGE : code;
    }
    return 0;
}

int cli_exit_status_module(const struct cli_outcome *o, const Plimsoll__V1__ModuleResult *m)
{
    if (o->verdict != CLI_V_RAN)
        return cli_exit_status(o, NULL);
    if (!m)
        return CLI_EXIT_RECORD;
    switch (m->outcome) {
    case PLIMSOLL__V1__PROJECT_OUTCOME__PROJECT_OUTCOME_COMPLETED: return 0;
    case PLIMSOLL__V1__PROJECT_OUTCOME__PROJECT_OUTCOME_TIMED_OUT: return 124;
    default: return 1;
    }
}
