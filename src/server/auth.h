/* auth.h: who is calling (wire.md §16). Three modes chosen at startup: a clients file (token
 * SHA-256 lookup, scopes), one shared token (constant-time), or open dev mode. The check runs on
 * headers only, before any body byte is read. */
#pragma once
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "../core/err.h"

enum auth_mode { AUTH_OPEN, AUTH_TOKEN, AUTH_CLIENTS };

struct principal {
    char id[128];  /* "" in open dev mode, "static" for the shared token */
    bool may_run;  /* holds code:run or the wildcard scope */
    bool may_metrics; /* holds metrics or the wildcard scope; the shared token and dev mode do */
    uint32_t paid_seconds_per_day; /* its paid_seconds_per_day in the clients file; 0 = none */
};

struct auth;

/* clients_file wins over token; both NULL/empty = open mode. Errors name the variable. */
struct auth *auth_new(const char *clients_file, const char *token, struct plm_err *err);
void auth_free(struct auth *a);
enum auth_mode auth_mode(const struct auth *a);
size_t auth_client_count(const struct auth *a);
/* Clients without a paid_seconds_per_day of their own (the first one's id in *first), and with
 * one: what hardened mode and the startup log look at (0 outside clients-file mode). */
size_t auth_uncapped(const struct auth *a, const char **first);
size_t auth_capped(const struct auth *a);

/* header: the Authorization value, or NULL when absent; n_headers: how many were sent.
 * Fills *p; on failure PLM_E_UNAUTHENTICATED / permission. The scope check is separate. */
int auth_authenticate(const struct auth *a, const char *header, unsigned n_headers, struct principal *p,
                      struct plm_err *err);
/* PLM_E_PERMISSION / permission unless the principal holds code:run. */
int auth_require_run_scope(const struct principal *p, struct plm_err *err);
