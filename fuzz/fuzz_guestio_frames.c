/* fuzz_guestio_frames.c: the canonical frame decoders of the guestio split (src/guestio/
 * frame.c) over bytes a confined helper that a guest may have taken over wrote to the daemon
 * (and, the other way, the daemon's REPLY frames the helper decodes), the guard's GCALL frames
 * included. The input is a stream of
 * frames; each header is decoded, its payload taken only when the header passed, and whatever
 * a decoder accepts is checked against the invariants the daemon relies on and re-encoded,
 * which must give back exactly the same bytes. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "../src/guestio/frame.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_call(const uint8_t *p, size_t len)
{
    struct gio_call c;
    if (gio_call_decode(p, len, &c) < 0)
        return;
    if (c.method_len < 1 || c.method_len > GIO_METHOD_MAX || c.target_len < 1 || c.target_len > GIO_TARGET_MAX ||
        c.body_len > GIO_BODY_MAX || GIO_CALL_FIXED + c.method_len + c.target_len + c.body_len != len)
        abort();
    for (size_t i = 0; i < c.method_len; i++)
        if (!gio_tchar(c.method[i]))
            abort();
    for (size_t i = 0; i < c.target_len; i++)
        if (!gio_target_byte(c.target[i])) /* never a NUL, CR, LF or space the daemon would see */
            abort();
    if (c.method < p || c.body + c.body_len != p + len)
        abort();
    uint8_t *re = malloc(len ? len : 1);
    if (!re)
        return;
    if (gio_call_encode(re, len, &c) != len || memcmp(re, p, len) != 0)
        abort();
    free(re);
}

static void check_reply(const uint8_t *p, size_t len)
{
    struct gio_reply r;
    if (gio_reply_decode(p, len, &r) < 0)
        return;
    if (r.status < 200 || r.status > 599 || r.ctype_len > GIO_CTYPE_MAX || r.body_len > GIO_REPLY_MAX ||
        GIO_REPLY_FIXED + r.ctype_len + r.body_len != len)
        abort();
    for (size_t i = 0; i < r.ctype_len; i++)
        if (r.ctype[i] < 0x20 || r.ctype[i] > 0x7e)
            abort();
    uint8_t *re = malloc(len ? len : 1);
    if (!re)
        return;
    if (gio_reply_encode(re, len, &r) != len || memcmp(re, p, len) != 0)
        abort();
    free(re);
}

static void check_gcall(const uint8_t *p, size_t len)
{
    struct gio_gcall g;
    if (gio_gcall_decode(p, len, &g) < 0)
        return;
    if (g.cred_len < 1 || g.cred_len > GIO_CRED_MAX || gio_gcall_size(&g) != len)
        abort();
    for (size_t i = 0; i < g.cred_len; i++)
        if (g.cred[i] < 0x21 || g.cred[i] > 0x7e)
            abort();
    if (g.verdict == GIO_V_CALL &&
        (g.method < 0 || g.method >= GIO_GM_COUNT || g.path_len < 1 || g.path_len > GIO_GPATH_MAX ||
         memchr(g.path, 0, g.path_len) || g.body_len > GIO_GBODY_MAX || g.body + g.body_len != p + len))
        abort();
    if (g.verdict == GIO_V_BAD && (g.why_len < 1 || g.why_len > GIO_WHY_MAX || memchr(g.why, '"', g.why_len)))
        abort();
    uint8_t *re = malloc(len ? len : 1);
    if (!re)
        return;
    if (gio_gcall_encode(re, len, &g) != len || memcmp(re, p, len) != 0)
        abort();
    free(re);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    /* The first byte picks the direction; the rest is the stream. */
    if (size < 1)
        return 0;
    enum gio_dir dir = data[0] & 1 ? GIO_TO_HELPER : GIO_TO_DAEMON;
    data++, size--;
    while (size >= F16_HDR_LEN) {
        struct f16_hdr h;
        if (gio_hdr_decode(data, dir, &h) < 0)
            return 0; /* the daemon kills the helper here */
        if (h.len > gio_max_len(dir, h.type) || h.flags)
            abort();
        data += F16_HDR_LEN, size -= F16_HDR_LEN;
        if (h.len > size)
            return 0; /* a truncated stream: the reader waits for more */
        /* a copy of exactly the payload, so ASan catches any read past it */
        uint8_t *p = malloc(h.len ? h.len : 1);
        if (!p)
            return 0;
        memcpy(p, data, h.len);
        uint32_t v;
        switch (h.type) {
        case GIO_T_CALL: check_call(p, h.len); break;
        case GIO_T_REPLY: check_reply(p, h.len); break;
        case GIO_T_GCALL: check_gcall(p, h.len); break;
        case GIO_T_GUEST: break; /* opaque here: the stream's own decoder (chan_fuzz.c) */
        case GIO_T_END:
            if (h.len != 1)
                abort();
            break;
        case GIO_T_HELLO:
            if (gio_hello_decode(p, h.len, &v) == 0 && v != GIO_VERSION)
                abort();
            break;
        default:
            if (h.len != 0) /* DONE and CONN are empty */
                abort();
        }
        free(p);
        data += h.len, size -= h.len;
    }
    return 0;
}
