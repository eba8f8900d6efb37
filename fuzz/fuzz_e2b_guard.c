/* fuzz_e2b_guard.c: the e2b egress guard's request parser (src/guestio/guardparse.c, run
 * only in the confined guestio helper, which is never sanitized): the body of a call a granted
 * guest sends to the guard. Whatever it accepts must be a canonical call: one of the five
 * methods, a non-empty NUL-free path, a body of the stated length; and it must fit the GCALL
 * frame the helper sends the daemon (src/guestio/frame.c), which must decode it back. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "../src/guestio/frame.h"
#include "../src/guestio/guardparse.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct e2b_guard_call c;
    char why[128];
    int st = e2b_guard_parse(data, size, &c, why, sizeof why);
    if (st == 0) {
        static const char *m[] = {"GET", "PUT", "POST", "DELETE", "PATCH"};
        int ok = 0;
        for (int i = 0; i < 5; i++)
            ok |= !strcmp(c.method, m[i]);
        if (!ok || !c.path || !*c.path || (c.len && !c.body) || (!c.len && c.body))
            abort();
        /* what the helper does with it: one GCALL the daemon's decoder takes back unchanged */
        struct gio_gcall g = {.cred = (const uint8_t *)"crg_x", .cred_len = 5, .verdict = GIO_V_CALL,
                              .path = (const uint8_t *)c.path, .path_len = strlen(c.path), .body = c.body,
                              .body_len = c.len};
        for (int i = 0; i < GIO_GM_COUNT; i++)
            if (!strcmp(c.method, gio_gmethod_name[i]))
                g.method = i;
        size_t n = gio_gcall_size(&g);
        uint8_t *f = n ? malloc(n) : NULL;
        struct gio_gcall d;
        if (n && f && (gio_gcall_encode(f, n, &g) != n || gio_gcall_decode(f, n, &d) < 0 || d.path_len != g.path_len ||
                       d.body_len != g.body_len || d.method != g.method))
            abort();
        free(f);
        e2b_guard_call_done(&c);
    } else if (st != 400 || !why[0]) {
        abort();
    }
    return 0;
}
