/* Greedy (test only, proves the per-row memory cap): allocates params[0] MiB and writes every
 * page. Parameter: mib (0..1024). Outputs per point: t, mib. A row over the cap fails alone with
 * status -2 while its neighbours complete. It ships in the image (harmless under the cap) so
 * that the black-box tests can prove the cap against the image the daemon runs. */
#include <stdlib.h>
#include <string.h>

#include "../model.h"
#include "../row_proto.h"

static int run(const double *p, double end, double step, uint64_t n_full, double last_h, struct model_out *o)
{
    if (!(p[0] >= 0) || !(p[0] <= 1024))
        return ROW_EXIT_PARAMS;
    size_t bytes = (size_t)p[0] * 1024 * 1024;
    unsigned char *m = bytes ? malloc(bytes) : NULL;
    if (bytes && !m)
        return ROW_EXIT_NOMEM;
    for (size_t i = 0; i < bytes; i += 4096)
        m[i] = 1;
    free(m);
    double pt[2] = {0, p[0]};
    if (model_emit(o, pt) < 0)
        return 0;
    for (uint64_t k = 1; k <= n_full + (last_h > 0); k++) {
        pt[0] = k <= n_full ? (double)k * step : end;
        if (model_emit(o, pt) < 0)
            return 0;
    }
    return 0;
}

const struct model MODEL = {"Greedy", 1, 2, run};
