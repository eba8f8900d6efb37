/* limits_scan.c: see limits_scan.h. Two walkers over untrusted bytes, neither allocates.
 * The JSON walker is a structural tokenizer: it needs only the six structural characters,
 * strings (with escapes) and whitespace, and treats any other run of characters as a scalar
 * token; jansson judges the tokens afterwards. It fails closed: input it cannot walk is refused
 * here ("invalid JSON at byte N"), so no text reaches jansson unscanned. Only the first
 * top-level value is walked: jansson stops at trailing data too, before building more. */
#include "limits_scan.h"

#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "../core/limits.h"

size_t wire_repeat_limit(const ProtobufCMessageDescriptor *m, const ProtobufCFieldDescriptor *f)
{
    static const struct {
        const char *msg, *field;
        size_t max;
    } table[] = {
        {"SoftwareRule", "identities", LIM_RULE_IDENTITIES_MAX},
        {"ProjectRun", "files", LIM_FILES_MAX},
        {"ProjectRun", "steps", LIM_STEPS_MAX},
        {"ProjectRun", "artifacts", LIM_ARTIFACTS_MAX},
        {"CellRun", "files", LIM_FILES_MAX},
        {"ModuleRun", "rows", LIM_ROWS_MAX},
        {"ModuleRow", "values", LIM_ROW_VALUES_MAX},
    };
    for (size_t i = 0; i < sizeof table / sizeof table[0]; i++)
        if (strcmp(m->short_name, table[i].msg) == 0 && strcmp(f->name, table[i].field) == 0)
            return table[i].max;
    return LIM_REPEATED_DEFAULT;
}

/* A count over its limit is the payload validation of wire.md §11.2 step 12, done early: a
 * refusal with the `request` detail, as the validator's own would be. Malformed or unknown input
 * stays a decode error (no detail). */
static int too_many(struct plm_err *err, const ProtobufCMessageDescriptor *m, const ProtobufCFieldDescriptor *f,
                    size_t limit)
{
    if (!m)
        return plm_refuse(err, PLM_E_INVALID, PLM_REFUSAL_REQUEST, "more than %u repeated elements in one request",
                          LIM_DECODE_VALUES_MAX);
    return plm_refuse(err, PLM_E_INVALID, PLM_REFUSAL_REQUEST, "field \"%s.%s\": more than %zu elements", m->short_name,
                      f->name, limit);
}

/* Module rows and their values count against a budget of their own (LIM_MODULE_ELEMENTS_MAX):
 * a run of 100,000 rows is allowed (providers.md §3.6), far above the request-wide limit. Every
 * element is still counted and bounded; docs/limits.md states what that costs. */
static bool module_field(const ProtobufCMessageDescriptor *m, const ProtobufCFieldDescriptor *f)
{
    return (!strcmp(m->short_name, "ModuleRun") && !strcmp(f->name, "rows")) ||
           (!strcmp(m->short_name, "ModuleRow") && !strcmp(f->name, "values"));
}

/* Adds add elements of field f to the request's counts; -1 (refused) over either budget. */
static int count_elements(size_t *values, size_t *module_values, const ProtobufCMessageDescriptor *m,
                          const ProtobufCFieldDescriptor *f, size_t add, struct plm_err *err)
{
    if (module_field(m, f)) {
        *module_values += add;
        if (*module_values > LIM_MODULE_ELEMENTS_MAX)
            return plm_refuse(err, PLM_E_INVALID, PLM_REFUSAL_REQUEST,
                              "more than %u module rows and values in one request", LIM_MODULE_ELEMENTS_MAX);
        return 0;
    }
    *values += add;
    if (*values > LIM_DECODE_VALUES_MAX)
        return too_many(err, NULL, NULL, 0);
    return 0;
}

/* ---- JSON --------------------------------------------------------------------------------- */

struct js {
    const char *s;
    size_t len, i;
    size_t values, module_values, ignored;
    struct plm_err *err;
};

static int js_syntax(struct js *j)
{
    return plm_fail(j->err, 0, PLM_E_INVALID, "invalid JSON at byte %zu", j->i);
}

static void js_ws(struct js *j)
{
    while (j->i < j->len && (j->s[j->i] == ' ' || j->s[j->i] == '\t' || j->s[j->i] == '\n' || j->s[j->i] == '\r'))
        j->i++;
}

static int hexval(char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

/* A string starting at '"'. With key non-NULL, its value is decoded into key (as jansson will
 * read it) when it is short ASCII; otherwise key gets "" (matching no field, as none is empty). */
static int js_string(struct js *j, char *key, size_t cap)
{
    size_t n = 0;
    bool keep = key != NULL;
    j->i++; /* the opening quote */
    while (j->i < j->len) {
        char c = j->s[j->i++];
        if (c == '"') {
            if (key)
                key[keep ? n : 0] = 0;
            return 0;
        }
        if (c == '\\') {
            if (j->i >= j->len)
                break;
            char e = j->s[j->i++];
            int v = -1;
            if (e == 'u') {
                if (j->len - j->i < 4)
                    break;
                int h[4];
                for (int k = 0; k < 4; k++)
                    h[k] = hexval(j->s[j->i + (size_t)k]);
                j->i += 4;
                if (h[0] == 0 && h[1] == 0 && h[2] >= 0 && h[3] >= 0 && (h[2] << 4 | h[3]) > 0)
                    v = h[2] << 4 | h[3]; /* ASCII; anything else makes the key unmatchable */
            } else {
                const char *from = "\"\\/bfnrt", *to = "\"\\/\b\f\n\r\t";
                const char *p = strchr(from, e);
                if (p && e)
                    v = to[p - from];
            }
            if (v < 0)
                keep = false;
            else if (keep && n + 1 < cap)
                key[n++] = (char)v;
            else
                keep = false;
            continue;
        }
        if (keep && n + 1 < cap)
            key[n++] = c;
        else
            keep = false;
    }
    return js_syntax(j);
}

/* Any scalar token that is not a string: a run of characters up to a structural one. */
static int js_token(struct js *j)
{
    size_t start = j->i;
    while (j->i < j->len && !strchr(",:[]{}\" \t\n\r", j->s[j->i]))
        j->i++;
    return j->i > start ? 0 : js_syntax(j);
}

static int js_value(struct js *j, const ProtobufCMessageDescriptor *msg, unsigned depth, bool ignored);

static int js_ignored_count(struct js *j)
{
    if (++j->ignored > LIM_JSON_IGNORED_MAX)
        return plm_fail(j->err, 0, PLM_E_INVALID, "JSON: more than %u values under unknown keys or of the wrong shape",
                        LIM_JSON_IGNORED_MAX);
    return 0;
}

static const ProtobufCFieldDescriptor *field_named(const ProtobufCMessageDescriptor *m, const char *key)
{
    if (!*key)
        return NULL;
    for (unsigned i = 0; i < m->n_fields; i++) {
        const ProtobufCFieldDescriptor *f = &m->fields[i];
        if (strcmp(f->name, key) == 0)
            return f;
        if (strchr(f->name, '_')) {
            /* lowerCamelCase spelling, as protoc's ToJsonName */
            const char *a = f->name, *b = key;
            bool up = false, same = true;
            for (; *a && same; a++) {
                if (*a == '_') {
                    up = true;
                    continue;
                }
                char c = up && *a >= 'a' && *a <= 'z' ? (char)(*a - 'a' + 'A') : *a;
                up = false;
                same = *b++ == c;
            }
            if (same && !*b)
                return f;
        }
    }
    return NULL;
}

/* A repeated field's array: each element counts against the field's limit and the request's. */
static int js_repeated(struct js *j, const ProtobufCMessageDescriptor *owner, const ProtobufCFieldDescriptor *f,
                       unsigned depth)
{
    size_t limit = wire_repeat_limit(owner, f), n = 0;
    const ProtobufCMessageDescriptor *elem = f->type == PROTOBUF_C_TYPE_MESSAGE ? f->descriptor : NULL;
    j->i++; /* '[' */
    js_ws(j);
    if (j->i < j->len && j->s[j->i] == ']') {
        j->i++;
        return 0;
    }
    for (;;) {
        if (++n > limit)
            return too_many(j->err, owner, f, limit);
        if (count_elements(&j->values, &j->module_values, owner, f, 1, j->err) < 0)
            return -1;
        js_ws(j);
        if (j->i >= j->len)
            return js_syntax(j);
        char c = j->s[j->i];
        /* a scalar element of a scalar field is what it should be; anything else is counted */
        bool right = elem ? c == '{' : (c != '{' && c != '[');
        if (js_value(j, right ? elem : NULL, depth + 1, !right) < 0)
            return -1;
        js_ws(j);
        if (j->i >= j->len)
            return js_syntax(j);
        if (j->s[j->i] == ']') {
            j->i++;
            return 0;
        }
        if (j->s[j->i++] != ',')
            return j->i--, js_syntax(j);
    }
}

static int js_object(struct js *j, const ProtobufCMessageDescriptor *msg, unsigned depth, bool ignored)
{
    j->i++; /* '{' */
    js_ws(j);
    if (j->i < j->len && j->s[j->i] == '}') {
        j->i++;
        return 0;
    }
    for (;;) {
        js_ws(j);
        if (j->i >= j->len || j->s[j->i] != '"')
            return js_syntax(j);
        char key[64];
        if (js_string(j, key, sizeof key) < 0)
            return -1;
        js_ws(j);
        if (j->i >= j->len || j->s[j->i] != ':')
            return js_syntax(j);
        j->i++;
        js_ws(j);
        if (j->i >= j->len)
            return js_syntax(j);
        const ProtobufCFieldDescriptor *f = msg && !ignored ? field_named(msg, key) : NULL;
        char c = j->s[j->i];
        int rc;
        if (f && f->label == PROTOBUF_C_LABEL_REPEATED && c == '[')
            rc = js_repeated(j, msg, f, depth);
        else if (f && f->type == PROTOBUF_C_TYPE_MESSAGE && c == '{')
            rc = js_value(j, f->descriptor, depth, false);
        else if (f && c != '{' && c != '[')
            rc = js_value(j, NULL, depth, false); /* a scalar where one belongs (or null) */
        else
            rc = js_value(j, NULL, depth, true);
        if (rc < 0)
            return -1;
        js_ws(j);
        if (j->i >= j->len)
            return js_syntax(j);
        if (j->s[j->i] == '}') {
            j->i++;
            return 0;
        }
        if (j->s[j->i++] != ',')
            return j->i--, js_syntax(j);
    }
}

/* An array that is not a known repeated field: every element is ignored content. */
static int js_array(struct js *j, unsigned depth)
{
    j->i++; /* '[' */
    js_ws(j);
    if (j->i < j->len && j->s[j->i] == ']') {
        j->i++;
        return 0;
    }
    for (;;) {
        if (js_value(j, NULL, depth + 1, true) < 0)
            return -1;
        js_ws(j);
        if (j->i >= j->len)
            return js_syntax(j);
        if (j->s[j->i] == ']') {
            j->i++;
            return 0;
        }
        if (j->s[j->i++] != ',')
            return j->i--, js_syntax(j);
    }
}

/* One value. msg: the message type expected when it is an object. ignored: it counts against
 * the ignored budget (and so does everything inside it). */
static int js_value(struct js *j, const ProtobufCMessageDescriptor *msg, unsigned depth, bool ignored)
{
    if (depth > LIM_JSON_DEPTH)
        return plm_fail(j->err, 0, PLM_E_INVALID, "JSON nested deeper than %d", LIM_JSON_DEPTH);
    if (ignored && js_ignored_count(j) < 0)
        return -1;
    js_ws(j);
    if (j->i >= j->len)
        return js_syntax(j);
    switch (j->s[j->i]) {
    case '{': return js_object(j, ignored ? NULL : msg, depth + 1, ignored || !msg);
    case '[': return js_array(j, depth + 1);
    case '"': return js_string(j, NULL, 0);
    default: return js_token(j);
    }
}

int wire_scan_json(const ProtobufCMessageDescriptor *desc, const char *text, size_t len, struct plm_err *err)
{
    struct js j = {.s = text ? text : "", .len = text ? len : 0, .err = err};
    js_ws(&j);
    if (j.i >= j.len)
        return 0; /* jansson's error, with nothing to build */
    /* A top-level array is refused by the decoder, but only after jansson built it: walk it as
     * ignored content. A scalar builds one value. */
    return js_value(&j, desc, 1, j.s[j.i] == '[');
}

/* ---- binary ------------------------------------------------------------------------------- */

struct pb {
    size_t values, module_values, unknown;
    struct plm_err *err;
};

static int pb_malformed(struct pb *b, const ProtobufCMessageDescriptor *m)
{
    return plm_fail(b->err, 0, PLM_E_INVALID, "malformed binary %s", m->name);
}

static bool varint(const uint8_t **p, const uint8_t *end, uint64_t *v)
{
    uint64_t x = 0;
    for (unsigned shift = 0; shift < 64 && *p < end; shift += 7) {
        uint8_t c = *(*p)++;
        x |= (uint64_t)(c & 0x7f) << shift;
        if (!(c & 0x80)) {
            *v = x;
            return true;
        }
    }
    return false;
}

/* Elements in a packed run of a scalar field's wire values. */
static size_t packed_count(ProtobufCType t, const uint8_t *p, size_t n)
{
    switch (t) {
    case PROTOBUF_C_TYPE_DOUBLE:
    case PROTOBUF_C_TYPE_FIXED64:
    case PROTOBUF_C_TYPE_SFIXED64: return n / 8;
    case PROTOBUF_C_TYPE_FLOAT:
    case PROTOBUF_C_TYPE_FIXED32:
    case PROTOBUF_C_TYPE_SFIXED32: return n / 4;
    default: {
        size_t k = 0;
        for (size_t i = 0; i < n; i++)
            k += !(p[i] & 0x80);
        return k;
    }
    }
}

static int pb_message(struct pb *b, const ProtobufCMessageDescriptor *m, const uint8_t *p, size_t len, unsigned depth)
{
    if (depth > LIM_JSON_DEPTH)
        return plm_fail(b->err, 0, PLM_E_INVALID, "binary %s nested deeper than %d", m->name, LIM_JSON_DEPTH);
    size_t counts[64] = {0};
    const uint8_t *end = p + len;
    while (p < end) {
        uint64_t tag, v;
        if (!varint(&p, end, &tag) || (tag >> 3) == 0 || (tag >> 3) > UINT32_MAX)
            return pb_malformed(b, m);
        unsigned wt = (unsigned)(tag & 7);
        const uint8_t *val = p;
        size_t vlen = 0;
        switch (wt) {
        case 0:
            if (!varint(&p, end, &v))
                return pb_malformed(b, m);
            vlen = (size_t)(p - val);
            break;
        case 1:
            if (end - p < 8)
                return pb_malformed(b, m);
            p += 8;
            vlen = 8;
            break;
        case 5:
            if (end - p < 4)
                return pb_malformed(b, m);
            p += 4;
            vlen = 4;
            break;
        case 2:
            if (!varint(&p, end, &v) || v > (uint64_t)(end - p))
                return pb_malformed(b, m);
            val = p;
            vlen = (size_t)v;
            p += vlen;
            break;
        default: return pb_malformed(b, m); /* groups (3, 4) and reserved wire types */
        }
        const ProtobufCFieldDescriptor *f = protobuf_c_message_descriptor_get_field(m, (unsigned)(tag >> 3));
        if (!f) {
            if (++b->unknown > LIM_UNKNOWN_FIELDS_MAX)
                return plm_fail(b->err, 0, PLM_E_INVALID, "binary request: more than %u unknown fields",
                                LIM_UNKNOWN_FIELDS_MAX);
            continue;
        }
        size_t idx = (size_t)(f - m->fields);
        bool packed = f->label == PROTOBUF_C_LABEL_REPEATED && wt == 2 && f->type != PROTOBUF_C_TYPE_STRING &&
                      f->type != PROTOBUF_C_TYPE_BYTES && f->type != PROTOBUF_C_TYPE_MESSAGE;
        size_t add = packed ? packed_count(f->type, val, vlen) : 1;
        if (idx < 64)
            counts[idx] += add;
        if (f->label != PROTOBUF_C_LABEL_REPEATED) {
            if (idx < 64 && counts[idx] > 1)
                return plm_fail(b->err, 0, PLM_E_INVALID, "binary %s: field \"%s\" given twice (not canonical)",
                                m->name, f->name);
        } else {
            size_t limit = wire_repeat_limit(m, f);
            if (idx >= 64 || counts[idx] > limit)
                return too_many(b->err, m, f, limit);
            if (count_elements(&b->values, &b->module_values, m, f, add, b->err) < 0)
                return -1;
        }
        if (f->type == PROTOBUF_C_TYPE_MESSAGE && wt == 2 && pb_message(b, f->descriptor, val, vlen, depth + 1) < 0)
            return -1;
    }
    return 0;
}

int wire_scan_binary(const ProtobufCMessageDescriptor *desc, const uint8_t *data, size_t len, struct plm_err *err)
{
    struct pb b = {.err = err};
    return pb_message(&b, desc, data ? data : (const uint8_t *)"", data ? len : 0, 1);
}
