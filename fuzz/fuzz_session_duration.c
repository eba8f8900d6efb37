/* fuzz_session_duration.c: the Go-duration parser of the session variables (sessions.md §3.1).
 * Operator input, but it is a hand-written parser with overflow arithmetic: any byte string must
 * parse or fail without a sanitizer report, and an accepted value must re-check as in range of
 * what Go itself accepts (at most INT64_MAX nanoseconds). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "../src/daemon/session_config.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *s = malloc(size + 1);
    if (!s)
        return 0;
    memcpy(s, data, size);
    s[size] = 0;
    uint64_t ms = 0;
    if (session_parse_duration(s, &ms) == 0 && ms > (uint64_t)INT64_MAX / 1000000)
        abort(); /* more than Go's duration range was accepted */
    free(s);
    return 0;
}
