/* origin.c: base_url validation for grant profiles (origin.h). The broker sends the run's
 * credential to this origin, so anything that could make "the API" mean more than one host
 * (userinfo, paths, odd host bytes, plain http off loopback) is refused at load. */
#include "origin.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "text.h"

static bool host_byte(unsigned char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' || c == '.';
}

/* The authority (host and optional port), split and checked; host is lower-cased later. */
struct authority {
    char host[256];
    size_t hlen;
    bool v6;
    const char *port; /* NULL when absent */
    size_t plen;
    unsigned long pv;
};

/* "https://" or "http://" (any case); *https tells which. */
static const char *split_scheme(const char *s, size_t len, bool *https, const char **auth, size_t *alen)
{
    const char *sep = strstr(s, "://");
    if (!sep)
        return "must be an absolute URL such as \"https://api.example\"";
    size_t slen = (size_t)(sep - s);
    *https = slen == 5 && strncasecmp(s, "https", 5) == 0;
    bool http = slen == 4 && strncasecmp(s, "http", 4) == 0;
    if (!*https && !http)
        return "scheme must be https (or http for localhost or a loopback IP)";
    *auth = sep + 3;
    *alen = len - slen - 3;
    return *alen == 0 ? "must have a host" : NULL;
}

/* An origin only: no path, query, fragment or userinfo, and plain ASCII. */
static const char *authority_bytes(const char *a, size_t alen)
{
    for (size_t i = 0; i < alen; i++) {
        unsigned char c = (unsigned char)a[i];
        if (c == '/')
            return "must be an origin only: no path, not even \"/\"";
        if (c == '?')
            return "must be an origin only: no query";
        if (c == '#')
            return "must be an origin only: no fragment";
        if (c == '@')
            return "must not contain userinfo";
        if (c <= 0x20 || c >= 0x7f || c == '\\' || c == '%')
            return "host must be plain ASCII (use punycode for IDN)";
    }
    return NULL;
}

/* "[v6]" with an optional ":port". */
static const char *split_v6(const char *a, size_t alen, struct authority *au)
{
    const char *rb = memchr(a, ']', alen);
    if (!rb)
        return "has an unterminated IPv6 literal";
    au->hlen = (size_t)(rb - a - 1);
    if (au->hlen == 0 || au->hlen >= sizeof au->host)
        return "has an invalid IPv6 literal";
    memcpy(au->host, a + 1, au->hlen);
    au->host[au->hlen] = '\0';
    struct in6_addr in6;
    if (inet_pton(AF_INET6, au->host, &in6) != 1)
        return "has an invalid IPv6 literal";
    au->v6 = true;
    size_t rest = alen - au->hlen - 2;
    if (rest > 0) {
        if (rb[1] != ':')
            return "has an invalid port";
        au->port = rb + 2;
        au->plen = rest - 1;
    }
    return NULL;
}

/* Labels of host bytes, none empty or over 63 bytes. A last label starting with a digit is an IP
 * literal to resolvers (even "127.1" or "0x7f.1"); only a dotted quad is accepted, so the
 * loopback test of is_loopback is exact. */
static const char *check_host_name(const char *host, size_t hlen)
{
    size_t label = 0;
    for (size_t i = 0; i < hlen; i++) {
        if (!host_byte((unsigned char)host[i]))
            return "has an invalid character in the host";
        if (host[i] == '.') {
            if (label == 0)
                return "has an empty label in the host";
            label = 0;
        } else if (++label > 63) {
            return "has a host label longer than 63 bytes";
        }
    }
    if (label == 0)
        return "has an empty label in the host";
    const char *last = strrchr(host, '.');
    last = last ? last + 1 : host;
    struct in_addr in4;
    if (*last >= '0' && *last <= '9' && inet_pton(AF_INET, host, &in4) != 1)
        return "has an invalid IPv4 address";
    return NULL;
}

/* "name" or "a.b.c.d" with an optional ":port". */
static const char *split_name(const char *a, size_t alen, struct authority *au)
{
    const char *colon = memchr(a, ':', alen);
    au->hlen = colon ? (size_t)(colon - a) : alen;
    if (colon) {
        au->port = colon + 1;
        au->plen = alen - au->hlen - 1;
        if (memchr(au->port, ':', au->plen))
            return "has an invalid port";
    }
    if (au->hlen == 0)
        return "must have a host";
    if (au->hlen > 253)
        return "has a host name longer than 253 bytes";
    memcpy(au->host, a, au->hlen);
    au->host[au->hlen] = '\0';
    return check_host_name(au->host, au->hlen);
}

/* 1..65535 in at most five digits. */
static const char *parse_port(struct authority *au)
{
    if (!au->port)
        return NULL;
    if (au->plen == 0 || au->plen > 5)
        return "has an invalid port";
    for (size_t i = 0; i < au->plen; i++) {
        if (au->port[i] < '0' || au->port[i] > '9')
            return "has an invalid port";
        au->pv = au->pv * 10 + (unsigned long)(au->port[i] - '0');
    }
    return au->pv == 0 || au->pv > 65535 ? "has an invalid port" : NULL;
}

/* ::1, ::ffff:127.x.y.z, 127.x.y.z or "localhost" (the host is lower-case by now). */
static bool is_loopback(const struct authority *au)
{
    if (au->v6) {
        struct in6_addr in6;
        inet_pton(AF_INET6, au->host, &in6);
        static const unsigned char mapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
        return IN6_IS_ADDR_LOOPBACK(&in6) ||
               (memcmp(in6.s6_addr, mapped, sizeof mapped) == 0 && in6.s6_addr[sizeof mapped] == 127);
    }
    struct in_addr in4;
    if (inet_pton(AF_INET, au->host, &in4) == 1)
        return (ntohl(in4.s_addr) >> 24) == 127;
    return strcmp(au->host, "localhost") == 0;
}

const char *brk_parse_origin(const char *s, size_t len, char **out)
{
    *out = NULL;
    if (len == 0 || !brk_text_ok(s, len, BRK_TXT_NONEMPTY | BRK_TXT_TRIMMED))
        return "must be a non-blank URL in valid UTF-8 with no surrounding whitespace";
    bool https;
    const char *a;
    size_t alen;
    const char *why = split_scheme(s, len, &https, &a, &alen);
    if (!why)
        why = authority_bytes(a, alen);
    struct authority au = {0};
    if (!why)
        why = a[0] == '[' ? split_v6(a, alen, &au) : split_name(a, alen, &au);
    if (!why)
        why = parse_port(&au);
    if (why)
        return why;
    for (size_t i = 0; i < au.hlen; i++)
        if (au.host[i] >= 'A' && au.host[i] <= 'Z')
            au.host[i] = (char)(au.host[i] - 'A' + 'a');
    if (!https && !is_loopback(&au))
        return "http is allowed only for localhost or a loopback IP; use https";
    char buf[300];
    const char *lb = au.v6 ? "[" : "", *rb = au.v6 ? "]" : "";
    int n;
    if (au.port)
        n = snprintf(buf, sizeof buf, "%s://%s%s%s:%lu", https ? "https" : "http", lb, au.host, rb, au.pv);
    else
        n = snprintf(buf, sizeof buf, "%s://%s%s%s", https ? "https" : "http", lb, au.host, rb);
    if (n < 0 || (size_t)n >= sizeof buf)
        return "is too long";
    *out = strdup(buf);
    return *out ? NULL : "out of memory";
}
