/* frames.c: parsers over bytes that come from dockerd or from inside a container: the attach
 * stream's framing, a snippet's end line, the runner's report frames and body.
 * Trusts: nothing. Every header field is checked before use, every length is compared with what
 * remains before it is subtracted, nothing is allocated from a length that was not capped first.
 * Invariant: a report is believed only when its header is canonical, its body is complete and
 * its MAC verifies under the per-run key (compared in constant time); a decoder consumes exactly
 * the bytes it was given or fails as a whole. */
#include "frames.h"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <stdlib.h>
#include <string.h>

#include "../../core/validate.h"

void dock_bytes_add(struct dock_bytes *b, const uint8_t *p, size_t n)
{
    if (n == 0)
        return;
    if (b->len >= b->max || b->oom) {
        if (n)
            b->truncated = true;
        return;
    }
    size_t take = n < b->max - b->len ? n : b->max - b->len;
    if (take < n)
        b->truncated = true;
    if (take == 0)
        return;
    if (b->len + take > b->cap) {
        size_t cap = b->cap ? b->cap : 4096;
        while (cap < b->len + take)
            cap = cap > b->max / 2 ? b->max : cap * 2;
        uint8_t *q = realloc(b->data, cap);
        if (!q) {
            b->oom = true;
            b->truncated = true;
            return;
        }
        b->data = q;
        b->cap = cap;
    }
    memcpy(b->data + b->len, p, take);
    b->len += take;
}

void dock_bytes_done(struct dock_bytes *b)
{
    free(b->data);
    b->data = NULL;
    b->len = b->cap = 0;
}

void dock_bytes_take(struct dock_bytes *b, struct plm_bytes *out)
{
    out->data = b->data;
    out->len = b->len;
    b->data = NULL;
    b->len = b->cap = 0;
}

int dock_mux_feed(struct dock_mux *m, const uint8_t *p, size_t n, dock_sink_fn sink, void *ctx)
{
    while (n && !m->bad) {
        if (m->left == 0 && m->have < 8) {
            size_t take = 8 - (size_t)m->have < n ? 8 - (size_t)m->have : n;
            memcpy(m->hdr + m->have, p, take);
            m->have = (uint8_t)(m->have + take);
            p += take, n -= take;
            if (m->have < 8)
                break;
            /* Fail closed on anything but stdout/stderr and zero reserved bytes. */
            if (m->hdr[0] > 2 || m->hdr[1] || m->hdr[2] || m->hdr[3]) {
                m->bad = true;
                break;
            }
            m->stream = m->hdr[0] == 2 ? DOCK_STDERR : DOCK_STDOUT;
            m->left = (uint32_t)m->hdr[4] << 24 | (uint32_t)m->hdr[5] << 16 | (uint32_t)m->hdr[6] << 8 | m->hdr[7];
            m->have = 0;
            continue; /* a zero-length frame is legal and carries nothing */
        }
        size_t take = m->left < n ? m->left : n;
        if (sink && take)
            sink(ctx, m->stream, p, take);
        m->left -= (uint32_t)take;
        p += take, n -= take;
    }
    return m->bad ? -1 : 0;
}

bool dock_mux_idle(const struct dock_mux *m)
{
    return !m->bad && m->have == 0 && m->left == 0;
}

/* ":<status>\n" after the end marker: status 0..255 as dash prints it. */
static bool parse_status(const uint8_t *p, size_t n, int64_t *status)
{
    if (n < 3 || p[0] != ':' || p[n - 1] != '\n' || n > 6)
        return false;
    int64_t v = 0;
    for (size_t i = 1; i + 1 < n; i++) {
        if (p[i] < '0' || p[i] > '9')
            return false;
        v = v * 10 + (p[i] - '0');
    }
    *status = v;
    return v <= 255;
}

void dock_endline_feed(struct dock_endline *st, const char *end, const uint8_t *p, size_t n)
{
    if (st->ended || !n)
        return;
    size_t tot = st->hold_len + n;
    uint8_t *w = malloc(tot);
    if (!w) {
        st->keep.oom = st->keep.truncated = true;
        return;
    }
    memcpy(w, st->hold, st->hold_len);
    memcpy(w + st->hold_len, p, n);
    const uint8_t *hit = memmem(w, tot, end, DOCK_END_LEN);
    if (hit) {
        size_t pre = (size_t)(hit - w), rest = tot - pre;
        dock_bytes_add(&st->keep, w, pre);
        const uint8_t *nl = memchr(hit + DOCK_END_LEN, '\n', rest - DOCK_END_LEN);
        if (nl) {
            st->ended = true;
            st->status_ok = parse_status(hit + DOCK_END_LEN, (size_t)(nl - hit) + 1 - DOCK_END_LEN, &st->status);
            st->hold_len = 0;
        } else if (rest <= sizeof st->hold) {
            memmove(st->hold, hit, rest); /* the status has not fully arrived */
            st->hold_len = rest;
        } else {
            st->ended = true; /* a marker followed by garbage: the guest forged it */
            st->hold_len = 0;
        }
    } else {
        size_t held = tot < DOCK_END_LEN - 1 ? tot : DOCK_END_LEN - 1;
        dock_bytes_add(&st->keep, w, tot - held);
        memcpy(st->hold, w + tot - held, held);
        st->hold_len = held;
    }
    free(w);
}

void dock_endline_flush(struct dock_endline *st)
{
    if (!st->ended)
        dock_bytes_add(&st->keep, st->hold, st->hold_len);
    st->hold_len = 0;
}

static int hexval(uint8_t c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    return -1; /* upper case is not canonical */
}

/* Parses the header that starts at h (just after the leading '\n'): "<tag> <len> <64 hex>\n".
 * Returns the header length including its '\n', or 0 when malformed. */
static size_t parse_header(const uint8_t *h, size_t avail, size_t *body_len, uint8_t mac[32])
{
    static const char tag[] = RW_FRAME_TAG " ";
    const size_t tl = sizeof tag - 1;
    size_t lim = avail < RW_FRAME_HEADER_MAX ? avail : RW_FRAME_HEADER_MAX;
    if (lim < tl || memcmp(h, tag, tl) != 0)
        return 0;
    size_t i = tl, digits = 0;
    uint64_t v = 0;
    while (i < lim && h[i] >= '0' && h[i] <= '9' && digits < 9) {
        v = v * 10 + (uint64_t)(h[i] - '0');
        i++, digits++;
    }
    /* canonical decimal: 1..8 digits, no leading zero unless the value is 0 */
    if (digits == 0 || digits > 8 || (digits > 1 && h[tl] == '0') || v > RW_REPORT_BODY_MAX)
        return 0;
    if (i >= lim || h[i] != ' ')
        return 0;
    i++;
    if (lim - i < 65)
        return 0;
    for (size_t k = 0; k < 32; k++) {
        int hi = hexval(h[i + 2 * k]), lo = hexval(h[i + 2 * k + 1]);
        if (hi < 0 || lo < 0)
            return 0;
        mac[k] = (uint8_t)(hi << 4 | lo);
    }
    i += 64;
    if (h[i] != '\n')
        return 0;
    *body_len = (size_t)v;
    return i + 1;
}

enum dock_report_status dock_report_find(const uint8_t *out, size_t len, const uint8_t key[RW_KEY_LEN],
                                         const uint8_t **body, size_t *body_len)
{
    static const char needle[] = "\n" RW_FRAME_TAG;
    const size_t nl = sizeof needle - 1;
    enum dock_report_status st = DOCK_REPORT_NONE;
    size_t off = 0;
    while (off < len && len - off >= nl) {
        const uint8_t *hit = memmem(out + off, len - off, needle, nl);
        if (!hit)
            break;
        st = DOCK_REPORT_FORGED;
        size_t h = (size_t)(hit - out) + 1, blen = 0;
        uint8_t want[32], got[32];
        size_t hl = parse_header(out + h, len - h, &blen, want);
        off = h; /* the next search starts inside this tag, so overlapping frames are seen */
        if (!hl || blen > len - h - hl)
            continue; /* malformed header or incomplete body */
        unsigned int mlen = 0;
        if (!HMAC(EVP_sha256(), key, RW_KEY_LEN, out + h + hl, blen, got, &mlen) || mlen != 32)
            continue;
        if (CRYPTO_memcmp(want, got, 32) == 0) {
            *body = out + h + hl;
            *body_len = blen;
            return DOCK_REPORT_OK;
        }
    }
    return st;
}

bool dock_report_complete(const uint8_t *out, size_t len, size_t *scan)
{
    static const char needle[] = "\n" RW_FRAME_TAG;
    const size_t nl = sizeof needle - 1;
    while (*scan < len && len - *scan >= nl) {
        const uint8_t *hit = memmem(out + *scan, len - *scan, needle, nl);
        if (!hit) {
            *scan = len - (nl - 1); /* a tag may straddle what arrives next */
            return false;
        }
        size_t h = (size_t)(hit - out) + 1, blen = 0;
        uint8_t mac[32];
        size_t hl = parse_header(out + h, len - h, &blen, mac);
        *scan = h - 1;
        if (hl)
            return blen <= len - h - hl;
        if (len - h < RW_FRAME_HEADER_MAX && !memchr(out + h, '\n', len - h))
            return false; /* the header is still arriving */
        *scan = h;        /* malformed: look further */
    }
    return false;
}

size_t dock_report_header(char out[RW_FRAME_HEADER_MAX + 2], size_t body_len, const uint8_t mac[32])
{
    static const char hex[] = "0123456789abcdef";
    int n = snprintf(out, RW_FRAME_HEADER_MAX + 2, "\n%s %zu ", RW_FRAME_TAG, body_len);
    if (n < 0 || (size_t)n + 65 > RW_FRAME_HEADER_MAX + 1)
        return 0;
    for (size_t i = 0; i < 32; i++) {
        out[n++] = hex[mac[i] >> 4];
        out[n++] = hex[mac[i] & 15];
    }
    out[n++] = '\n';
    return (size_t)n;
}

static char *dup_text(const uint8_t *p, size_t n)
{
    if (memchr(p, 0, n) || !plm_utf8_ok((const char *)p, n))
        return NULL;
    char *s = malloc(n + 1);
    if (s) {
        memcpy(s, p, n);
        s[n] = 0;
    }
    return s;
}

static int dup_bytes(const uint8_t *p, size_t n, struct plm_bytes *out)
{
    out->data = malloc(n ? n : 1);
    if (!out->data)
        return -1;
    memcpy(out->data, p, n);
    out->len = n;
    return 0;
}

void dock_project_result_done(struct plm_project_result *pr)
{
    for (size_t i = 0; i < pr->n_steps; i++) {
        free(pr->steps[i].command);
        plm_bytes_done(&pr->steps[i].out);
        plm_bytes_done(&pr->steps[i].err);
    }
    free(pr->steps);
    for (size_t i = 0; i < pr->n_artifacts; i++) {
        free(pr->artifacts[i].path);
        plm_bytes_done(&pr->artifacts[i].content);
    }
    free(pr->artifacts);
    free(pr->detail);
    memset(pr, 0, sizeof *pr);
}

static int decode_steps(struct rw_reader *r, const char *const *steps, size_t n_steps, struct plm_project_result *pr)
{
    uint32_t n = rw_u32(r);
    if (r->bad || n > n_steps || n > RW_STEPS_MAX)
        return -1;
    pr->steps = calloc(n ? n : 1, sizeof *pr->steps);
    if (!pr->steps)
        return -1;
    for (uint32_t i = 0; i < n; i++) {
        struct plm_step_result *s = &pr->steps[i];
        pr->n_steps = i + 1;
        uint32_t cl, ol, el;
        const uint8_t *cmd = rw_field(r, RW_COMMAND_MAX, &cl);
        if (!cmd || strlen(steps[i]) != cl || memcmp(cmd, steps[i], cl) != 0)
            return -1; /* the report must describe the steps we sent, in order */
        const uint8_t *o = rw_field(r, RW_STEP_STREAM_MAX, &ol);
        const uint8_t *e = rw_field(r, RW_STEP_STREAM_MAX, &el);
        int32_t code = (int32_t)rw_u32(r);
        uint8_t flags = rw_u8(r);
        uint64_t dur = rw_u64(r);
        if (r->bad || (flags & ~RW_F_ALL) || dur > INT64_MAX)
            return -1;
        s->command = dup_text(cmd, cl);
        if (!s->command || dup_bytes(o, ol, &s->out) < 0 || dup_bytes(e, el, &s->err) < 0)
            return -1;
        s->exit_code = code;
        s->timed_out = flags & RW_F_TIMED_OUT;
        s->out_truncated = flags & RW_F_OUT_TRUNC;
        s->err_truncated = flags & RW_F_ERR_TRUNC;
        s->duration_ms = (int64_t)dur;
    }
    return 0;
}

static int decode_artifacts(struct rw_reader *r, const char *const *artifacts, size_t n_artifacts,
                            struct plm_project_result *pr)
{
    uint8_t t = rw_u8(r);
    uint32_t n = rw_u32(r);
    if (r->bad || t > 1 || n > n_artifacts || n > RW_ARTIFACTS_MAX)
        return -1;
    pr->artifacts_truncated = t;
    pr->artifacts = calloc(n ? n : 1, sizeof *pr->artifacts);
    if (!pr->artifacts)
        return -1;
    bool seen[RW_ARTIFACTS_MAX] = {0};
    size_t total = 0;
    for (uint32_t i = 0; i < n; i++) {
        uint32_t pl, cl;
        const uint8_t *path = rw_field(r, RW_PATH_MAX, &pl);
        const uint8_t *content = rw_field(r, RW_ARTIFACT_TOTAL_MAX, &cl);
        if (r->bad || cl > RW_ARTIFACT_TOTAL_MAX - total)
            return -1;
        total += cl;
        size_t which = n_artifacts;
        for (size_t k = 0; k < n_artifacts && which == n_artifacts; k++)
            if (strlen(artifacts[k]) == pl && memcmp(artifacts[k], path, pl) == 0)
                which = k;
        if (which == n_artifacts || seen[which])
            return -1; /* only paths we asked for, each once */
        seen[which] = true;
        struct plm_artifact *a = &pr->artifacts[i];
        pr->n_artifacts = i + 1;
        a->path = dup_text(path, pl);
        if (!a->path || dup_bytes(content, cl, &a->content) < 0)
            return -1;
    }
    return 0;
}

/* The body's fields into pr and *error; on -1 they may hold a part, which the caller releases. */
static int report_fields(const uint8_t *body, size_t len, const char *const *steps, size_t n_steps,
                         const char *const *artifacts, size_t n_artifacts, struct plm_project_result *pr, char **error)
{
    struct rw_reader r;
    rw_reader_init(&r, body, len);
    uint32_t el;
    const uint8_t *etext = NULL;
    if (!rw_magic(&r, RW_REPORT_MAGIC) || !(etext = rw_field(&r, RW_ERROR_MAX, &el)))
        return -1;
    if (decode_steps(&r, steps, n_steps, pr) < 0 || decode_artifacts(&r, artifacts, n_artifacts, pr) < 0 ||
        !rw_done(&r))
        return -1;
    /* An error report carries neither steps nor artifacts. */
    if (el && (pr->n_steps || pr->n_artifacts || pr->artifacts_truncated || !(*error = dup_text(etext, el))))
        return -1;
    return 0;
}

int dock_report_decode(const uint8_t *body, size_t len, const char *const *steps, size_t n_steps,
                       const char *const *artifacts, size_t n_artifacts, struct plm_project_result *pr, char **error)
{
    memset(pr, 0, sizeof *pr);
    *error = NULL;
    if (report_fields(body, len, steps, n_steps, artifacts, n_artifacts, pr, error) == 0)
        return 0;
    free(*error);
    *error = NULL;
    dock_project_result_done(pr);
    return -1;
}
