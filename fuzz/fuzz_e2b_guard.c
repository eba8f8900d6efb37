/* fuzz_e2b_guard.c: the e2b egress guard's request parser (src/providers/e2b/guardparse.c): the
 * body of a call a granted guest sends to the guard, and the token format check. Whatever it
 * accepts must be a canonical call: one of the five methods, a non-empty NUL-free path, a body of
 * the stated length. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "../src/providers/e2b/guard.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    (void)e2b_guard_token_ok((const char *)data, size);
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
        e2b_guard_call_done(&c);
    } else if (st != 400 || !why[0]) {
        abort();
    }
    return 0;
}
