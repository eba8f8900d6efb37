/* fuzz_module.c: the two module formats that cross a trust line (issue 21). Byte 0 picks:
 * even: the PLSM record decoder (core/module.c) over bytes a worker wrote, against a request whose
 *       shape (rows 1..4, width 1..3, end/step) comes from bytes 1..3; every answer is checked
 *       against the request (runs = rows, outputs = status x width, only the canonical NaN);
 * odd:  the worker's params.txt reader (src/module/params.c) over the rest. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "../src/core/module.h"
#include "../src/module/params.h"

static void plsm(const uint8_t *data, size_t size)
{
    if (size < 4)
        return;
    size_t rows = 1 + data[1] % 4, width = 1 + data[2] % 3;
    double end = 1 + data[3] % 8, step = 0.5;
    double vals[4][3] = {{0}};
    struct plm_row r[4];
    for (size_t i = 0; i < rows; i++)
        r[i] = (struct plm_row){vals[i], width};
    struct plm_request q = {.kind = PLM_KIND_MODULE,
                            .module = {.model = "M", .rows = r, .n_rows = rows, .end_time = end, .step = step}};
    struct plm_module_result m = {0};
    const char *why = NULL;
    if (plm_plsm_decode(data + 4, size - 4, &q, &m, &why) < 0) {
        if (m.runs || m.n_runs || !why)
            abort();
        return;
    }
    if (m.n_runs != rows || m.width < 1)
        abort();
    for (size_t i = 0; i < m.n_runs; i++) {
        int32_t st = m.runs[i].status;
        size_t want = st > 0 ? (size_t)st * (size_t)m.width : 0;
        if (m.runs[i].n_outputs != want || (uint64_t)(st > 0 ? st : 0) > plm_module_max_steps(end, step))
            abort();
        for (size_t k = 0; k < m.runs[i].n_outputs; k++) {
            uint64_t u;
            memcpy(&u, &m.runs[i].outputs[k], 8);
            if (isnan(m.runs[i].outputs[k]) && u != 0x7ff8000000000000ull)
                abort();
        }
    }
    plm_module_runs_free(&m);
}

static void params(const uint8_t *data, size_t size)
{
    struct params p;
    char why[160];
    if (params_parse((const char *)data, size, &p, why, sizeof why) < 0)
        return;
    if (p.rows < 1 || p.rows > PARAMS_ROWS_MAX || p.width < 1 || p.width > PARAMS_WIDTH_MAX)
        abort();
    for (size_t i = 0; i < p.rows * p.width; i++)
        if (!isfinite(p.v[i]))
            abort();
    params_free(&p);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    if (data[0] & 1)
        params(data + 1, size - 1);
    else
        plsm(data, size);
    return 0;
}
