/* fuzz_cli_rows.c: libFuzzer target for `plimsoll module`'s rows file parser and exact double
 * printer (src/cli/module_rows.c). Traps when an accepted table breaks the daemon's bounds (rows,
 * width), holds a non-finite value, or when a printed value does not read back as the same bits;
 * and when a refusal keeps anything or gives no line number. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "../src/cli/cli.h"
#include "../src/core/module.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct cli_rows r;
    char why[256];
    if (cli_rows_parse((const char *)data, size, &r, why, sizeof why) < 0) {
        if (r.values || r.n_rows || !why[0])
            __builtin_trap();
        return 0;
    }
    if (r.n_rows < 1 || r.n_rows > PLM_MODULE_ROWS_MAX || r.width < 1 || r.width > PLM_MODULE_WIDTH_MAX)
        __builtin_trap();
    for (size_t i = 0; i < r.n_rows * r.width; i++) {
        double x = r.values[i];
        char b[32];
        if (!isfinite(x))
            __builtin_trap();
        size_t n = cli_fmt_double(x, b);
        double y = strtod(b, NULL);
        if (n != strlen(b) || memcmp(&x, &y, sizeof x) != 0)
            __builtin_trap();
    }
    cli_rows_done(&r);
    return 0;
}
