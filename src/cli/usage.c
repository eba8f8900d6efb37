/* usage.c: the CLI's one way to report a bad command line.
 * Owns: nothing; writes to stderr. */
#include <stdarg.h>
#include <stdio.h>

#include "cli.h"

int cli_usage_error(const char *cmd, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "plimsoll %s: ", cmd);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fprintf(stderr, "\n(try `plimsoll %s --help`)\n", cmd);
    return CLI_EXIT_USAGE;
}

