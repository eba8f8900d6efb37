/* fuzz_httphead.c: libFuzzer target for the gate's strict request-head check (raw bytes from any
 * peer, before authentication). A head it accepts must end in CRLFCRLF, hold no NUL, bare CR or
 * bare LF, fit in 32 KiB, and be accepted again on its own (the verdict depends only on the head). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "../src/core/limits.h"
#include "../src/server/httphead.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct httphead h;
    const char *s = (const char *)data;
    if (httphead_check(s, size, &h) != HTTPHEAD_OK)
        return 0;
    if (h.head_len < 4 || h.head_len > size || h.head_len > LIM_HEADER_MAX ||
        memcmp(s + h.head_len - 4, "\r\n\r\n", 4) != 0 || memchr(s, 0, h.head_len))
        abort();
    for (size_t i = 0; i < h.head_len; i++)
        if ((s[i] == '\n' && (i == 0 || s[i - 1] != '\r')) || (s[i] == '\r' && s[i + 1] != '\n'))
            abort();
    struct httphead again;
    if (httphead_check(s, h.head_len, &again) != HTTPHEAD_OK || again.head_len != h.head_len)
        abort();
    return 0;
}
