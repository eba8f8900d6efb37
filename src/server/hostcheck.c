/* hostcheck.c: see hostcheck.h. */
#include "hostcheck.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

/* Splits "host[:port]" / "[v6][:port]"; false when malformed. */
static bool split(const char *s, size_t len, size_t *host_len, const char **port, size_t *port_len)
{
    size_t h = len;
    if (len && s[0] == '[') {
        const char *rb = memchr(s, ']', len);
        if (!rb)
            return false;
        h = (size_t)(rb - s) + 1;
    } else {
        const char *colon = memchr(s, ':', len);
        if (colon)
            h = (size_t)(colon - s);
    }
    if (h == 0)
        return false;
    *host_len = h;
    *port = s + h;
    *port_len = len - h;
    if (*port_len == 0)
        return true;
    if ((*port)[0] != ':' || *port_len < 2 || *port_len > 6)
        return false;
    (*port)++;
    (*port_len)--;
    for (size_t i = 0; i < *port_len; i++)
        if ((*port)[i] < '0' || (*port)[i] > '9')
            return false;
    return true;
}

static bool same(const char *a, size_t an, const char *b)
{
    return strlen(b) == an && strncasecmp(a, b, an) == 0;
}

/* The connection's local address as Host would spell it. */
static bool is_local_address(const char *h, size_t hl, const struct sockaddr_storage *local)
{
    if (!local)
        return false;
    char txt[INET6_ADDRSTRLEN + 2];
    if (local->ss_family == AF_INET) {
        inet_ntop(AF_INET, &((const struct sockaddr_in *)local)->sin_addr, txt, sizeof txt);
        return same(h, hl, txt);
    }
    if (local->ss_family != AF_INET6)
        return false;
    const struct in6_addr *a = &((const struct sockaddr_in6 *)local)->sin6_addr;
    if (IN6_IS_ADDR_V4MAPPED(a)) {
        inet_ntop(AF_INET, &a->s6_addr[12], txt, sizeof txt);
        if (same(h, hl, txt))
            return true;
    }
    txt[0] = '[';
    inet_ntop(AF_INET6, a, txt + 1, sizeof txt - 2);
    strcat(txt, "]");
    if (same(h, hl, txt))
        return true;
    /* an IPv6 address has several spellings: compare the parsed address */
    char buf[INET6_ADDRSTRLEN];
    struct in6_addr b;
    if (hl < 3 || hl - 2 >= sizeof buf || h[0] != '[')
        return false;
    memcpy(buf, h + 1, hl - 2);
    buf[hl - 2] = 0;
    return inet_pton(AF_INET6, buf, &b) == 1 && memcmp(&b, a, sizeof b) == 0;
}

static bool in_list(const char *h, size_t hl, const char *port, size_t pl, const char *allowed)
{
    for (const char *e = allowed; e && *e;) {
        size_t n = strcspn(e, ",");
        size_t eh, epl;
        const char *ep;
        if (split(e, n, &eh, &ep, &epl) && eh == hl && strncasecmp(e, h, hl) == 0 &&
            (epl == 0 || (epl == pl && memcmp(ep, port, pl) == 0)))
            return true;
        e += n;
        if (*e == ',')
            e++;
    }
    return false;
}

bool hostcheck_ok(const char *host, size_t len, const struct sockaddr_storage *local, const char *allowed)
{
    size_t hl, pl;
    const char *port;
    if (!host || !split(host, len, &hl, &port, &pl))
        return false;
    if (same(host, hl, "localhost") || same(host, hl, "127.0.0.1") || same(host, hl, "[::1]"))
        return true;
    return is_local_address(host, hl, local) || in_list(host, hl, port, pl, allowed);
}

static bool name_char(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' || c == '.';
}

int hostcheck_parse_list(const char *v, char *why, size_t why_cap)
{
    if (!*v) {
        snprintf(why, why_cap, "empty");
        return -1;
    }
    for (const char *e = v;;) {
        size_t n = strcspn(e, ","), hl, pl;
        const char *port;
        if (!split(e, n, &hl, &port, &pl)) {
            snprintf(why, why_cap, "entry \"%.*s\" is not host or host:port", (int)(n > 200 ? 200 : n), e);
            return -1;
        }
        bool ok = true;
        if (e[0] == '[') {
            char buf[INET6_ADDRSTRLEN];
            struct in6_addr a;
            ok = hl - 2 < sizeof buf && (memcpy(buf, e + 1, hl - 2), buf[hl - 2] = 0, inet_pton(AF_INET6, buf, &a) == 1);
        } else {
            for (size_t i = 0; i < hl && ok; i++)
                ok = name_char(e[i]);
        }
        if (!ok) {
            snprintf(why, why_cap, "entry \"%.*s\" is not a host name or address", (int)(n > 200 ? 200 : n), e);
            return -1;
        }
        if (!e[n])
            return 0;
        e += n + 1;
    }
}
