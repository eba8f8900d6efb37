/* hostcheck_test.c: the Host check (DNS rebinding), name by name, and the list's syntax. */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <string.h>

#include "hostcheck.h"
#include "unit.h"

static int ok(const char *host, const struct sockaddr_storage *local, const char *allowed)
{
    return hostcheck_ok(host, strlen(host), local, allowed);
}

int main(void)
{
    /* the built-in names, with or without a port, any case for the name */
    CHECK(ok("localhost", NULL, NULL));
    CHECK(ok("LocalHost:8746", NULL, NULL));
    CHECK(ok("127.0.0.1:8746", NULL, NULL));
    CHECK(ok("[::1]:8746", NULL, NULL));
    CHECK(ok("[::1]", NULL, NULL));
    /* a rebinding page's own name, and near misses */
    CHECK(!ok("attacker.example", NULL, NULL));
    CHECK(!ok("attacker.example:8746", NULL, NULL));
    CHECK(!ok("localhost.attacker.example", NULL, NULL));
    CHECK(!ok("localhost.", NULL, NULL));
    CHECK(!ok("127.0.0.1.nip.io", NULL, NULL));
    CHECK(!ok("127.0.0.2", NULL, NULL));
    CHECK(!ok("", NULL, NULL));
    CHECK(!ok(":8746", NULL, NULL));
    CHECK(!ok("localhost:", NULL, NULL));
    CHECK(!ok("localhost:80x", NULL, NULL));
    CHECK(!ok("localhost:80:80", NULL, NULL));
    CHECK(!ok("[::1", NULL, NULL));
    CHECK(!ok("[::1]x", NULL, NULL));
    /* the listener's own address */
    struct sockaddr_storage v4 = {0}, v6 = {0};
    struct sockaddr_in *a4 = (struct sockaddr_in *)&v4;
    a4->sin_family = AF_INET;
    inet_pton(AF_INET, "10.1.2.3", &a4->sin_addr);
    CHECK(ok("10.1.2.3:8746", &v4, NULL));
    CHECK(!ok("10.1.2.4:8746", &v4, NULL));
    struct sockaddr_in6 *a6 = (struct sockaddr_in6 *)&v6;
    a6->sin6_family = AF_INET6;
    inet_pton(AF_INET6, "fd00::5", &a6->sin6_addr);
    CHECK(ok("[fd00::5]:8746", &v6, NULL));
    CHECK(ok("[fd00:0::5]", &v6, NULL)); /* another spelling of the same address */
    CHECK(!ok("[fd00::6]", &v6, NULL));
    inet_pton(AF_INET6, "::ffff:10.1.2.3", &a6->sin6_addr);
    CHECK(ok("10.1.2.3", &v6, NULL)); /* IPv4 reaching a dual-stack listener */
    /* PLIMSOLL_ALLOWED_HOSTS: a name matches any port unless the entry names one */
    CHECK(ok("sandbox.internal", NULL, "sandbox.internal"));
    CHECK(ok("Sandbox.Internal:8746", NULL, "a.example,sandbox.internal"));
    CHECK(ok("sandbox.internal:8746", NULL, "sandbox.internal:8746"));
    CHECK(!ok("sandbox.internal:9999", NULL, "sandbox.internal:8746"));
    CHECK(!ok("sandbox.internal.evil", NULL, "sandbox.internal"));
    CHECK(!ok("evil", NULL, "sandbox.internal"));
    /* the list's syntax (startup refuses a bad one, naming the variable) */
    char why[256];
    CHECK(hostcheck_parse_list("sandbox.internal", why, sizeof why) == 0);
    CHECK(hostcheck_parse_list("a.example:8746,[fd00::1]:80,10.0.0.1", why, sizeof why) == 0);
    CHECK(hostcheck_parse_list("", why, sizeof why) < 0);
    CHECK(hostcheck_parse_list("a,,b", why, sizeof why) < 0);
    CHECK(hostcheck_parse_list("a,", why, sizeof why) < 0);
    CHECK(hostcheck_parse_list("a b", why, sizeof why) < 0);
    CHECK(hostcheck_parse_list("a:port", why, sizeof why) < 0);
    CHECK(hostcheck_parse_list("[zz::1]", why, sizeof why) < 0);
    CHECK(hostcheck_parse_list("*.example", why, sizeof why) < 0);
    return unit_done();
}
