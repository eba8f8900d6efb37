/* session_grant.h: a session call's grant on e2b (session_grant.c), by E2B_SESSION_GRANTS. */
#pragma once
#include <stdbool.h>

#include "../../core/provider.h"
#include "../../core/session_end.h"
#include "guard.h"

struct e2b_state;

/* One session's channel: its credential in session mode (empty otherwise). */
struct e2b_sg {
    char token[E2B_GUARD_TOKEN_LEN + 1];
};
/* One granted call: the lent session credential, or the call's own (call mode). */
struct e2b_sg_call {
    bool lent;
    char token[E2B_GUARD_TOKEN_LEN + 1];
};

/* At open: session mode registers the session's credential; *create_token is what the sandbox is
 * created with (NULL: deny-all). */
int e2b_sg_open(struct e2b_state *s, struct e2b_sg *g, const char **create_token, struct plm_err *err);
/* At close, after the sandbox is deleted: the credential is unregistered. */
void e2b_sg_close(struct e2b_state *s, struct e2b_sg *g);
/* Before a granted call's code: a refusal when the grant cannot reach the guard (nothing ran). */
int e2b_sg_begin(struct e2b_state *s, struct e2b_sg *g, const char *sandbox_id, const struct plm_host_api *api,
                 struct e2b_sg_call *c, struct plm_err *err);
/* After it, on every path: the grant ends; a rule that cannot be taken off sets *ended. */
void e2b_sg_end(struct e2b_state *s, struct e2b_sg *g, const char *sandbox_id, struct e2b_sg_call *c,
                enum plm_session_end *ended);
