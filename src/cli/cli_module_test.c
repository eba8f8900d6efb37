/* cli_module_test.c: the pure parts of `plimsoll module` (module_rows.c): the CSV rows parser
 * (values, widths, limits, the line and column of each error) and the exact double printer (every
 * printed double read back bit for bit, and no longer than it must be). */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "../core/module.h"
#include "cli.h"
#include "unit.h"

static uint64_t bits(double x)
{
    uint64_t u;
    memcpy(&u, &x, sizeof u);
    return u;
}

static bool round_trips(double x)
{
    char b[32];
    size_t n = cli_fmt_double(x, b);
    return n == strlen(b) && bits(strtod(b, NULL)) == bits(x);
}

static const char *fmt(double x)
{
    static char b[32];
    cli_fmt_double(x, b);
    return b;
}

/* Digits from the first non-zero one to the last non-zero one, before any exponent. */
static int significant_digits(const char *b)
{
    int first = -1, last = -1, i = 0;
    for (const char *p = b; *p && *p != 'e'; p++) {
        if (*p < '0' || *p > '9')
            continue;
        if (*p != '0') {
            if (first < 0)
                first = i;
            last = i;
        }
        i++;
    }
    return first < 0 ? 0 : last - first + 1;
}

static void test_doubles(void)
{
    CHECK_STR(fmt(0.0), "0");
    CHECK_STR(fmt(-0.0), "-0");
    CHECK_STR(fmt(0.1), "0.1");
    CHECK_STR(fmt(0.1 + 0.2), "0.30000000000000004");
    CHECK_STR(fmt(5e-324), "5e-324");
    CHECK_STR(fmt(100.0), "100");
    CHECK_STR(fmt(1.5e10), "15000000000");
    CHECK_STR(fmt(1e16), "10000000000000000");
    CHECK_STR(fmt(1e17), "1e+17");
    CHECK_STR(fmt(0.001), "0.001");
    CHECK_STR(fmt(1e-5), "1e-05");
    CHECK_STR(fmt(2.2250738585072014e-308), "2.2250738585072014e-308");
    CHECK_STR(fmt(1.7976931348623157e308), "1.7976931348623157e+308");
    CHECK_STR(fmt(1e21), "1e+21");
    CHECK_STR(fmt(-1.5), "-1.5");
    CHECK_STR(fmt(NAN), "nan");
    CHECK_STR(fmt(INFINITY), "inf");
    CHECK_STR(fmt(-INFINITY), "-inf");
    char j[32];
    cli_fmt_double_json(NAN, j);
    CHECK_STR(j, "\"NaN\"");
    cli_fmt_double_json(INFINITY, j);
    CHECK_STR(j, "\"Infinity\"");
    cli_fmt_double_json(-INFINITY, j);
    CHECK_STR(j, "\"-Infinity\"");
    cli_fmt_double_json(-0.0, j);
    CHECK_STR(j, "-0");
    cli_fmt_double_json(5e-324, j);
    CHECK_STR(j, "5e-324");
    double fixed[] = {0.0, -0.0, 5e-324, -5e-324, 0.1 + 0.2, 1.0 / 3.0, 2.2250738585072009e-308,
                      1.7976931348623157e308, 123456789012345680.0, 9007199254740993.0, 1e-300, M_PI};
    for (size_t i = 0; i < sizeof fixed / sizeof fixed[0]; i++)
        CHECK(round_trips(fixed[i]));
    /* Pseudo-random bit patterns across the whole range (xorshift; NaN patterns skipped). */
    uint64_t s = 0x9e3779b97f4a7c15u;
    int bad = 0, longer = 0;
    for (int i = 0; i < 200000; i++) {
        s ^= s << 13, s ^= s >> 7, s ^= s << 17;
        double x;
        memcpy(&x, &s, sizeof x);
        if (isnan(x))
            continue;
        if (!round_trips(x))
            bad++;
        /* Shortest: one significant digit fewer no longer reads back. */
        char b[32], c[400];
        cli_fmt_double(x, b);
        int digits = significant_digits(b);
        if (digits > 1 && x != 0) {
            snprintf(c, sizeof c, "%.*g", digits - 1, x);
            if (strtod(c, NULL) == x)
                longer++;
        }
    }
    CHECK(bad == 0);
    CHECK(longer == 0);
}

static int parse(const char *text, struct cli_rows *r, char *why)
{
    return cli_rows_parse(text, strlen(text), r, why, 256);
}

static void test_rows_ok(void)
{
    struct cli_rows r;
    char why[256] = "";
    CHECK(parse("1,2,3\n-0.0, 5e-324 ,0.30000000000000004\n", &r, why) == 0);
    CHECK(r.n_rows == 2 && r.width == 3);
    CHECK(r.values[0] == 1 && r.values[2] == 3);
    CHECK(bits(r.values[3]) == bits(-0.0));
    CHECK(bits(r.values[4]) == bits(5e-324));
    CHECK(bits(r.values[5]) == bits(0.1 + 0.2));
    cli_rows_done(&r);
    CHECK(parse("# mu\n\n2.5\r\n  \n3\n", &r, why) == 0);
    CHECK(r.n_rows == 2 && r.width == 1 && r.values[0] == 2.5 && r.values[1] == 3);
    cli_rows_done(&r);
    CHECK(parse("7", &r, why) == 0); /* no final newline */
    CHECK(r.n_rows == 1 && r.values[0] == 7);
    cli_rows_done(&r);
    /* 64 values, and many rows (the growth path) */
    char line[64 * 3 + 2] = "";
    for (int i = 0; i < 64; i++)
        strcat(line, i ? ",1" : "1");
    CHECK(parse(line, &r, why) == 0 && r.width == 64);
    cli_rows_done(&r);
    size_t n = 5000;
    char *big = malloc(n * 8 + 1);
    for (size_t i = 0; i < n; i++)
        memcpy(big + i * 6, "1,2.5\n", 6);
    big[n * 6] = '\0';
    CHECK(parse(big, &r, why) == 0 && r.n_rows == n && r.width == 2 && r.values[2 * n - 1] == 2.5);
    cli_rows_done(&r);
    free(big);
}

static void bad(const char *text, const char *want)
{
    struct cli_rows r;
    char why[256] = "";
    int rc = parse(text, &r, why);
    CHECK(rc == -1);
    CHECK(r.values == NULL && r.n_rows == 0);
    CHECK_STR(why, want);
}

static void test_rows_bad(void)
{
    bad("1,2\n3,x\n", "line 2, column 3: `x` is not a decimal number");
    bad("1,2\n3\n", "line 2: 1 values, but the first row has 2 (every row must have the same width)");
    bad("1,2\n3,4,5\n", "line 2: 3 values, but the first row has 2 (every row must have the same width)");
    bad("1,,2\n", "line 1, column 3: empty value");
    bad("1,2,\n", "line 1, column 5: empty value");
    bad("nan\n", "line 1, column 1: `nan` is not a decimal number");
    bad("inf\n", "line 1, column 1: `inf` is not a decimal number");
    bad("0x1p3\n", "line 1, column 1: `0x1p3` is not a decimal number");
    bad("1e999\n", "line 1, column 1: `1e999` is out of range (not a finite double)");
    bad("1, 2 3\n", "line 1, column 4: `2 3` is not a decimal number");
    bad("1e\n", "line 1, column 1: `1e` is not a decimal number");
    bad(".\n", "line 1, column 1: `.` is not a decimal number");
    bad("", "no rows (give at least one line of comma-separated numbers)");
    bad("# only a comment\n\n", "no rows (give at least one line of comma-separated numbers)");
    struct cli_rows r;
    char why[256];
    CHECK(cli_rows_parse("1\n\0\n", 4, &r, why, sizeof why) == -1);
    CHECK_STR(why, "line 2: a NUL byte");
    char line[65 * 2 + 1] = "";
    for (int i = 0; i < 65; i++)
        strcat(line, i ? ",1" : "1");
    bad(line, "line 1, column 129: more than 64 values in a row");
    size_t n = PLM_MODULE_ROWS_MAX + 1;
    char *big = malloc(n * 2 + 1);
    for (size_t i = 0; i < n; i++)
        big[2 * i] = '1', big[2 * i + 1] = '\n';
    big[2 * n] = '\0';
    bad(big, "line 100001: more than 100000 rows (the daemon's limit)");
    big[2 * (n - 1)] = '\0';
    CHECK(parse(big, &r, why) == 0 && r.n_rows == PLM_MODULE_ROWS_MAX);
    cli_rows_done(&r);
    free(big);
}

static void test_exit_status(void)
{
    struct cli_outcome o = {.verdict = CLI_V_RAN};
    Plimsoll__V1__ModuleResult m = PLIMSOLL__V1__MODULE_RESULT__INIT;
    m.outcome = PLIMSOLL__V1__PROJECT_OUTCOME__PROJECT_OUTCOME_COMPLETED;
    CHECK(cli_exit_status_module(&o, &m) == 0);
    m.outcome = PLIMSOLL__V1__PROJECT_OUTCOME__PROJECT_OUTCOME_TIMED_OUT;
    CHECK(cli_exit_status_module(&o, &m) == 124);
    m.outcome = PLIMSOLL__V1__PROJECT_OUTCOME__PROJECT_OUTCOME_SETUP_FAILED;
    CHECK(cli_exit_status_module(&o, &m) == 1);
    CHECK(cli_exit_status_module(&o, NULL) == CLI_EXIT_RECORD);
    o.verdict = CLI_V_REFUSED;
    CHECK(cli_exit_status_module(&o, &m) == CLI_EXIT_REFUSED);
}

int main(void)
{
    test_doubles();
    test_rows_ok();
    test_rows_bad();
    test_exit_status();
    return unit_done();
}
