/* profiles_ref_test.c: a grants file written the reference's way, with every key it accepts
 * (issue 14 §4), loads from disk and behaves: "*" callers, preamble_file inside the grants
 * directory, token ttl_sec and key_id in the minted JWT, catalog, batch_of, advice,
 * advice_retention, allow_in_sessions; and each key's bad values are refused by name. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "broker.h"
#include "jwt.h"
#include "profiles.h"
#include "unit.h"

static const char *fake_getenv(const char *name)
{
    if (!strcmp(name, "INVENTORY_JWT_SECRET"))
        return "0123456789abcdef0123456789abcdef-key";
    if (!strcmp(name, "HUE_TOKEN"))
        return "tok";
    return NULL;
}

static char dir[64];

static void put(const char *name, const char *text)
{
    char p[160];
    snprintf(p, sizeof p, "%s/%s", dir, name);
    FILE *f = fopen(p, "w");
    CHECK(f != NULL);
    if (f) {
        fputs(text, f);
        fclose(f);
    }
}

static struct plm_err err;

static struct brk_profiles *load(const char *doc)
{
    put("grants.json", doc);
    char p[160];
    snprintf(p, sizeof p, "%s/grants.json", dir);
    memset(&err, 0, sizeof err);
    return brk_profiles_load(p, fake_getenv, &err);
}

static bool contains(const char *hay, const char *needle)
{
    return hay && strstr(hay, needle) != NULL;
}

/* The reference's own example shape, every key it accepts on a profile and a token. */
static const char full[] =
    "{\n"
    "  \"profiles\": {\n"
    "    \"inventory\": {\n"
    "      \"base_url\": \"https://inventory.example.internal\",\n"
    "      \"allow\": [\"POST /ping\", \"GET /v1/items/*\", \"GET /v1/items\"],\n"
    "      \"route_max_calls\": {\"POST /ping\": 5},\n"
    "      \"allowed_callers\": [\"*\"],\n"
    "      \"scopes\": [\"inventory:read\"],\n"
    "      \"token\": {\"type\": \"jwt\", \"secret_env\": \"INVENTORY_JWT_SECRET\", \"ttl_sec\": 60,\n"
    "                \"issuer\": \"plimsoll\", \"audience\": \"inventory\", \"key_id\": \"2026-12\"},\n"
    "      \"max_calls\": 100,\n"
    "      \"health_check\": \"GET /v1/items\",\n"
    "      \"global\": \"inventory\",\n"
    "      \"preamble_file\": \"inventory.client.js\",\n"
    "      \"catalog\": [\"GET /v1/items\", \"GET /v1/items/*\", \"POST /ping\", \"DELETE /v1/items/*\"],\n"
    "      \"batch_of\": {\"GET /v1/items\": [\"GET /v1/items/*\"]},\n"
    "      \"advice\": \"caller\",\n"
    "      \"advice_retention\": \"aggregate\",\n"
    "      \"allow_in_sessions\": true\n"
    "    },\n"
    "    \"hue\": {\n"
    "      \"base_url\": \"https://hue.example\", \"allow\": [\"GET /a\"], \"allowed_callers\": [\"test\"],\n"
    "      \"token\": {\"env\": \"HUE_TOKEN\"}, \"preamble\": \"globalThis.x = 1;\", \"advice\": \"\"\n"
    "    },\n"
    "    \"smart-home\": {\n"
    "      \"base_url\": \"https://home.internal\", \"allowed_callers\": [\"mcp-home\"],\n"
    "      \"token\": {\"type\": \"jwt\", \"secret_env\": \"INVENTORY_JWT_SECRET\", \"audience\": \"home\"},\n"
    "      \"allow\": [\"GET /lights/*\"], \"preamble_file\": \"\"\n"
    "    }\n"
    "  }\n"
    "}\n";

static const struct brk_profile *find(const struct brk_profiles *ps, const char *name)
{
    for (size_t i = 0; ps && i < ps->n; i++)
        if (!strcmp(ps->v[i].name, name))
            return &ps->v[i];
    return NULL;
}

/* The decoded JWT header (base64url) of a minted token. */
static void jwt_header(const char *tok, size_t len, char *out, size_t cap)
{
    static const char a[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
    const char *dot = memchr(tok, '.', len);
    size_t n = dot ? (size_t)(dot - tok) : 0, o = 0;
    unsigned v = 0;
    int bits = 0;
    for (size_t i = 0; i < n && o + 1 < cap; i++) {
        const char *q = strchr(a, tok[i]);
        if (!q)
            break;
        v = v << 6 | (unsigned)(q - a);
        bits += 6;
        if (bits >= 8) {
            bits -= 8;
            out[o++] = (char)(v >> bits & 0xff);
        }
    }
    out[o] = 0;
}

static void test_full(void)
{
    put("inventory.client.js", "globalThis.items = { list: () => inventory.get('/v1/items') };\n");
    struct brk_profiles *ps = load(full);
    CHECK(ps != NULL);
    if (!ps) {
        printf("# %s\n", err.msg);
        return;
    }
    CHECK(ps->n == 3);
    const struct brk_profile *p = find(ps, "inventory");
    CHECK(p != NULL);
    if (!p)
        return;
    CHECK(p->any_caller);
    CHECK(brk_profile_for(ps, "inventory", "whoever") == p);
    CHECK(p->jwt_ttl_s == 60);
    CHECK_STR(p->jwt_key_id, "2026-12");
    CHECK_STR(p->preamble, "globalThis.items = { list: () => inventory.get('/v1/items') };\n");
    CHECK(p->n_catalog == 4 && p->catalog[3].method == BRK_M_DELETE);
    CHECK(p->n_batch_of == 1 && p->batch_of[0].n_singles == 1);
    CHECK_STR(p->batch_of[0].batch.path, "/v1/items");
    CHECK_STR(p->batch_of[0].singles[0].path, "/v1/items/*");
    CHECK(p->advice == BRK_ADVICE_CALLER);
    CHECK_STR(brk_advice_name(p->advice), "caller");
    CHECK(p->advice_retention == BRK_RETENTION_AGGREGATE);
    CHECK_STR(brk_retention_name(p->advice_retention), "aggregate");
    CHECK(p->allow_in_sessions);
    const struct brk_profile *h = find(ps, "hue");
    CHECK(h && h->token_type == BRK_TOKEN_STATIC && h->advice == BRK_ADVICE_OFF && !h->allow_in_sessions);
    CHECK(h && h->advice_retention == BRK_RETENTION_NONE && h->n_catalog == 0 && !h->any_caller);
    const struct brk_profile *s = find(ps, "smart-home");
    CHECK(s && s->token_type == BRK_TOKEN_JWT && s->jwt_issuer == NULL && s->jwt_ttl_s == 0 && !s->jwt_key_id);
    CHECK(s && s->preamble && !*s->preamble);

    /* a clone (what a run works on) keeps every key */
    struct brk_profile *c = brk_profile_clone(p, true);
    CHECK(c && c->any_caller && c->jwt_ttl_s == 60 && c->n_catalog == 4 && c->n_batch_of == 1);
    CHECK(c && c->advice == BRK_ADVICE_CALLER && c->allow_in_sessions && !strcmp(c->jwt_key_id, "2026-12"));
    brk_profile_free(c);

    /* behaves: a run of any caller mints a JWT with kid and exp = iat + ttl_sec, not the budget */
    struct brk_run *r = brk_run_new(p, "carol", 5000, &err);
    CHECK(r != NULL);
    brk_run_free(r);
    struct brk_jwt_params jp = {.key = &p->secret, .audience = "inventory", .subject = "carol", .now_unix = 1000,
                                .ttl_s = p->jwt_ttl_s, .key_id = p->jwt_key_id};
    struct brk_secret tok = {0};
    CHECK(brk_jwt_mint(&jp, &tok, &err) == 0);
    char hdr[200];
    jwt_header(tok.data, tok.len, hdr, sizeof hdr);
    CHECK_STR(hdr, "{\"alg\":\"HS256\",\"typ\":\"JWT\",\"kid\":\"2026-12\"}");
    const char *dot = memchr(tok.data, '.', tok.len);
    char claims[400];
    jwt_header(dot + 1, tok.len - (size_t)(dot + 1 - tok.data), claims, sizeof claims);
    CHECK(contains(claims, "\"iat\":1000,\"exp\":1060,"));
    CHECK(!contains(claims, "\"iss\"")); /* no issuer given: no iss claim */
    brk_secret_done(&tok);
    jp.key_id = NULL;
    CHECK(brk_jwt_mint(&jp, &tok, &err) == 0);
    jwt_header(tok.data, tok.len, hdr, sizeof hdr);
    CHECK_STR(hdr, "{\"alg\":\"HS256\",\"typ\":\"JWT\"}");
    brk_secret_done(&tok);
    brk_profiles_free(ps);
}

/* One profile with `extra` added to a valid base; returns whether it loaded. */
static bool with(const char *extra)
{
    char doc[4096];
    snprintf(doc, sizeof doc,
             "{\"profiles\": {\"p\": {\"base_url\": \"https://x.example\", \"allow\": [\"GET /a\"], "
             "\"allowed_callers\": [\"test\"]%s%s}}}",
             *extra ? ", " : "", extra);
    struct brk_profiles *ps = load(doc);
    brk_profiles_free(ps);
    return ps != NULL;
}

static void test_refusals(void)
{
    CHECK(with("\"advice\": \"operator\""));
    CHECK(with("\"advice\": \" off \""));
    CHECK(!with("\"advice\": \"loud\""));
    CHECK(contains(err.msg, "profile \"p\": advice: \"loud\" is not one of off|operator|caller"));
    CHECK(!with("\"advice\": 1"));
    CHECK(with("\"advice_retention\": \"detailed\""));
    CHECK(!with("\"advice_retention\": \"forever\""));
    CHECK(contains(err.msg, "advice_retention: \"forever\" is not one of none|aggregate|detailed"));
    CHECK(!with("\"allow_in_sessions\": \"yes\""));
    CHECK(contains(err.msg, "allow_in_sessions: must be true or false"));
    CHECK(with("\"allow_in_sessions\": false"));
    CHECK(!with("\"catalog\": \"GET /a\""));
    CHECK(!with("\"catalog\": [\"GET a\"]"));
    CHECK(contains(err.msg, "catalog[0]"));
    CHECK(!with("\"catalog\": [\"GET /a/../b\"]"));
    CHECK(!with("\"catalog\": [\"GET /a\", \"get /a\"]"));
    CHECK(contains(err.msg, "catalog[1]: duplicate route"));
    CHECK(!with("\"batch_of\": [\"GET /a\"]"));
    CHECK(!with("\"batch_of\": {\"GET /a\": []}"));
    CHECK(!with("\"batch_of\": {\"GET /a\": \"GET /a/*\"}"));
    CHECK(!with("\"batch_of\": {\"FETCH /a\": [\"GET /a/*\"]}"));
    CHECK(contains(err.msg, "batch_of[\"FETCH /a\"]"));
    CHECK(!with("\"batch_of\": {\"GET /a\": [\"GET /a/%2e\"]}"));
    CHECK(with("\"batch_of\": {\"GET /a\": [\"GET /a/*\", \"GET /b/*/c\"], \"POST /q\": [\"GET /q/*\"]}"));

    /* tokens */
    CHECK(!with("\"token\": {\"type\": \"jwt\", \"secret_env\": \"INVENTORY_JWT_SECRET\", \"audience\": \"a\", "
                "\"ttl_sec\": -1}"));
    CHECK(contains(err.msg, "token.ttl_sec: must be 0..86400"));
    CHECK(!with("\"token\": {\"type\": \"jwt\", \"secret_env\": \"INVENTORY_JWT_SECRET\", \"audience\": \"a\", "
                "\"ttl_sec\": 86401}"));
    CHECK(!with("\"token\": {\"type\": \"jwt\", \"secret_env\": \"INVENTORY_JWT_SECRET\", \"audience\": \"a\", "
                "\"ttl_sec\": \"60\"}"));
    CHECK(!with("\"token\": {\"type\": \"jwt\", \"secret_env\": \"INVENTORY_JWT_SECRET\", \"audience\": \"a\", "
                "\"key_id\": \"\"}"));
    CHECK(contains(err.msg, "token.key_id"));
    CHECK(!with("\"token\": {\"type\": \"jwt\", \"secret_env\": \"INVENTORY_JWT_SECRET\", \"audience\": \"a\", "
                "\"key_id\": \"a\\nb\"}"));
    CHECK(!with("\"token\": {\"type\": \"jwt\", \"secret_env\": \"INVENTORY_JWT_SECRET\"}"));
    CHECK(contains(err.msg, "token.audience: is required"));
    CHECK(!with("\"token\": {\"type\": \"static\", \"env\": \"HUE_TOKEN\", \"ttl_sec\": 60}"));
    CHECK(contains(err.msg, "unknown field \"ttl_sec\""));
    CHECK(with("\"token\": {\"type\": \"\", \"env\": \"HUE_TOKEN\"}"));
    CHECK(!with("\"token\": {\"type\": 5, \"env\": \"HUE_TOKEN\"}"));

    /* preamble_file: inside the grants directory only, one of the two, bounded, UTF-8 */
    put("ok.js", "globalThis.ok = true;\n");
    CHECK(with("\"preamble_file\": \"ok.js\""));
    CHECK(with("\"preamble_file\": \"./sub/../ok.js\"") == false); /* sub does not exist: realpath fails */
    char sub[96];
    snprintf(sub, sizeof sub, "%s/sub", dir);
    CHECK(mkdir(sub, 0700) == 0);
    CHECK(with("\"preamble_file\": \"./sub/../ok.js\""));
    CHECK(with("\"preamble_file\": \"/ok.js\"")); /* joined under the directory, as the reference does */
    CHECK(!with("\"preamble_file\": \"ok.js\", \"preamble\": \"x\""));
    CHECK(contains(err.msg, "set either preamble or preamble_file, not both"));
    CHECK(!with("\"preamble_file\": \"missing.js\""));
    CHECK(contains(err.msg, "preamble_file: \"missing.js\" cannot be read"));
    CHECK(!with("\"preamble_file\": \"../etc/passwd\""));
    CHECK(!with("\"preamble_file\": \"../../../../../../etc/hostname\""));
    CHECK(contains(err.msg, "resolves outside the grants file's directory"));
    char link[120];
    snprintf(link, sizeof link, "%s/escape.js", dir);
    CHECK(symlink("/etc/hostname", link) == 0);
    CHECK(!with("\"preamble_file\": \"escape.js\""));
    CHECK(contains(err.msg, "resolves outside the grants file's directory"));
    CHECK(!with("\"preamble_file\": \"sub\""));
    CHECK(contains(err.msg, "is not a regular file"));
    put("bad.js", "\xff\xfe");
    CHECK(!with("\"preamble_file\": \"bad.js\""));
    CHECK(contains(err.msg, "must be UTF-8 without NUL bytes"));
    char *big = malloc(70 * 1024);
    memset(big, 'a', 70 * 1024 - 1);
    big[70 * 1024 - 1] = 0;
    put("big.js", big);
    free(big);
    CHECK(!with("\"preamble_file\": \"big.js\""));
    CHECK(contains(err.msg, "is longer than 65536 bytes"));
    CHECK(!with("\"preamble_file\": 7"));
    /* from a buffer there is no directory to resolve against */
    const char *doc = "{\"profiles\": {\"p\": {\"base_url\": \"https://x.example\", \"allow\": [], "
                      "\"allowed_callers\": [\"t\"], \"preamble_file\": \"ok.js\"}}}";
    CHECK(!brk_profiles_parse(doc, strlen(doc), fake_getenv, &err));
    CHECK(contains(err.msg, "needs a grants file"));

    char p[160];
    const char *names[] = {"grants.json", "ok.js", "bad.js", "big.js", "inventory.client.js", "escape.js"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        snprintf(p, sizeof p, "%s/%s", dir, names[i]);
        unlink(p);
    }
    rmdir(sub);
}

int main(void)
{
    snprintf(dir, sizeof dir, "/tmp/plimsoll-grants-ref-XXXXXX");
    if (!mkdtemp(dir)) {
        printf("not ok 1 - mkdtemp\n");
        return 1;
    }
    test_full();
    test_refusals();
    rmdir(dir);
    return unit_done();
}
