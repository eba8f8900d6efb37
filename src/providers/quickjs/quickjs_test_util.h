/* quickjs_test_util.h: what the quickjs unit test files share: one run through the ops table and
 * its output as text. Tests only. */
#pragma once
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "../../core/limits.h"
#include "../../core/provider.h"

struct run {
    int rc;
    struct plm_err err;
    struct plm_result res;
    int64_t ms;
};

static inline int64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static inline void run_on(struct plm_provider *p, const char *code, uint32_t timeout_ms, enum plm_tier floor, struct run *r)
{
    memset(r, 0, sizeof *r);
    struct plm_request req = {.protocol = 3, .kind = PLM_KIND_JAVASCRIPT};
    req.js.code = code;
    struct plm_run_ctx ctx = {.caller = "", .timeout_ms = timeout_ms, .floor = floor};
    int64_t t0 = now_ms();
    r->rc = p->ops->run_javascript(p, &ctx, &req, &r->res, &r->err);
    r->ms = now_ms() - t0;
}


/* data (n bytes, possibly NULL) as a NUL-terminated string in buf (cap bytes), cut to fit. */
static inline const char *text_into(char *buf, size_t cap, const uint8_t *data, size_t n)
{
    if (n > cap - 1)
        n = cap - 1;
    memcpy(buf, data ? (const char *)data : "", n);
    buf[n] = 0;
    return buf;
}

/* stdout/stderr as NUL-terminated copies (static, overwritten per call). */
static inline const char *out_of(const struct run *r)
{
    static char buf[LIM_OUTPUT_MAX + 1];
    return text_into(buf, sizeof buf, r->res.js.out.data, r->res.js.out.len);
}

/* stdout as a NUL-terminated copy in thread-local storage (for runs on several threads). */
static inline const char *out_of_copy(const struct run *r)
{
    static _Thread_local char buf[256];
    return text_into(buf, sizeof buf, r->res.js.out.data, r->res.js.out.len);
}

static inline const char *err_of(const struct run *r)
{
    static char buf[LIM_OUTPUT_MAX + 1];
    return text_into(buf, sizeof buf, r->res.js.err.data, r->res.js.err.len);
}
