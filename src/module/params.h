/* params.h: the worker's strict reader of params.txt (the daemon writes it: core/module.c).
 * The form: one row per line, every line ended by '\n', values separated by exactly one space,
 * each value a decimal number strtod reads whole ([0-9+-.eE] only: no nan, inf or hex), finite.
 * Bounded: at most PARAMS_FILE_MAX bytes, 100,000 rows, 64 values per row, every row the same
 * width, 32 bytes per value. */
#pragma once
#include <stddef.h>

#define PARAMS_FILE_MAX (32u * 1024 * 1024)
#define PARAMS_ROWS_MAX 100000u
#define PARAMS_WIDTH_MAX 64u

struct params {
    double *v; /* rows x width, row-major */
    size_t rows, width;
};

/* Parses text[0..len); 0, or -1 with a message naming the line in why (cap bytes). */
int params_parse(const char *text, size_t len, struct params *out, char *why, size_t cap);
/* Reads and parses the file at path (O_NOFOLLOW, a regular file); as params_parse. */
int params_read(const char *path, struct params *out, char *why, size_t cap);
void params_free(struct params *p);
