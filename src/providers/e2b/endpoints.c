/* endpoints.c: the rules for the configured URLs (E2B_API_URL, E2B_ENVD_URL, E2B_GUARD_URL).
 * Parsed by hand, strictly: a URL either is exactly what the rule allows or startup stops naming
 * the variable. Plain http is allowed only towards a loopback host (a test double); the guard URL
 * is public https on port 443 only (providers.md §6). */
#include <arpa/inet.h>
#include <ctype.h>
#include <stdio.h>
#include <string.h>

#include "internal.h"

#define URL_ERR(err, ...) plm_fail(err, 0, PLM_E_INVALID, __VA_ARGS__)

struct url {
    bool https;
    char host[256]; /* as written (brackets kept for v6) */
    char bare[256]; /* without brackets, lower-cased */
    long port;      /* -1 = none */
    const char *path; /* into the input: "" or starting with '/' */
};

bool e2b_host_is_loopback(const char *host)
{
    if (!strcasecmp(host, "localhost") || !strcasecmp(host, "localhost."))
        return true;
    struct in_addr a4;
    struct in6_addr a6;
    if (inet_pton(AF_INET, host, &a4) == 1)
        return (ntohl(a4.s_addr) >> 24) == 127;
    if (inet_pton(AF_INET6, host, &a6) == 1)
        return IN6_IS_ADDR_LOOPBACK(&a6) ||
               (IN6_IS_ADDR_V4MAPPED(&a6) && a6.s6_addr[12] == 127);
    return false;
}

static int parse(const char *var, const char *u, struct url *o, struct plm_err *err)
{
    memset(o, 0, sizeof *o);
    o->port = -1;
    for (const char *p = u; *p; p++)
        if ((unsigned char)*p <= 0x20 || (unsigned char)*p >= 0x7f)
            return URL_ERR(err, "%s: spaces, control characters and non-ASCII are not allowed", var);
    if (!strncasecmp(u, "https://", 8))
        o->https = true, u += 8;
    else if (!strncasecmp(u, "http://", 7))
        u += 7;
    else
        return URL_ERR(err, "%s: expected an http:// or https:// URL", var);
    size_t an = strcspn(u, "/?#");
    const char *auth = u;
    o->path = u + an;
    if (memchr(auth, '@', an))
        return URL_ERR(err, "%s: user information is not allowed in the URL", var);
    if (strpbrk(o->path, "?#"))
        return URL_ERR(err, "%s: a query or fragment is not allowed", var);
    size_t hn = an;
    if (auth[0] == '[') {
        const char *rb = memchr(auth, ']', an);
        if (!rb)
            return URL_ERR(err, "%s: unbalanced [ in the host", var);
        hn = (size_t)(rb - auth) + 1;
    } else {
        const char *colon = memchr(auth, ':', an);
        if (colon)
            hn = (size_t)(colon - auth);
    }
    if (!hn || hn >= sizeof o->host)
        return URL_ERR(err, "%s: the URL has no host", var);
    memcpy(o->host, auth, hn);
    if (hn < an) {
        if (auth[hn] != ':' || hn + 1 == an)
            return URL_ERR(err, "%s: malformed port", var);
        long port = 0;
        for (size_t i = hn + 1; i < an; i++) {
            if (!isdigit((unsigned char)auth[i]) || (port = port * 10 + (auth[i] - '0')) > 65535)
                return URL_ERR(err, "%s: malformed port", var);
        }
        if (!port)
            return URL_ERR(err, "%s: malformed port", var);
        o->port = port;
    }
    const char *b = o->host[0] == '[' ? o->host + 1 : o->host;
    size_t bn = o->host[0] == '[' ? strlen(o->host) - 2 : strlen(o->host);
    for (size_t i = 0; i < bn; i++)
        o->bare[i] = (char)tolower((unsigned char)b[i]);
    o->bare[bn] = 0;
    if (o->host[0] != '[') {
        for (const char *p = o->bare; *p; p++)
            if (!isalnum((unsigned char)*p) && *p != '.' && *p != '-')
                return URL_ERR(err, "%s: the host \"%s\" has characters a host name cannot have", var, o->host);
    } else {
        struct in6_addr a6;
        if (inet_pton(AF_INET6, o->bare, &a6) != 1)
            return URL_ERR(err, "%s: \"%s\" is not an IPv6 address", var, o->host);
    }
    return 0;
}

/* A canonical unencoded path: segments of safe characters, no empty, "." or ".." segment. */
static bool path_ok(const char *p, bool allow_slot)
{
    if (!*p)
        return true;
    if (*p != '/')
        return false;
    const char *seg = p + 1;
    for (;;) {
        size_t n = strcspn(seg, "/");
        if (n == 0 && seg[0] == 0)
            return false; /* trailing slash */
        if (n == 0 || (n == 1 && seg[0] == '.') || (n == 2 && seg[0] == '.' && seg[1] == '.'))
            return false;
        for (size_t i = 0; i < n; i++) {
            char c = seg[i];
            if (!(isalnum((unsigned char)c) || strchr("-._~", c) || (allow_slot && strchr("{}", c))))
                return false;
        }
        if (!seg[n])
            return true;
        seg += n + 1;
    }
}

int e2b_check_base_url(const char *var, const char *url, bool want_slot, char *out, size_t cap,
                       struct plm_err *err)
{
    char tmp[640];
    if (strlen(url) >= sizeof tmp || strlen(url) >= cap)
        return URL_ERR(err, "%s: the URL is too long", var);
    snprintf(tmp, sizeof tmp, "%s", url);
    /* A template is checked with its one slot filled by a name, so the slot may sit in the host
     * (E2B's own https://49983-{sandbox}.e2b.app) or in the path. */
    size_t braces = 0;
    for (const char *p = tmp; *p; p++)
        braces += *p == '{' || *p == '}';
    char *slot = strstr(tmp, "{sandbox}");
    if (want_slot && (!slot || braces != 2))
        return URL_ERR(err, "%s=%s: the template must contain {sandbox} exactly once", var, url);
    if (!want_slot && braces)
        return URL_ERR(err, "%s=%s: braces are not allowed", var, url);
    char probe[640];
    if (slot)
        snprintf(probe, sizeof probe, "%.*ssandbox1%s", (int)(slot - tmp), tmp, slot + 9);
    else
        snprintf(probe, sizeof probe, "%s", tmp);
    struct url u;
    if (parse(var, probe, &u, err) < 0)
        return -1;
    if (!u.https && !e2b_host_is_loopback(u.bare))
        return URL_ERR(err, "%s=%s: plain http is allowed only to a loopback address; use https", var, url);
    size_t n = strlen(probe), off = (size_t)(u.path - probe);
    size_t cut = 0;
    while (n - cut > off && probe[n - cut - 1] == '/')
        cut++; /* a trailing slash is dropped: paths are appended with their own */
    probe[n - cut] = 0;
    tmp[strlen(tmp) - cut] = 0;
    if (!path_ok(probe + off, false))
        return URL_ERR(err, "%s=%s: the path must be canonical and unencoded", var, url);
    snprintf(out, cap, "%s", tmp);
    return 0;
}

int e2b_check_guard_url(const char *url, char *out, size_t cap, char *host, size_t hcap, struct plm_err *err)
{
    struct url u;
    if (parse("E2B_GUARD_URL", url, &u, err) < 0)
        return -1;
    if (!u.https)
        return URL_ERR(err, "E2B_GUARD_URL=%s: the guard must be https", url);
    if (u.port != -1 && u.port != 443)
        return URL_ERR(err, "E2B_GUARD_URL=%s: the guard must be on port 443", url);
    if (e2b_host_is_loopback(u.bare))
        return URL_ERR(err, "E2B_GUARD_URL=%s: the guard must be reachable from E2B, not a loopback host", url);
    if (u.host[0] == '[' || strchr(u.bare, ':'))
        return URL_ERR(err, "E2B_GUARD_URL=%s: the guard host must be a DNS name or IPv4 address", url);
    if (strchr(u.path, '\\') || strchr(u.path, '%') || !path_ok(u.path, false) )
        return URL_ERR(err, "E2B_GUARD_URL=%s: the path must be canonical and unencoded (no %%, \\, //, . or ..)",
                       url);
    const char *path = *u.path ? u.path : E2B_GUARD_DEFAULT_PATH;
    if ((size_t)snprintf(out, cap, "https://%s%s", u.host, path) >= cap || strlen(u.bare) >= hcap)
        return URL_ERR(err, "E2B_GUARD_URL: too long");
    snprintf(host, hcap, "%s", u.bare);
    return 0;
}
