/* auth.c: bearer-token authentication and the code:run scope.
 * Owns: the client table (token digests, never tokens) and, in shared-token mode, the SHA-256 of
 * the token. Trusts: nothing in the Authorization header. Invariant: comparisons of secrets are
 * constant-time over fixed-length digests, and no token byte is ever logged or copied out. */
#include "auth.h"

#include <errno.h>
#include <ctype.h>
#include <jansson.h>
#include <openssl/crypto.h>
#include <openssl/sha.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../core/limits.h"
#include "../core/validate.h"
#include "../core/cleanup_json.h"

struct client {
    char id[128];
    unsigned char token_sha256[32];
    bool may_run, may_metrics;
    uint32_t paid_seconds_per_day; /* 0 = no allowance of its own */
};

struct auth {
    enum auth_mode mode;
    unsigned char token_sha256[32]; /* AUTH_TOKEN */
    struct client *clients;         /* AUTH_CLIENTS */
    size_t n_clients;
};

#define CFG_ERR(err, ...) plm_fail(err, 0, PLM_E_INVALID, __VA_ARGS__)

static int hexval(int c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    return -1; /* uppercase is refused: the file format says lowercase */
}

static bool parse_digest(const char *hex, unsigned char out[32])
{
    if (!hex || strlen(hex) != 64)
        return false;
    for (int i = 0; i < 32; i++) {
        int hi = hexval(hex[2 * i]), lo = hexval(hex[2 * i + 1]);
        if (hi < 0 || lo < 0)
            return false;
        out[i] = (unsigned char)(hi << 4 | lo);
    }
    return true;
}

static bool id_ok(const char *s)
{
    size_t n = strlen(s);
    if (n == 0 || n >= sizeof(((struct client *)0)->id) || strcmp(s, "*") == 0 || !plm_utf8_ok(s, n))
        return false;
    if (isspace((unsigned char)s[0]) || isspace((unsigned char)s[n - 1]))
        return false; /* "trimmed": padding would make two ids that look alike */
    for (size_t i = 0; i < n; i++)
        if ((unsigned char)s[i] < 0x20 || s[i] == 0x7f)
            return false;
    return true;
}

static bool scope_ok(const char *s)
{
    if (!*s)
        return false;
    for (const char *p = s; *p; p++)
        if ((unsigned char)*p <= 0x20 || *p == 0x7f)
            return false;
    return true;
}

static int load_client(json_t *c, size_t idx, struct client *out, struct plm_err *err)
{
    const char *key;
    json_t *val;
    if (!json_is_object(c))
        return CFG_ERR(err, "PLIMSOLL_CLIENTS_FILE: clients[%zu] must be an object", idx);
    json_object_foreach(c, key, val) {
        if (strcmp(key, "id") && strcmp(key, "token_sha256") && strcmp(key, "scopes") &&
            strcmp(key, "paid_seconds_per_day"))
            return CFG_ERR(err, "PLIMSOLL_CLIENTS_FILE: clients[%zu]: unknown key \"%s\"", idx, key);
    }
    const char *id = json_string_value(json_object_get(c, "id"));
    if (!id || !id_ok(id))
        return CFG_ERR(err, "PLIMSOLL_CLIENTS_FILE: clients[%zu].id must be a trimmed, non-empty name "
                            "other than \"*\" without control characters", idx);
    snprintf(out->id, sizeof out->id, "%s", id);
    if (!parse_digest(json_string_value(json_object_get(c, "token_sha256")), out->token_sha256))
        return CFG_ERR(err, "PLIMSOLL_CLIENTS_FILE: clients[%zu].token_sha256 must be 64 lowercase hex "
                            "characters", idx);
    json_t *scopes = json_object_get(c, "scopes");
    if (!json_is_array(scopes) || json_array_size(scopes) == 0)
        return CFG_ERR(err, "PLIMSOLL_CLIENTS_FILE: clients[%zu].scopes must be a non-empty array", idx);
    for (size_t i = 0; i < json_array_size(scopes); i++) {
        const char *s = json_string_value(json_array_get(scopes, i));
        if (!s || !scope_ok(s))
            return CFG_ERR(err, "PLIMSOLL_CLIENTS_FILE: clients[%zu].scopes[%zu] must be a non-empty name "
                                "without whitespace", idx, i);
        for (size_t k = 0; k < i; k++)
            if (strcmp(s, json_string_value(json_array_get(scopes, k))) == 0)
                return CFG_ERR(err, "PLIMSOLL_CLIENTS_FILE: clients[%zu].scopes: duplicate \"%s\"", idx, s);
        if (strcmp(s, "code:run") == 0 || strcmp(s, "*") == 0)
            out->may_run = true;
        if (strcmp(s, "metrics") == 0 || strcmp(s, "*") == 0)
            out->may_metrics = true;
    }
    json_t *paid = json_object_get(c, "paid_seconds_per_day");
    if (paid && !(json_is_integer(paid) && json_integer_value(paid) >= 0))
        return CFG_ERR(err, "PLIMSOLL_CLIENTS_FILE: clients[%zu].paid_seconds_per_day must be a "
                            "non-negative integer", idx);
    if (paid && json_integer_value(paid) > 86400000)
        return CFG_ERR(err, "PLIMSOLL_CLIENTS_FILE: clients[%zu].paid_seconds_per_day must be at most 86400000", idx);
    out->paid_seconds_per_day = paid ? (uint32_t)json_integer_value(paid) : 0;
    return 0;
}

static int load_clients(struct auth *a, const char *path, struct plm_err *err)
{
    json_error_t jerr;
    /* duplicate keys and trailing data are errors, as for the reference */
    json_t *root cleanup_json = json_load_file(path, JSON_REJECT_DUPLICATES, &jerr);
    if (!root)
        return CFG_ERR(err, "PLIMSOLL_CLIENTS_FILE: %s: line %d: %s", path, jerr.line, jerr.text);
    const char *key;
    json_t *val;
    json_t *clients = json_object_get(root, "clients");
    if (!json_is_object(root))
        return CFG_ERR(err, "PLIMSOLL_CLIENTS_FILE: %s: must hold an object", path);
    json_object_foreach(root, key, val) {
        if (strcmp(key, "clients"))
            return CFG_ERR(err, "PLIMSOLL_CLIENTS_FILE: %s: unknown key \"%s\"", path, key);
    }
    if (!json_is_array(clients) || json_array_size(clients) == 0)
        return CFG_ERR(err, "PLIMSOLL_CLIENTS_FILE: %s: \"clients\" must be a non-empty array", path);
    a->n_clients = json_array_size(clients);
    a->clients = calloc(a->n_clients, sizeof *a->clients);
    if (!a->clients)
        return plm_fail(err, ENOMEM, PLM_E_INTERNAL, "out of memory");
    for (size_t i = 0; i < a->n_clients; i++) {
        if (load_client(json_array_get(clients, i), i, &a->clients[i], err) < 0)
            return -1;
        for (size_t k = 0; k < i; k++) {
            if (strcmp(a->clients[k].id, a->clients[i].id) == 0)
                return CFG_ERR(err, "PLIMSOLL_CLIENTS_FILE: clients[%zu]: duplicate id \"%s\"", i, a->clients[i].id);
            if (memcmp(a->clients[k].token_sha256, a->clients[i].token_sha256, 32) == 0)
                return CFG_ERR(err, "PLIMSOLL_CLIENTS_FILE: clients[%zu]: duplicate token_sha256", i);
        }
    }
    return 0;
}

struct auth *auth_new(const char *clients_file, const char *token, struct plm_err *err)
{
    struct auth *a = calloc(1, sizeof *a);
    if (!a) {
        plm_fail(err, ENOMEM, PLM_E_INTERNAL, "out of memory");
        return NULL;
    }
    if (clients_file && *clients_file) {
        a->mode = AUTH_CLIENTS;
        if (load_clients(a, clients_file, err) < 0) {
            auth_free(a);
            return NULL;
        }
    } else if (token && *token) {
        a->mode = AUTH_TOKEN;
        if (strlen(token) < 32 || strlen(token) > LIM_TOKEN_MAX) {
            CFG_ERR(err, "PLIMSOLL_TOKEN must be 32 to %u characters", (unsigned)LIM_TOKEN_MAX);
            auth_free(a);
            return NULL;
        }
        SHA256((const unsigned char *)token, strlen(token), a->token_sha256);
    } else {
        a->mode = AUTH_OPEN;
    }
    return a;
}

void auth_free(struct auth *a)
{
    if (!a)
        return;
    if (a->clients)
        OPENSSL_cleanse(a->clients, a->n_clients * sizeof *a->clients);
    free(a->clients);
    OPENSSL_cleanse(a, sizeof *a);
    free(a);
}

enum auth_mode auth_mode(const struct auth *a) { return a->mode; }
size_t auth_client_count(const struct auth *a) { return a->n_clients; }

size_t auth_uncapped(const struct auth *a, const char **first)
{
    size_t n = 0;
    *first = NULL;
    for (size_t i = 0; a->mode == AUTH_CLIENTS && i < a->n_clients; i++)
        if (a->clients[i].paid_seconds_per_day == 0 && n++ == 0)
            *first = a->clients[i].id;
    return n;
}

size_t auth_capped(const struct auth *a)
{
    size_t n = 0;
    for (size_t i = 0; a->mode == AUTH_CLIENTS && i < a->n_clients; i++)
        n += a->clients[i].paid_seconds_per_day > 0;
    return n;
}

#define UNAUTH(err, msg) plm_refuse(err, PLM_E_UNAUTHENTICATED, PLM_REFUSAL_PERMISSION, msg)

/* "Bearer <token>": exactly two whitespace-separated fields, scheme case-insensitive. */
static bool bearer_token(const char *h, const char **tok, size_t *tok_len)
{
    while (*h == ' ' || *h == '\t')
        h++;
    if (strncasecmp(h, "bearer", 6) != 0 || (h[6] != ' ' && h[6] != '\t'))
        return false;
    h += 6;
    while (*h == ' ' || *h == '\t')
        h++;
    const char *start = h;
    while (*h && *h != ' ' && *h != '\t')
        h++;
    const char *end = h;
    while (*h == ' ' || *h == '\t')
        h++;
    if (*h || end == start)
        return false;
    *tok = start;
    *tok_len = (size_t)(end - start);
    return *tok_len <= LIM_TOKEN_MAX;
}

int auth_authenticate(const struct auth *a, const char *header, unsigned n_headers, struct principal *p,
                      struct plm_err *err)
{
    memset(p, 0, sizeof *p);
    if (a->mode == AUTH_OPEN) {
        p->may_run = p->may_metrics = true; /* the wildcard principal of dev mode */
        return 0;
    }
    const char *tok;
    size_t len;
    if (!header || n_headers != 1 || !bearer_token(header, &tok, &len))
        return UNAUTH(err, "missing bearer token");
    unsigned char d[32];
    SHA256((const unsigned char *)tok, len, d);
    if (a->mode == AUTH_TOKEN) {
        int same = CRYPTO_memcmp(d, a->token_sha256, 32) == 0;
        OPENSSL_cleanse(d, sizeof d);
        if (!same)
            return UNAUTH(err, "invalid or expired token");
        snprintf(p->id, sizeof p->id, "static");
        p->may_run = p->may_metrics = true; /* one shared token: the operator's */
        return 0;
    }
    /* Scan every client so the time taken does not say where a digest matched. */
    const struct client *hit = NULL;
    for (size_t i = 0; i < a->n_clients; i++)
        if (CRYPTO_memcmp(d, a->clients[i].token_sha256, 32) == 0)
            hit = &a->clients[i];
    OPENSSL_cleanse(d, sizeof d);
    if (!hit)
        return UNAUTH(err, "invalid or expired token");
    snprintf(p->id, sizeof p->id, "%s", hit->id);
    p->may_run = hit->may_run;
    p->may_metrics = hit->may_metrics;
    p->paid_seconds_per_day = hit->paid_seconds_per_day;
    return 0;
}

int auth_require_run_scope(const struct principal *p, struct plm_err *err)
{
    if (p->may_run)
        return 0;
    return plm_refuse(err, PLM_E_PERMISSION, PLM_REFUSAL_PERMISSION, "token lacks required scope \"code:run\"");
}
