/* worker.c: plimsoll-sim-worker, the module image's one program (docs/modules.md).
 *
 *   plimsoll-sim-worker --model /models/NAME PARAMS RESULTS END STEP MAX_BYTES
 *
 * Loads the model only from a read-only file system (the image's root), reads the parameter table
 * (params.h), runs every row in its own walled process (rowbox.h) and writes the PLSM record
 * (core/module.h) to RESULTS, a new file. Exit status, which the daemon maps (providers.md §3.6):
 *   0  the record is written
 *   1  usage: the arguments are malformed (the daemon wrote them: never the caller's fault)
 *   2  the model cannot be loaded (not installed, or not on the read-only image root)
 *   3  the parameter table cannot be read
 *   4  the request does not fit the model: parameter count, or the record would exceed MAX_BYTES
 * Messages go to stderr as one line "plimsoll-sim-worker: ...". */
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include "params.h"
#include "row_proto.h"
#include "rowbox.h"

#define EX_USAGE_ 1
#define EX_MODEL 2
#define EX_PARAMS 3
#define EX_REQUEST 4
#define RECORD_MAX (8u * 1024 * 1024)

static int die(int code, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fputs("plimsoll-sim-worker: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    exit(code);
}

static const char *base_name(const char *p)
{
    const char *s = strrchr(p, '/');
    return s ? s + 1 : p;
}

/* The model's descriptor, or exit 2: a regular file owned by root, writable by nobody else, on a
 * file system mounted read-only. The descriptor is what runs (no second lookup by name). */
static int open_model(const char *path)
{
    const char *name = base_name(path);
    if (path[0] != '/' || strlen(path) > 255)
        die(EX_USAGE_, "--model needs an absolute path");
    int fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0 && (errno == ENOENT || errno == ENOTDIR))
        die(EX_MODEL, "model \"%s\" is not installed in this image (no %s)", name, path);
    if (fd < 0)
        die(EX_MODEL, "model \"%s\" cannot be opened: %s", name, strerror(errno));
    struct stat st;
    struct statvfs vfs;
    if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode))
        die(EX_MODEL, "model \"%s\" is not a regular file", name);
    if (fstatvfs(fd, &vfs) < 0 || !(vfs.f_flag & ST_RDONLY))
        die(EX_MODEL, "model \"%s\" is on a writable file system; models load only from the image's read-only root",
            name);
    if (st.st_uid != 0 || (st.st_mode & 022))
        die(EX_MODEL, "model \"%s\" is not owned by root or is writable by others", name);
    return fd;
}

static double number_arg(const char *s, const char *what)
{
    char *end;
    errno = 0;
    double d = strtod(s, &end);
    if (!*s || *end || !isfinite(d) || !(d > 0))
        die(EX_USAGE_, "%s must be a finite number > 0", what);
    return d;
}

struct record {
    unsigned char *p;
    size_t len, cap;
};

static void put(struct record *r, const void *data, size_t n)
{
    if (n > r->cap - r->len)
        die(EX_REQUEST, "the record would exceed its bound");
    memcpy(r->p + r->len, data, n);
    r->len += n;
}

static void put_u32(struct record *r, uint32_t v)
{
    unsigned char b[4] = {(unsigned char)v, (unsigned char)(v >> 8), (unsigned char)(v >> 16), (unsigned char)(v >> 24)};
    put(r, b, 4);
}

/* ROW_DESCRIBE through the same walls: the model's width and parameter count. */
static void describe(int model_fd, const char *name, uint32_t *width, uint32_t *n_params)
{
    unsigned char in[ROW_HEADER] = {0};
    uint32_t mode = ROW_DESCRIBE;
    memcpy(in, &mode, 4);
    struct rowbox_out o;
    if (rowbox_run(model_fd, in, sizeof in, 8, &o) < 0)
        die(EX_MODEL, "out of memory");
    if (o.status != 0 || o.len != 8)
        die(EX_MODEL, "model \"%s\" did not describe itself (status %d)", name, o.status);
    memcpy(width, o.data, 4);
    memcpy(n_params, o.data + 4, 4);
    free(o.data);
    if (*width == 0 || *width > 65536 || *n_params == 0 || *n_params > ROW_PARAMS_MAX)
        die(EX_MODEL, "model \"%s\" describes itself as width %u with %u parameters", name, *width, *n_params);
}

static void run_row(int model_fd, const double *values, uint32_t n, double end, double step, uint32_t width,
                    uint64_t max_points, struct record *rec)
{
    unsigned char in[ROW_HEADER + ROW_PARAMS_MAX * 8];
    uint32_t mode = ROW_RUN;
    memcpy(in, &mode, 4);
    memcpy(in + 4, &n, 4);
    memcpy(in + 8, &end, 8);
    memcpy(in + 16, &step, 8);
    memcpy(in + ROW_HEADER, values, n * 8u);
    size_t point = (size_t)width * 8, out_max = (size_t)max_points * point;
    struct rowbox_out o;
    if (rowbox_run(model_fd, in, ROW_HEADER + n * 8u, out_max, &o) < 0)
        die(EX_REQUEST, "out of memory");
    int32_t status = o.status;
    if (status == 0 && o.len % point != 0)
        status = ROW_ST_BADOUT;
    if (status == 0)
        status = (int32_t)(o.len / point);
    put_u32(rec, (uint32_t)status);
    if (status > 0)
        put(rec, o.data, o.len);
    free(o.data);
}

int main(int argc, char **argv)
{
    signal(SIGPIPE, SIG_IGN);
    if (argc != 8 || strcmp(argv[1], "--model") != 0)
        die(EX_USAGE_, "usage: plimsoll-sim-worker --model PATH PARAMS RESULTS END STEP MAX_BYTES");
    int model_fd = open_model(argv[2]); /* first: it becomes descriptor 3 */
    const char *name = base_name(argv[2]);
    double end = number_arg(argv[5], "END"), step = number_arg(argv[6], "STEP");
    double max_bytes = number_arg(argv[7], "MAX_BYTES");
    if (!(end / step <= 1e6))
        die(EX_REQUEST, "END / STEP must be at most 1000000");
    if (max_bytes > RECORD_MAX || max_bytes != floor(max_bytes))
        die(EX_USAGE_, "MAX_BYTES must be a whole number <= %u", RECORD_MAX);
    uint32_t width, n_params;
    describe(model_fd, name, &width, &n_params);
    struct params tab;
    char why[160];
    if (params_read(argv[3], &tab, why, sizeof why) < 0)
        die(EX_PARAMS, "%s", why);
    if (tab.width != n_params)
        die(EX_REQUEST, "model \"%s\" takes %u parameters per row; the rows have %zu", name, n_params, tab.width);
    uint64_t max_points = (uint64_t)floor(end / step) + 2;
    /* the bound with the model's real width: 20 + rows x (4 + 8 x width x points) */
    double bound = 20 + (double)tab.rows * (4 + 8.0 * width * (double)max_points);
    if (bound > max_bytes)
        die(EX_REQUEST, "the record could reach %.0f bytes (model \"%s\" has %u outputs per step); the limit is %.0f",
            bound, name, width, max_bytes);
    struct record rec = {.cap = (size_t)bound};
    rec.p = malloc(rec.cap);
    if (!rec.p)
        die(EX_REQUEST, "out of memory");
    put(&rec, "PLSM", 4);
    put_u32(&rec, 1);
    put_u32(&rec, (uint32_t)tab.rows);
    put_u32(&rec, width);
    put_u32(&rec, n_params);
    for (size_t i = 0; i < tab.rows; i++)
        run_row(model_fd, tab.v + i * tab.width, n_params, end, step, width, max_points, &rec);
    size_t rows = tab.rows;
    params_free(&tab);
    int fd = open(argv[4], O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
    size_t off = 0;
    while (fd >= 0 && off < rec.len) {
        ssize_t w = write(fd, rec.p + off, rec.len - off);
        if (w <= 0)
            break;
        off += (size_t)w;
    }
    if (fd < 0 || off != rec.len || close(fd) < 0)
        die(EX_PARAMS, "cannot write %s", argv[4]);
    free(rec.p);
    printf("rows=%zu\n", rows);
    return 0;
}
