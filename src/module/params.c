/* params.c: see params.h. */
#include "params.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define TOKEN_MAX 32

static int fail(char *why, size_t cap, size_t line, const char *what)
{
    snprintf(why, cap, "params.txt line %zu: %s", line, what);
    return -1;
}

static int parse_value(const char *s, size_t n, double *out)
{
    char tok[TOKEN_MAX + 1];
    if (n == 0 || n > TOKEN_MAX)
        return -1;
    for (size_t i = 0; i < n; i++)
        if (!strchr("0123456789+-.eE", s[i]))
            return -1;
    memcpy(tok, s, n);
    tok[n] = 0;
    char *end;
    errno = 0;
    double d = strtod(tok, &end);
    if (end != tok + n || !isfinite(d))
        return -1;
    *out = d; /* ERANGE on a subnormal or underflow still reads the correctly rounded value */
    return 0;
}

int params_parse(const char *text, size_t len, struct params *out, char *why, size_t cap)
{
    memset(out, 0, sizeof *out);
    if (len == 0)
        return fail(why, cap, 1, "the table is empty");
    if (text[len - 1] != '\n')
        return fail(why, cap, 1, "the last line does not end with a newline");
    size_t cap_v = 0, n_v = 0, line = 0;
    for (size_t i = 0; i < len;) {
        line++;
        if (line > PARAMS_ROWS_MAX)
            return params_free(out), fail(why, cap, line, "more than 100000 rows");
        size_t width = 0;
        for (;;) {
            size_t j = i;
            while (j < len && text[j] != ' ' && text[j] != '\n')
                j++;
            double d;
            if (parse_value(text + i, j - i, &d) < 0)
                return params_free(out), fail(why, cap, line, "a value is not a finite decimal number");
            if (++width > PARAMS_WIDTH_MAX)
                return params_free(out), fail(why, cap, line, "more than 64 values");
            if (n_v == cap_v) {
                size_t nc = cap_v ? cap_v * 2 : 256;
                double *nv = realloc(out->v, nc * sizeof *nv);
                if (!nv)
                    return params_free(out), fail(why, cap, line, "out of memory");
                out->v = nv, cap_v = nc;
            }
            out->v[n_v++] = d;
            i = j + 1;
            if (text[j] == '\n')
                break;
        }
        if (line == 1)
            out->width = width;
        else if (width != out->width)
            return params_free(out), fail(why, cap, line, "a different number of values than line 1");
    }
    out->rows = line;
    return 0;
}

int params_read(const char *path, struct params *out, char *why, size_t cap)
{
    memset(out, 0, sizeof *out);
    int fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
    struct stat st;
    if (fd < 0 || fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) || st.st_size > PARAMS_FILE_MAX) {
        if (fd >= 0)
            close(fd);
        snprintf(why, cap, "params.txt: not a regular file of at most %u bytes", PARAMS_FILE_MAX);
        return -1;
    }
    size_t n = (size_t)st.st_size, got = 0;
    char *buf = malloc(n + 1);
    while (buf && got < n) {
        ssize_t r = read(fd, buf + got, n - got);
        if (r <= 0)
            break;
        got += (size_t)r;
    }
    close(fd);
    if (!buf || got != n) {
        free(buf);
        snprintf(why, cap, "params.txt: could not be read whole");
        return -1;
    }
    int rc = params_parse(buf, n, out, why, cap);
    free(buf);
    return rc;
}

void params_free(struct params *p)
{
    free(p->v);
    p->v = NULL;
    p->rows = p->width = 0;
}
