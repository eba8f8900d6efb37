/* profiles_test.c: loading PLIMSOLL_GRANTS_FILE (providers.md §5.1; §8 items 49-51, 56-58, 64).
 * Every refusal must name the profile and the field, and never print a secret. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "profiles.h"
#include "unit.h"

static const char *static_token = "s3cret-static-token";
static const char *jwt_key = "0123456789abcdef0123456789abcdef-key";

static const char *fake_getenv(const char *name)
{
    if (strcmp(name, "ACME_TOKEN") == 0)
        return static_token;
    if (strcmp(name, "ACME_JWT_KEY") == 0)
        return jwt_key;
    if (strcmp(name, "SHORT_KEY") == 0)
        return "short";
    return NULL;
}

static struct plm_err err;

/* Loads {"profiles":{"acme":{<base>,<extra>}}} where base is a valid profile minus the keys in
 * extra. */
static struct brk_profiles *load_with(const char *fields)
{
    char buf[8192];
    snprintf(buf, sizeof buf, "{\"profiles\": {\"acme\": {%s}}}", fields);
    memset(&err, 0, sizeof err);
    return brk_profiles_parse(buf, strlen(buf), fake_getenv, &err);
}

#define BASE_OK "\"allow\": [\"GET /v1/items/*\"], \"allowed_callers\": [\"alice\"]"

static bool ok_with(const char *fields)
{
    struct brk_profiles *ps = load_with(fields);
    bool ok = ps != NULL;
    brk_profiles_free(ps);
    return ok;
}

static bool base_url_ok(const char *url)
{
    char f[512];
    snprintf(f, sizeof f, "\"base_url\": \"%s\", " BASE_OK, url);
    return ok_with(f);
}

static bool scope_ok(const char *scope)
{
    char f[512];
    snprintf(f, sizeof f, "\"base_url\": \"https://api.example\", " BASE_OK ", \"scopes\": [\"%s\"]", scope);
    return ok_with(f);
}

static bool route_ok(const char *route)
{
    char f[512];
    snprintf(f, sizeof f,
             "\"base_url\": \"https://api.example\", \"allowed_callers\": [\"alice\"], \"allow\": [\"%s\"]", route);
    return ok_with(f);
}

static bool contains(const char *hay, const char *needle)
{
    return hay && strstr(hay, needle) != NULL;
}

int main(void)
{
    /* a full, valid profile */
    struct brk_profiles *ps =
        load_with("\"base_url\": \"HTTPS://API.Example:8443\", \"allow\": [\"get /v1/items/*\", \"POST /v1/items/*\", "
                  "\"PUT /v1/lights/abc\"], \"route_max_calls\": {\"put /V1/lights/ABC\": 3}, "
                  "\"allowed_callers\": [\"alice\", \"bob\"], \"scopes\": [\"items:read\", \"items:write\"], "
                  "\"token\": {\"type\": \"static\", \"env\": \"ACME_TOKEN\"}, \"max_calls\": 5, "
                  "\"health_check\": \"GET /health\", \"global\": \"acme\", \"preamble\": \"var x = 1;\"");
    CHECK(ps != NULL);
    if (!ps)
        printf("# %s\n", err.msg);
    const struct brk_profile *p = ps ? brk_profile_for(ps, "acme", "alice") : NULL;
    CHECK(p != NULL);
    if (p) {
        CHECK_STR(p->origin, "https://api.example:8443");
        CHECK(p->n_routes == 3 && p->routes[0].method == BRK_M_GET);
        CHECK(p->n_caps == 1 && p->caps[0].max == 3 && p->route_cap[2] == 0 && p->route_cap[0] == -1);
        CHECK(p->n_scopes == 2 && p->n_callers == 2);
        CHECK(p->token_type == BRK_TOKEN_STATIC && p->secret.len == strlen(static_token));
        CHECK(p->max_calls == 5 && p->has_health);
        CHECK_STR(p->health.path, "/health");
        CHECK_STR(p->global, "acme");
        CHECK_STR(p->preamble, "var x = 1;");
        char d[BRK_SECRET_DESCRIBE_MAX];
        CHECK_STR(brk_secret_describe(&p->secret, d), "[redacted len=19]");
        /* a clone without secrets */
        struct brk_profile *c = brk_profile_clone(p, false);
        CHECK(c && !brk_secret_isset(&c->secret) && c->n_routes == 3 && c->route_cap[2] == 0);
        CHECK(c && strcmp(c->routes[1].path, "/v1/items/*") == 0 && c->routes[1].path != p->routes[1].path);
        brk_profile_free(c);
    }
    /* unknown or not allowed: the same NULL, the same words */
    CHECK(ps && brk_profile_for(ps, "acme", "mallory") == NULL);
    CHECK(ps && brk_profile_for(ps, "nope", "alice") == NULL);
    CHECK(ps && brk_profile_for(ps, "acme", "") == NULL);
    CHECK(ps && brk_profile_for(ps, "acme", NULL) == NULL);
    CHECK(brk_profile_for(NULL, "acme", "alice") == NULL);
    const struct brk_profile *sel;
    struct plm_err e1 = {0}, e2 = {0};
    CHECK(brk_profile_select(ps, "acme", "mallory", &sel, &e1) < 0);
    CHECK(brk_profile_select(ps, "acme2", "alice", &sel, &e2) < 0);
    CHECK(e1.kind == PLM_E_PERMISSION && e1.refusal == PLM_REFUSAL_PERMISSION);
    CHECK_STR(e1.msg, "grant_profile \"acme\" is not available to this caller");
    CHECK_STR(e2.msg, "grant_profile \"acme2\" is not available to this caller");
    CHECK(brk_profile_select(ps, "acme", "bob", &sel, &e1) == 0 && sel == p);
    brk_profiles_free(ps);

    /* defaults */
    ps = load_with("\"base_url\": \"https://api.example\", " BASE_OK);
    CHECK(ps && ps->n == 1);
    if (ps) {
        p = &ps->v[0];
        CHECK(p->max_calls == 256 && p->token_type == BRK_TOKEN_NONE && !p->has_health);
        CHECK_STR(p->global, "host");
        CHECK_STR(p->preamble, "");
    }
    brk_profiles_free(ps);

    /* item 49: base URLs */
    CHECK(!base_url_ok("ftp://api.example"));
    CHECK(!base_url_ok("http://api.example"));
    CHECK(!base_url_ok("https://user:pw@api.example"));
    CHECK(!base_url_ok("https://api.example/api"));
    CHECK(!base_url_ok("https://api.example/"));
    CHECK(!base_url_ok("https://api.example?x=1"));
    CHECK(!base_url_ok("https://api.example?"));
    CHECK(!base_url_ok("https://api.example#frag"));
    CHECK(!base_url_ok("https://"));
    CHECK(!base_url_ok(""));
    CHECK(!base_url_ok(" https://api.example"));
    CHECK(!base_url_ok("https://api.example:0"));
    CHECK(!base_url_ok("https://api.example:65536"));
    CHECK(!base_url_ok("https://api.example:"));
    CHECK(!base_url_ok("https://api..example"));
    CHECK(!base_url_ok("http://127.1:8080")); /* not a dotted quad: not provably loopback */
    CHECK(!base_url_ok("http://0x7f000001"));
    CHECK(!base_url_ok("http://127.0.0.1.evil.example"));
    CHECK(!base_url_ok("http://[::2]:80"));
    CHECK(!base_url_ok("https://caf\xc3\xa9.example"));
    CHECK(base_url_ok("https://host:8443"));
    CHECK(base_url_ok("http://127.0.0.1:8080"));
    CHECK(base_url_ok("http://127.9.8.7"));
    CHECK(base_url_ok("http://localhost:9000"));
    CHECK(base_url_ok("http://LOCALHOST"));
    CHECK(base_url_ok("http://[::1]:8080"));
    CHECK(base_url_ok("https://[2001:db8::1]"));
    CHECK(!load_with("\"base_url\": \"https://api.example/api\", " BASE_OK));
    CHECK_STR(err.msg, "profile \"acme\": base_url: must be an origin only: no path, not even \"/\"");
    CHECK(err.kind == PLM_E_INVALID);
    CHECK(!load_with("\"base_url\": \"http://api.example\", " BASE_OK));
    CHECK_STR(err.msg, "profile \"acme\": base_url: http is allowed only for localhost or a loopback IP; use https");
    CHECK(!load_with("\"base_url\": \"https://u@api.example\", " BASE_OK));
    CHECK_STR(err.msg, "profile \"acme\": base_url: must not contain userinfo");

    /* item 50: scopes */
    CHECK(!scope_ok("safe code:run"));
    CHECK(!scope_ok(" safe"));
    CHECK(!scope_ok(""));
    CHECK(!scope_ok("code:run"));
    CHECK(!scope_ok("*"));
    CHECK(!scope_ok("a\\u00a0b")); /* no-break space is whitespace too */
    CHECK(!scope_ok("a\\nb"));
    CHECK(scope_ok("items:read"));
    CHECK(!load_with("\"base_url\": \"https://api.example\", " BASE_OK ", \"scopes\": [\"code:run\"]"));
    CHECK_STR(err.msg, "profile \"acme\": scopes: \"code:run\" is forbidden in a grant");
    CHECK(!load_with("\"base_url\": \"https://api.example\", " BASE_OK ", \"scopes\": [\"a\", \"a b\"]"));
    CHECK(contains(err.msg, "profile \"acme\": scopes[1]: "));

    /* item 51: routes through the loader; a duplicate pair */
    CHECK(!route_ok("TRACE /v1/x"));
    CHECK(!route_ok(" GET /v1/x"));
    CHECK(!route_ok("GET /v1/../admin"));
    CHECK(!route_ok("GET /v1/x;jsessionid=1"));
    CHECK(route_ok("get /v1/things/*"));
    CHECK(!ok_with("\"base_url\": \"https://api.example\", \"allowed_callers\": [\"a\"], "
                   "\"allow\": [\"GET /v1/x\", \"get /v1/x\"]"));
    CHECK_STR(err.msg, "profile \"acme\": allow[1]: duplicate route \"get /v1/x\"");
    CHECK(!ok_with("\"base_url\": \"https://api.example\", \"allowed_callers\": [\"a\"], "
                   "\"allow\": [\"GET /v1/x\", \"GET /v1/a*b\"]"));
    CHECK_STR(err.msg, "profile \"acme\": allow[1]: path a \"*\" must fill a whole segment");
    /* an empty allowlist is valid (deny all); a missing one is not */
    CHECK(ok_with("\"base_url\": \"https://api.example\", \"allowed_callers\": [\"a\"], \"allow\": []"));
    CHECK(!ok_with("\"base_url\": \"https://api.example\", \"allowed_callers\": [\"a\"]"));
    CHECK_STR(err.msg, "profile \"acme\": allow: is required (an empty list denies every call)");

    /* allowed_callers: required, non-empty, trimmed, no "*" */
    CHECK(!ok_with("\"base_url\": \"https://api.example\", \"allow\": []"));
    CHECK_STR(err.msg, "profile \"acme\": allowed_callers: is required");
    CHECK(!ok_with("\"base_url\": \"https://api.example\", \"allow\": [], \"allowed_callers\": []"));
    CHECK_STR(err.msg, "profile \"acme\": allowed_callers: must not be empty");
    CHECK(!ok_with("\"base_url\": \"https://api.example\", \"allow\": [], \"allowed_callers\": [\" a\"]"));
    /* "*": the reference's explicit opt-in for every authenticated caller (never an empty one) */
    ps = load_with("\"base_url\": \"https://api.example\", \"allow\": [], \"allowed_callers\": [\"*\"]");
    CHECK(ps && ps->v[0].any_caller);
    CHECK(brk_profile_for(ps, "acme", "anyone") != NULL);
    CHECK(brk_profile_for(ps, "acme", "") == NULL);
    CHECK(brk_profile_for(ps, "acme", NULL) == NULL);
    brk_profiles_free(ps);
    ps = load_with("\"base_url\": \"https://api.example\", \"allow\": [], \"allowed_callers\": [\"alice\"]");
    CHECK(ps && !ps->v[0].any_caller && brk_profile_for(ps, "acme", "bob") == NULL);
    brk_profiles_free(ps);
    CHECK(!ok_with("\"base_url\": \"https://api.example\", \"allow\": [], \"allowed_callers\": [\"a\", \"a\"]"));

    /* item 56: static tokens must be usable bearer tokens; the value is never printed */
    const char *bad_tokens[] = {"", " token", "with space", "a\nb", "t\xc3\xb6k"};
    for (int i = 0; i < 5; i++) {
        static_token = bad_tokens[i];
        CHECK(!load_with("\"base_url\": \"https://api.example\", " BASE_OK
                         ", \"token\": {\"type\": \"static\", \"env\": \"ACME_TOKEN\"}"));
        CHECK(
            contains(err.msg, "profile \"acme\": token.env: the value of \"ACME_TOKEN\" is not a usable bearer token"));
        CHECK(i < 2 || !contains(err.msg, bad_tokens[i])); /* "" and " token" are substrings of the words */
    }
    static_token = "s3cret-static-token";
    CHECK(!load_with("\"base_url\": \"https://api.example\", " BASE_OK
                     ", \"token\": {\"type\": \"static\", \"env\": \"MISSING_VAR\"}"));
    CHECK_STR(err.msg, "profile \"acme\": token.env: environment variable \"MISSING_VAR\" is not set");
    CHECK(!load_with("\"base_url\": \"https://api.example\", " BASE_OK
                     ", \"token\": {\"type\": \"static\", \"env\": \"ACME_TOKEN\", \"value\": \"x\"}"));
    CHECK_STR(err.msg, "profile \"acme\": token: unknown field \"value\"");
    CHECK(!load_with("\"base_url\": \"https://api.example\", " BASE_OK ", \"token\": {\"type\": \"oauth\"}"));
    CHECK_STR(err.msg, "profile \"acme\": token.type: \"oauth\" must be \"static\" or \"jwt\"");
    CHECK(!load_with("\"base_url\": \"https://api.example\", " BASE_OK
                     ", \"token\": {\"type\": \"static\", \"env\": \"1BAD\"}"));
    CHECK_STR(err.msg, "profile \"acme\": token.env: is not a valid environment variable name");

    /* jwt tokens */
    ps = load_with("\"base_url\": \"https://api.example\", " BASE_OK
                   ", \"token\": {\"type\": \"jwt\", \"secret_env\": \"ACME_JWT_KEY\", \"issuer\": \"plimsoll\", "
                   "\"audience\": \"acme-api\"}");
    CHECK(ps && ps->v[0].token_type == BRK_TOKEN_JWT && ps->v[0].secret.len == strlen(jwt_key));
    CHECK(ps && strcmp(ps->v[0].jwt_issuer, "plimsoll") == 0 && strcmp(ps->v[0].jwt_audience, "acme-api") == 0);
    brk_profiles_free(ps);
    CHECK(!load_with("\"base_url\": \"https://api.example\", " BASE_OK
                     ", \"token\": {\"type\": \"jwt\", \"secret_env\": \"SHORT_KEY\", \"issuer\": \"i\", "
                     "\"audience\": \"a\"}"));
    CHECK_STR(err.msg, "profile \"acme\": token.secret_env: the value of \"SHORT_KEY\" must be 32..4096 bytes");
    CHECK(!load_with("\"base_url\": \"https://api.example\", " BASE_OK
                     ", \"token\": {\"type\": \"jwt\", \"secret_env\": \"ACME_JWT_KEY\", \"issuer\": \"i\"}"));
    CHECK_STR(err.msg, "profile \"acme\": token.audience: is required (a string)");
    CHECK(!load_with(
        "\"base_url\": \"https://api.example\", " BASE_OK
        ", \"token\": {\"type\": \"jwt\", \"secret_env\": \"NOPE\", \"issuer\": \"i\", \"audience\": \"a\"}"));
    CHECK_STR(err.msg, "profile \"acme\": token.secret_env: environment variable \"NOPE\" is not set");

    /* item 64: max_calls */
    CHECK(ok_with("\"base_url\": \"https://api.example\", " BASE_OK ", \"max_calls\": 1"));
    CHECK(ok_with("\"base_url\": \"https://api.example\", " BASE_OK ", \"max_calls\": 100000"));
    ps = load_with("\"base_url\": \"https://api.example\", " BASE_OK ", \"max_calls\": 0");
    CHECK(ps && ps->v[0].max_calls == 256);
    brk_profiles_free(ps);
    CHECK(!ok_with("\"base_url\": \"https://api.example\", " BASE_OK ", \"max_calls\": -1"));
    CHECK(!ok_with("\"base_url\": \"https://api.example\", " BASE_OK ", \"max_calls\": 100001"));
    CHECK_STR(err.msg, "profile \"acme\": max_calls: must be an integer 1..100000 (0 means the default 256)");
    CHECK(!ok_with("\"base_url\": \"https://api.example\", " BASE_OK ", \"max_calls\": 5.0"));
    CHECK(!ok_with("\"base_url\": \"https://api.example\", " BASE_OK ", \"max_calls\": \"5\""));

    /* route caps */
    CHECK(!ok_with("\"base_url\": \"https://api.example\", " BASE_OK ", \"route_max_calls\": {\"GET /v1/other\": 1}"));
    CHECK_STR(err.msg, "profile \"acme\": route_max_calls[\"GET /v1/other\"]: names no route in allow");
    CHECK(
        !ok_with("\"base_url\": \"https://api.example\", " BASE_OK ", \"route_max_calls\": {\"GET /v1/items/*\": 0}"));
    CHECK(!ok_with("\"base_url\": \"https://api.example\", " BASE_OK
                   ", \"route_max_calls\": {\"GET /v1/items/*\": 1, \"get /V1/items/*\": 2}"));

    /* item 58: health check */
    CHECK(!ok_with("\"base_url\": \"https://api.example\", " BASE_OK ", \"health_check\": \"POST /health\""));
    CHECK_STR(err.msg, "profile \"acme\": health_check: must be a GET route");
    CHECK(!ok_with("\"base_url\": \"https://api.example\", " BASE_OK ", \"health_check\": \"GET /health/*\""));
    CHECK_STR(err.msg, "profile \"acme\": health_check: must be concrete (no \"*\")");
    CHECK(!ok_with("\"base_url\": \"https://api.example\", " BASE_OK ", \"health_check\": \"GET health\""));
    CHECK_STR(err.msg, "profile \"acme\": health_check: path must start with \"/\"");
    CHECK(!ok_with("\"base_url\": \"https://api.example\", " BASE_OK ", \"health_check\": \"GET /a/../health\""));
    CHECK(ok_with("\"base_url\": \"https://api.example\", " BASE_OK ", \"health_check\": \"get /health\""));

    /* item 57 at load: the global must be a plain identifier */
    CHECK(!ok_with("\"base_url\": \"https://api.example\", " BASE_OK
                   ", \"global\": \"x\\\"];globalThis.pwned=true;//\""));
    CHECK(contains(
        err.msg,
        "profile \"acme\": global: \"x\\\"];globalThis.pwned=true;//\" must be a plain JavaScript identifier"));
    CHECK(!ok_with("\"base_url\": \"https://api.example\", " BASE_OK ", \"global\": \"\""));
    CHECK(!ok_with("\"base_url\": \"https://api.example\", " BASE_OK ", \"global\": \"1abc\""));
    CHECK(!ok_with("\"base_url\": \"https://api.example\", " BASE_OK ", \"global\": \"this\""));
    CHECK(!ok_with("\"base_url\": \"https://api.example\", " BASE_OK ", \"global\": \"globalThis\""));
    CHECK(!ok_with("\"base_url\": \"https://api.example\", " BASE_OK ", \"global\": \"__plimsoll_host_send\""));
    CHECK(!ok_with("\"base_url\": \"https://api.example\", " BASE_OK ", \"global\": \"caf\xc3\xa9\""));
    CHECK(ok_with("\"base_url\": \"https://api.example\", " BASE_OK ", \"global\": \"$acme_2\""));

    /* strictness: unknown and duplicate keys, bad JSON, bad shapes, names */
    CHECK(!ok_with("\"base_url\": \"https://api.example\", " BASE_OK ", \"allow_in_session\": true"));
    CHECK_STR(err.msg, "profile \"acme\": unknown field \"allow_in_session\"");
    CHECK(!ok_with("\"base_url\": \"https://api.example\", \"base_url\": \"https://b.example\", " BASE_OK));
    CHECK(contains(err.msg, "invalid JSON at line 1"));
    CHECK(contains(err.msg, "duplicate"));
    const char *extra = "{\"profiles\": {}, \"extra\": 1}";
    CHECK(!brk_profiles_parse(extra, strlen(extra), fake_getenv, &err));
    CHECK_STR(err.msg, "unknown field \"extra\"");
    CHECK(!brk_profiles_parse("[]", 2, fake_getenv, &err));
    CHECK(!brk_profiles_parse("{}", 2, fake_getenv, &err));
    CHECK_STR(err.msg, "profiles: is required (an object of named profiles)");
    CHECK(!brk_profiles_parse("{\"profiles\": {\"bad name\": {}}}", 30, fake_getenv, &err));
    CHECK_STR(err.msg, "profiles: profile name \"bad name\" must be 1..128 bytes of [A-Za-z0-9._-]");
    const char *two = "{\"profiles\": {\"ok\": {\"base_url\": \"https://a.example\", " BASE_OK "}, \"b/c\": {}}}";
    CHECK(!brk_profiles_parse(two, strlen(two), fake_getenv, &err));
    CHECK_STR(err.msg, "profiles: profile name \"b/c\" must be 1..128 bytes of [A-Za-z0-9._-]");
    CHECK(!brk_profiles_parse("{\"profiles\": {\"a\": 1}}", 22, fake_getenv, &err));
    CHECK_STR(err.msg, "profile \"a\": must be an object");
    ps = brk_profiles_parse("{\"profiles\": {}}", 16, fake_getenv, &err);
    CHECK(ps && ps->n == 0);
    brk_profiles_free(ps);

    /* from a file: the message names the file; a missing file fails closed */
    char path[] = "/tmp/plimsoll-grants-XXXXXX";
    int fd = mkstemp(path);
    CHECK(fd >= 0);
    const char *doc = "{\"profiles\": {\"acme\": {\"base_url\": \"https://api.example/x\", " BASE_OK "}}}";
    CHECK(write(fd, doc, strlen(doc)) == (ssize_t)strlen(doc));
    close(fd);
    CHECK(!brk_profiles_load(path, fake_getenv, &err));
    char want[256];
    snprintf(want, sizeof want,
             "grants file \"%s\": profile \"acme\": base_url: must be an origin only: no path, not even \"/\"", path);
    CHECK_STR(err.msg, want);
    unlink(path);
    CHECK(!brk_profiles_load(path, fake_getenv, &err));
    CHECK(contains(err.msg, "No such file"));
    CHECK(!brk_profiles_load("/", fake_getenv, &err));
    CHECK(contains(err.msg, "not a regular file"));
    return unit_done();
}
