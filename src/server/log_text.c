/* log_text.c: PLIMSOLL_LOG_FORMAT=text, the log line as logfmt (key=value pairs, space separated).
 * Trusts: nothing in the values (callers' ids, request ids, upstream text reach the log).
 * Invariant: one call renders exactly one line: every byte below 0x20, DEL, `"` and `\` inside a
 * value is escaped, so an outside string can neither end a line nor forge a key=value pair; a
 * value with a space, `=`, a quote or nothing in it is quoted. Keys are the daemon's own
 * identifiers. Nested objects and arrays are written as their compact JSON text, quoted. */
#include "log_text.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../core/buf.h"

static bool put_quoted(struct plm_buf *b, const char *s, size_t n)
{
    bool quote = n == 0;
    for (size_t i = 0; i < n && !quote; i++) {
        unsigned char c = (unsigned char)s[i];
        quote = c <= ' ' || c == '=' || c == '"' || c == '\\' || c == 0x7f;
    }
    if (!quote)
        return plm_buf_add(b, s, n);
    bool r = plm_buf_add(b, "\"", 1);
    for (size_t i = 0; i < n && r; i++) {
        unsigned char c = (unsigned char)s[i];
        char esc[8];
        if (c == '"' || c == '\\')
            r = plm_buf_add(b, (char[]){'\\', (char)c}, 2);
        else if (c == '\n')
            r = plm_buf_add(b, "\\n", 2);
        else if (c == '\t')
            r = plm_buf_add(b, "\\t", 2);
        else if (c < 0x20 || c == 0x7f) {
            snprintf(esc, sizeof esc, "\\x%02x", c);
            r = plm_buf_add(b, esc, 4);
        } else
            r = plm_buf_add(b, (const char *)&s[i], 1);
    }
    return r && plm_buf_add(b, "\"", 1);
}

static bool put_value(struct plm_buf *b, json_t *v)
{
    char num[64];
    switch (json_typeof(v)) {
    case JSON_STRING: return put_quoted(b, json_string_value(v), json_string_length(v));
    case JSON_INTEGER:
        snprintf(num, sizeof num, "%" JSON_INTEGER_FORMAT, json_integer_value(v));
        return plm_buf_add(b, num, strlen(num));
    case JSON_REAL:
        snprintf(num, sizeof num, "%.17g", json_real_value(v));
        return plm_buf_add(b, num, strlen(num));
    case JSON_TRUE: return plm_buf_add(b, "true", 4);
    case JSON_FALSE: return plm_buf_add(b, "false", 5);
    case JSON_NULL: return plm_buf_add(b, "null", 4);
    default: {
        char *t = json_dumps(v, JSON_COMPACT | JSON_ENSURE_ASCII);
        if (!t)
            return false;
        bool r = put_quoted(b, t, strlen(t));
        free(t);
        return r;
    }
    }
}

char *log_text_line(json_t *o)
{
    struct plm_buf b = {.max = LOG_TEXT_MAX};
    const char *key;
    json_t *v;
    bool first = true;
    json_object_foreach(o, key, v)
    {
        if ((!first && !plm_buf_add(&b, " ", 1)) || !plm_buf_add(&b, key, strlen(key)) ||
            !plm_buf_add(&b, "=", 1) || !put_value(&b, v)) {
            plm_buf_done(&b);
            return NULL;
        }
        first = false;
    }
    size_t len;
    return plm_buf_take(&b, &len); /* NUL-terminated */
}
