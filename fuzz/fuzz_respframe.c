/* fuzz_respframe.c: libFuzzer target for the relay's response-framing tracker (respframe.h).
 * Any bytes: no crash, and the verdict does not depend on how the bytes are split (fed whole,
 * then in two pieces at a point the input chooses). */
#include <stdint.h>
#include <stdlib.h>

#include "../src/server/respframe.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 2)
        return 0;
    bool head = data[0] & 1;
    size_t cut = data[1] % (size - 1);
    const char *s = (const char *)data + 2;
    size_t n = size - 2;
    if (cut > n)
        cut = n;
    struct respframe a, b;
    respframe_expect(&a, head);
    respframe_expect(&b, head);
    int whole = respframe_feed(&a, s, n);
    int first = respframe_feed(&b, s, cut);
    int second = first < 0 ? -1 : respframe_feed(&b, s + cut, n - cut);
    int split = first < 0 || second < 0 ? -1 : first + second;
    if (whole != split)
        abort();
    return 0;
}
