/* readback_test.c: the session read-back (readback.c) over canned inspect answers: an identical
 * answer matches, every change anyone with the docker socket can make is named, absent equals
 * null, and a hostile answer (wrong types, no HostConfig) is still compared, never trusted. */
#include <string.h>

#include "../../../tests/unit.h"
#include "internal.h"

static const char *const base =
    "{\"Image\":\"sha256:aa\",\"Mounts\":[],\"Config\":{\"User\":\"61000:61000\"},"
    "\"HostConfig\":{\"Runtime\":\"runc\",\"SecurityOpt\":[\"no-new-privileges\",\"seccomp={}\"],"
    "\"NetworkMode\":\"none\",\"CapDrop\":[\"ALL\"],\"CapAdd\":null,\"Privileged\":false,"
    "\"ReadonlyRootfs\":true,\"Tmpfs\":{\"/work\":\"size=64m\"},\"Memory\":268435456,\"PidsLimit\":64}}";

/* The field named after changing `path`'s key in the base answer to `value` (JSON), or "". */
static const char *changed(const char *where, const char *key, const char *value, char *what, size_t cap)
{
    json_t *a = json_loads(base, 0, NULL), *b = json_loads(base, 0, NULL);
    json_t *obj = where ? json_object_get(b, where) : b;
    json_object_set_new(obj, key, json_loads(value, JSON_DECODE_ANY, NULL));
    json_t *pa = dock_readback_of(a), *pb = dock_readback_of(b);
    what[0] = 0;
    if (dock_readback_compare(pa, pb, what, cap) == 0)
        snprintf(what, cap, "%s", "");
    json_decref(a), json_decref(b), json_decref(pa), json_decref(pb);
    return what;
}

int main(void)
{
    char w[32];
    CHECK_STR(changed(NULL, "Name", "\"/other\"", w, sizeof w), ""); /* not part of the sandbox */
    CHECK_STR(changed("HostConfig", "PidsLimit", "65", w, sizeof w), "pids_limit");
    CHECK_STR(changed("HostConfig", "Runtime", "\"runsc\"", w, sizeof w), "runtime");
    CHECK_STR(changed(NULL, "Image", "\"sha256:bb\"", w, sizeof w), "image");
    CHECK_STR(changed("HostConfig", "SecurityOpt", "[\"seccomp={}\",\"no-new-privileges\"]", w, sizeof w),
              "security_opt"); /* order is as dockerd reports it: a reorder is a change */
    CHECK_STR(changed("HostConfig", "NetworkMode", "\"bridge\"", w, sizeof w), "network_mode");
    CHECK_STR(changed("HostConfig", "CapAdd", "[\"SYS_ADMIN\"]", w, sizeof w), "cap_add");
    CHECK_STR(changed("HostConfig", "CapAdd", "null", w, sizeof w), ""); /* null was already there */
    CHECK_STR(changed("HostConfig", "Binds", "[\"/:/host\"]", w, sizeof w), "binds");
    CHECK_STR(changed("HostConfig", "Binds", "null", w, sizeof w), ""); /* absent equals null */
    CHECK_STR(changed(NULL, "Mounts", "[{\"Type\":\"bind\",\"Source\":\"/\"}]", w, sizeof w), "mounts");
    CHECK_STR(changed("HostConfig", "Memory", "0", w, sizeof w), "memory");
    CHECK_STR(changed("HostConfig", "Privileged", "true", w, sizeof w), "privileged");
    CHECK_STR(changed("Config", "User", "\"0\"", w, sizeof w), "user");
    CHECK_STR(changed("HostConfig", "Tmpfs", "{\"/work\":\"size=64m,exec\"}", w, sizeof w), "tmpfs");
    CHECK_STR(changed(NULL, "HostConfig", "7", w, sizeof w), "runtime"); /* a hostile shape: every field gone */

    /* a snapshot missing a field (never made by take, but never trusted) is a difference */
    json_t *a = json_loads(base, 0, NULL), *pa = dock_readback_of(a), *pb = json_object();
    CHECK(dock_readback_compare(pa, pb, w, sizeof w) == 1 && !strcmp(w, "image"));
    json_decref(a), json_decref(pa), json_decref(pb);
    return unit_done();
}
