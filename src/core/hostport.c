/* hostport.c: listener addresses (hostport.h). */
#include "hostport.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>

int plm_parse_hostport(const char *addr, struct sockaddr_storage *ss, socklen_t *sl)
{
    const char *colon = strrchr(addr, ':');
    if (!colon || !colon[1])
        return -1;
    char host[64];
    size_t hl = (size_t)(colon - addr);
    if (hl >= sizeof host)
        return -1;
    memcpy(host, addr, hl);
    host[hl] = 0;
    char *end;
    errno = 0;
    unsigned long port = strtoul(colon + 1, &end, 10);
    if (errno || *end || port > 65535)
        return -1;
    memset(ss, 0, sizeof *ss);
    if (host[0] == '[' && hl > 2 && host[hl - 1] == ']') {
        struct sockaddr_in6 *a6 = (struct sockaddr_in6 *)ss;
        host[hl - 1] = 0;
        if (inet_pton(AF_INET6, host + 1, &a6->sin6_addr) != 1)
            return -1;
        a6->sin6_family = AF_INET6;
        a6->sin6_port = htons((uint16_t)port);
        *sl = sizeof *a6;
        return 0;
    }
    struct sockaddr_in *a4 = (struct sockaddr_in *)ss;
    a4->sin_family = AF_INET;
    a4->sin_port = htons((uint16_t)port);
    *sl = sizeof *a4;
    if (hl == 0)
        a4->sin_addr.s_addr = htonl(INADDR_ANY); /* ":port" listens on every interface, on purpose */
    else if (strcmp(host, "localhost") == 0)
        a4->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    else if (inet_pton(AF_INET, host, &a4->sin_addr) != 1)
        return -1;
    return 0;
}
