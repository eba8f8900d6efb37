/* fuzz_pyprobe.c: the judge of the Python startup probe (src/core/pylang.c) over a step result a
 * guest wrote: any stdout/stderr bytes and exit status must be judged without a sanitizer report,
 * the observed text must be printable ASCII and NUL-terminated, and a pass must name Python. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "../src/core/pylang.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 2)
        return 0;
    size_t split = data[0] % size; /* first byte: where stdout ends and stderr begins */
    struct plm_step_result st = {.exit_code = (int8_t)data[1], .timed_out = data[0] & 0x80};
    st.out.data = (uint8_t *)data + 2;
    st.out.len = split > 2 ? split - 2 : 0;
    st.err.data = (uint8_t *)data + 2 + st.out.len;
    st.err.len = size - 2 - st.out.len;
    char obs[160];
    memset(obs, 0x7f, sizeof obs);
    bool ok = plm_py_probe_judge(&st, obs, sizeof obs);
    size_t n = strnlen(obs, sizeof obs);
    if (n == sizeof obs)
        abort(); /* not terminated */
    for (size_t i = 0; i < n; i++)
        if (obs[i] < 0x20 || obs[i] > 0x7e)
            abort(); /* guest bytes reached the card unfiltered */
    if (ok && strncmp(obs, "Python ", 7) != 0)
        abort();
    return 0;
}
