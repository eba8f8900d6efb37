/* util.c: the small utilities the provider's files share: random hex and the provider's log lines,
 * which go through the daemon's log (core/log_hook.h), so they follow its format and sink. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/random.h>

#include "../../core/log_hook.h"
#include "internal.h"

int e2b_random_hex(char *out, size_t nbytes)
{
    uint8_t b[64];
    if (nbytes > sizeof b)
        return -1;
    size_t got = 0;
    while (got < nbytes) {
        ssize_t r = getrandom(b + got, nbytes - got, 0);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            return -1;
        got += (size_t)r;
    }
    for (size_t i = 0; i < nbytes; i++)
        snprintf(out + 2 * i, 3, "%02x", b[i]);
    explicit_bzero(b, sizeof b);
    return 0;
}

/* fmt gives the extra fields as JSON object members; callers pass only IDs, numbers and fixed
 * words, never tokens or bodies. Every line names the provider. */
void e2b_log(const char *level, const char *event, const char *fmt, ...)
{
    char fields[1024];
    int n = snprintf(fields, sizeof fields, "\"provider\":\"e2b\"%s", fmt[0] ? "," : "");
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(fields + n, sizeof fields - (size_t)n, fmt, ap);
    va_end(ap);
    plm_log(level, event, fields);
}
