/* sessframe.c: the host side of the session agent's frames (sessframe.h).
 * Trusts: nothing in a reply. Invariant: a reply is accepted only whole; its output streams are
 * each at most LIM_OUTPUT_MAX bytes after decoding; nothing is allocated before the length was
 * checked against DOCK_SF_REPLY_MAX. */
#include "sessframe.h"

#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "../../core/base64.h"
#include "../../core/cleanup.h"
#include "../../core/cleanup_json.h"
#include "../../core/limits.h"

void dock_sf_reply_done(struct dock_sf_reply *r)
{
    if (!r)
        return;
    free(r->out.data);
    free(r->err.data);
    memset(r, 0, sizeof *r);
}

static int get_bool(json_t *o, const char *k, bool *v)
{
    json_t *x = json_object_get(o, k);
    if (!x)
        return 0; /* absent = false */
    if (!json_is_boolean(x))
        return -1;
    *v = json_is_true(x);
    return 0;
}

static int get_uint(json_t *o, const char *k, uint64_t max, uint64_t *v)
{
    json_t *x = json_object_get(o, k);
    if (!json_is_integer(x) || json_integer_value(x) < 0 || (uint64_t)json_integer_value(x) > max)
        return -1;
    *v = (uint64_t)json_integer_value(x);
    return 0;
}

static int get_stream(json_t *o, const char *k, struct plm_bytes *b)
{
    json_t *x = json_object_get(o, k);
    if (!x)
        return 0;
    const char *s = json_string_value(x);
    size_t n = json_string_length(x);
    if (!s || n > b64_encoded_len(LIM_OUTPUT_MAX, true))
        return -1;
    if (n == 0)
        return 0;
    uint8_t *d = malloc(b64_decoded_max(n));
    size_t got = 0, bad = 0;
    if (!d || b64_decode(s, n, B64_ONE_ALPHABET, d, &got, &bad) < 0 || got > LIM_OUTPUT_MAX) {
        free(d);
        return -1;
    }
    b->data = d;
    b->len = got;
    return 0;
}

static int decode_body(json_t *o, struct dock_sf_reply *r)
{
    if (!json_is_object(o))
        return -1;
    const char *st = json_string_value(json_object_get(o, "status"));
    uint64_t exit_code = 0;
    if (!st || get_uint(o, "id", UINT32_MAX, &r->id) < 0 || get_uint(o, "disk", UINT64_MAX >> 1, &r->disk) < 0)
        return -1;
    if (!strcmp(st, "ready")) {
        r->status = DOCK_SF_READY;
        /* optional: an agent older than session grants does not say it */
        return json_object_get(o, "grants") ? get_bool(o, "grants", &r->grants) : 0;
    }
    if (!strcmp(st, "nointerp")) {
        r->status = DOCK_SF_NOINTERP;
        return 0;
    }
    if (!strcmp(st, "files")) {
        uint64_t file = 0;
        const char *e = json_string_value(json_object_get(o, "errno"));
        size_t n = e ? strlen(e) : 0;
        if (get_uint(o, "file", LIM_FILES_MAX, &file) < 0 || n == 0 || n >= sizeof r->errno_name)
            return -1;
        for (size_t i = 0; i < n; i++)
            if (!((e[i] >= 'A' && e[i] <= 'Z') || (e[i] >= '0' && e[i] <= '9')))
                return -1;
        memcpy(r->errno_name, e, n + 1);
        r->file = (uint32_t)file;
        r->status = DOCK_SF_FILES;
        return 0;
    }
    if (strcmp(st, "ran") != 0)
        return -1;
    r->status = DOCK_SF_RAN;
    if (get_uint(o, "exit", 255, &exit_code) < 0 || get_bool(o, "timed_out", &r->timed_out) < 0 ||
        get_bool(o, "started", &r->started) < 0 || get_bool(o, "ended", &r->ended) < 0 ||
        get_bool(o, "out_trunc", &r->out_trunc) < 0 || get_bool(o, "err_trunc", &r->err_trunc) < 0 ||
        get_stream(o, "out", &r->out) < 0 || get_stream(o, "err", &r->err) < 0)
        return -1;
    r->exit_code = (int32_t)exit_code;
    return 0;
}

int dock_sf_parse(const uint8_t *buf, size_t len, size_t *used, struct dock_sf_reply *r)
{
    size_t cmp = len < 4 ? len : 4;
    if (memcmp(buf, DOCK_SF_MAGIC, cmp) != 0)
        return -1; /* stray bytes where a frame must start */
    if (len < DOCK_SF_HDR)
        return 0;
    uint32_t n = (uint32_t)buf[4] << 24 | (uint32_t)buf[5] << 16 | (uint32_t)buf[6] << 8 | buf[7];
    if (n == 0 || n > DOCK_SF_REPLY_MAX)
        return -1;
    if (len - DOCK_SF_HDR < n)
        return 0;
    memset(r, 0, sizeof *r);
    json_error_t je;
    json_t *o = json_loadb((const char *)buf + DOCK_SF_HDR, n, JSON_REJECT_DUPLICATES, &je);
    int rc = o ? decode_body(o, r) : -1;
    json_decref(o);
    if (rc < 0) {
        dock_sf_reply_done(r);
        return -1;
    }
    *used = DOCK_SF_HDR + n;
    return 1;
}

int dock_sf_request(uint64_t id, const char *op, const char *language, const char *code, const struct plm_file *files,
                    size_t n_files, uint32_t timeout_ms, uint32_t cap, const char *grant_sock,
                    const char *grant_preload, uint8_t **out, size_t *len)
{
    *out = NULL;
    json_t *fl = json_array(); /* owned until json_pack's "o" takes it, below */
    for (size_t i = 0; fl && i < n_files; i++) {
        size_t n = strlen(files[i].content);
        char *b cleanup_free = malloc(b64_encoded_len(n, true) + 1);
        if (!b)
            break;
        size_t m = b64_encode((const uint8_t *)files[i].content, n, b, B64_STD, true);
        b[m] = 0;
        json_t *pair = json_pack("[s, s]", files[i].path, b);
        if (!pair || json_array_append_new(fl, pair) < 0)
            break;
    }
    bool files_ok = fl && json_array_size(fl) == n_files;
    /* "o" steals fl, also when it fails; without it, fl is released here */
    json_t *o cleanup_json = files_ok ? json_pack("{s:I, s:s, s:s, s:s, s:o, s:I, s:I}", "id", (json_int_t)id, "op", op,
                                                  "lang", language ? language : "", "code", code, "files", fl,
                                                  "timeout_ms", (json_int_t)timeout_ms, "cap", (json_int_t)cap)
                                      : (json_decref(fl), NULL);
    if (!o ||
        (grant_sock && grant_preload &&
         json_object_set_new(o, "grant", json_pack("{s:s, s:s}", "sock", grant_sock, "preload", grant_preload)) < 0))
        return -1;
    char *body cleanup_free = json_dumps(o, JSON_COMPACT);
    if (!body)
        return -1;
    size_t n = strlen(body);
    uint8_t *f = malloc(n + 4);
    if (!f)
        return -1;
    f[0] = (uint8_t)(n >> 24), f[1] = (uint8_t)(n >> 16), f[2] = (uint8_t)(n >> 8), f[3] = (uint8_t)n;
    memcpy(f + 4, body, n);
    *out = f;
    *len = n + 4;
    return 0;
}
