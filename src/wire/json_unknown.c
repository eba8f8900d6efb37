/* json_unknown.c: how a request's JSON keys are matched to fields, and how an unknown one is
 * named back to the caller with the field it most likely meant.
 * Trusts: nothing in a key (any UTF-8 but U+0000, any length); the descriptors are protoc-c's.
 * Invariant: no key byte reaches an error message unescaped, and the work per key is bounded
 * (NEAREST_KEY_MAX characters compared against each field, two spellings per field).
 *
 * "Nearest" (docs/decisions.md, Unknown JSON fields): names are compared case-insensitively with
 * '_' removed, so "minimum_isolaton", "MinimumIsolaton" and "minimumIsolaton" all read as
 * "minimumisolaton". A field is suggested when that comparison is equal, or within an edit
 * distance (insertions, deletions, substitutions, adjacent transpositions) of 2 for a field name
 * of 6 or more letters and of 1 for a shorter one; the closest wins, the first in field-number
 * order on a tie. Anything further suggests nothing: a guess that is wrong misleads more than
 * silence. */
#include <limits.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "json_internal.h"

#define NEAREST_KEY_MAX 64 /* longer keys get no suggestion (no field is near that long) */
#define QUOTE_KEY_MAX 48   /* key bytes shown in a message; more are cut, marked "..." */

const ProtobufCFieldDescriptor *wire_json_field_by_key(const ProtobufCMessageDescriptor *desc, const char *key,
                                                       size_t len)
{
    for (unsigned i = 0; i < desc->n_fields; i++) {
        const ProtobufCFieldDescriptor *f = &desc->fields[i];
        if (strlen(f->name) == len && memcmp(f->name, key, len) == 0)
            return f;
        char camel[96];
        size_t n = camel_name(f->name, camel, sizeof camel);
        if (n == len && n <= sizeof camel && memcmp(camel, key, len) == 0)
            return f;
    }
    return NULL;
}

/* Lower-cased, '_' dropped; returns the length, or SIZE_MAX when longer than NEAREST_KEY_MAX. */
static size_t fold(const char *s, size_t len, char out[NEAREST_KEY_MAX])
{
    size_t n = 0;
    for (size_t i = 0; i < len; i++) {
        char c = s[i];
        if (c == '_')
            continue;
        if (n == NEAREST_KEY_MAX)
            return SIZE_MAX;
        out[n++] = (c >= 'A' && c <= 'Z') ? (char)(c - 'A' + 'a') : c;
    }
    return n;
}

static unsigned min3(unsigned a, unsigned b, unsigned c)
{
    unsigned m = a < b ? a : b;
    return m < c ? m : c;
}

/* Optimal string alignment distance (Levenshtein plus a swap of two adjacent characters), kept
 * in three rows so the stack holds under a kilobyte whatever the lengths (both <= NEAREST_KEY_MAX). */
static unsigned edit_distance(const char *a, size_t na, const char *b, size_t nb)
{
    unsigned rows[3][NEAREST_KEY_MAX + 1];
    unsigned *two = rows[0], *prev = rows[1], *cur = rows[2];
    for (size_t j = 0; j <= nb; j++)
        prev[j] = (unsigned)j;
    for (size_t i = 1; i <= na; i++) {
        cur[0] = (unsigned)i;
        for (size_t j = 1; j <= nb; j++) {
            unsigned cost = a[i - 1] != b[j - 1];
            cur[j] = min3(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + cost);
            if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] && two[j - 2] + 1 < cur[j])
                cur[j] = two[j - 2] + 1;
        }
        unsigned *t = two;
        two = prev;
        prev = cur;
        cur = t;
    }
    return prev[nb];
}

const ProtobufCFieldDescriptor *wire_json_nearest_field(const ProtobufCMessageDescriptor *desc, const char *key,
                                                        size_t len)
{
    char k[NEAREST_KEY_MAX], f[NEAREST_KEY_MAX];
    size_t nk = fold(key, len, k);
    if (nk == SIZE_MAX)
        return NULL;
    const ProtobufCFieldDescriptor *best = NULL;
    unsigned best_dist = UINT_MAX;
    /* fields[] is in field-number order, so on a tie the lower number stays */
    for (unsigned i = 0; i < desc->n_fields; i++) {
        const ProtobufCFieldDescriptor *fd = &desc->fields[i];
        size_t nf = fold(fd->name, strlen(fd->name), f);
        if (nf == SIZE_MAX)
            continue;
        unsigned allowed = nf >= 6 ? 2 : 1;
        unsigned dist = edit_distance(k, nk, f, nf);
        if (dist <= allowed && dist < best_dist) {
            best = fd;
            best_dist = dist;
        }
    }
    return best;
}

void wire_json_quote_key(const char *key, size_t len, char *out, size_t cap)
{
    size_t o = 0;
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)key[i];
        char piece[5];
        if (i == QUOTE_KEY_MAX) {
            snprintf(piece, sizeof piece, "...");
        } else if (c > 0x20 && c < 0x7f && c != '\\' && c != '"') {
            piece[0] = (char)c;
            piece[1] = '\0';
        } else {
            snprintf(piece, sizeof piece, "\\x%02x", c);
        }
        size_t n = strlen(piece);
        if (o + n >= cap)
            break;
        memcpy(out + o, piece, n);
        o += n;
        if (i == QUOTE_KEY_MAX)
            break;
    }
    if (cap)
        out[o] = '\0';
}
