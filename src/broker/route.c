/* route.c: route patterns, the raw-target rule and the route match (providers.md §5.1, §5.3.6).
 * Trusts: nothing; patterns come from the operator's file, targets from guest code.
 * Invariant: a target is accepted only if it is made of the canonical alphabet (route.h) and has
 * no empty, all-dots or ';' segment, so the bytes the route was checked against are exactly the
 * bytes the upstream receives: there is no decoding step between the check and the wire. */
#include "route.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "text.h"

static const char *const method_names[BRK_M_N] = {
    [BRK_M_GET] = "GET", [BRK_M_PUT] = "PUT", [BRK_M_POST] = "POST", [BRK_M_DELETE] = "DELETE", [BRK_M_PATCH] = "PATCH",
};

const char *brk_method_name(enum brk_method m)
{
    return (unsigned)m < BRK_M_N ? method_names[m] : "?";
}

int brk_method_parse(const char *s, size_t len, enum brk_method *out)
{
    if (!s)
        return -1;
    for (int m = 0; m < BRK_M_N; m++) {
        if (strlen(method_names[m]) == len && strncasecmp(s, method_names[m], len) == 0) {
            *out = (enum brk_method)m;
            return 0;
        }
    }
    return -1;
}

enum path_mode { MODE_PATTERN, MODE_CONCRETE, MODE_TARGET };

/* The bytes an HTTP stack sends unchanged in a path (RFC 3986 unreserved plus the sub-delims Go
 * leaves alone), with ';' kept so that its segment rule can name it. */
static bool canonical_byte(unsigned char c)
{
    if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9'))
        return true;
    return c != '\0' && strchr("-._~$&+,:=@/;", c) != NULL;
}

/* Returns NULL when p is acceptable in this mode, else the reason. Counts segments. */
static const char *path_problem(const char *p, size_t len, enum path_mode mode, size_t *segments)
{
    size_t max = mode == MODE_TARGET ? BRK_TARGET_MAX : BRK_ROUTE_PATH_MAX;
    if (!p || len == 0)
        return "is empty";
    if (len > max)
        return mode == MODE_TARGET ? "is too long" : "is longer than 1024 bytes";
    if (p[0] != '/')
        return "must start with \"/\"";
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)p[i];
        if (c == '\\')
            return "must not contain a backslash";
        if (c == '?')
            return "must not contain a query (\"?\")";
        if (c == '#')
            return "must not contain a fragment (\"#\")";
        if (c == '%')
            return "must not contain percent-encoding (\"%\")";
        if (c < 0x20 || c == 0x7f)
            return "must not contain a control character";
        if (c >= 0x80)
            return "must be ASCII (non-ASCII needs percent-encoding)";
        if (c == '*' && mode == MODE_CONCRETE)
            return "must be concrete (no \"*\")";
        if (c == '*' && mode == MODE_PATTERN)
            continue; /* checked per segment below */
        if (!canonical_byte(c))
            return "contains a character that would be percent-encoded";
    }
    size_t n = 0;
    if (len == 1) { /* the root "/" is canonical: one empty segment */
        if (segments)
            *segments = 1;
        return NULL;
    }
    size_t i = 1;
    for (;;) {
        size_t e = i;
        while (e < len && p[e] != '/')
            e++;
        size_t sl = e - i;
        if (sl == 0)
            return "must not contain \"//\" or end with \"/\"";
        size_t dots = 0;
        bool semi = false, star = false;
        for (size_t k = i; k < e; k++) {
            dots += p[k] == '.';
            semi |= p[k] == ';';
            star |= p[k] == '*';
        }
        if (dots == sl)
            return "must not contain a \".\", \"..\" or other all-dots segment";
        if (semi)
            return "must not have a segment containing \";\"";
        if (star && sl != 1)
            return "a \"*\" must fill a whole segment";
        n++;
        if (e >= len)
            break;
        i = e + 1;
    }
    if (segments)
        *segments = n;
    return NULL;
}

int brk_pattern_check(const char *path, size_t len, bool allow_wildcard, struct plm_err *err)
{
    const char *why = path_problem(path, len, allow_wildcard ? MODE_PATTERN : MODE_CONCRETE, NULL);
    if (why)
        return plm_fail(err, 0, PLM_E_INVALID, "path %s", why);
    return 0;
}

int brk_route_parse(const char *spec, size_t len, bool allow_wildcard, struct brk_route *out, struct plm_err *err)
{
    *out = (struct brk_route){0};
    const char *sp = spec ? memchr(spec, ' ', len) : NULL;
    if (!sp)
        return plm_fail(err, 0, PLM_E_INVALID, "must be \"METHOD /path\" (one space between)");
    size_t mlen = (size_t)(sp - spec);
    enum brk_method m;
    if (brk_method_parse(spec, mlen, &m) < 0) {
        char q[64];
        return plm_fail(err, 0, PLM_E_INVALID, "method \"%s\" must be one of GET, PUT, POST, DELETE or PATCH",
                        brk_quote(q, sizeof q, spec, mlen));
    }
    const char *path = sp + 1;
    size_t plen = len - mlen - 1;
    size_t segs = 0;
    const char *why = path_problem(path, plen, allow_wildcard ? MODE_PATTERN : MODE_CONCRETE, &segs);
    if (why)
        return plm_fail(err, 0, PLM_E_INVALID, "path %s", why);
    char *copy = strndup(path, plen);
    if (!copy)
        return plm_fail(err, ENOMEM, PLM_E_INTERNAL, "out of memory");
    out->method = m;
    out->path = copy;
    out->len = plen;
    out->segments = segs;
    out->wildcard = memchr(path, '*', plen) != NULL;
    return 0;
}

void brk_route_done(struct brk_route *r)
{
    if (!r)
        return;
    free(r->path);
    *r = (struct brk_route){0};
}

int brk_route_copy(struct brk_route *dst, const struct brk_route *src)
{
    *dst = *src;
    dst->path = src->path ? strndup(src->path, src->len) : NULL;
    return (src->path && !dst->path) ? -1 : 0;
}

bool brk_target_ok(const char *target, size_t len, size_t *segments)
{
    return path_problem(target, len, MODE_TARGET, segments) == NULL;
}

bool brk_route_match(const struct brk_route *r, enum brk_method m, const char *t, size_t tlen, size_t segments)
{
    if (!r->path || r->method != m || r->segments != segments)
        return false;
    const char *p = r->path;
    size_t plen = r->len, i = 1, j = 1;
    for (;;) {
        size_t pe = i, te = j;
        while (pe < plen && p[pe] != '/')
            pe++;
        while (te < tlen && t[te] != '/')
            te++;
        size_t pl = pe - i, tl = te - j;
        if (pl == 1 && p[i] == '*') {
            if (tl == 0) /* a wildcard needs a non-empty segment */
                return false;
        } else if (pl != tl || memcmp(p + i, t + j, pl) != 0) {
            return false;
        }
        if (pe >= plen || te >= tlen)
            return pe >= plen && te >= tlen;
        i = pe + 1;
        j = te + 1;
    }
}

long brk_route_find(const struct brk_route *routes, size_t n, const char *method, size_t method_len, const char *target,
                    size_t target_len)
{
    enum brk_method m;
    size_t segs = 0;
    if (brk_method_parse(method, method_len, &m) < 0)
        return -1;
    if (!brk_target_ok(target, target_len, &segs))
        return -1;
    for (size_t i = 0; i < n; i++)
        if (brk_route_match(&routes[i], m, target, target_len, segs))
            return (long)i;
    return -1;
}
