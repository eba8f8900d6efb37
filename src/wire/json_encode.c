/* json_encode.c: encoding for the one proto3 JSON codec of wire.md §6, driven by protobuf-c
 * descriptors. Trusts: the message (built by us or unpacked by protobuf-c), but not that its strings
 * are UTF-8: invalid sequences are repaired to U+FFFD (§8.2). Invariant: output is always valid
 * UTF-8 JSON. jansson is not used here: it prints doubles with 17 digits and -0.0 as "-0.0" and
 * refuses invalid UTF-8, while §6 wants shortest round-trip numbers and "-0". Number text uses
 * snprintf, so this relies on LC_NUMERIC being "C" (nothing calls setlocale). */
#include "json_codec.h"

#include <errno.h>
#include <float.h>
#include <inttypes.h>
#include <jansson.h>
#include <math.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../core/base64.h"
#include "../core/cleanup.h"
#include "../core/limits.h"
#include "json_internal.h"

/* ---------------------------------------------------------------------------------------------
 * Encoding */

struct out {
    char *p;
    size_t len, cap;
    bool oom; /* sticky: once set, nothing more is written and encode returns NULL */
};

static bool out_reserve(struct out *o, size_t more)
{
    size_t need;
    if (o->oom)
        return false;
    if (__builtin_add_overflow(o->len, more, &need) || __builtin_add_overflow(need, 1, &need)) {
        o->oom = true;
        return false;
    }
    if (need <= o->cap)
        return true;
    size_t cap = o->cap ? o->cap : 256;
    while (cap < need)
        if (__builtin_mul_overflow(cap, 2, &cap)) {
            cap = need;
            break;
        }
    char *p = realloc(o->p, cap);
    if (!p) {
        o->oom = true;
        return false;
    }
    o->p = p;
    o->cap = cap;
    return true;
}

static void out_put(struct out *o, const void *s, size_t n)
{
    if (out_reserve(o, n)) {
        memcpy(o->p + o->len, s, n);
        o->len += n;
    }
}

static void out_ch(struct out *o, char c) { out_put(o, &c, 1); }

/* Length of the valid UTF-8 sequence at s (n > 0 bytes available), or 0 with *bad set to the
 * length of its maximal invalid prefix (Unicode §3.9 U+FFFD substitution, as Python's "replace"
 * does): overlongs, surrogates and code points past U+10FFFF are invalid. */
static size_t utf8_seq(const unsigned char *s, size_t n, size_t *bad)
{
    unsigned char c = s[0], lo = 0x80, hi = 0xBF;
    size_t need, k;
    if (c >= 0xC2 && c <= 0xDF)
        need = 2;
    else if (c >= 0xE0 && c <= 0xEF) {
        need = 3;
        lo = c == 0xE0 ? 0xA0 : 0x80;
        hi = c == 0xED ? 0x9F : 0xBF;
    } else if (c >= 0xF0 && c <= 0xF4) {
        need = 4;
        lo = c == 0xF0 ? 0x90 : 0x80;
        hi = c == 0xF4 ? 0x8F : 0xBF;
    } else {
        *bad = 1;
        return 0;
    }
    for (k = 1; k < need && k < n; k++) {
        if (s[k] < (k == 1 ? lo : 0x80) || s[k] > (k == 1 ? hi : 0xBF))
            break;
    }
    if (k == need)
        return need;
    *bad = k;
    return 0;
}

/* A JSON string. Invalid UTF-8 (possible in a message from binary protobuf, which protobuf-c
 * does not validate) becomes U+FFFD, so the answer is always UTF-8 (§8.2). */
static void put_string(struct out *o, const char *str, size_t n)
{
    static const char hex[] = "0123456789abcdef";
    const unsigned char *s = (const unsigned char *)str;
    size_t run = 0, i = 0; /* s[run..i) is pending verbatim output */
    out_ch(o, '"');
    while (i < n) {
        unsigned char c = s[i];
        if (c >= 0x20 && c < 0x80 && c != '"' && c != '\\') {
            i++;
            continue;
        }
        size_t len = 0, bad = 0;
        if (c >= 0x80 && (len = utf8_seq(s + i, n - i, &bad)) > 0) {
            i += len;
            continue;
        }
        out_put(o, s + run, i - run);
        if (c >= 0x80) {
            out_put(o, "\xEF\xBF\xBD", 3);
            i += bad;
        } else {
            static const char from[] = "\"\\\n\r\t\b\f", to[] = "\"\\nrtbf";
            const char *hit = c ? strchr(from, c) : NULL;
            char esc[6] = { '\\', hit ? to[hit - from] : 'u', '0', '0', hex[c >> 4], hex[c & 15] };
            out_put(o, esc, hit ? 2 : 6);
            i++;
        }
        run = i;
    }
    out_put(o, s + run, i - run);
    out_ch(o, '"');
}

static void put_base64(struct out *o, const uint8_t *s, size_t n)
{
    size_t groups = n / 3 + (n % 3 != 0), total;
    if (__builtin_mul_overflow(groups, 4, &total) || __builtin_add_overflow(total, 2, &total)) {
        o->oom = true;
        return;
    }
    if (!out_reserve(o, total))
        return;
    char *p = o->p + o->len;
    *p++ = '"';
    p += b64_encode(s, n, p, B64_STD, true);
    *p++ = '"';
    o->len = (size_t)(p - o->p);
}

/* Shortest text that reads back to the same value. %g drops trailing zeros, so for a normal
 * double %.15g already gives the shortest form of any value that needs at most 15 digits; 16
 * and 17 cover the rest (17 always round-trips). -0.0 prints as "-0", as §6 wants. */
static void put_double(struct out *o, double v, bool is_float)
{
    char buf[40];
    int n = 0;
    if (isnan(v))
        n = snprintf(buf, sizeof buf, "\"NaN\"");
    else if (isinf(v))
        n = snprintf(buf, sizeof buf, v > 0 ? "\"Infinity\"" : "\"-Infinity\"");
    else if (is_float)
        for (int prec = 6; prec <= 9; prec++) {
            n = snprintf(buf, sizeof buf, "%.*g", prec, v);
            if (strtof(buf, NULL) == (float)v)
                break;
        }
    else /* subnormals have fewer digits of precision, so their search starts lower */
        for (int prec = v > -DBL_MIN && v < DBL_MIN ? 1 : 15; prec <= 17; prec++) {
            n = snprintf(buf, sizeof buf, "%.*g", prec, v);
            if (strtod(buf, NULL) == v)
                break;
        }
    out_put(o, buf, (size_t)n);
}

static void put_fmt(struct out *o, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void put_fmt(struct out *o, const char *fmt, ...)
{
    char buf[48];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    out_put(o, buf, (size_t)n);
}

static void encode_message(struct out *o, const ProtobufCMessage *m);

static void encode_value(struct out *o, const ProtobufCFieldDescriptor *f, const void *p)
{
    switch (kind_of(f->type)) {
    case K_I32: put_fmt(o, "%" PRId32, *(const int32_t *)p); return;
    case K_U32: put_fmt(o, "%" PRIu32, *(const uint32_t *)p); return;
    case K_I64: put_fmt(o, "\"%" PRId64 "\"", *(const int64_t *)p); return;
    case K_U64: put_fmt(o, "\"%" PRIu64 "\"", *(const uint64_t *)p); return;
    case K_DOUBLE: put_double(o, *(const double *)p, false); return;
    case K_FLOAT: put_double(o, *(const float *)p, true); return;
    case K_BOOL:
        if (*(const protobuf_c_boolean *)p)
            out_put(o, "true", 4);
        else
            out_put(o, "false", 5);
        return;
    case K_ENUM: {
        int v = *(const int *)p;
        const ProtobufCEnumValue *ev = protobuf_c_enum_descriptor_get_value(f->descriptor, v);
        if (ev) /* enum names are identifiers from the descriptor; no escaping needed */
            put_fmt(o, "\"%s\"", ev->name);
        else
            put_fmt(o, "%d", v);
        return;
    }
    case K_STRING: {
        const char *s = *(char *const *)p;
        put_string(o, s ? s : "", s ? strlen(s) : 0);
        return;
    }
    case K_BYTES: {
        const ProtobufCBinaryData *b = p;
        put_base64(o, b->data, b->data ? b->len : 0);
        return;
    }
    case K_MESSAGE: {
        const ProtobufCMessage *sub = *(ProtobufCMessage *const *)p;
        if (sub)
            encode_message(o, sub);
        else
            out_put(o, "{}", 2);
        return;
    }
    }
}

/* Whether a field without explicit presence holds its zero value. A double is zero only when
 * all its bits are: -0.0 is emitted, because its sign enters the digest (§6). */
static bool is_zero(const ProtobufCFieldDescriptor *f, const void *p)
{
    static const char zeros[8];
    enum kind k = kind_of(f->type);
    switch (k) {
    case K_STRING: {
        const char *s = *(char *const *)p;
        return !s || !s[0];
    }
    case K_BYTES: return ((const ProtobufCBinaryData *)p)->len == 0;
    case K_MESSAGE: return *(ProtobufCMessage *const *)p == NULL;
    default: return memcmp(p, zeros, kind_size[k]) == 0; /* bitwise, so -0.0 is not zero */
    }
}

static void put_key(struct out *o, const char *name, bool *first)
{
    size_t n = strlen(name); /* the camel name is never longer */
    if (!out_reserve(o, n + 4))
        return;
    char *p = o->p + o->len;
    if (!*first)
        *p++ = ',';
    *first = false;
    *p++ = '"';
    p += camel_name(name, p, n);
    *p++ = '"';
    *p++ = ':';
    o->len = (size_t)(p - o->p);
}

static void encode_message(struct out *o, const ProtobufCMessage *m)
{
    const ProtobufCMessageDescriptor *desc = m->descriptor;
    bool first = true;
    out_ch(o, '{');
    for (unsigned i = 0; i < desc->n_fields && !o->oom; i++) {
        const ProtobufCFieldDescriptor *f = &desc->fields[i];
        const void *p = FIELD_CPTR(m, f->offset);
        if (f->label == PROTOBUF_C_LABEL_REPEATED) {
            size_t n = *(const size_t *)FIELD_CPTR(m, f->quantifier_offset);
            const char *arr = *(char *const *)p;
            if (n == 0 || !arr)
                continue;
            size_t size = kind_size[kind_of(f->type)];
            put_key(o, f->name, &first);
            out_ch(o, '[');
            for (size_t k = 0; k < n && !o->oom; k++) {
                if (k)
                    out_ch(o, ',');
                encode_value(o, f, arr + k * size);
            }
            out_ch(o, ']');
            continue;
        }
        if (f->flags & PROTOBUF_C_FIELD_FLAG_ONEOF) {
            /* a set member is emitted even at its zero value: the case says it is set */
            if (*(const uint32_t *)FIELD_CPTR(m, f->quantifier_offset) != f->id)
                continue;
        } else if (f->label == PROTOBUF_C_LABEL_OPTIONAL && f->type != PROTOBUF_C_TYPE_STRING &&
                   f->type != PROTOBUF_C_TYPE_MESSAGE) {
            if (!*(const protobuf_c_boolean *)FIELD_CPTR(m, f->quantifier_offset))
                continue;
        } else if (f->label != PROTOBUF_C_LABEL_REQUIRED && is_zero(f, p)) {
            continue;
        }
        put_key(o, f->name, &first);
        encode_value(o, f, p);
    }
    out_ch(o, '}');
}

char *wire_json_encode(const ProtobufCMessage *msg, size_t *len_out)
{
    struct out o = { 0 };
    if (!msg || !msg->descriptor)
        return NULL;
    encode_message(&o, msg);
    if (o.oom) {
        free(o.p);
        return NULL;
    }
    o.p[o.len] = '\0'; /* out_reserve always keeps room for it */
    if (len_out)
        *len_out = o.len;
    return o.p;
}
