/* err.c: filling and wrapping struct plm_err. Never allocates. */
#include "err.h"

#include <stdio.h>
#include <string.h>

int plm_err_set(struct plm_err *err, int errnum, enum plm_err_kind kind, enum plm_refusal refusal,
                const char *fmt, ...)
{
    if (!err)
        return -1;
    err->errnum = errnum;
    err->kind = kind;
    err->refusal = refusal;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err->msg, sizeof err->msg, fmt, ap);
    va_end(ap);
    return -1;
}

__attribute__((format(printf, 5, 0))) static void vset(struct plm_err *err, int errnum, enum plm_err_kind kind,
                                                       enum plm_refusal refusal, const char *fmt, va_list ap)
{
    err->errnum = errnum;
    err->kind = kind;
    err->refusal = kind == PLM_E_INTERNAL ? PLM_REFUSAL_NONE : refusal;
    vsnprintf(err->msg, sizeof err->msg, fmt, ap);
}

int plm_refuse(struct plm_err *err, enum plm_err_kind kind, enum plm_refusal why, const char *fmt, ...)
{
    if (!err)
        return -1;
    va_list ap;
    va_start(ap, fmt);
    vset(err, 0, kind, why, fmt, ap);
    va_end(ap);
    return -1;
}

int plm_fail(struct plm_err *err, int errnum, enum plm_err_kind kind, const char *fmt, ...)
{
    if (!err)
        return -1;
    va_list ap;
    va_start(ap, fmt);
    vset(err, errnum, kind, PLM_REFUSAL_NONE, fmt, ap);
    va_end(ap);
    return -1;
}

bool plm_err_is_refusal(const struct plm_err *err)
{
    return err && err->refusal != PLM_REFUSAL_NONE && err->kind != PLM_E_INTERNAL;
}

int plm_err_wrap(struct plm_err *err, const char *fmt, ...)
{
    if (!err)
        return -1;
    char prefix[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(prefix, sizeof prefix, fmt, ap);
    va_end(ap);
    char old[sizeof err->msg];
    memcpy(old, err->msg, sizeof old);
    /* Truncation is the documented behaviour of a fixed-size message. */
    int n = snprintf(err->msg, sizeof err->msg, "%s: ", prefix);
    if (n > 0 && (size_t)n < sizeof err->msg)
        snprintf(err->msg + n, sizeof err->msg - (size_t)n, "%.*s", (int)(sizeof err->msg - (size_t)n - 1), old);
    return -1;
}

void plm_err_clear(struct plm_err *err)
{
    if (err)
        memset(err, 0, sizeof *err);
}

const char *plm_refusal_name(enum plm_refusal r)
{
    switch (r) {
    case PLM_REFUSAL_REQUEST: return "request";
    case PLM_REFUSAL_PERMISSION: return "permission";
    case PLM_REFUSAL_PROTOCOL: return "protocol";
    case PLM_REFUSAL_UNSUPPORTED: return "unsupported";
    case PLM_REFUSAL_ISOLATION: return "isolation";
    case PLM_REFUSAL_CAPACITY: return "capacity";
    case PLM_REFUSAL_ENVIRONMENT: return "environment";
    case PLM_REFUSAL_NONE: break;
    }
    return "unknown";
}
