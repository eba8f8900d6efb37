/* origin.h: a grant profile's base_url, reduced to its canonical origin (providers.md §5.1). */
#pragma once
#include <stddef.h>

/* Parses an origin "scheme://host[:port]" (no userinfo, path, query or fragment). Returns NULL
 * and the canonical lower-case origin in *out (malloc'd), or the reason as a phrase that follows
 * the field name ("must be ..."). http is refused unless the host is localhost or a loopback IP
 * literal: a credential must never cross a network in clear text. */
const char *brk_parse_origin(const char *s, size_t len, char **out);
