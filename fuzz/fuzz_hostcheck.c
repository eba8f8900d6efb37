/* fuzz_hostcheck.c: libFuzzer target for the Host check (src/server/hostcheck.c), whose Host
 * value comes from any peer. Input: "<Host value>\n<PLIMSOLL_ALLOWED_HOSTS>" (the list part
 * optional). Traps when, with no list and no local address, a Host other than localhost,
 * 127.0.0.1 or [::1] (any case, any port) is let through, or when adding a list refuses a Host
 * that no list let through (a list only adds names). Both functions run over every input. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "../src/server/hostcheck.h"

static int builtin(const char *h, size_t n)
{
    size_t hl = n;
    if (n && h[0] == '[') {
        const char *rb = memchr(h, ']', n);
        hl = rb ? (size_t)(rb - h) + 1 : n;
    } else {
        const char *c = memchr(h, ':', n);
        if (c)
            hl = (size_t)(c - h);
    }
    return (hl == 9 && !strncasecmp(h, "localhost", 9)) || (hl == 9 && !memcmp(h, "127.0.0.1", 9)) ||
           (hl == 5 && !memcmp(h, "[::1]", 5));
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *p = (const char *)data;
    const char *nl = memchr(p, '\n', size);
    size_t hl = nl ? (size_t)(nl - p) : size;
    char *list = NULL;
    if (nl) {
        list = malloc(size - hl);
        memcpy(list, nl + 1, size - hl - 1);
        list[size - hl - 1] = 0;
    }
    int bare = hostcheck_ok(p, hl, NULL, NULL);
    if (bare && !builtin(p, hl))
        __builtin_trap();
    if (list) {
        char why[256];
        (void)hostcheck_parse_list(list, why, sizeof why);
        int with = hostcheck_ok(p, hl, NULL, list);
        if (bare && !with)
            __builtin_trap(); /* a list only adds names */
    }
    free(list);
    return 0;
}
