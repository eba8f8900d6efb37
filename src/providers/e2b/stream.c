/* stream.c: envd's Connect process stream, parsed under fixed bounds (stream.h).
 * Trusts: nothing the stream says. Every frame is bounded before it is allocated, the total is
 * counted before a frame is read, and JSON is parsed only from a complete, bounded frame. */
#include "stream.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../core/cleanup_json.h"

void e2b_stream_init(struct e2b_stream *s, size_t keep)
{
    memset(s, 0, sizeof *s);
    s->keep = keep;
    s->pid = -1;
}

void e2b_stream_done(struct e2b_stream *s)
{
    free(s->frame);
    s->frame = NULL;
    plm_bytes_done(&s->out);
    plm_bytes_done(&s->err);
}

static int fail(struct e2b_stream *s, const char *why)
{
    s->failed = true;
    snprintf(s->fail, sizeof s->fail, "%s", why);
    return -1;
}

static int b64v(unsigned char c)
{
    if (c >= 'A' && c <= 'Z')
        return c - 'A';
    if (c >= 'a' && c <= 'z')
        return c - 'a' + 26;
    if (c >= '0' && c <= '9')
        return c - '0' + 52;
    if (c == '+')
        return 62;
    if (c == '/')
        return 63;
    return -1;
}

long e2b_b64_decode(const char *in, size_t len, uint8_t *out, size_t cap)
{
    if (len % 4)
        return -1;
    size_t o = 0;
    for (size_t i = 0; i < len; i += 4) {
        int v[4], pad = 0;
        for (int k = 0; k < 4; k++) {
            if (in[i + k] == '=' && i + 4 == len && k >= 2) {
                v[k] = 0;
                pad++;
            } else if (pad || (v[k] = b64v((unsigned char)in[i + k])) < 0) {
                return -1;
            }
        }
        uint32_t w = (uint32_t)v[0] << 18 | (uint32_t)v[1] << 12 | (uint32_t)v[2] << 6 | (uint32_t)v[3];
        size_t n = 3 - (size_t)pad;
        if (o + n > cap)
            return -1;
        out[o++] = (uint8_t)(w >> 16);
        if (n > 1)
            out[o++] = (uint8_t)(w >> 8);
        if (n > 2)
            out[o++] = (uint8_t)w;
    }
    return (long)o;
}

/* Appends up to the keep limit; past it the stream is flagged truncated. */
static int keep_bytes(struct e2b_stream *s, struct plm_bytes *b, bool *trunc, const uint8_t *p, size_t n)
{
    size_t room = b->len < s->keep ? s->keep - b->len : 0;
    size_t take = n < room ? n : room;
    if (take < n)
        *trunc = true;
    if (!take)
        return 0;
    uint8_t *nd = realloc(b->data, b->len + take);
    if (!nd)
        return -1;
    memcpy(nd + b->len, p, take);
    b->data = nd;
    b->len += take;
    return 0;
}

static int on_data(struct e2b_stream *s, json_t *data)
{
    static const char *keys[2] = {"stdout", "stderr"};
    for (int k = 0; k < 2; k++) {
        json_t *v = json_object_get(data, keys[k]);
        if (!v)
            continue;
        if (!json_is_string(v))
            return fail(s, "a data event's output is not a base64 string");
        size_t len = json_string_length(v);
        uint8_t *buf = malloc(len / 4 * 3 + 3);
        if (!buf)
            return fail(s, "out of memory");
        long n = e2b_b64_decode(json_string_value(v), len, buf, len / 4 * 3 + 3);
        int r = 0;
        if (n < 0)
            r = fail(s, "a data event's output is not valid base64");
        else if (s->sink)
            s->sink(s->sink_ctx, k, buf, (size_t)n);
        else
            r = keep_bytes(s, k ? &s->err : &s->out, k ? &s->err_truncated : &s->out_truncated, buf, (size_t)n);
        free(buf);
        if (r < 0)
            return s->failed ? -1 : fail(s, "out of memory");
    }
    return 0;
}

static void copy_str(json_t *o, const char *key, char *dst, size_t cap)
{
    json_t *v = json_object_get(o, key);
    if (json_is_string(v)) {
        /* printable ASCII only: the text may reach a log line or an error message */
        const char *t = json_string_value(v);
        size_t i = 0;
        for (; t[i] && i + 1 < cap; i++)
            dst[i] = t[i] >= 0x20 && t[i] < 0x7f ? t[i] : '?';
        dst[i] = 0;
    }
}

static int on_end(struct e2b_stream *s, json_t *end)
{
    json_t *code = json_object_get(end, "exitCode");
    if (code && !json_is_integer(code))
        return fail(s, "the end event's exitCode is not an integer");
    json_int_t c = code ? json_integer_value(code) : 0;
    if (c < -2147483647 || c > 2147483647)
        return fail(s, "the end event's exitCode is out of range");
    s->exit_code = (int32_t)c;
    copy_str(end, "status", s->end_status, sizeof s->end_status);
    copy_str(end, "error", s->end_error, sizeof s->end_error);
    s->ended = true;
    return 0;
}

static int on_message(struct e2b_stream *s, json_t *msg)
{
    json_t *ev = json_object_get(msg, "event");
    if (!json_is_object(ev))
        return fail(s, "a stream message has no event object");
    if (s->ended)
        return fail(s, "an event after the end event");
    json_t *v;
    if ((v = json_object_get(ev, "start"))) {
        if (!json_is_object(v) || s->started)
            return fail(s, "a malformed or repeated start event");
        json_t *pid = json_object_get(v, "pid");
        s->pid = json_is_integer(pid) ? json_integer_value(pid) : 0;
        s->started = true;
        if (s->on_start)
            s->on_start(s->sink_ctx, s->pid);
        return 0;
    }
    if ((v = json_object_get(ev, "data"))) {
        if (!json_is_object(v) || !s->started)
            return fail(s, "a data event before the start event");
        return on_data(s, v);
    }
    if ((v = json_object_get(ev, "end"))) {
        if (!json_is_object(v) || !s->started)
            return fail(s, "an end event before the start event");
        return on_end(s, v);
    }
    if (json_object_get(ev, "keepalive"))
        return 0;
    return fail(s, "an unknown event");
}

static int on_trailer(struct e2b_stream *s, json_t *msg)
{
    s->trailer = true;
    json_t *e = json_object_get(msg, "error");
    if (e) {
        if (!json_is_object(e))
            return fail(s, "the trailer's error is not an object");
        copy_str(e, "code", s->trailer_code, sizeof s->trailer_code);
        copy_str(e, "message", s->trailer_msg, sizeof s->trailer_msg);
        if (!s->trailer_code[0])
            snprintf(s->trailer_code, sizeof s->trailer_code, "unknown");
    }
    return 1;
}

static int on_frame(struct e2b_stream *s)
{
    json_error_t je;
    cleanup_json json_t *msg = json_loadb((const char *)s->frame, s->frame_len, JSON_REJECT_DUPLICATES, &je);
    free(s->frame);
    s->frame = NULL;
    if (!json_is_object(msg))
        return fail(s, "a stream frame is not a JSON object");
    return s->frame_flags & 0x02 ? on_trailer(s, msg) : on_message(s, msg);
}

int e2b_stream_feed(struct e2b_stream *s, const uint8_t *p, size_t n)
{
    if (s->failed)
        return -1;
    if (s->trailer) {
        if (n)
            return fail(s, "bytes after the end-of-stream trailer");
        return 1;
    }
    if (s->over_budget)
        return 1;
    while (n) {
        if (s->head_have < 5) {
            size_t t = 5 - s->head_have < n ? 5 - s->head_have : n;
            memcpy(s->head + s->head_have, p, t);
            s->head_have += t, p += t, n -= t;
            if (s->head_have < 5)
                return 0;
            s->frame_flags = s->head[0];
            s->frame_len = (uint32_t)s->head[1] << 24 | (uint32_t)s->head[2] << 16 | (uint32_t)s->head[3] << 8 |
                           (uint32_t)s->head[4];
            if (s->frame_flags & ~0x02u)
                return fail(s, "a compressed or unknown stream frame");
            if (s->frame_len > E2B_FRAME_MAX)
                return fail(s, "a stream frame over 8 MiB");
            if (!s->sink && s->total + 5 + s->frame_len > E2B_STREAM_MAX) {
                /* (spec) the transfer budget: stop reading; the run's exit becomes 153 */
                s->over_budget = true;
                s->out_truncated = s->err_truncated = true;
                return 1;
            }
            s->total += 5 + (uint64_t)s->frame_len;
            s->frame_have = 0;
            s->frame = malloc(s->frame_len ? s->frame_len : 1);
            if (!s->frame)
                return fail(s, "out of memory");
        }
        size_t t = s->frame_len - s->frame_have < n ? s->frame_len - s->frame_have : n;
        memcpy(s->frame + s->frame_have, p, t);
        s->frame_have += (uint32_t)t, p += t, n -= t;
        if (s->frame_have < s->frame_len)
            return 0;
        s->head_have = 0;
        int r = on_frame(s);
        if (r < 0)
            return -1;
        if (r == 1)
            return n ? fail(s, "bytes after the end-of-stream trailer") : 1;
    }
    return 0;
}

int e2b_stream_finish(struct e2b_stream *s)
{
    if (s->failed)
        return -1;
    if (!s->over_budget && s->head_have)
        return fail(s, "the stream ended inside a frame");
    return 0;
}
