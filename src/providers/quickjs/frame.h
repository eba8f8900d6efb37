/* frame.h: the frame types between the monitor (daemon), the zygote and one QuickJS worker.
 * Wire format: core/frame16.h's 16-byte header, with this channel's type table (qf_types): an
 * unknown type, reserved flags or a length outside its type's bounds => the receiver kills the
 * sender. A reply echoes its request's seq; unsolicited frames (READY) carry 0. The RUN, RESULT,
 * HOST_CALL and HOST_REPLY payloads are core/runframe.h's. Payload decoders consume exactly len.
 * Shared by both sides of the wall: this file allocates nothing and calls no syscall. */
#pragma once
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "../../core/frame16.h"
#include "../../core/runframe.h"

enum qf_type {
    QF_RUN = 1,           /* monitor -> worker: see struct qf_run */
    QF_PROBE = 2,         /* monitor -> worker: u32 probe id (startup evidence only) */
    QF_HOST_REPLY = 3,    /* monitor -> worker: the answer to one HOST_CALL, see qf_host_reply */
    QF_READY = 16,        /* worker -> monitor: confined, engine up; empty */
    QF_RESULT = 17,       /* worker -> monitor: see struct qf_result */
    QF_PROBE_RESULT = 18, /* worker -> monitor: i64 syscall return, u32 errno */
    QF_HOST_CALL = 19,    /* worker -> monitor: one host API call of a granted run, qf_host_call */
    QF_SPAWN = 32,        /* monitor -> zygote: empty; one fd in SCM_RIGHTS */
    QF_SPAWNED = 33,      /* zygote -> monitor: u32 pid (0 on failure), u32 errno */
    QF_HELLO = 34,        /* zygote -> monitor, once: u32 namespace flags applied */
};

/* Decodes and validates type, flags and len against the type's bounds. Returns 0 or -1. */
int qf_hdr_decode(const uint8_t in[F16_HDR_LEN], struct f16_hdr *h);
