/* jwt.h: per-run credential minting (providers.md §5.2): HS256 JWTs for `jwt` profiles.
 * Owns: nothing beyond the minted token it hands out in a brk_secret.
 * Invariant: the subject is checked before anything is minted (a refused subject never reaches
 * the key), and a token leaves only if brk_token_ok() accepts it. */
#pragma once
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "../core/err.h"
#include "secret.h"

/* The subject rule of a subject-bound minter: valid UTF-8, non-empty, not "*", no surrounding
 * whitespace, no control characters. */
bool brk_subject_ok(const char *subject);

struct brk_jwt_params {
    const struct brk_secret *key; /* the HS256 key */
    const char *issuer;           /* iss; NULL = no iss claim */
    const char *audience;         /* aud */
    const char *subject;          /* sub: the authenticated caller */
    const char *const *scopes;    /* joined with spaces into "scope"; the claim is left out when none */
    size_t n_scopes;
    int64_t now_unix; /* iat */
    uint32_t ttl_s;   /* exp = iat + ttl_s; 1.. */
    const char *key_id; /* the "kid" header; NULL = none */
};

/* Mints header.claims.signature (base64url, no padding) with header {"alg":"HS256","typ":"JWT"}
 * (plus "kid" with a key_id) and claims iss, aud, sub, scope, iat, exp and a random 128-bit jti. On a bad subject fails
 * with PLM_E_PERMISSION / permission and a message ending "requires a stable authenticated
 * subject", without touching the key. Other failures are PLM_E_PERMISSION / permission too
 * (a mint failure is a pre-dispatch refusal). */
int brk_jwt_mint(const struct brk_jwt_params *p, struct brk_secret *out, struct plm_err *err);

/* base64url without padding; out must hold brk_b64url_len(n) + 1 bytes. Returns the length. */
size_t brk_b64url_len(size_t n);
size_t brk_b64url_encode(const unsigned char *in, size_t n, char *out);
