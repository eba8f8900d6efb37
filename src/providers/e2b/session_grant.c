/* session_grant.c: how a session call's grant reaches the egress guard on e2b (docs/sessions.md
 * "Grants in sessions", E2B_SESSION_GRANTS). The guest reaches the guard only through E2B's
 * egress proxy, which adds the guard credential outside the VM; the two modes differ in how long
 * that credential lives:
 *  - session: the sandbox is created with the guard's rule and one credential for the session's
 *    life, registered without a grant; each granted call lends it the call's broker and takes it
 *    back after (between calls the guard answers it 403). No control-plane request per call.
 *  - call: the sandbox is created deny-all; a granted call registers a fresh credential and puts
 *    the guard's rule carrying it on the sandbox (PUT /sandboxes/{id}/network), and after the call
 *    unregisters it first (the guard refuses it at once) and then takes the rule off. A rule that
 *    cannot be taken off ends the session BOUNDARY_FAILED: its network is no longer the one it
 *    was opened with (the credential in it is already dead).
 * Owns: the session's credential (session mode; wiped when unregistered) and a call's (call mode).
 * Invariant: a call's broker is reachable only between e2b_sg_begin and e2b_sg_end. */
#include <string.h>

#include "internal.h"
#include "session_grant.h"

int e2b_sg_open(struct e2b_state *s, struct e2b_sg *g, const char **create_token, struct plm_err *err)
{
    memset(g, 0, sizeof *g);
    *create_token = NULL;
    if (s->session_grants != E2B_SG_SESSION || !s->guard)
        return 0;
    if (e2b_guard_register(s->guard, NULL, g->token, err) < 0)
        return plm_err_wrap(err, "e2b: the session's guard credential");
    *create_token = g->token;
    return 0;
}

void e2b_sg_close(struct e2b_state *s, struct e2b_sg *g)
{
    if (g->token[0])
        e2b_guard_unregister(s->guard, g->token); /* wipes it */
}

int e2b_sg_begin(struct e2b_state *s, struct e2b_sg *g, const char *sandbox_id, const struct plm_host_api *api,
                 struct e2b_sg_call *c, struct plm_err *err)
{
    memset(c, 0, sizeof *c);
    if (!s->guard || !api || !api->call || s->session_grants == E2B_SG_NONE)
        return plm_refuse(err, PLM_E_UNSUPPORTED, PLM_REFUSAL_UNSUPPORTED,
                          "e2b: session grants need E2B_GUARD_URL and E2B_SESSION_GRANTS; nothing ran");
    if (s->session_grants == E2B_SG_SESSION) {
        if (!g->token[0])
            return plm_refuse(err, PLM_E_UNSUPPORTED, PLM_REFUSAL_UNSUPPORTED,
                              "e2b: this session was opened without a guard credential; nothing ran");
        if (e2b_guard_lend(s->guard, g->token, api, err) < 0)
            return -1;
        c->lent = true;
        return 0;
    }
    if (e2b_guard_register(s->guard, api, c->token, err) < 0)
        return -1;
    if (e2b_set_network(s, sandbox_id, c->token, err) < 0) {
        e2b_guard_unregister(s->guard, c->token);
        /* Nothing ran; a rule the failed update may have left carries a dead credential, and the
         * next granted call replaces it (E2B's update replaces, it does not merge). */
        char why[300];
        snprintf(why, sizeof why, "%.290s", err->msg);
        return plm_refuse(err, PLM_E_ENVIRONMENT, PLM_REFUSAL_ENVIRONMENT,
                          "e2b: the guard's rule could not be put on the session's sandbox (%s); nothing ran", why);
    }
    e2b_log("info", "e2b_session_grant_on", "\"sandbox\":\"%s\"", sandbox_id);
    return 0;
}

void e2b_sg_end(struct e2b_state *s, struct e2b_sg *g, const char *sandbox_id, struct e2b_sg_call *c,
                enum plm_session_end *ended)
{
    if (c->lent) {
        e2b_guard_unlend(s->guard, g->token);
        c->lent = false;
        return;
    }
    if (!c->token[0])
        return;
    e2b_guard_unregister(s->guard, c->token); /* first: the guard refuses it from now on */
    struct plm_err e = {0};
    if (e2b_set_network(s, sandbox_id, NULL, &e) < 0) {
        e2b_log("warning", "e2b_session_grant_left_on", "\"sandbox\":\"%s\"", sandbox_id);
        if (*ended == PLM_END_NONE)
            *ended = PLM_END_BOUNDARY_FAILED;
        return;
    }
    e2b_log("info", "e2b_session_grant_off", "\"sandbox\":\"%s\"", sandbox_id);
}
