/* fuzz_route.c: libFuzzer target for the grant route parser and the raw-target matcher
 * (src/broker/route.c), whose input is guest-controlled on every host call.
 * Input: "<route spec>\n<method>\n<target>" (missing parts are empty). The target checks are
 * re-derived here independently, byte by byte, and any disagreement traps:
 *  - an accepted route pattern is canonical (starts with '/', only the canonical alphabet,
 *    no empty / all-dots / ';' segment, '*' only as a whole segment);
 *  - a target that matches is canonical the same way, has no '*', and has exactly as many
 *    segments as the route, with each literal segment equal;
 *  - a pattern with its '*' segments replaced by "x" matches itself (the matcher is not empty). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "../src/broker/route.h"

static int canonical_byte(unsigned char c, int star_ok)
{
    if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9'))
        return 1;
    if (c == '*')
        return star_ok;
    return c != 0 && strchr("-._~$&+,:=@/;", c) != NULL;
}

/* Independent canonical check; counts segments. */
static int canonical(const char *p, size_t len, int star_ok, size_t *segs)
{
    if (len == 0 || p[0] != '/')
        return 0;
    for (size_t i = 0; i < len; i++)
        if (!canonical_byte((unsigned char)p[i], star_ok))
            return 0;
    *segs = 1;
    if (len == 1)
        return 1;
    size_t start = 1;
    for (size_t i = 1; i <= len; i++) {
        if (i < len && p[i] != '/')
            continue;
        size_t sl = i - start, dots = 0;
        if (sl == 0)
            return 0;
        for (size_t k = start; k < i; k++) {
            if (p[k] == ';')
                return 0;
            if (p[k] == '*' && sl != 1)
                return 0;
            dots += p[k] == '.';
        }
        if (dots == sl)
            return 0;
        if (i < len)
            (*segs)++;
        start = i + 1;
    }
    return 1;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size > 4 * BRK_TARGET_MAX)
        return 0;
    char *buf = malloc(size + 1);
    if (!buf)
        return 0;
    memcpy(buf, data, size);
    buf[size] = '\0';
    const char *spec = buf, *method = "", *target = "";
    size_t spec_len = size, method_len = 0, target_len = 0;
    char *nl = memchr(buf, '\n', size);
    if (nl) {
        spec_len = (size_t)(nl - buf);
        method = nl + 1;
        char *nl2 = memchr(nl + 1, '\n', size - spec_len - 1);
        method_len = nl2 ? (size_t)(nl2 - method) : size - spec_len - 1;
        if (nl2) {
            target = nl2 + 1;
            target_len = size - (size_t)(target - buf);
        }
    }

    struct brk_route r;
    struct plm_err err;
    if (brk_route_parse(spec, spec_len, 1, &r, &err) == 0) {
        size_t segs;
        if (!canonical(r.path, r.len, 1, &segs) || segs != r.segments || strlen(r.path) != r.len)
            __builtin_trap();
        /* the pattern with "x" for every "*" must match itself */
        char *inst = strdup(r.path);
        if (inst) {
            for (char *p = inst; *p; p++)
                if (*p == '*')
                    *p = 'x';
            const char *mn = brk_method_name(r.method);
            if (brk_route_find(&r, 1, mn, strlen(mn), inst, r.len) != 0)
                __builtin_trap();
            free(inst);
        }
        long idx = brk_route_find(&r, 1, method, method_len, target, target_len);
        if (idx == 0) {
            size_t tsegs;
            enum brk_method m;
            if (!canonical(target, target_len, 0, &tsegs) || tsegs != r.segments)
                __builtin_trap();
            if (brk_method_parse(method, method_len, &m) < 0 || m != r.method)
                __builtin_trap();
            /* literal segments are equal byte for byte, wildcards non-empty */
            size_t i = 1, j = 1;
            while (i <= r.len && j <= target_len) {
                size_t pe = i, te = j;
                while (pe < r.len && r.path[pe] != '/')
                    pe++;
                while (te < target_len && target[te] != '/')
                    te++;
                int star = pe - i == 1 && r.path[i] == '*';
                if (star ? te == j : (pe - i != te - j || memcmp(r.path + i, target + j, pe - i) != 0))
                    __builtin_trap();
                i = pe + 1;
                j = te + 1;
            }
        } else if (idx != -1) {
            __builtin_trap();
        }
        brk_route_done(&r);
    }
    /* the target rule alone agrees with the independent check */
    size_t s1 = 0, s2 = 0;
    int a = brk_target_ok(target, target_len, &s1);
    int b = target_len <= BRK_TARGET_MAX && canonical(target, target_len, 0, &s2);
    if (a != b || (a && s1 != s2))
        __builtin_trap();
    free(buf);
    return 0;
}
