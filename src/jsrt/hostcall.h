/* hostcall.h: the guest half of one host API call, the same on both tiers that run a granted
 * snippet (the quickjs worker, the microvm guest agent): one HOST_CALL frame out, then one
 * HOST_REPLY frame in, for this run and this call only.
 * Trusts: the reply only after the channel's own header reader (its per-type caps bound the
 * length before the allocation) and qf_host_reply_decode(). */
#pragma once
#include <stddef.h>
#include <stdint.h>

#include "../core/frame16.h"
#include "jsrt.h"

struct jsrt_hostcall_chan {
    int fd;
    uint16_t call_type, reply_type; /* the channel's numbers for HOST_CALL and HOST_REPLY */
    int (*hdr_decode)(const uint8_t in[F16_HDR_LEN], struct f16_hdr *h);
};

enum jsrt_hostcall_fail {
    JSRT_HOSTCALL_OK = 0,
    JSRT_HOSTCALL_IO,       /* the channel failed: the guest can only exit */
    JSRT_HOSTCALL_PROTOCOL, /* the other side spoke out of turn or malformed */
    JSRT_HOSTCALL_MEMORY,
};

/* One exchange under run `seq`. Method and path lengths were checked by jsrt.c; the sum is within
 * HOST_CALL's cap. On JSRT_HOSTCALL_OK, out->buf owns the bytes out->body points into. Blocks
 * until the reply: nothing else may arrive meanwhile. */
enum jsrt_hostcall_fail jsrt_hostcall(const struct jsrt_hostcall_chan *ch, uint64_t seq, uint32_t call_no,
                                      const uint8_t *method, size_t method_len, const uint8_t *path,
                                      size_t path_len, const uint8_t *body, size_t body_len,
                                      struct jsrt_host_reply *out);
