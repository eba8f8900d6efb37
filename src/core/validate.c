/* validate.c: the shared request validation of providers.md §1.4.
 * Trusts: nothing; every field is as the caller sent it. Invariant: every failure is
 * PLM_E_INVALID marked `request` (nothing ran), and no check allocates. */
#include "validate.h"

#include <math.h>
#include <string.h>

#include "limits.h"
#include "module.h"

#define INVALID(err, ...) plm_refuse(err, PLM_E_INVALID, PLM_REFUSAL_REQUEST, __VA_ARGS__)

static bool text_ok(const char *s, size_t *len_out)
{
    size_t len = strlen(s);
    *len_out = len;
    return plm_utf8_ok(s, len);
}

bool plm_path_ok(const char *p)
{
    size_t len = strlen(p);
    if (len == 0 || len > LIM_PATH_MAX || p[0] == '/' || !plm_utf8_ok(p, len))
        return false;
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)p[i];
        if (c < 0x20 || c == 0x7f || c == '\\')
            return false;
    }
    /* Lexically clean (Go's path.Clean leaves it unchanged): no empty, "." or ".." segment,
     * which also rules out "//", a trailing "/", ".", ".." and a leading "../". */
    const char *seg = p;
    for (;;) {
        const char *end = strchr(seg, '/');
        size_t n = end ? (size_t)(end - seg) : strlen(seg);
        if (n == 0 || (n == 1 && seg[0] == '.') || (n == 2 && seg[0] == '.' && seg[1] == '.'))
            return false;
        if (!end)
            return true;
        seg = end + 1;
    }
}

static int check_paths(const char *what, const char *const *paths, size_t n, struct plm_err *err)
{
    for (size_t i = 0; i < n; i++) {
        if (!plm_path_ok(paths[i]))
            return INVALID(err, "%s %zu: path must be relative, lexically clean, at most %u bytes, "
                                "without control characters or backslashes",
                           what, i + 1, (unsigned)LIM_PATH_MAX);
        for (size_t k = 0; k < i; k++)
            if (strcmp(paths[k], paths[i]) == 0)
                return INVALID(err, "%s %zu: duplicate path", what, i + 1);
    }
    return 0;
}

static int check_files(const struct plm_file *files, size_t n, struct plm_err *err)
{
    if (n > LIM_FILES_MAX)
        return INVALID(err, "at most %d files are allowed, got %zu", LIM_FILES_MAX, n);
    size_t total = 0;
    for (size_t i = 0; i < n; i++) {
        if (!plm_path_ok(files[i].path))
            return INVALID(err, "file %zu: path must be relative, lexically clean, at most %u bytes, "
                                "without control characters or backslashes",
                           i + 1, (unsigned)LIM_PATH_MAX);
        for (size_t k = 0; k < i; k++)
            if (strcmp(files[k].path, files[i].path) == 0)
                return INVALID(err, "file %zu: duplicate path", i + 1);
        size_t len;
        if (!text_ok(files[i].content, &len))
            return INVALID(err, "file %zu: content must be valid UTF-8", i + 1);
        if (__builtin_add_overflow(total, len, &total) || total > LIM_FILES_TOTAL_MAX)
            return INVALID(err, "file content exceeds %u bytes in total", (unsigned)LIM_FILES_TOTAL_MAX);
    }
    return 0;
}

static int check_grant_name(const char *g, struct plm_err *err)
{
    size_t len = g ? strlen(g) : 0;
    if (len > LIM_GRANT_PROFILE_MAX)
        return INVALID(err, "grant_profile exceeds %d bytes", LIM_GRANT_PROFILE_MAX);
    if (g && !plm_utf8_ok(g, len))
        return INVALID(err, "grant_profile must be valid UTF-8");
    return 0;
}

static int check_javascript(const struct plm_request *r, struct plm_err *err)
{
    size_t len;
    const char *code = r->js.code ? r->js.code : "";
    if (!*code)
        return INVALID(err, "javascript code is empty");
    if (!text_ok(code, &len))
        return INVALID(err, "javascript code must be valid UTF-8");
    if (len > LIM_CODE_MAX)
        return INVALID(err, "javascript code is %zu bytes; the limit is %u", len, (unsigned)LIM_CODE_MAX);
    return check_grant_name(r->js.grant_profile, err);
}

static int check_project(const struct plm_request *r, struct plm_err *err)
{
    size_t n = r->project.n_steps;
    if (n < 1 || n > LIM_STEPS_MAX)
        return INVALID(err, "a project needs 1 to %d steps, got %zu", LIM_STEPS_MAX, n);
    for (size_t i = 0; i < n; i++) {
        size_t len;
        if (!text_ok(r->project.steps[i], &len))
            return INVALID(err, "step %zu must be valid UTF-8", i + 1);
        if (len == 0)
            return INVALID(err, "step %zu is empty", i + 1);
        if (len > LIM_STEP_MAX)
            return INVALID(err, "step %zu is %zu bytes; the limit is %u", i + 1, len, (unsigned)LIM_STEP_MAX);
    }
    if (check_files(r->project.files, r->project.n_files, err) < 0)
        return -1;
    if (r->project.n_artifacts > LIM_ARTIFACTS_MAX)
        return INVALID(err, "at most %d artifacts are allowed, got %zu", LIM_ARTIFACTS_MAX,
                       r->project.n_artifacts);
    if (check_paths("artifact", r->project.artifacts, r->project.n_artifacts, err) < 0)
        return -1;
    return check_grant_name(r->project.grant_profile, err);
}

int plm_validate_rule(const struct plm_request *r, struct plm_err *err)
{
    const char *mode = r->software_mode ? r->software_mode : "";
    size_t n = r->n_software_identities;
    if (!*mode) {
        if (n)
            return INVALID(err, "software_rule: identities need a mode (exact or approved)");
        return 0;
    }
    if (strcmp(mode, "exact") == 0) {
        if (n != 1)
            return INVALID(err, "software_rule: exact takes exactly one identity, got %zu", n);
    } else if (strcmp(mode, "approved") == 0) {
        if (n < 1 || n > LIM_RULE_IDENTITIES_MAX)
            return INVALID(err, "software_rule: approved takes 1 to %d identities, got %zu",
                           LIM_RULE_IDENTITIES_MAX, n);
    } else {
        return INVALID(err, "software_rule: mode must be \"\", exact or approved");
    }
    for (size_t i = 0; i < n; i++) {
        size_t len;
        if (!text_ok(r->software_identities[i], &len) || len == 0 || len > LIM_RULE_IDENTITY_MAX)
            return INVALID(err, "software_rule: identity %zu must be 1 to %d bytes of UTF-8", i + 1,
                           LIM_RULE_IDENTITY_MAX);
    }
    return 0;
}

int plm_validate_payload(const struct plm_request *r, struct plm_err *err)
{
    switch (r->kind) {
    case PLM_KIND_JAVASCRIPT: return check_javascript(r, err);
    case PLM_KIND_PROJECT: return check_project(r, err);
    case PLM_KIND_MODULE: return plm_module_check(r, err);
    case PLM_KIND_CELL:
        return INVALID(err, "payload must be exactly one of javascript, project, or module; "
                            "a cell runs only in a session (SessionRun)");
    case PLM_KIND_NONE: break;
    }
    return INVALID(err, "payload must be exactly one of javascript, project, or module");
}
