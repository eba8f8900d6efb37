/* model_main.c: the process side of one row (row_proto.h), linked into every model executable.
 * Reads the request from stdin, runs MODEL, buffers its points to stdout (model_io.h, the leaf it
 * shares with the models). Uses raw read/write only: the worker's seccomp filter allows little
 * more than that, brk/mmap and exit. */
#include <errno.h>
#include <math.h>
#include <string.h>
#include <unistd.h>

#include "model.h"
#include "row_proto.h"

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
        return model_write_all(d, sizeof d) < 0 ? 2 : 0;
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
    return model_flush(&out) < 0 ? 2 : 0;
}
