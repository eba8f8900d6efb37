/* fuzz_docker_posture.c: the docker host posture parser (src/providers/docker/posture.c) over
 * whatever dockerd's /info and a container's inspect answer hold. The first byte picks the peer
 * uid the socket reported; the rest is the JSON. Checked: a stated mode always agrees with the
 * uid, every string is NUL-terminated printable ASCII, the card lines never overflow. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "../src/providers/docker/internal.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void printable_or_abort(const char *s, size_t cap)
{
    size_t n = strnlen(s, cap);
    if (n == cap)
        abort();
    for (size_t i = 0; i < n; i++)
        if (s[i] < 0x20 || s[i] >= 0x7f)
            abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    long uid = data[0] == 0xff ? -1 : data[0] < 0x80 ? 0 : (long)data[0];
    json_error_t je;
    json_t *j = json_loadb((const char *)data + 1, size - 1, JSON_DECODE_ANY | JSON_ALLOW_NUL, &je);
    struct dock_posture p;
    struct plm_err err = {0};
    int r = dock_posture_from_info(j, uid, &p, &err);
    if (r == 0) {
        if (p.mode == DOCK_MODE_ROOTLESS && uid <= 0)
            abort();
        if ((p.mode == DOCK_MODE_ROOTFUL || p.mode == DOCK_MODE_USERNS_REMAP) && uid != 0)
            abort();
        printable_or_abort(p.security_options, sizeof p.security_options);
        printable_or_abort(p.seccomp_default, sizeof p.seccomp_default);
        printable_or_abort(p.server_version, sizeof p.server_version);
        printable_or_abort(p.cgroup_version, sizeof p.cgroup_version);
        printable_or_abort(p.cgroup_driver, sizeof p.cgroup_driver);
        dock_posture_container(j, 0, &p);
        printable_or_abort(p.apparmor_profile, sizeof p.apparmor_profile);
        printable_or_abort(p.selinux_label, sizeof p.selinux_label);
        static struct plm_evidence ev;
        memset(&ev, 0, sizeof ev);
        if (dock_posture_lines(&p, "runc", "1", "", &ev) < 0)
            abort();
    } else if (p.mode != DOCK_MODE_UNKNOWN || !err.msg[0]) {
        abort();
    }
    char plat[56];
    if (dock_platform(j, plat, sizeof plat, &err) == 0)
        printable_or_abort(plat, sizeof plat);
    json_decref(j);
    return 0;
}
