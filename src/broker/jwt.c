/* jwt.c: HS256 JWT minting with OpenSSL's HMAC (RFC 7519, RFC 7518 §3.2).
 * Trusts: the key and claims from a validated profile; the subject from the authenticated caller,
 * re-checked here because it ends up inside a credential.
 * Invariant: every buffer that held the signing input's signature or the token is wiped before
 * it is freed; the key is only ever read through its brk_secret. */
#include "../core/base64.h"
#include "jwt.h"

#include <errno.h>
#include <jansson.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>
#include <stdlib.h>
#include <string.h>

#include "../core/cleanup.h"
#include "../core/cleanup_json.h"
#include "text.h"

/* A caller or configuration that cannot have a token is a refusal (nothing ran); the minter's own
 * faults (randomness, memory, HMAC) are failures, so they are never counted as refusals. */
#define REFUSE(err, ...) plm_refuse(err, PLM_E_PERMISSION, PLM_REFUSAL_PERMISSION, __VA_ARGS__)

bool brk_subject_ok(const char *s)
{
    if (!s)
        return false;
    size_t len = strlen(s);
    if (len == 1 && s[0] == '*')
        return false;
    return brk_text_ok(s, len, BRK_TXT_NONEMPTY | BRK_TXT_NO_CTRL | BRK_TXT_TRIMMED);
}

size_t brk_b64url_len(size_t n)
{
    return b64_encoded_len(n, false);
}

size_t brk_b64url_encode(const unsigned char *in, size_t n, char *out)
{
    size_t o = b64_encode(in, n, out, B64_URL, false);
    out[o] = '\0';
    return o;
}

/* Appends b64url(data) to b. */
static void add_b64(struct brk_sbuf *b, const unsigned char *data, size_t n)
{
    size_t need = brk_b64url_len(n) + 1;
    cleanup_free char *tmp = malloc(need);
    if (!tmp) {
        b->b.failed = true;
        return;
    }
    size_t len = brk_b64url_encode(data, n, tmp);
    brk_sbuf_add(b, tmp, len);
}

static char *claims_json(const struct brk_jwt_params *p, const char *jti)
{
    json_t *c cleanup_json = json_object();
    if (!c)
        return NULL;
    int bad = p->issuer ? json_object_set_new(c, "iss", json_string(p->issuer)) : 0;
    bad |= json_object_set_new(c, "aud", json_string(p->audience));
    bad |= json_object_set_new(c, "sub", json_string(p->subject));
    if (p->n_scopes > 0) {
        struct brk_sbuf s = {0};
        for (size_t i = 0; i < p->n_scopes; i++) {
            if (i)
                brk_sbuf_add(&s, " ", 1);
            brk_sbuf_str(&s, p->scopes[i]);
        }
        cleanup_free char *joined = brk_sbuf_take(&s);
        bad |= joined ? json_object_set_new(c, "scope", json_string(joined)) : -1;
    }
    bad |= json_object_set_new(c, "iat", json_integer(p->now_unix));
    bad |= json_object_set_new(c, "exp", json_integer(p->now_unix + (json_int_t)p->ttl_s));
    bad |= json_object_set_new(c, "jti", json_string(jti));
    return bad ? NULL : json_dumps(c, JSON_COMPACT | JSON_PRESERVE_ORDER);
}

/* The builder holds the signing input and then the token: wiped whatever happens. */
static void sbuf_wipe(struct brk_sbuf *b)
{
    if (b->b.p)
        explicit_bzero(b->b.p, b->b.cap);
    brk_sbuf_done(b);
}

/* b64url(header) "." b64url(claims) into b; -1 when out of memory. */
static int signing_input(const struct brk_jwt_params *p, const char *jti, struct brk_sbuf *b)
{
    cleanup_free char *claims = claims_json(p, jti);
    if (!claims)
        return -1;
    static const char header_plain[] = "{\"alg\":\"HS256\",\"typ\":\"JWT\"}";
    cleanup_free char *header_kid = NULL;
    if (p->key_id) {
        json_t *h cleanup_json = json_pack("{s:s,s:s,s:s}", "alg", "HS256", "typ", "JWT", "kid", p->key_id);
        header_kid = h ? json_dumps(h, JSON_COMPACT | JSON_PRESERVE_ORDER) : NULL;
        if (!header_kid)
            return -1;
    }
    const char *header = header_kid ? header_kid : header_plain;
    add_b64(b, (const unsigned char *)header, strlen(header));
    brk_sbuf_add(b, ".", 1);
    add_b64(b, (const unsigned char *)claims, strlen(claims));
    return b->b.failed ? -1 : 0;
}

/* Appends "." b64url(HMAC-SHA256(key, b)). The signature is encoded on the stack and wiped:
 * add_b64's heap scratch is not. The builder grows before it copies, so no freed block ever held
 * the signature. */
static int sign(const struct brk_secret *key, struct brk_sbuf *b)
{
    unsigned char mac[EVP_MAX_MD_SIZE];
    unsigned int mac_len = 0;
    if (!HMAC(EVP_sha256(), key->data, (int)key->len, (const unsigned char *)b->b.p, b->b.len, mac, &mac_len))
        return -1;
    char sig[(EVP_MAX_MD_SIZE + 2) / 3 * 4 + 1];
    size_t sig_len = brk_b64url_encode(mac, mac_len, sig);
    brk_sbuf_add(b, ".", 1);
    brk_sbuf_add(b, sig, sig_len);
    explicit_bzero(mac, sizeof mac);
    explicit_bzero(sig, sizeof sig);
    return 0;
}

int brk_jwt_mint(const struct brk_jwt_params *p, struct brk_secret *out, struct plm_err *err)
{
    brk_secret_done(out);
    /* The subject first: a refused subject never reaches the key (§5.2, §8 item 55). */
    if (!brk_subject_ok(p->subject))
        return REFUSE(err, "grant token: minting a per-caller credential requires a stable "
                           "authenticated subject");
    if (!brk_secret_isset(p->key) || !p->audience || p->ttl_s == 0)
        return REFUSE(err, "grant token: the jwt minter is not configured");
    for (size_t i = 0; i < p->n_scopes; i++)
        if (!p->scopes[i])
            return REFUSE(err, "grant token: a scope is missing");

    unsigned char rnd[16];
    if (RAND_bytes(rnd, sizeof rnd) != 1)
        return plm_fail(err, 0, PLM_E_INTERNAL, "grant token: no randomness for the token id");
    char jti[32];
    brk_b64url_encode(rnd, sizeof rnd, jti);

    __attribute__((cleanup(sbuf_wipe))) struct brk_sbuf b = {0};
    if (signing_input(p, jti, &b) < 0)
        return plm_fail(err, ENOMEM, PLM_E_INTERNAL, "grant token: out of memory");
    if (sign(p->key, &b) < 0)
        return plm_fail(err, 0, PLM_E_INTERNAL, "grant token: HMAC-SHA256 failed");
    if (b.b.failed || !brk_token_ok(b.b.p, b.b.len) || brk_secret_set(out, b.b.p, b.b.len) < 0)
        return plm_fail(err, 0, PLM_E_INTERNAL, "grant token: the minted token is not a usable bearer token");
    return 0;
}
