/* route.h: grant routes (providers.md §5.1) and the raw-target rule and route match of §5.3
 * step 6. Pure functions over bytes: no allocation except brk_route_parse's owned copy, no locks,
 * no I/O, so the fuzz target and the client generator can use them directly.
 *
 * A pattern and a target share one alphabet: A-Z a-z 0-9 - . _ ~ $ & + , : = @ / (plus ';', which
 * is then refused per segment, and '*' as a whole pattern segment). That is exactly the set an
 * HTTP stack sends unchanged, so "canonical" means "sent byte for byte as the route was checked":
 * no percent-encoding, no query, no fragment, no backslash, no control or non-ASCII byte, no empty
 * segment (no "//", no trailing "/"), no all-dots segment ("." ".." "..."), no segment with ';'.
 * The one exception is the root "/" itself. A '*' pattern segment matches exactly one non-empty
 * target segment; every other segment matches byte for byte (paths are case-sensitive). */
#pragma once
#include <stdbool.h>
#include <stddef.h>

#include "../core/err.h"

enum brk_method { BRK_M_GET, BRK_M_PUT, BRK_M_POST, BRK_M_DELETE, BRK_M_PATCH, BRK_M_N };

#define BRK_ROUTE_PATH_MAX 1024 /* bytes in a route pattern or health-check path (our cap) */
#define BRK_TARGET_MAX 8192     /* bytes in a raw target; longer is refused (403, our cap) */
#define BRK_METHOD_MAX 16       /* bytes in a method word; longer cannot be a known method */

struct brk_route {
    enum brk_method method;
    char *path;      /* owned canonical pattern, a wildcard segment written "*" */
    size_t len;      /* strlen(path) */
    size_t segments; /* '/'-separated segments ("/" has one, empty) */
    bool wildcard;   /* at least one "*" segment */
};

/* "GET", "PUT", "POST", "DELETE", "PATCH". */
const char *brk_method_name(enum brk_method m);
/* One of the five methods, ignoring case, with nothing around it. Returns 0 or -1. */
int brk_method_parse(const char *s, size_t len, enum brk_method *out);

/* Checks a route pattern (allow_wildcard) or a concrete path such as the health check. On
 * failure returns -1 with err = PLM_E_INVALID and a reason ("must start with \"/\"", ...) for the
 * caller to prefix with the profile and field. */
int brk_pattern_check(const char *path, size_t len, bool allow_wildcard, struct plm_err *err);
/* Parses "METHOD /pattern" (one space between). out->path is owned: brk_route_done(). */
int brk_route_parse(const char *spec, size_t len, bool allow_wildcard, struct brk_route *out, struct plm_err *err);
void brk_route_done(struct brk_route *r);
/* Deep copy; returns 0 or -1 out of memory. */
int brk_route_copy(struct brk_route *dst, const struct brk_route *src);

/* The raw-target rule (§5.3 steps 6 and 10): true when target could be sent verbatim and is
 * already canonical. Counts segments into *segments when non-NULL. */
bool brk_target_ok(const char *target, size_t len, size_t *segments);
/* One route against a method and a target that passed brk_target_ok (with its segment count). */
bool brk_route_match(const struct brk_route *r, enum brk_method m, const char *target, size_t len, size_t segments);
/* The whole step 6: parses the method (ignoring case), checks the target, and returns the index
 * of the first matching route, or -1 (which the broker answers with 403). */
long brk_route_find(const struct brk_route *routes, size_t n, const char *method, size_t method_len, const char *target,
                    size_t target_len);
