/* fuzz_e2b_stream.c: the parser of envd's Connect process stream (src/providers/e2b/stream.c),
 * which reads whatever E2B's data plane sends. The first byte chooses how the rest is cut into
 * chunks (the transport's boundaries are arbitrary); the second the per-stream keep limit. What
 * the parser reports is checked against the invariants process.c relies on. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "../src/providers/e2b/stream.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 2)
        return 0;
    size_t chunk = (size_t)data[0] + 1, keep = (size_t)data[1] * 16;
    data += 2, size -= 2;
    struct e2b_stream s;
    e2b_stream_init(&s, keep);
    int r = 0;
    for (size_t off = 0; off < size; off += chunk) {
        size_t n = size - off < chunk ? size - off : chunk;
        int nr = e2b_stream_feed(&s, data + off, n);
        if (r != 0 && nr != r && !(r == 1 && nr == -1))
            abort(); /* a verdict, once given, only ever worsens to an error */
        r = nr;
        if (r < 0)
            break;
    }
    if (r == 0)
        e2b_stream_finish(&s);
    if (s.out.len > keep || s.err.len > keep || s.total > E2B_STREAM_MAX)
        abort();
    if (s.failed && !s.fail[0])
        abort();
    if (s.over_budget && !(s.out_truncated && s.err_truncated))
        abort();
    e2b_stream_done(&s);
    return 0;
}
