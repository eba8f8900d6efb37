/* profiles.c: loading and validating PLIMSOLL_GRANTS_FILE (providers.md §5.1, docs/grants.md).
 * Owns: the loaded profiles and their secrets.
 * Trusts: nothing in the file beyond its being the operator's; every field is checked, unknown
 * and duplicate keys are errors, and the first problem fails the whole load (fail closed), so the
 * daemon never starts with a profile it only half understood. Secrets are read from the
 * environment here and nowhere else, copied into brk_secret, and never appear in a message.
 * Invariant: every message names the profile and the field; a message never contains a secret
 * value (only variable names and lengths). */
#include "profiles.h"

#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../core/cleanup.h"
#include "../core/cleanup_json.h"
#include "../core/limits.h"
#include "../core/validate.h"
#include "origin.h"
#include "profile_names.h"
#include "text.h"

/* ---- field errors ---------------------------------------------------------------------- */

struct lctx {
    const char *profile; /* validated name, or NULL before the name is known */
    brk_getenv_fn getenv_fn;
    struct plm_err *err;
    const char *dir; /* the grants file's directory (preamble_file), or NULL */
};

static int fail(struct lctx *c, const char *field, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int fail(struct lctx *c, const char *field, const char *fmt, ...)
{
    char why[320];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why, sizeof why, fmt, ap);
    va_end(ap);
    /* field NULL: the message is about the object itself ("unknown field ...") */
    const char *f = field ? field : "", *sep = field ? ": " : "";
    if (c->profile)
        return plm_fail(c->err, 0, PLM_E_INVALID, "profile \"%s\": %s%s%s", c->profile, f, sep, why);
    return plm_fail(c->err, 0, PLM_E_INVALID, "%s%s%s", f, sep, why);
}

static int oom(struct lctx *c)
{
    return plm_fail(c->err, ENOMEM, PLM_E_INTERNAL, "out of memory");
}

/* A JSON string's bytes, refusing an embedded NUL (jansson rejects \u0000 already; twice is
 * cheap). Returns NULL when v is not a string. */
static const char *jstr(const json_t *v, size_t *len)
{
    if (!json_is_string(v))
        return NULL;
    const char *s = json_string_value(v);
    *len = json_string_length(v);
    if (strlen(s) != *len)
        return NULL;
    return s;
}

static bool key_in(const char *k, const char *const *keys)
{
    for (; *keys; keys++)
        if (strcmp(k, *keys) == 0)
            return true;
    return false;
}

static int unknown_key(struct lctx *c, const char *where, const char *k)
{
    char q[80];
    return fail(c, where, "unknown field \"%s\"", brk_quote(q, sizeof q, k, strlen(k)));
}

static int check_keys(struct lctx *c, const json_t *o, const char *where, const char *const *keys)
{
    const char *k;
    json_t *v;
    json_object_foreach((json_t *)o, k, v)
    {
        if (!key_in(k, keys))
            return unknown_key(c, where, k);
    }
    return 0;
}

/* ---- small field helpers --------------------------------------------------------------- */

static void lower_copy(char *dst, const char *src, size_t len)
{
    for (size_t i = 0; i < len; i++) {
        char c = src[i];
        dst[i] = (c >= 'A' && c <= 'Z') ? (char)(c - 'A' + 'a') : c;
    }
    dst[len] = '\0';
}

static int dup_str(struct lctx *c, char **dst, const char *s, size_t len)
{
    *dst = strndup(s, len);
    return *dst ? 0 : oom(c);
}

/* A required or optional list of strings, each checked by `rules` and bounded by max_len,
 * duplicates refused. */
static int parse_strings(struct lctx *c, const json_t *o, const char *field, bool required, size_t max_n,
                         unsigned rules, char ***out, size_t *n_out)
{
    *out = NULL;
    *n_out = 0;
    const json_t *arr = json_object_get(o, field);
    if (!arr) {
        if (required)
            return fail(c, field, "is required");
        return 0;
    }
    if (!json_is_array(arr))
        return fail(c, field, "must be a list of strings");
    size_t n = json_array_size(arr);
    if (required && n == 0)
        return fail(c, field, "must not be empty");
    if (n > max_n)
        return fail(c, field, "has more than %zu entries", max_n);
    char **v = calloc(n ? n : 1, sizeof *v);
    if (!v)
        return oom(c);
    *out = v;
    for (size_t i = 0; i < n; i++) {
        char f[64];
        snprintf(f, sizeof f, "%s[%zu]", field, i);
        size_t len;
        const char *s = jstr(json_array_get(arr, i), &len);
        if (!s)
            return fail(c, f, "must be a string");
        if (len > BRK_STRING_MAX)
            return fail(c, f, "is longer than %d bytes", BRK_STRING_MAX);
        if (!brk_text_ok(s, len, rules)) {
            char q[80];
            return fail(c, f, "\"%s\" is empty, has whitespace or control characters, or is not UTF-8",
                        brk_quote(q, sizeof q, s, len));
        }
        for (size_t k = 0; k < i; k++)
            if (strcmp(v[k], s) == 0) {
                char q[80];
                return fail(c, f, "duplicate \"%s\"", brk_quote(q, sizeof q, s, len));
            }
        if (dup_str(c, &v[i], s, len) < 0)
            return -1;
        (*n_out)++;
    }
    return 0;
}

static int parse_uint(struct lctx *c, const json_t *v, const char *field, uint32_t lo, uint32_t hi, uint32_t *out)
{
    if (!json_is_integer(v))
        return fail(c, field, "must be an integer");
    json_int_t x = json_integer_value(v);
    if (x < (json_int_t)lo || x > (json_int_t)hi)
        return fail(c, field, "must be %u..%u", lo, hi);
    *out = (uint32_t)x;
    return 0;
}

/* ---- the profile ----------------------------------------------------------------------- */

static void profile_done(struct brk_profile *p)
{
    if (!p)
        return;
    free(p->name);
    free(p->origin);
    for (size_t i = 0; p->routes && i < p->n_routes; i++)
        brk_route_done(&p->routes[i]);
    free(p->routes);
    free(p->route_cap);
    for (size_t i = 0; p->caps && i < p->n_caps; i++)
        free(p->caps[i].path_lower);
    free(p->caps);
    for (size_t i = 0; p->callers && i < p->n_callers; i++)
        free(p->callers[i]);
    free(p->callers);
    for (size_t i = 0; p->scopes && i < p->n_scopes; i++)
        free(p->scopes[i]);
    free(p->scopes);
    brk_secret_done(&p->secret);
    free(p->token_env);
    free(p->jwt_issuer);
    free(p->jwt_audience);
    brk_route_done(&p->health);
    free(p->global);
    free(p->preamble);
    free(p->jwt_key_id);
    brk_ref_keys_done(p);
    *p = (struct brk_profile){0};
}

static int parse_allow(struct lctx *c, const json_t *o, struct brk_profile *p)
{
    const json_t *arr = json_object_get(o, "allow");
    if (!arr)
        return fail(c, "allow", "is required (an empty list denies every call)");
    if (!json_is_array(arr))
        return fail(c, "allow", "must be a list of \"METHOD /path\" strings");
    size_t n = json_array_size(arr);
    if (n > BRK_ROUTES_MAX)
        return fail(c, "allow", "has more than %d routes", BRK_ROUTES_MAX);
    p->routes = calloc(n ? n : 1, sizeof *p->routes);
    p->route_cap = calloc(n ? n : 1, sizeof *p->route_cap);
    if (!p->routes || !p->route_cap)
        return oom(c);
    for (size_t i = 0; i < n; i++) {
        char f[32];
        snprintf(f, sizeof f, "allow[%zu]", i);
        size_t len;
        const char *s = jstr(json_array_get(arr, i), &len);
        if (!s)
            return fail(c, f, "must be a \"METHOD /path\" string");
        struct plm_err e = {0};
        if (brk_route_parse(s, len, true, &p->routes[i], &e) < 0)
            return e.kind == PLM_E_INTERNAL ? oom(c) : fail(c, f, "%s", e.msg);
        p->n_routes++;
        p->route_cap[i] = -1;
        for (size_t k = 0; k < i; k++)
            if (p->routes[k].method == p->routes[i].method && strcmp(p->routes[k].path, p->routes[i].path) == 0) {
                char q[80];
                return fail(c, f, "duplicate route \"%s\"", brk_quote(q, sizeof q, s, len));
            }
    }
    return 0;
}

/* route_max_calls: {"METHOD /path": cap}. A key names allow entries by METHOD and lower-cased
 * path (the reference's cap key); it must name at least one, so a typo cannot silently leave a
 * route uncapped. */
static int parse_caps(struct lctx *c, const json_t *o, struct brk_profile *p)
{
    const json_t *obj = json_object_get(o, "route_max_calls");
    if (!obj)
        return 0;
    if (!json_is_object(obj))
        return fail(c, "route_max_calls", "must be an object of \"METHOD /path\": cap");
    size_t n = json_object_size(obj);
    p->caps = calloc(n ? n : 1, sizeof *p->caps);
    if (!p->caps)
        return oom(c);
    const char *k;
    json_t *v;
    json_object_foreach((json_t *)obj, k, v)
    {
        char q[80], f[120];
        snprintf(f, sizeof f, "route_max_calls[\"%s\"]", brk_quote(q, sizeof q, k, strlen(k)));
        __attribute__((cleanup(brk_route_done))) struct brk_route r = {0};
        struct plm_err e = {0};
        if (brk_route_parse(k, strlen(k), true, &r, &e) < 0)
            return e.kind == PLM_E_INTERNAL ? oom(c) : fail(c, f, "%s", e.msg);
        char *low = malloc(r.len + 1);
        if (!low)
            return oom(c);
        lower_copy(low, r.path, r.len);
        enum brk_method m = r.method;
        struct brk_cap *cap = &p->caps[p->n_caps];
        cap->method = m;
        cap->path_lower = low;
        p->n_caps++;
        for (size_t i = 0; i + 1 < p->n_caps; i++)
            if (p->caps[i].method == m && strcmp(p->caps[i].path_lower, low) == 0)
                return fail(c, f, "duplicate cap (keys ignore the path's case)");
        if (parse_uint(c, v, f, 1, BRK_MAX_CALLS_MAX, &cap->max) < 0)
            return -1;
        bool named = false;
        size_t li = p->n_caps - 1;
        for (size_t i = 0; i < p->n_routes; i++) {
            struct brk_route *rt = &p->routes[i];
            if (rt->method != m || rt->len != strlen(low) || strncasecmp(rt->path, low, rt->len) != 0)
                continue;
            p->route_cap[i] = (long)li;
            named = true;
        }
        if (!named)
            return fail(c, f, "names no route in allow");
    }
    return 0;
}

static int read_env(struct lctx *c, const char *field, const char *name, const char **val)
{
    *val = c->getenv_fn ? c->getenv_fn(name) : getenv(name);
    if (!*val)
        return fail(c, field, "environment variable \"%s\" is not set", name);
    return 0;
}

/* token.env (static) or token.secret_env (jwt): a valid variable name that is set. */
static int token_env(struct lctx *c, const json_t *t, const char *key, const char *what, const char **env, size_t *len,
                     const char **val)
{
    char f[32];
    snprintf(f, sizeof f, "token.%s", key);
    *env = jstr(json_object_get(t, key), len);
    if (!*env)
        return fail(c, f, "is required (the name of the variable holding %s)", what);
    if (!brk_env_name_ok(*env, *len))
        return fail(c, f, "is not a valid environment variable name");
    return read_env(c, f, *env, val);
}

/* The credential and the name of the variable it came from (names only ever reach messages). */
static int keep_secret(struct lctx *c, struct brk_profile *p, enum brk_token_type type, const char *env, size_t env_len,
                       const char *val)
{
    p->token_type = type;
    if (dup_str(c, &p->token_env, env, env_len) < 0)
        return -1;
    return brk_secret_set(&p->secret, val, strlen(val)) < 0 ? oom(c) : 0;
}

static int parse_static_token(struct lctx *c, const json_t *t, struct brk_profile *p)
{
    static const char *const keys[] = {"type", "env", NULL};
    const char *env, *val;
    size_t len;
    if (check_keys(c, t, "token", keys) < 0 || token_env(c, t, "env", "the token", &env, &len, &val) < 0)
        return -1;
    if (!brk_token_ok(val, strlen(val)))
        return fail(c, "token.env", "the value of \"%s\" is not a usable bearer token (1..%d bytes, each 0x21-0x7E)",
                    env, LIM_TOKEN_MAX);
    return keep_secret(c, p, BRK_TOKEN_STATIC, env, len, val);
}

/* issuer and key_id are optional (no iss claim, no kid header), as in the reference; audience is
 * required. */
static int parse_jwt_claims(struct lctx *c, const json_t *t, struct brk_profile *p)
{
    static const char *const claims[] = {"issuer", "audience", "key_id"};
    char **dst[] = {&p->jwt_issuer, &p->jwt_audience, &p->jwt_key_id};
    for (int i = 0; i < 3; i++) {
        char f[32];
        snprintf(f, sizeof f, "token.%s", claims[i]);
        size_t cl;
        const json_t *cv = json_object_get(t, claims[i]);
        if (!cv && i != 1)
            continue;
        const char *s = jstr(cv, &cl);
        if (!s)
            return fail(c, f, "is required (a string)");
        if (cl > BRK_STRING_MAX || !brk_text_ok(s, cl, BRK_TXT_NONEMPTY | BRK_TXT_NO_CTRL | BRK_TXT_TRIMMED))
            return fail(c, f, "must be 1..%d bytes of UTF-8, trimmed, without control characters", BRK_STRING_MAX);
        if (dup_str(c, dst[i], s, cl) < 0)
            return -1;
    }
    const json_t *ttl = json_object_get(t, "ttl_sec");
    return ttl ? parse_uint(c, ttl, "token.ttl_sec", 0, BRK_JWT_TTL_MAX, &p->jwt_ttl_s) : 0;
}

static int parse_jwt_token(struct lctx *c, const json_t *t, struct brk_profile *p)
{
    static const char *const keys[] = {"type", "secret_env", "issuer", "audience", "ttl_sec", "key_id", NULL};
    const char *env, *val;
    size_t len;
    if (check_keys(c, t, "token", keys) < 0 || token_env(c, t, "secret_env", "the HS256 key", &env, &len, &val) < 0)
        return -1;
    size_t vlen = strlen(val);
    if (vlen < BRK_JWT_SECRET_MIN || vlen > LIM_TOKEN_MAX)
        return fail(c, "token.secret_env", "the value of \"%s\" must be %d..%d bytes", env, BRK_JWT_SECRET_MIN,
                    LIM_TOKEN_MAX);
    if (parse_jwt_claims(c, t, p) < 0)
        return -1;
    return keep_secret(c, p, BRK_TOKEN_JWT, env, len, val);
}

static int parse_token(struct lctx *c, const json_t *o, struct brk_profile *p)
{
    const json_t *t = json_object_get(o, "token");
    if (!t) {
        p->token_type = BRK_TOKEN_NONE;
        return 0;
    }
    if (!json_is_object(t))
        return fail(c, "token", "must be an object with \"type\" static or jwt");
    size_t tlen = 0;
    const json_t *tv = json_object_get(t, "type");
    const char *type = tv ? jstr(tv, &tlen) : "static"; /* the reference's default */
    if (!type)
        return fail(c, "token.type", "must be \"static\" or \"jwt\"");
    if (!*type || strcmp(type, "static") == 0)
        return parse_static_token(c, t, p);
    if (strcmp(type, "jwt") == 0)
        return parse_jwt_token(c, t, p);
    char q[40];
    return fail(c, "token.type", "\"%s\" must be \"static\" or \"jwt\"", brk_quote(q, sizeof q, type, tlen));
}

static int parse_health(struct lctx *c, const json_t *o, struct brk_profile *p)
{
    const json_t *v = json_object_get(o, "health_check");
    if (!v)
        return 0;
    size_t len;
    const char *s = jstr(v, &len);
    if (!s)
        return fail(c, "health_check", "must be a \"GET /path\" string");
    struct plm_err e = {0};
    if (brk_route_parse(s, len, true, &p->health, &e) < 0)
        return e.kind == PLM_E_INTERNAL ? oom(c) : fail(c, "health_check", "%s", e.msg);
    p->has_health = true;
    if (p->health.method != BRK_M_GET)
        return fail(c, "health_check", "must be a GET route");
    if (p->health.wildcard)
        return fail(c, "health_check", "must be concrete (no \"*\")");
    return 0;
}

static int parse_base_url(struct lctx *c, const json_t *o, struct brk_profile *p)
{
    size_t len;
    const json_t *bu = json_object_get(o, "base_url");
    if (!bu)
        return fail(c, "base_url", "is required");
    const char *s = jstr(bu, &len);
    if (!s)
        return fail(c, "base_url", "must be a string");
    const char *why = brk_parse_origin(s, len, &p->origin);
    return why ? fail(c, "base_url", "%s", why) : 0;
}

static int parse_callers(struct lctx *c, const json_t *o, struct brk_profile *p)
{
    if (parse_strings(c, o, "allowed_callers", true, BRK_CALLERS_MAX,
                      BRK_TXT_NONEMPTY | BRK_TXT_NO_CTRL | BRK_TXT_TRIMMED, &p->callers, &p->n_callers) < 0)
        return -1;
    for (size_t i = 0; i < p->n_callers; i++)
        if (strcmp(p->callers[i], "*") == 0)
            p->any_caller = true; /* the operator's explicit opt-in: every authenticated caller */
    return 0;
}

static int parse_scopes(struct lctx *c, const json_t *o, struct brk_profile *p)
{
    if (parse_strings(c, o, "scopes", false, BRK_SCOPES_MAX, BRK_TXT_NONEMPTY | BRK_TXT_NO_CTRL | BRK_TXT_NO_SPACE,
                      &p->scopes, &p->n_scopes) < 0)
        return -1;
    for (size_t i = 0; i < p->n_scopes; i++)
        if (strcmp(p->scopes[i], "code:run") == 0 || strcmp(p->scopes[i], "*") == 0)
            return fail(c, "scopes", "\"%s\" is forbidden in a grant", p->scopes[i]);
    return 0;
}

/* 0 (or absent) means the default. */
static int parse_max_calls(struct lctx *c, const json_t *o, struct brk_profile *p)
{
    p->max_calls = BRK_MAX_CALLS_DEFAULT;
    const json_t *mc = json_object_get(o, "max_calls");
    if (!mc)
        return 0;
    if (!json_is_integer(mc) || json_integer_value(mc) < 0 || json_integer_value(mc) > BRK_MAX_CALLS_MAX)
        return fail(c, "max_calls", "must be an integer 1..%u (0 means the default %u)", BRK_MAX_CALLS_MAX,
                    BRK_MAX_CALLS_DEFAULT);
    uint32_t v = (uint32_t)json_integer_value(mc);
    p->max_calls = v ? v : BRK_MAX_CALLS_DEFAULT;
    return 0;
}

static int parse_global(struct lctx *c, const json_t *o, struct brk_profile *p)
{
    const json_t *g = json_object_get(o, "global");
    if (!g)
        return dup_str(c, &p->global, "host", 4);
    size_t len;
    const char *s = jstr(g, &len);
    if (!s)
        return fail(c, "global", "must be a string");
    if (!brk_global_name_ok(s, len)) {
        char q[80];
        return fail(c, "global",
                    "\"%s\" must be a plain JavaScript identifier ([A-Za-z_$][A-Za-z0-9_$]*, "
                    "at most %d bytes), not a reserved word or a built-in the client needs",
                    brk_quote(q, sizeof q, s, len), BRK_GLOBAL_MAX);
    }
    return dup_str(c, &p->global, s, len);
}

static int parse_preamble(struct lctx *c, const json_t *o, struct brk_profile *p)
{
    const json_t *pre = json_object_get(o, "preamble");
    if (!pre)
        return dup_str(c, &p->preamble, "", 0);
    size_t len;
    const char *s = jstr(pre, &len);
    if (!s)
        return fail(c, "preamble", "must be a string without NUL");
    if (len > BRK_PREAMBLE_MAX)
        return fail(c, "preamble", "is longer than %u bytes", BRK_PREAMBLE_MAX);
    if (!plm_utf8_ok(s, len))
        return fail(c, "preamble", "must be valid UTF-8");
    return dup_str(c, &p->preamble, s, len);
}

/* The reference's further keys, all parsed together by profile_ref.c. */
static int parse_ref_keys(struct lctx *c, const json_t *o, struct brk_profile *p)
{
    char field[64], rwhy[256];
    int rr = brk_ref_keys_parse(o, c->dir, p, field, sizeof field, rwhy, sizeof rwhy);
    if (rr == -2)
        return oom(c);
    return rr < 0 ? fail(c, field, "%s", rwhy) : 0;
}

/* The profile's fields in the order they are checked (the first problem is the one reported);
 * a key not in this table is an error. A NULL parser is a key another entry's parser reads. */
static const struct profile_field {
    const char *key;
    int (*parse)(struct lctx *c, const json_t *o, struct brk_profile *p);
} profile_fields[] = {
    {"base_url", parse_base_url},
    {"allow", parse_allow},
    {"route_max_calls", parse_caps},
    {"allowed_callers", parse_callers},
    {"scopes", parse_scopes},
    {"token", parse_token},
    {"max_calls", parse_max_calls},
    {"health_check", parse_health},
    {"global", parse_global},
    {"preamble", parse_preamble},
    {"catalog", parse_ref_keys},
    {"batch_of", NULL},
    {"advice", NULL},
    {"advice_retention", NULL},
    {"allow_in_sessions", NULL},
    {"preamble_file", NULL},
};

static bool profile_key_known(const char *k)
{
    for (size_t i = 0; i < sizeof profile_fields / sizeof profile_fields[0]; i++)
        if (strcmp(k, profile_fields[i].key) == 0)
            return true;
    return false;
}

static int parse_profile(struct lctx *c, const char *name, const json_t *o, struct brk_profile *p)
{
    if (!json_is_object(o))
        return fail(c, NULL, "must be an object");
    const char *k;
    json_t *v;
    json_object_foreach((json_t *)o, k, v)
    {
        if (!profile_key_known(k))
            return unknown_key(c, NULL, k);
    }
    if (dup_str(c, &p->name, name, strlen(name)) < 0)
        return -1;
    for (size_t i = 0; i < sizeof profile_fields / sizeof profile_fields[0]; i++)
        if (profile_fields[i].parse && profile_fields[i].parse(c, o, p) < 0)
            return -1;
    return 0;
}

/* ---- loading --------------------------------------------------------------------------- */

void brk_profiles_free(struct brk_profiles *ps)
{
    if (!ps)
        return;
    for (size_t i = 0; ps->v && i < ps->n; i++)
        profile_done(&ps->v[i]);
    free(ps->v);
    free(ps);
}

struct brk_profiles *brk_profiles_parse(const char *json, size_t len, brk_getenv_fn getenv_fn, struct plm_err *err)
{
    return brk_profiles_parse_in(json, len, NULL, getenv_fn, err);
}

/* The top level: {"profiles": {...}} with at most BRK_PROFILES_MAX entries; NULL after an error. */
static const json_t *profiles_object(struct lctx *c, const json_t *root)
{
    static const char *const top[] = {"profiles", NULL};
    if (!json_is_object(root))
        return fail(c, NULL, "must be a JSON object {\"profiles\": {...}}"), NULL;
    if (check_keys(c, root, NULL, top) < 0)
        return NULL;
    const json_t *profs = json_object_get(root, "profiles");
    if (!json_is_object(profs))
        return fail(c, "profiles", "is required (an object of named profiles)"), NULL;
    if (json_object_size(profs) > BRK_PROFILES_MAX)
        return fail(c, "profiles", "has more than %d profiles", BRK_PROFILES_MAX), NULL;
    return profs;
}

/* Each named profile into ps->v, counted even when half-built so brk_profiles_free frees it. */
static int parse_each(struct lctx *c, const json_t *profs, struct brk_profiles *ps)
{
    size_t n = json_object_size(profs);
    ps->v = calloc(n ? n : 1, sizeof *ps->v);
    if (!ps->v)
        return oom(c);
    const char *name;
    json_t *o;
    json_object_foreach((json_t *)profs, name, o)
    {
        size_t nlen = strlen(name);
        c->profile = NULL; /* not yet: the name itself is under test */
        if (!brk_profile_name_ok(name, nlen)) {
            char q[80];
            return fail(c, "profiles", "profile name \"%s\" must be 1..%d bytes of [A-Za-z0-9._-]",
                        brk_quote(q, sizeof q, name, nlen), LIM_GRANT_PROFILE_MAX);
        }
        c->profile = name;
        int r = parse_profile(c, name, o, &ps->v[ps->n]);
        ps->n++;
        if (r < 0)
            return -1;
    }
    return 0;
}

DEFINE_CLEANUP(struct brk_profiles, brk_profiles_free)

struct brk_profiles *brk_profiles_parse_in(const char *json, size_t len, const char *dir, brk_getenv_fn getenv_fn,
                                           struct plm_err *err)
{
    struct lctx c = {.getenv_fn = getenv_fn, .err = err, .dir = dir};
    json_error_t je;
    json_t *root cleanup_json = json_loadb(json, len, JSON_REJECT_DUPLICATES, &je);
    if (!root)
        return plm_fail(err, 0, PLM_E_INVALID, "invalid JSON at line %d column %d: %s", je.line, je.column, je.text),
               NULL;
    struct brk_profiles *ps cleanup_(brk_profiles_free) = calloc(1, sizeof *ps);
    if (!ps)
        return oom(&c), NULL;
    const json_t *profs = profiles_object(&c, root);
    if (!profs || parse_each(&c, profs, ps) < 0)
        return NULL;
    return take_ptr(&ps);
}

struct brk_profiles *brk_profiles_load(const char *path, brk_getenv_fn getenv_fn, struct plm_err *err)
{
    char q[256];
    brk_quote(q, sizeof q, path ? path : "", path ? strlen(path) : 0);
    cleanup_close int fd = path ? open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY) : -1;
    if (fd < 0) {
        plm_fail(err, errno, PLM_E_INVALID, "grants file \"%s\": %s", q, strerror(path ? errno : EINVAL));
        return NULL;
    }
    struct stat st;
    if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
        plm_fail(err, errno, PLM_E_INVALID, "grants file \"%s\": not a regular file", q);
        return NULL;
    }
    if ((uint64_t)st.st_size > BRK_GRANTS_FILE_MAX) {
        plm_fail(err, EFBIG, PLM_E_INVALID, "grants file \"%s\": larger than %u bytes", q, BRK_GRANTS_FILE_MAX);
        return NULL;
    }
    /* read up to the cap + 1, so a file growing under us is still caught */
    cleanup_free char *buf = malloc(BRK_GRANTS_FILE_MAX + 1);
    if (!buf) {
        plm_fail(err, ENOMEM, PLM_E_INTERNAL, "out of memory");
        return NULL;
    }
    size_t got = 0;
    while (got <= BRK_GRANTS_FILE_MAX) {
        ssize_t n = read(fd, buf + got, BRK_GRANTS_FILE_MAX + 1 - got);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0) {
            plm_fail(err, errno, PLM_E_INVALID, "grants file \"%s\": read: %s", q, strerror(errno));
            return NULL;
        }
        if (n == 0)
            break;
        got += (size_t)n;
    }
    if (got > BRK_GRANTS_FILE_MAX) {
        plm_fail(err, EFBIG, PLM_E_INVALID, "grants file \"%s\": larger than %u bytes", q, BRK_GRANTS_FILE_MAX);
        return NULL;
    }
    /* preamble_file resolves in the grants file's directory */
    cleanup_free char *dir = strdup(path);
    if (!dir) {
        plm_fail(err, ENOMEM, PLM_E_INTERNAL, "out of memory");
        return NULL;
    }
    char *slash = strrchr(dir, '/');
    if (!slash)
        strcpy(dir, ".");
    else if (slash == dir)
        dir[1] = 0;
    else
        *slash = 0;
    struct brk_profiles *ps = brk_profiles_parse_in(buf, got, dir, getenv_fn, err);
    if (!ps)
        plm_err_wrap(err, "grants file \"%s\"", q);
    return ps;
}

/* ---- lookups --------------------------------------------------------------------------- */

bool brk_profile_caller_allowed(const struct brk_profile *p, const char *caller)
{
    if (!p || !caller || !*caller)
        return false;
    if (p->any_caller)
        return true;
    for (size_t i = 0; i < p->n_callers; i++)
        if (strcmp(p->callers[i], caller) == 0)
            return true;
    return false;
}

const struct brk_profile *brk_profile_for(const struct brk_profiles *ps, const char *name, const char *caller)
{
    if (!ps || !name || !*name || !caller || !*caller)
        return NULL;
    for (size_t i = 0; i < ps->n; i++)
        if (strcmp(ps->v[i].name, name) == 0)
            return brk_profile_caller_allowed(&ps->v[i], caller) ? &ps->v[i] : NULL;
    return NULL;
}

int brk_profile_select(const struct brk_profiles *ps, const char *name, const char *caller,
                       const struct brk_profile **out, struct plm_err *err)
{
    *out = brk_profile_for(ps, name, caller);
    if (*out)
        return 0;
    char q[LIM_GRANT_PROFILE_MAX * 4 + 8];
    return plm_refuse(err, PLM_E_PERMISSION, PLM_REFUSAL_PERMISSION,
                      "grant_profile \"%s\" is not available to this caller",
                      brk_quote(q, sizeof q, name ? name : "", name ? strlen(name) : 0));
}

void brk_profile_free(struct brk_profile *p)
{
    if (!p)
        return;
    profile_done(p);
    free(p);
}
