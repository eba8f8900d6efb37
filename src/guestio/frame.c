/* frame.c: the canonical frame codec of the guestio split (frame.h).
 * Owns: nothing; pure functions over caller buffers.
 * Trusts: nothing. The daemon decodes what a helper that may be running an attacker's code
 *   wrote, and the helper decodes the daemon's frames with the same rules.
 * Invariant: every length is checked against its cap and against the bytes that remain before
 *   it is used, lengths never wrap (sizes here are at most a few MiB, far below SIZE_MAX, and
 *   every sum is over values already capped), and a decoder accepts a payload only when it
 *   consumed every byte of it. */
#include "frame.h"

#include <string.h>

#include "../core/frame16.h"
#include "../core/validate.h"

bool gio_tchar(uint8_t c)
{
    if ((c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'))
        return true;
    return c && strchr("!#$%&'*+-.^_`|~", c) != NULL;
}

/* Bounds per type and direction: a type from the other direction is not in the reader's table.
 * HELLO and END are exactly their size. */
static const struct f16_type to_daemon[] = {
    {GIO_T_HELLO, 4, 4},
    {GIO_T_CALL, 0, GIO_CALL_FIXED + GIO_METHOD_MAX + GIO_TARGET_MAX + GIO_BODY_MAX},
    {GIO_T_DONE, 0, 0},
    {GIO_T_GCALL, 0, GIO_GCALL_FIXED + GIO_CRED_MAX + GIO_GPATH_MAX + GIO_GBODY_MAX},
    {GIO_T_GUEST, 0, GIO_GUEST_MAX},
    {GIO_T_END, 1, 1},
};
static const struct f16_type to_helper[] = {
    {GIO_T_CONN, 0, 0},
    {GIO_T_REPLY, 0, GIO_REPLY_FIXED + GIO_CTYPE_MAX + GIO_REPLY_MAX},
};
#define TABLE(dir) ((dir) == GIO_TO_DAEMON ? to_daemon : to_helper)
#define ROWS(dir) ((dir) == GIO_TO_DAEMON ? sizeof to_daemon / sizeof to_daemon[0] : sizeof to_helper / sizeof to_helper[0])

uint32_t gio_max_len(enum gio_dir dir, uint16_t type)
{
    return f16_max_len(TABLE(dir), ROWS(dir), type);
}

int gio_hdr_decode(const uint8_t in[F16_HDR_LEN], enum gio_dir dir, struct f16_hdr *h)
{
    if (f16_hdr_decode(in, TABLE(dir), ROWS(dir), h) < 0)
        return -1;
    /* HELLO belongs to no connection; everything else names one, and 0 is never assigned. */
    if ((h->type == GIO_T_HELLO) != (h->seq == 0))
        return -1;
    return 0;
}

/* ---- CALL ------------------------------------------------------------------------------------- */

size_t gio_call_size(size_t method_len, size_t target_len, size_t body_len)
{
    if (method_len < 1 || method_len > GIO_METHOD_MAX || target_len < 1 || target_len > GIO_TARGET_MAX ||
        body_len > GIO_BODY_MAX)
        return 0;
    return GIO_CALL_FIXED + method_len + target_len + body_len; /* each capped: no overflow */
}

static bool method_ok(const uint8_t *m, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (!gio_tchar(m[i]))
            return false;
    return true;
}

static bool target_ok(const uint8_t *t, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (!gio_target_byte(t[i]))
            return false;
    return true;
}

int gio_call_decode(const uint8_t *p, size_t len, struct gio_call *c)
{
    memset(c, 0, sizeof *c);
    size_t off = 0;
    if (len < GIO_CALL_FIXED)
        return -1;
    size_t ml = p[off++];
    if (ml < 1 || ml > GIO_METHOD_MAX || len - off < ml)
        return -1;
    c->method = p + off;
    c->method_len = ml;
    off += ml;
    if (len - off < 2)
        return -1;
    size_t tl = f16_be16(p + off);
    off += 2;
    if (tl < 1 || tl > GIO_TARGET_MAX || len - off < tl)
        return -1;
    c->target = p + off;
    c->target_len = tl;
    off += tl;
    if (len - off < 4)
        return -1;
    uint32_t bl = f16_be32(p + off);
    off += 4;
    if (bl > GIO_BODY_MAX || len - off != bl)
        return -1; /* exactly the declared body, nothing after it */
    c->body = p + off;
    c->body_len = bl;
    if (!method_ok(c->method, ml) || !target_ok(c->target, tl))
        return -1;
    return 0;
}

size_t gio_call_encode(uint8_t *out, size_t cap, const struct gio_call *c)
{
    size_t n = gio_call_size(c->method_len, c->target_len, c->body_len);
    if (!n || n > cap || !method_ok(c->method, c->method_len) || !target_ok(c->target, c->target_len))
        return 0;
    size_t off = 0;
    out[off++] = (uint8_t)c->method_len;
    memcpy(out + off, c->method, c->method_len);
    off += c->method_len;
    f16_put_u16(out + off, (uint16_t)c->target_len);
    off += 2;
    memcpy(out + off, c->target, c->target_len);
    off += c->target_len;
    f16_put_u32(out + off, (uint32_t)c->body_len);
    off += 4;
    if (c->body_len)
        memcpy(out + off, c->body, c->body_len);
    return n;
}

/* ---- REPLY ------------------------------------------------------------------------------------ */

size_t gio_reply_size(size_t ctype_len, size_t body_len)
{
    if (ctype_len > GIO_CTYPE_MAX || body_len > GIO_REPLY_MAX)
        return 0;
    return GIO_REPLY_FIXED + ctype_len + body_len;
}

static bool ctype_ok(const uint8_t *t, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (t[i] < 0x20 || t[i] > 0x7e)
            return false;
    return true;
}

int gio_reply_decode(const uint8_t *p, size_t len, struct gio_reply *r)
{
    memset(r, 0, sizeof *r);
    if (len < GIO_REPLY_FIXED)
        return -1;
    size_t off = 0;
    r->status = f16_be16(p);
    off += 2;
    size_t cl = p[off++];
    if (r->status < 200 || r->status > 599 || cl > GIO_CTYPE_MAX || len - off < cl)
        return -1;
    r->ctype = p + off;
    r->ctype_len = cl;
    off += cl;
    if (len - off < 4)
        return -1;
    uint32_t bl = f16_be32(p + off);
    off += 4;
    if (bl > GIO_REPLY_MAX || len - off != bl)
        return -1;
    r->body = p + off;
    r->body_len = bl;
    return ctype_ok(r->ctype, cl) ? 0 : -1;
}

size_t gio_reply_encode(uint8_t *out, size_t cap, const struct gio_reply *r)
{
    size_t n = gio_reply_size(r->ctype_len, r->body_len);
    if (!n || n > cap || r->status < 200 || r->status > 599 || !ctype_ok(r->ctype, r->ctype_len))
        return 0;
    size_t off = 0;
    f16_put_u16(out, (uint16_t)r->status);
    off += 2;
    out[off++] = (uint8_t)r->ctype_len;
    if (r->ctype_len)
        memcpy(out + off, r->ctype, r->ctype_len);
    off += r->ctype_len;
    f16_put_u32(out + off, (uint32_t)r->body_len);
    off += 4;
    if (r->body_len)
        memcpy(out + off, r->body, r->body_len);
    return n;
}

/* ---- HELLO ------------------------------------------------------------------------------------ */

int gio_hello_decode(const uint8_t *p, size_t len, uint32_t *version)
{
    if (len != 4)
        return -1;
    *version = f16_be32(p);
    return *version == GIO_VERSION ? 0 : -1;
}

void gio_hello_encode(uint8_t out[4], uint32_t version)
{
    f16_put_u32(out, version);
}

/* ---- GCALL ------------------------------------------------------------------------------------ */

const char *const gio_gmethod_name[GIO_GM_COUNT] = {"GET", "PUT", "POST", "DELETE", "PATCH"};

static bool cred_ok(const uint8_t *c, size_t n)
{
    if (n < 1 || n > GIO_CRED_MAX)
        return false;
    for (size_t i = 0; i < n; i++)
        if (c[i] < 0x21 || c[i] > 0x7e)
            return false;
    return true;
}

/* A reason the daemon can put inside a JSON string as it is. */
static bool why_ok(const uint8_t *w, size_t n)
{
    if (n < 1 || n > GIO_WHY_MAX)
        return false;
    for (size_t i = 0; i < n; i++)
        if (w[i] < 0x20 || w[i] > 0x7e || w[i] == '"' || w[i] == '\\')
            return false;
    return true;
}

static bool gpath_ok(const uint8_t *p, size_t n)
{
    return n >= 1 && n <= GIO_GPATH_MAX && !memchr(p, 0, n) && plm_utf8_ok((const char *)p, n);
}

static bool gbody_ok(const uint8_t *b, size_t n)
{
    return n <= GIO_GBODY_MAX && plm_utf8_ok((const char *)b, n);
}

size_t gio_gcall_size(const struct gio_gcall *g)
{
    if (!cred_ok(g->cred, g->cred_len))
        return 0;
    size_t n = 2 + g->cred_len;
    switch (g->verdict) {
    case GIO_V_CALL:
        if (g->method < 0 || g->method >= GIO_GM_COUNT || g->path_len < 1 || g->path_len > GIO_GPATH_MAX ||
            g->body_len > GIO_GBODY_MAX)
            return 0;
        return n + 1 + 2 + g->path_len + 4 + g->body_len; /* each capped: no overflow */
    case GIO_V_BAD: return g->why_len >= 1 && g->why_len <= GIO_WHY_MAX ? n + 1 + g->why_len : 0;
    case GIO_V_TOO_LARGE: return n;
    }
    return 0;
}

int gio_gcall_decode(const uint8_t *p, size_t len, struct gio_gcall *g)
{
    memset(g, 0, sizeof *g);
    size_t off = 0;
    if (len < 2)
        return -1;
    g->cred_len = p[off++];
    if (len - off < g->cred_len + 1 || !cred_ok(p + off, g->cred_len))
        return -1;
    g->cred = p + off;
    off += g->cred_len;
    g->verdict = p[off++];
    switch (g->verdict) {
    case GIO_V_CALL:
        if (len - off < 3)
            return -1;
        g->method = p[off++];
        g->path_len = f16_be16(p + off);
        off += 2;
        if (g->method >= GIO_GM_COUNT || g->path_len < 1 || g->path_len > GIO_GPATH_MAX || len - off < g->path_len)
            return -1;
        g->path = p + off;
        off += g->path_len;
        if (len - off < 4)
            return -1;
        g->body_len = f16_be32(p + off);
        off += 4;
        if (g->body_len > GIO_GBODY_MAX || len - off != g->body_len)
            return -1;
        g->body = p + off;
        return gpath_ok(g->path, g->path_len) && gbody_ok(g->body, g->body_len) ? 0 : -1;
    case GIO_V_BAD:
        if (len - off < 1)
            return -1;
        g->why_len = p[off++];
        if (len - off != g->why_len || !why_ok(p + off, g->why_len))
            return -1;
        g->why = p + off;
        return 0;
    case GIO_V_TOO_LARGE: return len == off ? 0 : -1;
    }
    return -1;
}

size_t gio_gcall_encode(uint8_t *out, size_t cap, const struct gio_gcall *g)
{
    size_t n = gio_gcall_size(g);
    if (!n || n > cap)
        return 0;
    if (g->verdict == GIO_V_CALL && (!gpath_ok(g->path, g->path_len) || !gbody_ok(g->body, g->body_len)))
        return 0;
    if (g->verdict == GIO_V_BAD && !why_ok(g->why, g->why_len))
        return 0;
    size_t off = 0;
    out[off++] = (uint8_t)g->cred_len;
    memcpy(out + off, g->cred, g->cred_len);
    off += g->cred_len;
    out[off++] = (uint8_t)g->verdict;
    if (g->verdict == GIO_V_CALL) {
        out[off++] = (uint8_t)g->method;
        f16_put_u16(out + off, (uint16_t)g->path_len);
        off += 2;
        memcpy(out + off, g->path, g->path_len);
        off += g->path_len;
        f16_put_u32(out + off, (uint32_t)g->body_len);
        off += 4;
        if (g->body_len)
            memcpy(out + off, g->body, g->body_len);
    } else if (g->verdict == GIO_V_BAD) {
        out[off++] = (uint8_t)g->why_len;
        memcpy(out + off, g->why, g->why_len);
    }
    return n;
}
