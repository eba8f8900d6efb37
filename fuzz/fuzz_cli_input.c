/* fuzz_cli_input.c: libFuzzer target for the client's local parsers of user input: the repl's
 * cell reader (src/cli/cell.c, lines from standard input) and the artifact path rule
 * (src/cli/project_files.c, paths from --artifact and from the daemon's answer). Traps when a
 * cell exceeds the code limit, starts or ends with a blank or %% line, or when a path judged
 * safe is absolute, empty or has an empty, `.` or `..` component. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "../src/cli/cli.h"
#include "../src/core/limits.h"

/* The rule of cell.c, restated: only blanks (space, tab, CR), or %% with spaces and tabs around
 * it (and CRs after it). */
static bool blank_or_sep(const char *s, size_t n)
{
    if (strspn(s, " \t\r") >= n)
        return true;
    size_t i = 0;
    while (i < n && (s[i] == ' ' || s[i] == '\t'))
        i++;
    while (n > i && (s[n - 1] == ' ' || s[n - 1] == '\t' || s[n - 1] == '\r'))
        n--;
    return n - i == 2 && s[i] == '%' && s[i + 1] == '%';
}

static void check_cell(char *c)
{
    if (!c)
        return;
    size_t n = strlen(c);
    if (n == 0 || n > LIM_CODE_MAX)
        abort();
    const char *nl = memchr(c, '\n', n);
    if (blank_or_sep(c, nl ? (size_t)(nl - c) : n))
        abort();
    const char *last = memrchr(c, '\n', n);
    if (last && blank_or_sep(last + 1, n - (size_t)(last + 1 - c)))
        abort();
    free(c);
}

static void check_path(const uint8_t *data, size_t size)
{
    char *p = strndup((const char *)data, size);
    if (!p)
        return;
    if (cli_artifact_path_safe(p)) {
        size_t n = strlen(p);
        if (n == 0 || p[0] == '/' || p[n - 1] == '/' || strstr(p, "//") || strcmp(p, ".") == 0 ||
            strcmp(p, "..") == 0 || strncmp(p, "./", 2) == 0 || strncmp(p, "../", 3) == 0 || strstr(p, "/./") ||
            strstr(p, "/../") || (n >= 2 && strcmp(p + n - 2, "/.") == 0) || (n >= 3 && strcmp(p + n - 3, "/..") == 0))
            abort();
    }
    free(p);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    check_path(data, size);
    struct cli_cell cell = {0};
    const char *s = (const char *)data, *end = s + size;
    while (s < end) {
        const char *nl = memchr(s, '\n', (size_t)(end - s));
        size_t n = nl ? (size_t)(nl - s) : (size_t)(end - s);
        /* a line is fed as given; repeat long lines so the code limit is reached quickly */
        int reps = n > 1000 ? 300 : 1;
        for (int r = 0; r < reps; r++)
            if (cli_cell_feed(&cell, s, n) == CLI_CELL_DONE)
                check_cell(cli_cell_take(&cell));
        s += n + (nl ? 1 : 0);
    }
    check_cell(cli_cell_take(&cell));
    cli_cell_done(&cell);
    return 0;
}
