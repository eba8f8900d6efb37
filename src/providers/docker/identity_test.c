/* identity_test.c: the image's software identity (identity.c) from canned and hostile inspect
 * answers. No dockerd needed. */
#include <string.h>

#include "../../../tests/unit.h"
#include "internal.h"

#define ID "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"

static int plat(const char *text, char *out, size_t cap)
{
    json_error_t je;
    json_t *j = json_loads(text, JSON_DECODE_ANY, &je);
    struct plm_err err = {0};
    int r = dock_platform(j, out, cap, &err);
    json_decref(j);
    return r;
}

int main(void)
{
    char p[56], id[160];
    CHECK(plat("{\"Os\":\"linux\",\"Architecture\":\"amd64\"}", p, sizeof p) == 0);
    CHECK_STR(p, "linux/amd64");
    CHECK(plat("{\"Os\":\"linux\",\"Architecture\":\"arm\",\"Variant\":\"v7\"}", p, sizeof p) == 0);
    CHECK_STR(p, "linux/arm/v7");
    CHECK(plat("{\"Os\":\"linux\",\"Architecture\":\"amd64\",\"Variant\":\"\"}", p, sizeof p) == 0);
    CHECK_STR(p, "linux/amd64");
    CHECK(plat("{\"Os\":\"linux\",\"Architecture\":\"amd64\",\"Variant\":null}", p, sizeof p) == 0);
    static const char *const bad[] = {
        "{}", "[]", "null", "{\"Os\":\"linux\"}", "{\"Os\":\"\",\"Architecture\":\"amd64\"}",
        "{\"Os\":\"Linux\",\"Architecture\":\"amd64\"}",          /* not lowercase */
        "{\"Os\":\"linux\",\"Architecture\":\"amd64@sha256\"}",   /* would forge the separator */
        "{\"Os\":\"linux/amd64\",\"Architecture\":\"x\"}",
        "{\"Os\":\"linux\",\"Architecture\":\"aaaaaaaaaaaaaaaaa\"}", /* 17 bytes */
        "{\"Os\":\"linux\",\"Architecture\":7}",
        "{\"Os\":\"linux\",\"Architecture\":\"amd64\",\"Variant\":\"v 8\"}",
        "{\"Os\":\"linux\",\"Architecture\":\"amd64\",\"Variant\":3}",
        "{\"Os\":\"li\\u0000nux\",\"Architecture\":\"amd64\"}",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        CHECK(plat(bad[i], p, sizeof p) == -1);
    CHECK(plat("{\"Os\":\"linux\",\"Architecture\":\"amd64\",\"Variant\":\"v8\"}", p, 8) == -1); /* no room */

    CHECK(dock_software_identity("linux/amd64", ID, id, sizeof id) == 0);
    CHECK_STR(id, "oci-config:linux/amd64@" ID);
    CHECK(dock_software_identity("linux/amd64", "sha256:0123", id, sizeof id) == -1);
    CHECK_STR(id, "");
    CHECK(dock_software_identity("linux/amd64", "md5:" ID, id, sizeof id) == -1);
    CHECK(dock_software_identity("", ID, id, sizeof id) == -1);
    CHECK(dock_software_identity("linux/amd64", ID, id, 40) == -1);
    CHECK_STR(id, "");
    return unit_done();
}
