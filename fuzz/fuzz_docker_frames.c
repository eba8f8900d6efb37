/* fuzz_docker_frames.c: the docker provider's parsers over container and dockerd bytes
 * (src/providers/docker/frames.c): the attach stream's framing fed in fuzzer-chosen chunks, a
 * snippet's end-line splitter, the report-frame finder (with its incremental completeness check)
 * and the report-body decoder. The first input byte picks chunk sizes; the rest is the stream.
 * The MAC never verifies for fuzzed bytes, so the body decoder is also driven directly. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "../src/providers/docker/frames.h"

static void sink(void *ctx, int stream, const uint8_t *p, size_t n)
{
    struct dock_bytes *b = ctx;
    dock_bytes_add(&b[stream == DOCK_STDERR], p, n);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    size_t chunk = (size_t)data[0] % 64 + 1;
    data++, size--;

    struct dock_mux m = {0};
    struct dock_bytes out[2] = {{.max = 4096}, {.max = 4096}};
    for (size_t i = 0; i < size; i += chunk)
        if (dock_mux_feed(&m, data + i, size - i < chunk ? size - i : chunk, sink, out) < 0)
            break;
    (void)dock_mux_idle(&m);
    dock_bytes_done(&out[0]);
    dock_bytes_done(&out[1]);

    static const char end[] = DOCK_END_PREFIX "0123456789abcdef0123456789abcdef";
    struct dock_endline el = {.keep = {.max = 1024}};
    for (size_t i = 0; i < size; i += chunk)
        dock_endline_feed(&el, end, data + i, size - i < chunk ? size - i : chunk);
    dock_endline_flush(&el);
    dock_bytes_done(&el.keep);

    static const uint8_t key[RW_KEY_LEN] = {1, 2, 3};
    const uint8_t *body = NULL;
    size_t blen = 0, scan = 0;
    for (size_t i = chunk; i < size; i += chunk)
        (void)dock_report_complete(data, i, &scan);
    (void)dock_report_complete(data, size, &scan);
    (void)dock_report_find(data, size, key, &body, &blen);

    static const char *const steps[] = {"echo one", "node main.js", ""};
    static const char *const arts[] = {"out.txt", "bin.dat", "a/b"};
    struct plm_project_result pr;
    char *error = NULL;
    if (dock_report_decode(data, size, steps, 3, arts, 3, &pr, &error) == 0) {
        free(error);
        dock_project_result_done(&pr);
    }
    return 0;
}
