/* chan.h: the framing between the daemon and the guest agent of one microvm, carried over the
 * VM's virtio-serial port (docs/microvm.md, Channel). Shared by both sides of the wall; this file
 * allocates nothing and calls no syscall.
 * Wire format: the quickjs provider's 16-byte header (STYLE.md §5), big-endian, decoded field by
 * field: u32 len, u16 type, u16 flags (zero), u64 seq; then exactly len payload bytes. The RUN,
 * RESULT, HOST_CALL and HOST_REPLY payloads ARE the quickjs frame payloads (frame.h), so a
 * snippet's request and answer are the same bytes at `process` and at `vm`.
 *
 * The host-side decoder of guest bytes is one pure function, mvc_decode_guest (bytes -> one
 * validated frame), so it can move into a confined helper process later (issue 12). */
#pragma once
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "../quickjs/frame.h"

#define MVC_HDR_LEN 16u

enum mvc_type {
    /* host -> guest */
    MVC_SEED = 1,       /* u64 Math.random seed + 32 bytes for the guest kernel's pool */
    MVC_RUN = 2,        /* a quickjs RUN payload (qf_run) */
    MVC_HOST_REPLY = 3, /* a quickjs HOST_REPLY payload */
    MVC_PROBE = 4,      /* empty: run the negative probes (startup evidence only) */
    /* guest -> host */
    MVC_READY = 16,        /* text: "<kernel release>\n<cpu model>\n" (booted, engine warm) */
    MVC_RESULT = 17,       /* a quickjs RESULT payload */
    MVC_PROBE_RESULT = 18, /* text: one "name=observed" line per probe */
    MVC_HOST_CALL = 19,    /* a quickjs HOST_CALL payload */
    MVC_DIED = 20,         /* i32 wait status of the run's process that ended without a RESULT */
    MVC_SEEDED = 21,       /* empty: the seed is in (the guest is this run's own) */
};

#define MVC_SEED_LEN 40u
#define MVC_READY_MAX 512u
#define MVC_PROBE_RESULT_MAX 4096u

struct mvc_hdr {
    uint32_t len;
    uint16_t type, flags;
    uint64_t seq;
};

/* The cap of each type's payload (0 also for an unknown type). */
uint32_t mvc_max_len(uint16_t type);
void mvc_hdr_encode(uint8_t out[MVC_HDR_LEN], const struct mvc_hdr *h);
/* Decodes a header and checks type (any direction), flags and len against the type's bounds. */
int mvc_hdr_decode(const uint8_t in[MVC_HDR_LEN], struct mvc_hdr *h);

/* One validated frame from the guest. Pointers point into the caller's buffer. */
struct mvc_frame {
    struct mvc_hdr hdr;
    union {
        struct qf_result result;       /* MVC_RESULT */
        struct qf_host_call host_call; /* MVC_HOST_CALL */
        int32_t died_status;           /* MVC_DIED */
        struct {
            const uint8_t *p; /* printable ASCII and '\n' only */
            uint32_t len;
        } text; /* MVC_READY, MVC_PROBE_RESULT */
    } u;
};

enum mvc_decode_status {
    MVC_NEED_MORE = 0, /* buf holds a prefix of a frame that may still be valid */
    MVC_FRAME = 1,     /* *out is one complete valid frame of *used bytes */
    MVC_BAD = -1,      /* the guest broke the protocol: stop reading, kill the VM */
};
/* bytes -> validated frame. Accepts only guest->host types; a header that is invalid, or a
 * payload that does not decode to exactly its length, is MVC_BAD as soon as its bytes are in.
 * Never reads outside buf[0..len). */
enum mvc_decode_status mvc_decode_guest(const uint8_t *buf, size_t len, struct mvc_frame *out, size_t *used);

/* Printable ASCII (0x20..0x7e) and '\n'. */
bool mvc_text_ok(const uint8_t *p, size_t len);
