/* model_main.c: the process side of one row (row_proto.h), linked into every model executable.
 * Reads the request from stdin, runs MODEL, buffers its points to stdout. Uses raw read/write only:
 * the worker's seccomp filter allows little more than that, brk/mmap and exit. */
#include <errno.h>
#include <math.h>
#include <string.h>
#include <unistd.h>

#include "model.h"
#include "row_proto.h"

struct model_out {
    uint32_t width;
    size_t len;
    unsigned char buf[65536];
    int failed;
};

static int write_all(const void *p, size_t n)
{
    const unsigned char *c = p;
    while (n) {
        ssize_t w = write(1, c, n);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return -1;
        c += w;
        n -= (size_t)w;
    }
    return 0;
}

static int flush_out(struct model_out *o)
{
    if (o->len && write_all(o->buf, o->len) < 0)
        o->failed = 1;
    o->len = 0;
    return o->failed ? -1 : 0;
}

int model_emit(struct model_out *o, const double *point)
{
    size_t n = o->width * sizeof(double);
    if (o->failed)
        return -1;
    if (sizeof o->buf - o->len < n && flush_out(o) < 0)
        return -1;
    if (n > sizeof o->buf) /* width <= 64: never */
        return o->failed = 1, -1;
    memcpy(o->buf + o->len, point, n);
    o->len += n;
    return 0;
}

void model_rk4(void (*f)(const double *y, double *dy, const void *ctx), const void *ctx, double *y, int dim, double h)
{
    double k1[8], k2[8], k3[8], k4[8], t[8];
    f(y, k1, ctx);
    for (int i = 0; i < dim; i++)
        t[i] = y[i] + h / 2 * k1[i];
    f(t, k2, ctx);
    for (int i = 0; i < dim; i++)
        t[i] = y[i] + h / 2 * k2[i];
    f(t, k3, ctx);
    for (int i = 0; i < dim; i++)
        t[i] = y[i] + h * k3[i];
    f(t, k4, ctx);
    for (int i = 0; i < dim; i++)
        y[i] = y[i] + h / 6 * (k1[i] + 2 * k2[i] + 2 * k3[i] + k4[i]);
}

static int read_all(void *p, size_t n)
{
    unsigned char *c = p;
    while (n) {
        ssize_t r = read(0, c, n);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            return -1;
        c += r;
        n -= (size_t)r;
    }
    return 0;
}

static struct model_out out;

int main(void)
{
    unsigned char hdr[ROW_HEADER];
    double params[ROW_PARAMS_MAX];
    if (read_all(hdr, sizeof hdr) < 0)
        return 2;
    uint32_t mode, n;
    double end, step;
    memcpy(&mode, hdr, 4);
    memcpy(&n, hdr + 4, 4);
    memcpy(&end, hdr + 8, 8);
    memcpy(&step, hdr + 16, 8);
    if (mode == ROW_DESCRIBE) {
        uint32_t d[2] = {MODEL.width, MODEL.n_params};
        return write_all(d, sizeof d) < 0 ? 2 : 0;
    }
    if (mode != ROW_RUN || n != MODEL.n_params || n > ROW_PARAMS_MAX || read_all(params, n * sizeof(double)) < 0)
        return 2;
    if (!(end > 0) || !(step > 0) || !(end / step <= 1e6))
        return 2;
    double q = floor(end / step); /* exact; the worker checked the ratio */
    uint64_t n_full = (uint64_t)q;
    double last_h = end - q * step;
    out.width = MODEL.width;
    int rc = MODEL.run(params, end, step, n_full, last_h > 0 ? last_h : 0, &out);
    if (rc)
        return rc;
    return flush_out(&out) < 0 ? 2 : 0;
}
