/* base64.h: RFC 4648 base64, standard and URL-safe alphabets, once for the whole daemon (the
 * JSON codec, Connect error details, JWTs, the CLI). Pure, no allocation. */
#pragma once
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum b64_alphabet { B64_STD, B64_URL };

/* Characters b64_encode writes for n bytes (no NUL). */
size_t b64_encoded_len(size_t n, bool pad);
/* Writes b64_encoded_len(n, pad) characters to out, no NUL; returns that count. */
size_t b64_encode(const uint8_t *in, size_t n, char *out, enum b64_alphabet a, bool pad);

/* Bytes b64_decode may write for n characters (an upper bound). */
static inline size_t b64_decoded_max(size_t n) { return n / 4 * 3 + 3; }

enum b64_mix {
    B64_ONE_ALPHABET, /* URL-safe when '-' or '_' occurs, else standard: mixing fails (protojson) */
    B64_ANY_ALPHABET, /* either alphabet, mixed (Connect error details, wire.md §7.1) */
};
/* Padded or unpadded; '=' only as the padding of a length that is a multiple of 4; one left-over
 * symbol never decodes; left-over low bits are ignored (Go's non-strict decoder does the same).
 * No whitespace. Returns 0 and *out_len, or -1 with *bad_at the offset of the first invalid
 * character, or SIZE_MAX when the length itself is invalid. */
int b64_decode(const char *in, size_t n, enum b64_mix mix, uint8_t *out, size_t *out_len, size_t *bad_at);
