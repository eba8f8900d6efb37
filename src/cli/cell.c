/* cell.c: the repl's cell reader: lines in, cells out. A cell ends at a blank line or at a line
 * holding only %% (blanks around it ignored), so a Python block such as `def f(x):` and its
 * indented body is one cell, as in Python's own interactive mode.
 * Owns: the cell buffer. Trusts: no line: a cell beyond the daemon's code limit is dropped whole
 * (too_big), never sent truncated, and so is one holding a NUL byte (has_nul).
 * Invariant: memory stays below twice the code limit whatever the input. */
#include <stdlib.h>
#include <string.h>

#include "../core/limits.h"
#include "cli.h"

static bool only_blanks(const char *s, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (s[i] != ' ' && s[i] != '\t' && s[i] != '\r')
            return false;
    return true;
}

static bool is_separator(const char *s, size_t n)
{
    while (n && (*s == ' ' || *s == '\t')) {
        s++;
        n--;
    }
    while (n && (s[n - 1] == ' ' || s[n - 1] == '\t' || s[n - 1] == '\r'))
        n--;
    return n == 2 && s[0] == '%' && s[1] == '%';
}

enum cli_cell_feed cli_cell_feed(struct cli_cell *c, const char *line, size_t n)
{
    bool empty = c->len == 0 && !c->too_big && !c->has_nul;
    if (only_blanks(line, n) || is_separator(line, n))
        return empty ? CLI_CELL_MORE : CLI_CELL_DONE;
    if (c->too_big || c->has_nul)
        return CLI_CELL_MORE;
    if (memchr(line, 0, n)) { /* code is a string on the wire: a NUL cannot be sent */
        c->has_nul = true;
        c->len = 0;
        return CLI_CELL_MORE;
    }
    size_t need = c->len + n + 2; /* a '\n' between lines and the NUL */
    if (need > LIM_CODE_MAX + 1) {
        c->too_big = true;
        c->len = 0;
        return CLI_CELL_MORE;
    }
    if (need > c->cap) {
        size_t cap = need * 2 > LIM_CODE_MAX + 2 ? LIM_CODE_MAX + 2 : need * 2;
        char *b = realloc(c->buf, cap);
        if (!b) {
            c->too_big = true; /* out of memory reads as "cannot send this cell" */
            c->len = 0;
            return CLI_CELL_MORE;
        }
        c->buf = b;
        c->cap = cap;
    }
    if (c->len)
        c->buf[c->len++] = '\n';
    memcpy(c->buf + c->len, line, n);
    c->len += n;
    c->buf[c->len] = 0;
    return CLI_CELL_MORE;
}

char *cli_cell_take(struct cli_cell *c)
{
    char *out = NULL;
    if (c->len && !c->too_big && !c->has_nul)
        out = strndup(c->buf, c->len);
    c->len = 0;
    c->too_big = false;
    c->has_nul = false;
    return out;
}

void cli_cell_done(struct cli_cell *c)
{
    free(c->buf);
    memset(c, 0, sizeof *c);
}
