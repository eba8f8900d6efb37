/* model_io.h: the helpers a model and model_main.c share, the output buffer and the integrator, as
 * a leaf both call down to (header-only, so each model executable stays two sources: model_main.c
 * and its model, as src/module/meson.build and scripts/build-images.py compile them). model_main.c
 * calls the model through MODEL; the model calls only these, never back into model_main.c.
 * Raw write(2) only: the worker's seccomp filter allows little more than read, write, brk/mmap
 * and exit (rowbox.c). */
#pragma once
#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <unistd.h>

/* Points buffered for stdout; one per model process (model_main.c owns it). */
struct model_out {
    uint32_t width;
    size_t len;
    unsigned char buf[65536];
    int failed;
};

static inline int model_write_all(const void *p, size_t n)
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

static inline int model_flush(struct model_out *o)
{
    if (o->len && model_write_all(o->buf, o->len) < 0)
        o->failed = 1;
    o->len = 0;
    return o->failed ? -1 : 0;
}

/* Emits one point of `width` doubles; -1 when stdout is gone (the model should then stop). */
static inline int model_emit(struct model_out *o, const double *point)
{
    size_t n = o->width * sizeof(double);
    if (o->failed)
        return -1;
    if (sizeof o->buf - o->len < n && model_flush(o) < 0)
        return -1;
    if (n > sizeof o->buf) /* width <= 64: never */
        return o->failed = 1, -1;
    memcpy(o->buf + o->len, point, n);
    o->len += n;
    return 0;
}

/* Classic fourth-order Runge-Kutta for a system of dim <= 8 equations: advances y by h. */
static inline void model_rk4(void (*f)(const double *y, double *dy, const void *ctx), const void *ctx, double *y,
                             int dim, double h)
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
