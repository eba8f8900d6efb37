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

#include "../core/cleanup.h"

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

/* One line of values into p (growing p->v by doubling); *width is how many it held. */
static int parse_line(const char *text, size_t len, size_t *i, struct params *p, size_t *cap_v, size_t *n_v,
                      size_t *width, const char **why)
{
    *width = 0;
    for (;;) {
        size_t j = *i;
        while (j < len && text[j] != ' ' && text[j] != '\n')
            j++;
        double d;
        if (parse_value(text + *i, j - *i, &d) < 0)
            return *why = "a value is not a finite decimal number", -1;
        if (++*width > PARAMS_WIDTH_MAX)
            return *why = "more than 64 values", -1;
        if (*n_v == *cap_v) {
            size_t nc = *cap_v ? *cap_v * 2 : 256;
            double *nv = realloc(p->v, nc * sizeof *nv);
            if (!nv)
                return *why = "out of memory", -1;
            p->v = nv, *cap_v = nc;
        }
        p->v[(*n_v)++] = d;
        *i = j + 1;
        if (text[j] == '\n')
            return 0;
    }
}

int params_parse(const char *text, size_t len, struct params *out, char *why, size_t cap)
{
    memset(out, 0, sizeof *out);
    if (len == 0)
        return fail(why, cap, 1, "the table is empty");
    if (text[len - 1] != '\n')
        return fail(why, cap, 1, "the last line does not end with a newline");
    __attribute__((cleanup(params_free))) struct params p = {0};
    size_t cap_v = 0, n_v = 0, line = 0;
    for (size_t i = 0; i < len;) {
        line++;
        if (line > PARAMS_ROWS_MAX)
            return fail(why, cap, line, "more than 100000 rows");
        size_t width;
        const char *bad;
        if (parse_line(text, len, &i, &p, &cap_v, &n_v, &width, &bad) < 0)
            return fail(why, cap, line, bad);
        if (line == 1)
            p.width = width;
        else if (width != p.width)
            return fail(why, cap, line, "a different number of values than line 1");
    }
    p.rows = line;
    *out = p;
    p.v = NULL; /* handed to out */
    return 0;
}

int params_read(const char *path, struct params *out, char *why, size_t cap)
{
    memset(out, 0, sizeof *out);
    cleanup_close int fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
    struct stat st;
    if (fd < 0 || fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) || st.st_size > PARAMS_FILE_MAX) {
        snprintf(why, cap, "params.txt: not a regular file of at most %u bytes", PARAMS_FILE_MAX);
        return -1;
    }
    size_t n = (size_t)st.st_size, got = 0;
    cleanup_free char *buf = malloc(n + 1);
    while (buf && got < n) {
        ssize_t r = read(fd, buf + got, n - got);
        if (r <= 0)
            break;
        got += (size_t)r;
    }
    if (!buf || got != n) {
        snprintf(why, cap, "params.txt: could not be read whole");
        return -1;
    }
    return params_parse(buf, n, out, why, cap);
}

void params_free(struct params *p)
{
    free(p->v);
    p->v = NULL;
    p->rows = p->width = 0;
}
