/* VanDerPol: x'' - mu (1 - x^2) x' + x = 0 with mu = 1, as the system x' = v,
 * v' = mu (1 - x^2) v - x. Parameters: x0, v0. Outputs per point: t, x, v. RK4, fixed step. */
#include "../model.h"
#include "../row_proto.h"

static void vdp(const double *y, double *dy, const void *ctx)
{
    (void)ctx;
    const double mu = 1.0;
    dy[0] = y[1];
    dy[1] = mu * (1 - y[0] * y[0]) * y[1] - y[0];
}

static int run(const double *p, double end, double step, uint64_t n_full, double last_h, struct model_out *o)
{
    double y[2] = {p[0], p[1]}, pt[3] = {0, y[0], y[1]};
    if (model_emit(o, pt) < 0)
        return 0;
    for (uint64_t k = 1; k <= n_full + (last_h > 0); k++) {
        model_rk4(vdp, 0, y, 2, k <= n_full ? step : last_h);
        pt[0] = k <= n_full ? (double)k * step : end;
        pt[1] = y[0], pt[2] = y[1];
        if (model_emit(o, pt) < 0)
            return 0;
    }
    return 0;
}

const struct model MODEL = {"VanDerPol", 2, 3, run};
