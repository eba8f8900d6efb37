/* frame_fuzz.c: libFuzzer target for the worker/zygote frame decoders (frame.c), the parsers
 * the daemon runs on bytes a possibly compromised worker wrote (STYLE.md §10).
 * Build (fuzz build only): clang -fsanitize=fuzzer,address,undefined frame_fuzz.c frame.c
 * Invariant checked: no decoder reads outside its buffer; an accepted RESULT, RUN, HOST_CALL or
 * HOST_REPLY never claims more than its caps or more bytes than it carries, and an accepted
 * HOST_CALL's method and path are text without NUL; the UTF-8 repair always yields text. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "../../core/limits.h"
#include "frame.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < F16_HDR_LEN)
        return 0;
    struct f16_hdr h;
    if (qf_hdr_decode(data, &h) < 0)
        return 0;
    const uint8_t *p = data + F16_HDR_LEN;
    size_t n = size - F16_HDR_LEN;
    if (n > h.len)
        n = h.len;
    struct qf_result res;
    if (qf_result_decode(p, n, &res) == 0) {
        if (res.out_len > LIM_OUTPUT_MAX || res.err_len > LIM_OUTPUT_MAX ||
            (size_t)QF_RESULT_FIXED + res.out_len + res.err_len != n)
            abort();
    }
    struct qf_run run;
    if (qf_run_decode(p, n, &run) == 0 &&
        (run.code_len == 0 || run.code_len > LIM_CODE_MAX || run.client_len > QF_CLIENT_MAX ||
         (run.client_len && !(run.flags & QF_RUN_GRANT)) || (size_t)QF_RUN_FIXED + run.client_len + run.code_len != n))
        abort();
    /* Host calls: what a possibly compromised worker sends the monitor on every grant call. */
    struct qf_host_call hc;
    if (qf_host_call_decode(p, n, &hc) == 0 &&
        (hc.call_no == 0 || hc.method_len == 0 || hc.method_len > QF_HOST_METHOD_MAX || hc.path_len == 0 ||
         hc.path_len > QF_HOST_PATH_MAX || hc.body_len > QF_HOST_BODY_MAX ||
         (size_t)QF_HOST_CALL_FIXED + hc.method_len + hc.path_len + hc.body_len != n ||
         !qf_text_ok(hc.method, hc.method_len) || !qf_text_ok(hc.path, hc.path_len) ||
         memchr(hc.path, 0, hc.path_len) != NULL))
        abort();
    struct qf_host_reply hr;
    if (qf_host_reply_decode(p, n, &hr) == 0 &&
        (hr.body_len > QF_HOST_REPLY_MAX || (size_t)QF_HOST_REPLY_FIXED + hr.body_len != n ||
         ((hr.flags & QF_HR_DEADLINE) ? hr.status != 0 : (hr.status < 100 || hr.status > 599))))
        abort();
    /* The UTF-8 repair never writes past 3x its input and its output is always valid text
     * (NULs aside, which it keeps). */
    if (n <= 4096) {
        static uint8_t out[3 * 4096];
        size_t k = qf_utf8_repair(p, n, NULL);
        if (k > 3 * n || qf_utf8_repair(p, n, out) != k)
            abort();
        for (size_t i = 0; i < k; i++)
            if (out[i] == 0)
                out[i] = ' ';
        if (!qf_text_ok(out, k))
            abort();
    }
    struct f16_reader r;
    f16_reader_init(&r, p, n);
    while (!r.bad && f16_get_bytes(&r, 3))
        ;
    (void)f16_reader_finish(&r);
    return 0;
}
