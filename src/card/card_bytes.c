/* card_bytes.c: guest bytes in a card's JSON: as text when they are valid UTF-8, else as
 * standard padded base64, with the encoding named beside them.
 * Owns: nothing past the call; a leaf of the card library (calls only check.c's UTF-8 test). */
#include <stdint.h>
#include <stdlib.h>

#include "../core/cleanup.h"
#include "card.h"

int cli_json_set_bytes(json_t *o, const char *k, const char *enc_k, const ProtobufCBinaryData *b)
{
    if (cli_utf8_valid(b->data, b->len)) {
        if (json_object_set_new(o, k, json_stringn(b->len ? (const char *)b->data : "", b->len)) < 0)
            return -1;
        return json_object_set_new(o, enc_k, json_string("utf-8"));
    }
    static const char tbl[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    size_t olen = (b->len + 2) / 3 * 4;
    cleanup_free char *out = malloc(olen + 1);
    if (!out)
        return -1;
    size_t j = 0;
    for (size_t i = 0; i < b->len; i += 3) {
        uint32_t v = (uint32_t)b->data[i] << 16;
        if (i + 1 < b->len)
            v |= (uint32_t)b->data[i + 1] << 8;
        if (i + 2 < b->len)
            v |= b->data[i + 2];
        out[j++] = tbl[(v >> 18) & 63];
        out[j++] = tbl[(v >> 12) & 63];
        out[j++] = i + 1 < b->len ? tbl[(v >> 6) & 63] : '=';
        out[j++] = i + 2 < b->len ? tbl[v & 63] : '=';
    }
    out[j] = '\0';
    if (json_object_set_new(o, k, json_stringn(out, j)) < 0)
        return -1;
    return json_object_set_new(o, enc_k, json_string("base64"));
}
