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

const char *brk_parse_origin(const char *s, size_t len, char **out)
{
    *out = NULL;
    if (len == 0 || !brk_text_ok(s, len, BRK_TXT_NONEMPTY | BRK_TXT_TRIMMED))
        return "must be a non-blank URL in valid UTF-8 with no surrounding whitespace";
    const char *sep = strstr(s, "://");
    if (!sep)
        return "must be an absolute URL such as \"https://api.example\"";
    size_t slen = (size_t)(sep - s);
    bool https = slen == 5 && strncasecmp(s, "https", 5) == 0;
    bool http = slen == 4 && strncasecmp(s, "http", 4) == 0;
    if (!https && !http)
        return "scheme must be https (or http for localhost or a loopback IP)";
    const char *a = sep + 3;
    size_t alen = len - slen - 3;
    if (alen == 0)
        return "must have a host";
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
    /* split host and port */
    char host[256];
    const char *port = NULL;
    size_t hlen, plen = 0;
    bool v6 = false;
    if (a[0] == '[') {
        const char *rb = memchr(a, ']', alen);
        if (!rb)
            return "has an unterminated IPv6 literal";
        hlen = (size_t)(rb - a - 1);
        if (hlen == 0 || hlen >= sizeof host)
            return "has an invalid IPv6 literal";
        memcpy(host, a + 1, hlen);
        host[hlen] = '\0';
        struct in6_addr in6;
        if (inet_pton(AF_INET6, host, &in6) != 1)
            return "has an invalid IPv6 literal";
        v6 = true;
        size_t rest = alen - hlen - 2;
        if (rest > 0) {
            if (rb[1] != ':')
                return "has an invalid port";
            port = rb + 2;
            plen = rest - 1;
        }
    } else {
        const char *colon = memchr(a, ':', alen);
        hlen = colon ? (size_t)(colon - a) : alen;
        if (colon) {
            port = colon + 1;
            plen = alen - hlen - 1;
            if (memchr(port, ':', plen))
                return "has an invalid port";
        }
        if (hlen == 0)
            return "must have a host";
        if (hlen > 253)
            return "has a host name longer than 253 bytes";
        memcpy(host, a, hlen);
        host[hlen] = '\0';
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
        /* A last label starting with a digit is an IP literal to resolvers (even "127.1" or
         * "0x7f.1"); only a dotted quad is accepted, so the loopback test below is exact. */
        const char *last = strrchr(host, '.');
        last = last ? last + 1 : host;
        struct in_addr in4;
        if (*last >= '0' && *last <= '9' && inet_pton(AF_INET, host, &in4) != 1)
            return "has an invalid IPv4 address";
    }
    unsigned long pv = 0;
    if (port) {
        if (plen == 0 || plen > 5)
            return "has an invalid port";
        for (size_t i = 0; i < plen; i++) {
            if (port[i] < '0' || port[i] > '9')
                return "has an invalid port";
            pv = pv * 10 + (unsigned long)(port[i] - '0');
        }
        if (pv == 0 || pv > 65535)
            return "has an invalid port";
    }
    for (size_t i = 0; i < hlen; i++)
        if (host[i] >= 'A' && host[i] <= 'Z')
            host[i] = (char)(host[i] - 'A' + 'a');
    bool loopback = false;
    if (v6) {
        struct in6_addr in6;
        inet_pton(AF_INET6, host, &in6);
        static const unsigned char mapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
        loopback = IN6_IS_ADDR_LOOPBACK(&in6) || (memcmp(in6.s6_addr, mapped, 12) == 0 && in6.s6_addr[12] == 127);
    } else {
        struct in_addr in4;
        if (inet_pton(AF_INET, host, &in4) == 1)
            loopback = (ntohl(in4.s_addr) >> 24) == 127;
        else
            loopback = strcmp(host, "localhost") == 0;
    }
    if (http && !loopback)
        return "http is allowed only for localhost or a loopback IP; use https";
    char buf[300];
    int n;
    if (port)
        n = snprintf(buf, sizeof buf, "%s://%s%s%s:%lu", https ? "https" : "http", v6 ? "[" : "", host, v6 ? "]" : "",
                     pv);
    else
        n = snprintf(buf, sizeof buf, "%s://%s%s%s", https ? "https" : "http", v6 ? "[" : "", host, v6 ? "]" : "");
    if (n < 0 || (size_t)n >= sizeof buf)
        return "is too long";
    *out = strdup(buf);
    return *out ? NULL : "out of memory";
}
