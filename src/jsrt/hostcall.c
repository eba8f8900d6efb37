/* hostcall.c: one HOST_CALL out, its HOST_REPLY in (hostcall.h). Owns the reply buffer until it
 * hands it to the caller in out->buf. */
#include "hostcall.h"

#include <stdlib.h>

#include "../core/exact_io.h"
#include "../core/runframe.h"

static int send_call(const struct jsrt_hostcall_chan *ch, uint64_t seq, uint32_t call_no, const uint8_t *method,
                     size_t method_len, const uint8_t *path, size_t path_len, const uint8_t *body, size_t body_len)
{
    uint8_t fixed[QF_HOST_CALL_FIXED];
    qf_host_call_encode_fixed(fixed, call_no, (uint32_t)method_len, (uint32_t)path_len, (uint32_t)body_len);
    uint32_t len = (uint32_t)(QF_HOST_CALL_FIXED + method_len + path_len + body_len);
    uint8_t h[F16_HDR_LEN];
    f16_hdr_encode(h, &(struct f16_hdr){.len = len, .type = ch->call_type, .flags = 0, .seq = seq});
    if (plm_write_exact(ch->fd, h, sizeof h) < 0 || plm_write_exact(ch->fd, fixed, sizeof fixed) < 0 ||
        plm_write_exact(ch->fd, method, method_len) < 0 || plm_write_exact(ch->fd, path, path_len) < 0 ||
        plm_write_exact(ch->fd, body, body_len) < 0)
        return -1;
    return 0;
}

enum jsrt_hostcall_fail jsrt_hostcall(const struct jsrt_hostcall_chan *ch, uint64_t seq, uint32_t call_no,
                                      const uint8_t *method, size_t method_len, const uint8_t *path,
                                      size_t path_len, const uint8_t *body, size_t body_len,
                                      struct jsrt_host_reply *out)
{
    if (send_call(ch, seq, call_no, method, method_len, path, path_len, body, body_len) < 0)
        return JSRT_HOSTCALL_IO;
    uint8_t hb[F16_HDR_LEN];
    struct f16_hdr rh;
    if (plm_read_exact(ch->fd, hb, sizeof hb) < 0)
        return JSRT_HOSTCALL_IO;
    /* Fail closed: only the reply to this run, its length bounded by the type's cap first. */
    if (ch->hdr_decode(hb, &rh) < 0 || rh.type != ch->reply_type || rh.seq != seq)
        return JSRT_HOSTCALL_PROTOCOL;
    uint8_t *payload = malloc(rh.len ? rh.len : 1);
    if (!payload)
        return JSRT_HOSTCALL_MEMORY;
    struct qf_host_reply rep;
    if (plm_read_exact(ch->fd, payload, rh.len) < 0) {
        free(payload);
        return JSRT_HOSTCALL_IO;
    }
    if (qf_host_reply_decode(payload, rh.len, &rep) < 0 || rep.call_no != call_no) {
        free(payload);
        return JSRT_HOSTCALL_PROTOCOL;
    }
    *out = (struct jsrt_host_reply){.status = rep.status,
                                    .deadline = (rep.flags & QF_HR_DEADLINE) != 0,
                                    .body = rep.body,
                                    .body_len = rep.body_len,
                                    .buf = payload};
    return JSRT_HOSTCALL_OK;
}
