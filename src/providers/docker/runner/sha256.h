/* sha256.h: SHA-256 (FIPS 180-4) and HMAC-SHA256 (RFC 2104) for the static in-container runner,
 * which links nothing but libc. The host verifies with OpenSSL; docker_test checks the two agree. */
#pragma once
#include <stddef.h>
#include <stdint.h>

#define RS_SHA256_LEN 32u
#define RS_BLOCK 64u

struct rs_sha256 {
    uint32_t h[8];
    uint64_t bytes;
    uint8_t buf[RS_BLOCK];
    size_t have;
};

void rs_sha256_init(struct rs_sha256 *c);
void rs_sha256_update(struct rs_sha256 *c, const void *data, size_t len);
void rs_sha256_final(struct rs_sha256 *c, uint8_t out[RS_SHA256_LEN]);

struct rs_hmac {
    struct rs_sha256 inner, outer;
};

void rs_hmac_init(struct rs_hmac *m, const uint8_t *key, size_t key_len);
void rs_hmac_update(struct rs_hmac *m, const void *data, size_t len);
/* Writes the MAC and wipes the state. */
void rs_hmac_final(struct rs_hmac *m, uint8_t out[RS_SHA256_LEN]);
