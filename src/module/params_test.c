/* params_test.c: the worker's params.txt reader accepts exactly the daemon's form. */
#include <math.h>

#include "params.h"
#include "unit.h"

static struct params p;
static char why[160];

static int parse(const char *s)
{
    params_free(&p);
    return params_parse(s, strlen(s), &p, why, sizeof why);
}

int main(void)
{
    CHECK(parse("1.5 -0\n0.1 2\n") == 0 && p.rows == 2 && p.width == 2);
    CHECK(p.v[0] == 1.5 && p.v[1] == 0 && signbit(p.v[1]) && p.v[2] == 0.1 && p.v[3] == 2);
    CHECK(parse("4.94065645841247e-324\n") == 0 && p.v[0] == 5e-324);
    CHECK(parse("1.7976931348623157e+308\n") == 0 && p.v[0] == 1.7976931348623157e308);
    /* refused: empty, no final newline, empty line, double space, leading space, ragged, words */
    const char *bad[] = {"", "1", "1\n\n", "1  2\n", " 1\n", "1 2\n3\n", "nan\n", "inf\n", "0x10\n", "1e999\n",
                         "1,2\n", "1\t2\n", "1 \n", "+\n", "1e\n", "123456789012345678901234567890123\n", "1\r\n"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++)
        CHECK(parse(bad[i]) < 0);
    CHECK(parse("1 2\n3\n") < 0 && strstr(why, "line 2"));
    /* 64 values pass, 65 do not */
    char row[65 * 2 + 1];
    for (int n = 64; n <= 65; n++) {
        for (int i = 0; i < n; i++)
            row[2 * i] = '1', row[2 * i + 1] = i + 1 < n ? ' ' : '\n';
        row[2 * n] = 0;
        CHECK(n == 64 ? parse(row) == 0 && p.width == 64 : parse(row) < 0 && strstr(why, "64"));
    }
    params_free(&p);
    return unit_done();
}
