/* module.c: see module.h. */
#include "module.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "limits.h"

#define INVALID(err, ...) plm_refuse(err, PLM_E_INVALID, PLM_REFUSAL_REQUEST, __VA_ARGS__)

uint64_t plm_module_max_steps(double end_time, double step)
{
    /* floor() is exact (no rounding), so this is the same on every machine */
    return (uint64_t)floor(end_time / step) + 2;
}

static bool model_ok(const char *m)
{
    size_t len = strlen(m);
    if (len == 0 || len > LIM_MODEL_MAX)
        return false;
    for (size_t i = 0; i < len; i++) {
        char c = m[i];
        bool alnum = (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9');
        if (!alnum && (i == 0 || (c != '.' && c != '_' && c != '-')))
            return false;
    }
    return true;
}

static int check_rows(const struct plm_request *r, struct plm_err *err)
{
    size_t n = r->module.n_rows;
    if (n == 0 || n > PLM_MODULE_ROWS_MAX)
        return INVALID(err, "a module run needs 1 to %u rows, got %zu", PLM_MODULE_ROWS_MAX, n);
    size_t width = r->module.rows[0].n_values;
    if (width == 0 || width > PLM_MODULE_WIDTH_MAX)
        return INVALID(err, "row 1 has %zu values; a row holds 1 to %u", width, PLM_MODULE_WIDTH_MAX);
    for (size_t i = 0; i < n; i++) {
        const struct plm_row *row = &r->module.rows[i];
        if (row->n_values != width)
            return INVALID(err, "row %zu has %zu values, row 1 has %zu: every row must have the same width", i + 1,
                           row->n_values, width);
        for (size_t k = 0; k < width; k++)
            if (!isfinite(row->values[k]))
                return INVALID(err, "row %zu value %zu is not finite", i + 1, k + 1);
    }
    return 0;
}

int plm_module_check(const struct plm_request *r, struct plm_err *err)
{
    if (!r->module.model || !model_ok(r->module.model))
        return INVALID(err, "model must match [A-Za-z0-9][A-Za-z0-9._-]{0,63}");
    if (check_rows(r, err) < 0)
        return -1;
    double end = r->module.end_time, step = r->module.step;
    /* `!(x > 0)` also refuses NaN */
    if (!(end > 0) || !isfinite(end))
        return INVALID(err, "end_time must be a finite number > 0");
    if (!(step > 0) || !isfinite(step))
        return INVALID(err, "step must be a finite number > 0");
    if (!(end / step <= PLM_MODULE_RATIO_MAX))
        return INVALID(err, "end_time / step must be at most %.0f", PLM_MODULE_RATIO_MAX);
    /* 20 + rows x (4 + 8 x max steps): at most 1e5 x (4 + 8 x 1000002), no overflow in 64 bits */
    uint64_t bound = PLM_PLSM_HEADER + (uint64_t)r->module.n_rows * (4 + 8 * plm_module_max_steps(end, step));
    if (bound > PLM_MODULE_RESULT_MAX)
        return INVALID(err,
                       "the result could reach %llu bytes (20 + rows x (4 + 8 x (floor(end_time/step) + 2))); the "
                       "limit is %u",
                       (unsigned long long)bound, PLM_MODULE_RESULT_MAX);
    return 0;
}

size_t plm_module_fmt_double(double x, char buf[32])
{
    for (int prec = 15; prec <= 17; prec++) {
        int n = snprintf(buf, 32, "%.*g", prec, x);
        double back = strtod(buf, NULL);
        if (prec == 17 || memcmp(&back, &x, sizeof x) == 0)
            return (size_t)n;
    }
    return 0; /* not reached: 17 significant digits always read back */
}

int plm_module_params_text(const struct plm_request *r, char **out, size_t *len)
{
    size_t cap = 1;
    for (size_t i = 0; i < r->module.n_rows; i++)
        cap += r->module.rows[i].n_values * 25 + 1; /* "%.17g" of a double is at most 24 bytes */
    char *t = malloc(cap), buf[32];
    if (!t)
        return -1;
    size_t o = 0;
    for (size_t i = 0; i < r->module.n_rows; i++) {
        const struct plm_row *row = &r->module.rows[i];
        for (size_t k = 0; k < row->n_values; k++) {
            size_t n = plm_module_fmt_double(row->values[k], buf);
            if (k)
                t[o++] = ' ';
            memcpy(t + o, buf, n);
            o += n;
        }
        t[o++] = '\n';
    }
    t[o] = 0;
    *out = t;
    *len = o;
    return 0;
}

static uint32_t get_u32(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static double get_f64(const uint8_t *p)
{
    uint64_t u = (uint64_t)get_u32(p) | (uint64_t)get_u32(p + 4) << 32;
    if ((u & 0x7ff0000000000000ull) == 0x7ff0000000000000ull && (u & 0x000fffffffffffffull))
        u = 0x7ff8000000000000ull; /* (spec) every NaN canonical */
    double d;
    memcpy(&d, &u, sizeof d);
    return d;
}

void plm_module_runs_free(struct plm_module_result *m)
{
    for (size_t i = 0; i < m->n_runs; i++)
        free(m->runs[i].outputs);
    free(m->runs);
    m->runs = NULL;
    m->n_runs = 0;
}

static int decode_rows(const uint8_t *p, size_t n, size_t off, uint32_t width, uint64_t max_steps,
                       struct plm_module_result *out, const char **why)
{
    for (size_t i = 0; i < out->n_runs; i++) {
        if (n - off < 4)
            return *why = "the record is truncated", -1;
        int32_t status = (int32_t)get_u32(p + off);
        off += 4;
        out->runs[i].status = status;
        if (status <= 0)
            continue;
        if ((uint64_t)status > max_steps)
            return *why = "a row reports more steps than the request allows", -1;
        /* status <= 1e6 + 2 and width <= 65536: the product fits in 64 bits */
        uint64_t count = (uint64_t)status * width;
        if (count > (n - off) / 8)
            return *why = "the record is truncated", -1;
        double *v = malloc((size_t)count * sizeof *v);
        if (!v)
            return *why = "out of memory", -1;
        for (uint64_t k = 0; k < count; k++, off += 8)
            v[k] = get_f64(p + off);
        out->runs[i].outputs = v;
        out->runs[i].n_outputs = (size_t)count;
    }
    if (off != n)
        return *why = "the record has trailing bytes", -1;
    return 0;
}

int plm_plsm_decode(const uint8_t *p, size_t n, const struct plm_request *r, struct plm_module_result *out,
                    const char **why)
{
    out->runs = NULL;
    out->n_runs = 0;
    if (n < PLM_PLSM_HEADER || memcmp(p, "PLSM", 4) != 0)
        return *why = "not a PLSM record", -1;
    if (get_u32(p + 4) != 1)
        return *why = "the record's version is not 1", -1;
    uint32_t rows = get_u32(p + 8), width = get_u32(p + 12), params = get_u32(p + 16);
    if (rows != r->module.n_rows)
        return *why = "the record's row count differs from the request's", -1;
    if (r->module.n_rows == 0 || params != r->module.rows[0].n_values)
        return *why = "the record's parameter count differs from the request's row width", -1;
    if (width == 0 || width > PLM_PLSM_WIDTH_MAX)
        return *why = "the record's width is 0 or above 65536", -1;
    /* every row needs at least its 4-byte status: refuse before allocating rows x 24 bytes */
    if ((n - PLM_PLSM_HEADER) / 4 < rows)
        return *why = "the record is truncated", -1;
    out->runs = calloc(rows ? rows : 1, sizeof *out->runs);
    if (!out->runs)
        return *why = "out of memory", -1;
    out->n_runs = rows;
    uint64_t max_steps = plm_module_max_steps(r->module.end_time, r->module.step);
    if (decode_rows(p, n, PLM_PLSM_HEADER, width, max_steps, out, why) < 0) {
        plm_module_runs_free(out);
        return -1;
    }
    out->width = (int32_t)width;
    return 0;
}
