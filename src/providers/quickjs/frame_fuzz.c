/* frame_fuzz.c: libFuzzer target for the worker/zygote frame decoders (frame.c), the parsers
 * the daemon runs on bytes a possibly compromised worker wrote (STYLE.md §10).
 * Build (fuzz build only): clang -fsanitize=fuzzer,address,undefined frame_fuzz.c frame.c
 * Invariant checked: no decoder reads outside its buffer, and an accepted RESULT never claims
 * more than LIM_OUTPUT_MAX bytes per stream or more bytes than it carries. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include "../../core/limits.h"
#include "frame.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < QF_HDR_LEN)
        return 0;
    struct qf_hdr h;
    if (qf_hdr_decode(data, &h) < 0)
        return 0;
    const uint8_t *p = data + QF_HDR_LEN;
    size_t n = size - QF_HDR_LEN;
    if (n > h.len)
        n = h.len;
    struct qf_result res;
    if (qf_result_decode(p, n, &res) == 0) {
        if (res.out_len > LIM_OUTPUT_MAX || res.err_len > LIM_OUTPUT_MAX ||
            (size_t)QF_RESULT_FIXED + res.out_len + res.err_len != n)
            abort();
    }
    struct qf_run run;
    if (qf_run_decode(p, n, &run) == 0 && (run.code_len == 0 || run.code_len + QF_RUN_FIXED != n))
        abort();
    struct qf_reader r;
    qf_reader_init(&r, p, n);
    while (!r.bad && qf_get_bytes(&r, 3))
        ;
    (void)qf_reader_finish(&r);
    return 0;
}
