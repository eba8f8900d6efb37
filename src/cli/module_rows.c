/* module_rows.c: the pure parts of `plimsoll module`: the rows file parser (CSV), the exact double
 * printer and the exit status of a module run (unit-tested in cli_module_test.c, fuzzed by
 * fuzz_cli_rows).
 * Trusts: nothing in the rows text: every value is checked to be a plain finite decimal, every
 * count against the daemon's limits, before anything is allocated beyond the input's own size.
 * Invariant: a double printed here reads back (strtod) as the same 64 bits, and no shorter
 * decimal does. */
#include <errno.h>
#include <stdarg.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "../core/cleanup.h"
#include "../core/module.h"
#include "cli.h"

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

size_t cli_fmt_double(double x, char buf[32])
{
    if (isnan(x))
        return (size_t)snprintf(buf, 32, "nan");
    if (isinf(x))
        return (size_t)snprintf(buf, 32, x < 0 ? "-inf" : "inf");
    /* The first precision whose correctly rounded decimal reads back as x is the shortest one:
     * any shorter decimal that read back would be this rounding with trailing zeros, which %g
     * drops. 17 significant digits always suffice for binary64. */
    int n = 0;
    for (int prec = 1; prec <= 17; prec++) {
        n = snprintf(buf, 32, "%.*g", prec, x);
        if (strtod(buf, NULL) == x && signbit(strtod(buf, NULL)) == signbit(x))
            break;
    }
    /* %g writes 100 as 1e+02: below 1e17 an integer-valued shortest form is written out in full
     * when that adds only zeros and still reads back. */
    const char *e = strchr(buf, 'e');
    int exp10 = e ? atoi(e + 1) : -1;
    if (exp10 >= 0 && exp10 <= 16) {
        char full[32];
        int m = snprintf(full, sizeof full, "%.*g", exp10 + 1, x);
        if (strtod(full, NULL) == x && significant_digits(full) <= significant_digits(buf)) {
            memcpy(buf, full, (size_t)m + 1);
            n = m;
        }
    }
    return (size_t)n;
}

size_t cli_fmt_double_json(double x, char buf[32])
{
    if (isnan(x))
        return (size_t)snprintf(buf, 32, "\"NaN\"");
    if (isinf(x))
        return (size_t)snprintf(buf, 32, x < 0 ? "\"-Infinity\"" : "\"Infinity\"");
    return cli_fmt_double(x, buf);
}

void cli_rows_done(struct cli_rows *r)
{
    free(r->values);
    memset(r, 0, sizeof *r);
}

static int fail(struct cli_rows *out, char *why, size_t why_n, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static int fail(struct cli_rows *out, char *why, size_t why_n, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why, why_n, fmt, ap);
    va_end(ap);
    cli_rows_done(out);
    return -1;
}

/* A plain decimal: [+-] digits [. digits] [e|E [+-] digits], at least one mantissa digit. strtod
 * alone would also take hex floats, "nan", "inf" and leading blanks. */
static bool plain_decimal(const char *s, size_t n)
{
    size_t i = 0, digits = 0;
    if (i < n && (s[i] == '+' || s[i] == '-'))
        i++;
    while (i < n && s[i] >= '0' && s[i] <= '9')
        i++, digits++;
    if (i < n && s[i] == '.')
        for (i++; i < n && s[i] >= '0' && s[i] <= '9'; i++)
            digits++;
    if (digits == 0)
        return false;
    if (i < n && (s[i] == 'e' || s[i] == 'E')) {
        i++;
        if (i < n && (s[i] == '+' || s[i] == '-'))
            i++;
        size_t ed = 0;
        while (i < n && s[i] >= '0' && s[i] <= '9')
            i++, ed++;
        if (ed == 0)
            return false;
    }
    return i == n;
}

static bool blank(char c) { return c == ' ' || c == '\t' || c == '\r'; }

/* One value: the field s[0..n) with blanks around it trimmed; col is its 1-based column. */
static int parse_value(const char *s, size_t n, size_t line, size_t col, double *v, char *why, size_t why_n)
{
    size_t a = 0;
    while (a < n && blank(s[a]))
        a++;
    while (n > a && blank(s[n - 1]))
        n--;
    if (n == a) {
        snprintf(why, why_n, "line %zu, column %zu: empty value", line, col + a);
        return -1;
    }
    char tok[64];
    if (n - a >= sizeof tok || !plain_decimal(s + a, n - a)) {
        snprintf(why, why_n, "line %zu, column %zu: `%.*s%s` is not a decimal number", line, col + a,
                 (int)(n - a > 24 ? 24 : n - a), s + a, n - a > 24 ? "..." : "");
        return -1;
    }
    memcpy(tok, s + a, n - a);
    tok[n - a] = '\0';
    errno = 0;
    double d = strtod(tok, NULL);
    if (!isfinite(d)) {
        snprintf(why, why_n, "line %zu, column %zu: `%s` is out of range (not a finite double)", line, col + a, tok);
        return -1;
    }
    *v = d; /* underflow to a subnormal or zero is the nearest double: kept */
    return 0;
}

int cli_rows_parse(const char *buf, size_t len, struct cli_rows *out, char *why, size_t why_n)
{
    memset(out, 0, sizeof *out);
    size_t cap = 0, line = 0;
    for (size_t pos = 0; pos < len;) {
        const char *s = buf + pos;
        const char *nl = memchr(s, '\n', len - pos);
        size_t n = nl ? (size_t)(nl - s) : len - pos;
        pos += n + (nl ? 1 : 0);
        line++;
        if (memchr(s, '\0', n))
            return fail(out, why, why_n, "line %zu: a NUL byte", line);
        size_t k = 0;
        while (k < n && blank(s[k]))
            k++;
        if (k == n || s[k] == '#')
            continue; /* blank line or comment */
        if (out->n_rows >= PLM_MODULE_ROWS_MAX)
            return fail(out, why, why_n, "line %zu: more than %u rows (the daemon's limit)", line, PLM_MODULE_ROWS_MAX);
        size_t width = 0;
        for (size_t f = 0; f <= n;) {
            const char *comma = memchr(s + f, ',', n - f);
            size_t e = comma ? (size_t)(comma - s) : n;
            if (width >= PLM_MODULE_WIDTH_MAX)
                return fail(out, why, why_n, "line %zu, column %zu: more than %u values in a row", line, f + 1,
                            PLM_MODULE_WIDTH_MAX);
            if (out->n_rows * (out->width ? out->width : PLM_MODULE_WIDTH_MAX) + width >= cap) {
                size_t ncap = cap ? cap * 2 : 256;
                double *nv = realloc(out->values, ncap * sizeof *nv);
                if (!nv)
                    return fail(out, why, why_n, "out of memory");
                out->values = nv;
                cap = ncap;
            }
            double v;
            if (parse_value(s + f, e - f, line, f + 1, &v, why, why_n) < 0) {
                cli_rows_done(out);
                return -1;
            }
            out->values[(out->width ? out->n_rows * out->width : 0) + width] = v;
            width++;
            f = e + 1;
            if (!comma)
                break;
        }
        if (out->n_rows == 0)
            out->width = width;
        else if (width != out->width)
            return fail(out, why, why_n, "line %zu: %zu values, but the first row has %zu (every row must "
                                         "have the same width)", line, width, out->width);
        out->n_rows++;
    }
    if (out->n_rows == 0)
        return fail(out, why, why_n, "no rows (give at least one line of comma-separated numbers)");
    return 0;
}

int cli_rows_read_file(const char *path, struct cli_rows *out, char *why, size_t why_n)
{
    memset(out, 0, sizeof *out);
    bool from_stdin = strcmp(path, "-") == 0;
    cleanup_fclose FILE *opened = from_stdin ? NULL : fopen(path, "rb");
    FILE *f = from_stdin ? stdin : opened;
    if (!f) {
        snprintf(why, why_n, "--rows `%s`: %s", path, strerror(errno));
        return -1;
    }
    size_t cap = 1 << 16, len = 0;
    cleanup_free char *buf = malloc(cap);
    bool oom = !buf;
    while (!oom) {
        if (len == cap) {
            if (cap >= CLI_ROWS_FILE_MAX) {
                snprintf(why, why_n, "--rows `%s`: larger than %u bytes", path, CLI_ROWS_FILE_MAX);
                return -1;
            }
            char *nb = realloc(buf, cap * 2);
            if (!nb) {
                oom = true; /* never parse a file cut short */
                break;
            }
            buf = nb;
            cap *= 2;
        }
        size_t got = fread(buf + len, 1, cap - len, f);
        len += got;
        if (got == 0)
            break;
    }
    if (oom || ferror(f)) {
        snprintf(why, why_n, "--rows `%s`: %s", path, oom ? "out of memory" : "read error");
        return -1;
    }
    char inner[400];
    int r = cli_rows_parse(buf, len, out, inner, sizeof inner);
    if (r < 0)
        snprintf(why, why_n, "--rows `%s`: %s", path, inner);
    return r;
}
