/* profile_clone.c: the deep copy a run works on (profiles.h, brk_profile_clone).
 * Owns: nothing; the clone belongs to the caller (brk_profile_free).
 * Invariant: every field is copied, so nothing done to the loaded profiles afterwards reaches a
 * live run; the secret is copied only when asked for. */
#include <stdlib.h>
#include <string.h>

#include "../core/cleanup.h"
#include "profiles.h"

DEFINE_CLEANUP(struct brk_profile, brk_profile_free)

static char *sdup(const char *s, bool *ok)
{
    if (!s)
        return NULL;
    char *d = strdup(s);
    if (!d)
        *ok = false;
    return d;
}

struct brk_profile *brk_profile_clone(const struct brk_profile *p, bool with_secret)
{
    struct brk_profile *d cleanup_(brk_profile_free) = calloc(1, sizeof *d);
    if (!d)
        return NULL;
    bool ok = true;
    d->name = sdup(p->name, &ok);
    d->origin = sdup(p->origin, &ok);
    d->routes = calloc(p->n_routes ? p->n_routes : 1, sizeof *d->routes);
    d->route_cap = calloc(p->n_routes ? p->n_routes : 1, sizeof *d->route_cap);
    d->caps = calloc(p->n_caps ? p->n_caps : 1, sizeof *d->caps);
    d->callers = calloc(p->n_callers ? p->n_callers : 1, sizeof *d->callers);
    d->scopes = calloc(p->n_scopes ? p->n_scopes : 1, sizeof *d->scopes);
    if (!d->routes || !d->route_cap || !d->caps || !d->callers || !d->scopes)
        return NULL;
    for (size_t i = 0; i < p->n_routes; i++) {
        if (brk_route_copy(&d->routes[i], &p->routes[i]) < 0)
            ok = false;
        d->route_cap[i] = p->route_cap[i];
        d->n_routes++;
    }
    for (size_t i = 0; i < p->n_caps; i++) {
        d->caps[i] = p->caps[i];
        d->caps[i].path_lower = sdup(p->caps[i].path_lower, &ok);
        d->n_caps++;
    }
    for (size_t i = 0; i < p->n_callers; i++, d->n_callers++)
        d->callers[i] = sdup(p->callers[i], &ok);
    for (size_t i = 0; i < p->n_scopes; i++, d->n_scopes++)
        d->scopes[i] = sdup(p->scopes[i], &ok);
    d->token_type = p->token_type;
    if (with_secret && brk_secret_isset(&p->secret) && brk_secret_set(&d->secret, p->secret.data, p->secret.len) < 0)
        ok = false;
    d->token_env = sdup(p->token_env, &ok);
    d->jwt_issuer = sdup(p->jwt_issuer, &ok);
    d->jwt_audience = sdup(p->jwt_audience, &ok);
    d->jwt_key_id = sdup(p->jwt_key_id, &ok);
    d->jwt_ttl_s = p->jwt_ttl_s;
    d->any_caller = p->any_caller;
    if (brk_ref_keys_copy(d, p) < 0)
        ok = false;
    d->max_calls = p->max_calls;
    d->has_health = p->has_health;
    if (p->has_health && brk_route_copy(&d->health, &p->health) < 0)
        ok = false;
    d->global = sdup(p->global, &ok);
    d->preamble = sdup(p->preamble, &ok);
    return ok ? take_ptr(&d) : NULL;
}
