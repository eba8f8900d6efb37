/* guardparse.c: the guard's request body, bytes -> one validated host call (guardparse.h). Linked
 * only into the confined guestio helper (and its tests and fuzzer), never into the daemon.
 * Trusts: nothing: the bytes were written by guest code. The input is bounded before parsing,
 * JSON is parsed with duplicate keys refused, and every string is checked for UTF-8 and NUL. */
#include <ctype.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "../core/cleanup_json.h"
#include "../core/validate.h"
#include "guardparse.h"

static int bad(char *why, size_t cap, const char *msg)
{
    snprintf(why, cap, "%s", msg);
    return 400;
}

void e2b_guard_call_done(struct e2b_guard_call *c)
{
    free(c->path);
    free(c->body);
    memset(c, 0, sizeof *c);
}

static bool clean_string(json_t *v)
{
    size_t n = json_string_length(v);
    const char *s = json_string_value(v);
    return memchr(s, 0, n) == NULL && plm_utf8_ok(s, n);
}

int e2b_guard_parse(const uint8_t *buf, size_t len, struct e2b_guard_call *out, char *why, size_t wcap)
{
    static const char *methods[] = {"GET", "PUT", "POST", "DELETE", "PATCH"};
    memset(out, 0, sizeof *out);
    if (len > E2B_GUARD_BODY_MAX)
        return bad(why, wcap, "request body too large");
    json_error_t je;
    cleanup_json json_t *root = json_loadb((const char *)buf, len, JSON_REJECT_DUPLICATES, &je);
    if (!json_is_object(root))
        return bad(why, wcap, "expected a JSON object {method, path, body}");
    int rc = 0;
    const char *key;
    json_t *v;
    json_object_foreach(root, key, v)
    {
        if (strcmp(key, "method") && strcmp(key, "path") && strcmp(key, "body")) {
            rc = bad(why, wcap, "unknown field in the guard request");
            goto out;
        }
    }
    json_t *m = json_object_get(root, "method"), *p = json_object_get(root, "path"),
           *b = json_object_get(root, "body");
    if (!json_is_string(m) || !json_string_length(m) || !clean_string(m)) {
        rc = bad(why, wcap, "method must be a non-blank string");
        goto out;
    }
    for (size_t i = 0; i < sizeof methods / sizeof *methods && !out->method[0]; i++)
        if (!strcasecmp(json_string_value(m), methods[i]) && json_string_length(m) == strlen(methods[i]))
            snprintf(out->method, sizeof out->method, "%s", methods[i]);
    if (!out->method[0]) {
        rc = bad(why, wcap, "method must be GET, PUT, POST, DELETE or PATCH");
        goto out;
    }
    if (!json_is_string(p) || !json_string_length(p) || !clean_string(p) || json_string_length(p) > 8192) {
        rc = bad(why, wcap, "path must be a non-empty string of at most 8192 bytes");
        goto out;
    }
    if (b && !json_is_null(b) && (!json_is_string(b) || !plm_utf8_ok(json_string_value(b), json_string_length(b)))) {
        rc = bad(why, wcap, "body must be a string (the JSON text) or absent");
        goto out;
    }
    out->path = strdup(json_string_value(p));
    if (!out->path) {
        rc = bad(why, wcap, "out of memory");
        goto out;
    }
    if (json_is_string(b) && json_string_length(b)) {
        out->len = json_string_length(b);
        out->body = malloc(out->len);
        if (!out->body) {
            rc = bad(why, wcap, "out of memory");
            goto out;
        }
        memcpy(out->body, json_string_value(b), out->len);
    }
out:
    if (rc)
        e2b_guard_call_done(out);
    return rc;
}
