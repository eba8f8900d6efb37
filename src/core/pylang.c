/* pylang.c: the Python-project test of pylang.h.
 * Trusts: nothing in the step; it reads bytes up to the NUL (steps are validated, bounded strings).
 * Invariant: a pure function of the steps; no allocation. */
#include <stdio.h>
#include <string.h>

#include "pylang.h"

static bool is_delim(char c)
{
    return c == 0 || strchr(" \t\n\r;&|()`$'\"<>", c) != NULL;
}

/* w[0..n) is one word; strip a directory, then match python, python3, python3.<digits>. */
static bool word_is_python(const char *w, size_t n)
{
    const char *slash = memrchr(w, '/', n);
    if (slash) {
        n -= (size_t)(slash + 1 - w);
        w = slash + 1;
    }
    if (n < 6 || memcmp(w, "python", 6))
        return false;
    if (n == 6 || (n == 7 && w[6] == '3'))
        return true;
    if (n < 9 || w[6] != '3' || w[7] != '.')
        return false;
    for (size_t i = 8; i < n; i++)
        if (w[i] < '0' || w[i] > '9')
            return false;
    return true;
}

bool plm_step_names_python(const char *step)
{
    if (!step)
        return false;
    const char *p = step;
    while (*p) {
        while (*p && is_delim(*p))
            p++;
        const char *start = p;
        while (!is_delim(*p))
            p++;
        if (p > start && word_is_python(start, (size_t)(p - start)))
            return true;
    }
    return false;
}

bool plm_project_is_python(const struct plm_request *r)
{
    if (!r || r->kind != PLM_KIND_PROJECT)
        return false;
    for (size_t i = 0; i < r->project.n_steps; i++)
        if (plm_step_names_python(r->project.steps[i]))
            return true;
    return false;
}

static bool version_word(const char *w, size_t n)
{
    if (n == 0 || n > 24)
        return false;
    for (size_t i = 0; i < n; i++)
        if (!strchr("0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ.+-~", w[i]) || !w[i])
            return false;
    return true;
}

/* The last non-empty line of b, printable ASCII only, at most 100 bytes, into out. */
static void last_line(const struct plm_bytes *b, char *out, size_t cap)
{
    size_t end = b->len;
    while (end && (b->data[end - 1] == '\n' || b->data[end - 1] == '\r'))
        end--;
    size_t start = end;
    while (start && b->data[start - 1] != '\n')
        start--;
    size_t k = 0;
    for (size_t i = start; i < end && k + 1 < cap && k < 100; i++)
        out[k++] = b->data[i] >= 0x20 && b->data[i] < 0x7f ? (char)b->data[i] : '?';
    out[k] = 0;
}

bool plm_py_probe_judge(const struct plm_step_result *st, char *observed, size_t cap)
{
    static const char tag[] = "plimsoll-python ";
    const char *names[] = {"Python", "numpy", "pandas", "matplotlib"};
    if (!st) {
        snprintf(observed, cap, "absent: the probe step did not run");
        return false;
    }
    if (st->exit_code != 0 || st->timed_out) {
        char why[104] = "";
        last_line(&st->err, why, sizeof why);
        snprintf(observed, cap, "absent: %s %d: %s", st->timed_out ? "timed out, exit" : "exit", st->exit_code,
                 *why ? why : "(no stderr)");
        return false;
    }
    const char *p = (const char *)st->out.data;
    size_t n = st->out.len;
    if (n && p[n - 1] == '\n')
        n--;
    if (n <= sizeof tag - 1 || n > 200 || memcmp(p, tag, sizeof tag - 1) || memchr(p, '\n', n)) {
        snprintf(observed, cap, "absent: the probe printed no version line");
        return false;
    }
    p += sizeof tag - 1;
    n -= sizeof tag - 1;
    char buf[160];
    size_t k = 0;
    for (int i = 0; i < 4; i++) {
        const char *sp = i < 3 ? memchr(p, ' ', n) : p + n;
        size_t w = sp ? (size_t)(sp - p) : 0;
        if (!sp || !version_word(p, w)) {
            snprintf(observed, cap, "absent: the probe's version line is malformed");
            return false;
        }
        int m = snprintf(buf + k, sizeof buf - k, "%s%s %.*s", i ? ", " : "", names[i], (int)w, p);
        k += m > 0 ? (size_t)m : 0;
        if (i < 3) {
            p = sp + 1;
            n -= w + 1;
        }
    }
    snprintf(observed, cap, "%s", buf);
    return true;
}
