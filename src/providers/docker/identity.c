/* identity.c: the software identity of a docker image (issue 14 §7; wire.md §4.2), so that a
 * software rule can be met on docker instead of always refused.
 * Owns: nothing (pure functions over the image inspect answer).
 * Trusts: nothing in the inspect answer: the platform fields must be short lowercase tokens and
 * the ID a sha256 digest, or no identity is stated (and every rule is refused, as before).
 * Invariant: the identity is content-addressed: oci-config:<os>/<arch>[/<variant>]@sha256:<hex>,
 * the hex being the image ID, i.e. the digest of the image configuration, which names every
 * layer by the digest of its uncompressed content (rootfs.diff_ids). Why the configuration and
 * not a registry manifest digest: docs/docker.md "Software identity". */
#include <stdio.h>
#include <string.h>

#include "internal.h"

static bool token_ok(const char *s, size_t max)
{
    size_t n = 0;
    for (; s && *s; s++, n++)
        if (!((*s >= 'a' && *s <= 'z') || (*s >= '0' && *s <= '9') || *s == '_'))
            return false;
    return s && n > 0 && n <= max;
}

int dock_platform(const json_t *inspect, char *out, size_t cap, struct plm_err *err)
{
    const char *os = json_string_value(json_object_get(inspect, "Os"));
    const char *arch = json_string_value(json_object_get(inspect, "Architecture"));
    const json_t *vv = json_object_get(inspect, "Variant");
    const char *variant = json_string_value(vv);
    if (!token_ok(os, 16) || !token_ok(arch, 16))
        return plm_fail(err, 0, PLM_E_INVALID, "image inspect: Os and Architecture must be short lowercase tokens");
    if (vv && !json_is_null(vv) && !(variant && (!*variant || token_ok(variant, 16))))
        return plm_fail(err, 0, PLM_E_INVALID, "image inspect: Variant is not a short token");
    int n = variant && *variant ? snprintf(out, cap, "%s/%s/%s", os, arch, variant) : snprintf(out, cap, "%s/%s", os, arch);
    if (n < 0 || (size_t)n >= cap)
        return plm_fail(err, 0, PLM_E_INVALID, "image inspect: platform too long");
    return 0;
}

static bool digest_ok(const char *h) /* 64 lowercase hex, as dock_id_ok (kept here: no engine.c) */
{
    size_t n = 0;
    for (; h[n]; n++)
        if (!((h[n] >= '0' && h[n] <= '9') || (h[n] >= 'a' && h[n] <= 'f')))
            return false;
    return n == 64;
}

int dock_software_identity(const char *platform, const char *image_id, char *out, size_t cap)
{
    *out = 0;
    if (!platform || !*platform || !image_id || strncmp(image_id, "sha256:", 7) != 0 || !digest_ok(image_id + 7))
        return -1;
    int n = snprintf(out, cap, "oci-config:%s@%s", platform, image_id);
    if (n < 0 || (size_t)n >= cap) {
        *out = 0;
        return -1;
    }
    return 0;
}
