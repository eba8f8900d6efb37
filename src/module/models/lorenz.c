/* Lorenz: x' = sigma (y - x), y' = x (rho - z) - y, z' = x y - beta z with sigma = 10, rho = 28,
 * beta = 8/3. Parameters: x0, y0, z0. Outputs per point: t, x, y, z. RK4, fixed step. Chaotic: a
 * one-ulp difference anywhere grows until every later point differs. */
#include "../model.h"
#include "../row_proto.h"

static void lorenz(const double *y, double *dy, const void *ctx)
{
    (void)ctx;
    const double sigma = 10.0, rho = 28.0, beta = 8.0 / 3.0;
    dy[0] = sigma * (y[1] - y[0]);
    dy[1] = y[0] * (rho - y[2]) - y[1];
    dy[2] = y[0] * y[1] - beta * y[2];
}

static int run(const double *p, double end, double step, uint64_t n_full, double last_h, struct model_out *o)
{
    double y[3] = {p[0], p[1], p[2]}, pt[4] = {0, y[0], y[1], y[2]};
    if (model_emit(o, pt) < 0)
        return 0;
    for (uint64_t k = 1; k <= n_full + (last_h > 0); k++) {
        model_rk4(lorenz, 0, y, 3, k <= n_full ? step : last_h);
        pt[0] = k <= n_full ? (double)k * step : end;
        pt[1] = y[0], pt[2] = y[1], pt[3] = y[2];
        if (model_emit(o, pt) < 0)
            return 0;
    }
    return 0;
}

const struct model MODEL = {"Lorenz", 3, 4, run};
