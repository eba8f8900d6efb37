/* wire.h: the plan (host -> runner, on the container's stdin) and the report (runner -> host, on
 * the container's stdout) of a project run, shared by both sides of the wall.
 *
 * Plan, all integers big-endian, read to EOF by the runner:
 *     key[32]                     raw per-run HMAC key, first, before anything else
 *     "PLMPLAN1"
 *     u32 step_timeout_ms
 *     u32 n_files     { u32 len, path; u32 len, content }
 *     u32 n_steps     { u32 len, command }
 *     u32 n_artifacts { u32 len, path }
 * Report frame, written once to stdout by the runner:
 *     "\n<<<PLIMSOLL_REPORT_V2>>> <bodylen> <64 hex HMAC-SHA256(body, key)>\n" body
 * Report body:
 *     "PLMREPT1"
 *     u32 len, error text (0 = none: the plan ran)
 *     u32 n_steps { u32 len, command; u32 len, stdout; u32 len, stderr; i32 exit;
 *                   u8 flags (RW_F_*; other bits zero); u64 duration_ms }
 *     u8 artifacts_truncated (0 or 1)
 *     u32 n_artifacts { u32 len, path; u32 len, content }
 * A decoder must consume exactly the length it was given; any read past the end marks it bad.
 * Binary rather than JSON: artifacts are bytes, and the static runner then needs no JSON parser.
 * This header allocates nothing and calls no syscall. */
#pragma once
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#define RW_KEY_LEN 32u
#define RW_PLAN_MAGIC "PLMPLAN1"
#define RW_REPORT_MAGIC "PLMREPT1"
#define RW_MAGIC_LEN 8u
#define RW_FRAME_TAG "<<<PLIMSOLL_REPORT_V2>>>"
/* tag, space, up to 8 length digits, space, 64 hex, newline (providers.md says 96; a maximal
 * length needs 99, so the cap is 100). */
#define RW_FRAME_HEADER_MAX 100u
#define RW_PLAN_MAX (6u * 1024 * 1024)           /* 4 MiB files + 20 x 16 KiB steps + paths */
#define RW_STDOUT_MAX (16u * 1024 * 1024)        /* (spec) host reads at most this much */
#define RW_REPORT_BODY_MAX (16u * 1024 * 1024)   /* (spec) canonical length 0..16 MiB */
#define RW_RESULT_BUDGET (15u * 1024 * 1024)     /* (spec) whole encoded result */
#define RW_STEP_STREAM_MAX (1u * 1024 * 1024)    /* (spec) per stream per step */
#define RW_STEP_ENCODED_MAX (3u * 1024 * 1024)   /* (spec) one encoded step */
#define RW_ARTIFACT_TOTAL_MAX (8u * 1024 * 1024) /* (spec) all artifact bytes */
#define RW_COMMAND_MAX (16u * 1024)              /* (spec) recorded command */
#define RW_ERROR_MAX 1024u
#define RW_FILES_MAX 200u
#define RW_STEPS_MAX 20u
#define RW_ARTIFACTS_MAX 100u
#define RW_PATH_MAX 1024u

#define RW_F_TIMED_OUT 1u
#define RW_F_OUT_TRUNC 2u
#define RW_F_ERR_TRUNC 4u
#define RW_F_ALL 7u

struct rw_reader {
    const uint8_t *p;
    size_t len, off;
    bool bad;
};

static inline void rw_reader_init(struct rw_reader *r, const void *p, size_t len)
{
    r->p = p;
    r->len = len;
    r->off = 0;
    r->bad = false;
}

/* The next n bytes, or NULL (and bad) when fewer remain. Compares before subtracting. */
static inline const uint8_t *rw_get(struct rw_reader *r, size_t n)
{
    if (r->bad || r->off > r->len || n > r->len - r->off) {
        r->bad = true;
        return NULL;
    }
    const uint8_t *q = r->p + r->off;
    r->off += n;
    return q;
}

static inline uint8_t rw_u8(struct rw_reader *r)
{
    const uint8_t *q = rw_get(r, 1);
    return q ? q[0] : 0;
}

static inline uint32_t rw_u32(struct rw_reader *r)
{
    const uint8_t *q = rw_get(r, 4);
    return q ? (uint32_t)q[0] << 24 | (uint32_t)q[1] << 16 | (uint32_t)q[2] << 8 | q[3] : 0;
}

static inline uint64_t rw_u64(struct rw_reader *r)
{
    uint64_t hi = rw_u32(r);
    return hi << 32 | rw_u32(r);
}

/* A length-prefixed field whose length must not exceed max. */
static inline const uint8_t *rw_field(struct rw_reader *r, size_t max, uint32_t *len)
{
    *len = rw_u32(r);
    if (r->bad || *len > max) {
        r->bad = true;
        return NULL;
    }
    return rw_get(r, *len);
}

static inline bool rw_magic(struct rw_reader *r, const char *magic)
{
    const uint8_t *q = rw_get(r, RW_MAGIC_LEN);
    if (!q || memcmp(q, magic, RW_MAGIC_LEN) != 0)
        r->bad = true;
    return !r->bad;
}

/* True when nothing went wrong and every byte was consumed. */
static inline bool rw_done(const struct rw_reader *r)
{
    return !r->bad && r->off == r->len;
}

static inline void rw_put_u32(uint8_t *p, uint32_t v)
{
    p[0] = (uint8_t)(v >> 24), p[1] = (uint8_t)(v >> 16), p[2] = (uint8_t)(v >> 8), p[3] = (uint8_t)v;
}

static inline void rw_put_u64(uint8_t *p, uint64_t v)
{
    rw_put_u32(p, (uint32_t)(v >> 32));
    rw_put_u32(p + 4, (uint32_t)v);
}
