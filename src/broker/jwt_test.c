/* jwt_test.c: HS256 minting, the subject rule and the token byte rule (§5.2; §8 items 55, 56). */
#include <jansson.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <string.h>

#include "jwt.h"
#include "unit.h"

/* base64url decode (no padding) for the checks */
static size_t b64url_decode(const char *in, size_t n, unsigned char *out)
{
    size_t o = 0;
    uint32_t acc = 0;
    int bits = 0;
    for (size_t i = 0; i < n; i++) {
        char c = in[i];
        int v = c >= 'A' && c <= 'Z'   ? c - 'A'
                : c >= 'a' && c <= 'z' ? c - 'a' + 26
                : c >= '0' && c <= '9' ? c - '0' + 52
                : c == '-'             ? 62
                : c == '_'             ? 63
                                       : -1;
        if (v < 0)
            return (size_t)-1;
        acc = acc << 6 | (uint32_t)v;
        bits += 6;
        if (bits >= 8) {
            bits -= 8;
            out[o++] = (unsigned char)(acc >> bits);
        }
    }
    return o;
}

static json_t *part_json(const char *tok, int which)
{
    const char *s = tok;
    for (int i = 0; i < which; i++)
        s = strchr(s, '.') + 1;
    const char *e = strchr(s, '.');
    size_t n = e ? (size_t)(e - s) : strlen(s);
    unsigned char buf[2048];
    size_t len = b64url_decode(s, n, buf);
    return json_loadb((const char *)buf, len, 0, NULL);
}

int main(void)
{
    struct brk_secret key = {0};
    const char *k = "0123456789abcdef0123456789abcdef";
    CHECK(brk_secret_set(&key, k, strlen(k)) == 0);
    const char *scopes[] = {"items:read", "items:write"};
    struct brk_jwt_params p = {.key = &key,
                               .issuer = "plimsoll",
                               .audience = "acme-api",
                               .subject = "alice",
                               .scopes = scopes,
                               .n_scopes = 2,
                               .now_unix = 1700000000,
                               .ttl_s = 30};
    struct brk_secret tok = {0};
    struct plm_err err = {0};
    CHECK(brk_jwt_mint(&p, &tok, &err) == 0);
    CHECK(brk_secret_isset(&tok) && brk_token_ok(tok.data, tok.len));
    CHECK(tok.data && strchr(tok.data, '=') == NULL); /* no padding */
    if (tok.data) {
        /* header and claims */
        const char *dot1 = strchr(tok.data, '.');
        /* b64url('{"alg":"HS256","typ":"JWT"}') */
        CHECK(dot1 && strncmp(tok.data, "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9", (size_t)(dot1 - tok.data)) == 0);
        json_t *c = part_json(tok.data, 1);
        CHECK(c != NULL);
        CHECK_STR(json_string_value(json_object_get(c, "iss")), "plimsoll");
        CHECK_STR(json_string_value(json_object_get(c, "aud")), "acme-api");
        CHECK_STR(json_string_value(json_object_get(c, "sub")), "alice");
        CHECK_STR(json_string_value(json_object_get(c, "scope")), "items:read items:write");
        CHECK(json_integer_value(json_object_get(c, "iat")) == 1700000000);
        CHECK(json_integer_value(json_object_get(c, "exp")) == 1700000030);
        const char *jti = json_string_value(json_object_get(c, "jti"));
        CHECK(jti && strlen(jti) == 22);
        json_decref(c);
        /* the signature verifies over header.claims */
        const char *dot2 = strrchr(tok.data, '.');
        unsigned char mac[EVP_MAX_MD_SIZE], sig[64];
        unsigned int mac_len = 0;
        HMAC(EVP_sha256(), k, (int)strlen(k), (const unsigned char *)tok.data, (size_t)(dot2 - tok.data), mac,
             &mac_len);
        size_t sig_len = b64url_decode(dot2 + 1, strlen(dot2 + 1), sig);
        CHECK(mac_len == 32 && sig_len == 32 && memcmp(mac, sig, 32) == 0);
    }
    /* two mints differ (random jti) */
    struct brk_secret tok2 = {0};
    CHECK(brk_jwt_mint(&p, &tok2, &err) == 0);
    CHECK(tok.data && tok2.data && strcmp(tok.data, tok2.data) != 0);
    brk_secret_done(&tok2);
    char d[BRK_SECRET_DESCRIBE_MAX];
    CHECK(strncmp(brk_secret_describe(&tok, d), "[redacted len=", 14) == 0);
    brk_secret_done(&tok);
    CHECK(!brk_secret_isset(&tok) && tok.len == 0);
    CHECK_STR(brk_secret_describe(&tok, d), "[unset]");

    /* no scopes: no scope claim */
    p.n_scopes = 0;
    CHECK(brk_jwt_mint(&p, &tok, &err) == 0);
    json_t *c = tok.data ? part_json(tok.data, 1) : NULL;
    CHECK(c && json_object_get(c, "scope") == NULL);
    json_decref(c);
    brk_secret_done(&tok);

    /* item 55: subjects refused without minting */
    const char *bad[] = {"", "  ", "a\nb", "*", " alice", "alice ", "a\x7f", "\xc2\x85x", "\xff"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        p.subject = bad[i];
        memset(&err, 0, sizeof err);
        CHECK(brk_jwt_mint(&p, &tok, &err) < 0 && !brk_secret_isset(&tok));
        CHECK(err.kind == PLM_E_PERMISSION && err.refusal == PLM_REFUSAL_PERMISSION);
        size_t n = strlen(err.msg), w = strlen("requires a stable authenticated subject");
        CHECK(n >= w && strcmp(err.msg + n - w, "requires a stable authenticated subject") == 0);
    }
    p.subject = NULL;
    CHECK(brk_jwt_mint(&p, &tok, &err) < 0);
    CHECK(brk_subject_ok("alice") && brk_subject_ok("user@example.com") && brk_subject_ok("j\xc3\xb6rg"));

    /* item 56: the token byte rule */
    CHECK(!brk_token_ok("", 0));
    CHECK(!brk_token_ok(" token", 6));
    CHECK(!brk_token_ok("with space", 10));
    CHECK(!brk_token_ok("a\nb", 3));
    CHECK(!brk_token_ok("t\xc3\xb6k", 4));
    CHECK(!brk_token_ok("a\x7f", 2));
    CHECK(brk_token_ok("abc.DEF-_~!", 11));
    static char big[5000];
    memset(big, 'a', sizeof big);
    CHECK(brk_token_ok(big, 4096) && !brk_token_ok(big, 4097));

    /* base64url */
    char out[16];
    CHECK(brk_b64url_encode((const unsigned char *)"\xfb\xff", 2, out) == 3);
    CHECK_STR(out, "-_8");
    CHECK(brk_b64url_len(1) == 2 && brk_b64url_len(3) == 4 && brk_b64url_len(32) == 43);

    /* a secret with an embedded NUL is refused */
    struct brk_secret s = {0};
    CHECK(brk_secret_set(&s, "a\0b", 3) < 0 && !brk_secret_isset(&s));
    brk_secret_done(&key);
    return unit_done();
}
