/* BouncingBall: a ball under gravity g = 9.81 above a floor at h = 0, h' = v, v' = -g, with the
 * bounce event h = 0 (falling): v becomes -e v. Parameters: h0 (>= 0), v0, e (0 <= e <= 1).
 * Outputs per point: t, h, v, bounces so far. Between events the motion is integrated exactly
 * (the flight is a parabola); the event time inside a step is the root of
 * h + v tau - g tau^2 / 2 = 0, tau = (v + sqrt(v^2 + 2 g h)) / g, with IEEE sqrt (correctly
 * rounded, so reproducible). After 1000 events inside one step, or when a bounce leaves less than
 * 1e-9 m/s, the ball is at rest (h = 0, v = 0): the Zeno limit of e < 1. */
#include <math.h>

#include "../model.h"
#include "../row_proto.h"

#define G 9.81
#define EVENTS_PER_STEP 1000

struct ball {
    double h, v, e, bounces;
    int rest;
};

static void advance(struct ball *b, double dt)
{
    if (b->rest)
        return;
    for (int events = 0; dt > 0; events++) {
        double h1 = b->h + b->v * dt - G * dt * dt / 2;
        if (h1 > 0 || (h1 == 0 && b->v - G * dt >= 0)) {
            b->h = h1;
            b->v = b->v - G * dt;
            return;
        }
        double tau = (b->v + __builtin_sqrt(b->v * b->v + 2 * G * b->h)) / G;
        if (tau > dt)
            tau = dt;
        double vi = b->v - G * tau;
        b->h = 0;
        b->v = -b->e * vi;
        b->bounces = b->bounces + 1;
        dt = dt - tau;
        if (b->v < 1e-9 || events >= EVENTS_PER_STEP) {
            b->v = 0;
            b->rest = 1;
            return;
        }
    }
}

static int run(const double *p, double end, double step, uint64_t n_full, double last_h, struct model_out *o)
{
    if (!(p[0] >= 0) || !(p[2] >= 0) || !(p[2] <= 1))
        return ROW_EXIT_PARAMS;
    struct ball b = {p[0], p[1], p[2], 0, 0};
    double pt[4] = {0, b.h, b.v, 0};
    if (model_emit(o, pt) < 0)
        return 0;
    for (uint64_t k = 1; k <= n_full + (last_h > 0); k++) {
        advance(&b, k <= n_full ? step : last_h);
        pt[0] = k <= n_full ? (double)k * step : end;
        pt[1] = b.h, pt[2] = b.v, pt[3] = b.bounces;
        if (model_emit(o, pt) < 0)
            return 0;
    }
    return 0;
}

const struct model MODEL = {"BouncingBall", 3, 4, run};
