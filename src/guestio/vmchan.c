/* vmchan.c: encoding and decoding of host <-> guest frames (vmchan.h).
 * Trusts: nothing. The host decodes what a guest wrote, and the guest kernel runs the code of
 * whoever sent the snippet: every field is range-checked before anyone uses it.
 * Invariant: a frame is accepted only when its payload decoder consumed exactly len bytes, and
 * every length is compared with its cap before the caller allocates or waits for more. */
#include "vmchan.h"

#include <string.h>

#include "../core/limits.h"

/* Bounds per type, both directions (the guest decodes the host's with the same table). */
static const struct f16_type mvc_types[] = {
    {MVC_SEED, MVC_SEED_LEN, MVC_SEED_LEN},
    {MVC_RUN, QF_RUN_FIXED + 1, QF_RUN_FIXED + QF_CLIENT_MAX + LIM_CODE_MAX},
    {MVC_HOST_REPLY, QF_HOST_REPLY_FIXED, QF_HOST_REPLY_FIXED + QF_HOST_REPLY_MAX},
    {MVC_PROBE, 0, 0},
    {MVC_PROJECT, 16, MVC_PROJECT_MAX},
    {MVC_SESSION, MVC_SESSION_LEN, MVC_SESSION_LEN},
    {MVC_CELL, MVC_CELL_FIXED + 1, MVC_CELL_FIXED + LIM_CODE_MAX},
    {MVC_FILES, 4u + 8u + 1u, 4u + MVC_FILES_MAX * (8u + MVC_PATH_MAX) + LIM_FILES_TOTAL_MAX},
    {MVC_READY, 0, MVC_READY_MAX},
    {MVC_RESULT, QF_RESULT_FIXED, QF_RESULT_FIXED + 2 * LIM_OUTPUT_MAX},
    {MVC_PROBE_RESULT, 0, MVC_PROBE_RESULT_MAX},
    {MVC_HOST_CALL, QF_HOST_CALL_FIXED + 2, QF_HOST_CALL_FIXED + QF_HOST_METHOD_MAX + QF_HOST_PATH_MAX + QF_HOST_BODY_MAX},
    {MVC_DIED, 4, 4},
    {MVC_SEEDED, 0, 0},
    {MVC_PROJECT_RESULT, 12, MVC_PROJECT_RESULT_MAX},
    {MVC_SESSION_READY, 0, 0},
    {MVC_SESSION_STATUS, MVC_SESSION_STATUS_LEN, MVC_SESSION_STATUS_LEN},
};
#define MVC_TYPES (sizeof mvc_types / sizeof mvc_types[0])

uint32_t mvc_max_len(uint16_t type)
{
    return f16_max_len(mvc_types, MVC_TYPES, type);
}

int mvc_hdr_decode(const uint8_t in[F16_HDR_LEN], struct f16_hdr *h)
{
    return f16_hdr_decode(in, mvc_types, MVC_TYPES, h);
}

bool mvc_text_ok(const uint8_t *p, size_t len)
{
    for (size_t i = 0; i < len; i++)
        if (p[i] != '\n' && (p[i] < 0x20 || p[i] > 0x7e))
            return false;
    return true;
}

static int read_step(struct f16_reader *r, struct mvc_step *s)
{
    s->exit_code = f16_get_i32(r);
    uint8_t flags = f16_get_u8(r);
    uint8_t z0 = f16_get_u8(r), z1 = f16_get_u8(r), z2 = f16_get_u8(r);
    s->ms = f16_get_u32(r);
    s->out_len = f16_get_u32(r);
    s->err_len = f16_get_u32(r);
    if (r->bad || (flags & ~7u) || z0 || z1 || z2 || s->out_len > MVC_STEP_OUT_MAX || s->err_len > MVC_STEP_OUT_MAX)
        return -1;
    s->timed_out = flags & 1;
    s->out_truncated = flags & 2;
    s->err_truncated = flags & 4;
    s->out = f16_get_bytes(r, s->out_len);
    s->err = f16_get_bytes(r, s->err_len);
    return r->bad ? -1 : 0;
}

static int read_artifact(struct f16_reader *r, struct mvc_artifact *a)
{
    a->path_len = f16_get_u32(r);
    a->len = f16_get_u32(r);
    if (r->bad || a->path_len == 0 || a->path_len > MVC_PATH_MAX || a->len > MVC_ARTIFACTS_TOTAL_MAX)
        return -1;
    a->path = f16_get_bytes(r, a->path_len);
    a->content = f16_get_bytes(r, a->len);
    if (r->bad || !qf_text_ok(a->path, a->path_len))
        return -1;
    return 0;
}

/* Every length and count of a PROJECT_RESULT, before anyone copies a byte of it. */
static int project_result_check(const uint8_t *p, size_t len, struct mvc_frame *out)
{
    struct f16_reader r;
    f16_reader_init(&r, p, len);
    uint32_t n_steps = f16_get_u32(&r);
    if (r.bad || n_steps > MVC_STEPS_MAX)
        return -1;
    uint64_t out_total = 0;
    for (uint32_t i = 0; i < n_steps; i++) {
        struct mvc_step s;
        if (read_step(&r, &s) < 0)
            return -1;
        out_total += (uint64_t)s.out_len + s.err_len;
    }
    uint32_t trunc = f16_get_u32(&r), n_art = f16_get_u32(&r);
    if (r.bad || trunc > 1 || n_art > MVC_ARTIFACTS_MAX || out_total > MVC_STEPS_OUT_BUDGET)
        return -1;
    uint64_t art_total = 0;
    for (uint32_t i = 0; i < n_art; i++) {
        struct mvc_artifact a;
        if (read_artifact(&r, &a) < 0)
            return -1;
        art_total += a.len;
    }
    uint32_t elen = f16_get_u32(&r);
    if (r.bad || elen > MVC_ERROR_MAX || art_total > MVC_ARTIFACTS_TOTAL_MAX)
        return -1;
    const uint8_t *e = f16_get_bytes(&r, elen);
    if (f16_reader_finish(&r) < 0 || !qf_text_ok(e, elen))
        return -1;
    out->u.project.p = p;
    out->u.project.len = (uint32_t)len;
    out->u.project.n_steps = n_steps;
    out->u.project.n_artifacts = n_art;
    out->u.project.artifacts_truncated = trunc;
    out->u.project.error = e;
    out->u.project.error_len = elen;
    return 0;
}

void mvc_project_walk_init(struct mvc_project_walk *w, const struct mvc_frame *f)
{
    f16_reader_init(&w->r, f->u.project.p, f->u.project.len);
    (void)f16_get_u32(&w->r);
    w->steps_left = f->u.project.n_steps;
    w->artifacts_left = f->u.project.n_artifacts;
    if (w->steps_left == 0) {
        (void)f16_get_u32(&w->r); /* artifacts_truncated */
        (void)f16_get_u32(&w->r); /* n_artifacts */
    }
}

int mvc_project_next_step(struct mvc_project_walk *w, struct mvc_step *s)
{
    if (w->steps_left == 0)
        return 0;
    w->steps_left--;
    if (read_step(&w->r, s) < 0)
        return 0;
    if (w->steps_left == 0) {
        (void)f16_get_u32(&w->r); /* artifacts_truncated, n_artifacts: known from the check */
        (void)f16_get_u32(&w->r);
    }
    return 1;
}

int mvc_project_next_artifact(struct mvc_project_walk *w, struct mvc_artifact *a)
{
    if (w->steps_left != 0 || w->artifacts_left == 0)
        return 0;
    w->artifacts_left--;
    return read_artifact(&w->r, a) < 0 ? 0 : 1;
}

enum mvc_decode_status mvc_decode_guest(const uint8_t *buf, size_t len, struct mvc_frame *out, size_t *used)
{
    if (len < F16_HDR_LEN)
        return MVC_NEED_MORE;
    struct f16_hdr h;
    if (mvc_hdr_decode(buf, &h) < 0 || h.type < MVC_READY)
        return MVC_BAD; /* unknown, reserved flags, out of bounds, or a host->guest type */
    if (len - F16_HDR_LEN < h.len)
        return MVC_NEED_MORE;
    const uint8_t *p = buf + F16_HDR_LEN;
    memset(out, 0, sizeof *out);
    out->hdr = h;
    switch (h.type) {
    case MVC_READY:
    case MVC_PROBE_RESULT:
        if (!mvc_text_ok(p, h.len))
            return MVC_BAD;
        out->u.text.p = p;
        out->u.text.len = h.len;
        break;
    case MVC_RESULT:
        if (qf_result_decode(p, h.len, &out->u.result) < 0)
            return MVC_BAD;
        break;
    case MVC_HOST_CALL:
        if (qf_host_call_decode(p, h.len, &out->u.host_call) < 0)
            return MVC_BAD;
        break;
    case MVC_DIED:
        out->u.died_status = (int32_t)f16_be32(p);
        break;
    case MVC_SEEDED:
    case MVC_SESSION_READY:
        break;
    case MVC_SESSION_STATUS:
        out->u.status.used = (uint64_t)f16_be32(p) << 32 | f16_be32(p + 4);
        out->u.status.file = f16_be32(p + 8);
        out->u.status.errnum = f16_be32(p + 12);
        if (out->u.status.file > MVC_FILES_MAX || out->u.status.errnum > MVC_ERRNO_MAX ||
            (out->u.status.file == 0) != (out->u.status.errnum == 0))
            return MVC_BAD;
        break;
    case MVC_PROJECT_RESULT:
        if (project_result_check(p, h.len, out) < 0)
            return MVC_BAD;
        break;
    default:
        return MVC_BAD;
    }
    *used = F16_HDR_LEN + h.len;
    return MVC_FRAME;
}

/* ---- canonical frames (the guestio split) ------------------------------------------------------ */

static uint8_t *put_bytes(uint8_t *o, const void *p, size_t n)
{
    if (n)
        memcpy(o, p, n);
    return o + n;
}

static uint8_t *put_u32(uint8_t *o, uint32_t v)
{
    f16_put_u32(o, v);
    return o + 4;
}

/* A PROJECT_RESULT from its walk: every step and artifact written from its decoded fields. */
static uint8_t *encode_project(uint8_t *o, const struct mvc_frame *f)
{
    struct mvc_project_walk w;
    struct mvc_step st;
    struct mvc_artifact a;
    mvc_project_walk_init(&w, f);
    o = put_u32(o, f->u.project.n_steps);
    while (mvc_project_next_step(&w, &st) == 1) {
        o = put_u32(o, (uint32_t)st.exit_code);
        *o++ = (uint8_t)((st.timed_out ? 1 : 0) | (st.out_truncated ? 2 : 0) | (st.err_truncated ? 4 : 0));
        *o++ = 0, *o++ = 0, *o++ = 0;
        o = put_u32(o, st.ms);
        o = put_u32(o, st.out_len);
        o = put_u32(o, st.err_len);
        o = put_bytes(o, st.out, st.out_len);
        o = put_bytes(o, st.err, st.err_len);
    }
    o = put_u32(o, f->u.project.artifacts_truncated ? 1 : 0);
    o = put_u32(o, f->u.project.n_artifacts);
    while (mvc_project_next_artifact(&w, &a) == 1) {
        o = put_u32(o, a.path_len);
        o = put_u32(o, a.len);
        o = put_bytes(o, a.path, a.path_len);
        o = put_bytes(o, a.content, a.len);
    }
    o = put_u32(o, f->u.project.error_len);
    return put_bytes(o, f->u.project.error, f->u.project.error_len);
}

size_t mvc_canon_encode(uint8_t *out, size_t cap, const struct mvc_frame *f)
{
    size_t n = F16_HDR_LEN + (size_t)f->hdr.len;
    if (f->hdr.type < MVC_READY || f->hdr.len > mvc_max_len(f->hdr.type) || n > cap)
        return 0;
    f16_hdr_encode(out, &(struct f16_hdr){.len = f->hdr.len, .type = f->hdr.type, .seq = f->hdr.seq});
    uint8_t *o = out + F16_HDR_LEN, *end;
    switch (f->hdr.type) {
    case MVC_READY:
    case MVC_PROBE_RESULT: end = put_bytes(o, f->u.text.p, f->u.text.len); break;
    case MVC_RESULT: {
        const struct qf_result *r = &f->u.result;
        qf_result_encode_fixed(o, r->exit_code, r->flags, r->out_len, r->err_len);
        end = put_bytes(put_bytes(o + QF_RESULT_FIXED, r->out, r->out_len), r->err, r->err_len);
        break;
    }
    case MVC_HOST_CALL: {
        const struct qf_host_call *c = &f->u.host_call;
        qf_host_call_encode_fixed(o, c->call_no, c->method_len, c->path_len, c->body_len);
        end = put_bytes(put_bytes(put_bytes(o + QF_HOST_CALL_FIXED, c->method, c->method_len), c->path, c->path_len),
                        c->body, c->body_len);
        break;
    }
    case MVC_DIED: end = put_u32(o, (uint32_t)f->u.died_status); break;
    case MVC_SEEDED:
    case MVC_SESSION_READY: end = o; break;
    case MVC_SESSION_STATUS:
        f16_put_u64(o, f->u.status.used);
        end = put_u32(put_u32(o + 8, f->u.status.file), f->u.status.errnum);
        break;
    case MVC_PROJECT_RESULT: end = encode_project(o, f); break;
    default: return 0;
    }
    /* the fields must add up to the length the header states, as the decoder found them */
    return (size_t)(end - out) == n ? n : 0;
}

int mvc_canon_decode(const uint8_t *p, size_t len, struct mvc_frame *out)
{
    size_t used = 0;
    if (len < F16_HDR_LEN || len > MVC_CANON_MAX)
        return -1;
    /* One complete frame, nothing before or after it: no stream, no partial frame. */
    return mvc_decode_guest(p, len, out, &used) == MVC_FRAME && used == len ? 0 : -1;
}
