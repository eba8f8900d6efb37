/* fuzz_e2b_cellscan.c: the end-of-cell marker scanner (src/providers/e2b/cellscan.c), which reads
 * whatever a session's interpreter prints. The first byte chooses the chunk size (the stream's
 * boundaries are arbitrary), the second the keep limit and which marker form (stdout or stderr).
 * Checked: the kept output stays within the limit, a verdict only ever stays, the bytes used never
 * exceed what was fed, and a found marker has a status within its digit bound. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "../src/providers/e2b/cellscan.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 2)
        return 0;
    size_t chunk = (size_t)data[0] + 1, keep = (size_t)(data[1] >> 1) * 8;
    bool with_status = data[1] & 1;
    data += 2, size -= 2;
    struct e2b_cellscan c;
    if (e2b_cellscan_init(&c, "00112233445566778899aabbccddeeff", with_status, keep) < 0)
        abort();
    int r = 0;
    uint64_t fed = 0;
    for (size_t off = 0; off < size; off += chunk) {
        size_t n = size - off < chunk ? size - off : chunk, used = 99;
        int nr = e2b_cellscan_feed(&c, data + off, n, &used);
        if (used > n || (r != 0 && (nr != r || used != 0)))
            abort();
        fed += used;
        r = nr;
    }
    if (c.out.len > keep || c.seen > fed || (c.out.len < c.seen && !c.truncated && c.matched == 0 && r == 0))
        abort();
    if (r == 1 && (c.status > 999999 || c.status < -99999))
        abort();
    e2b_cellscan_done(&c);
    return 0;
}
