/* frame.c: the type table of the monitor/zygote/worker channel (frame.h); the header codec is
 * core/frame16.c and the run payloads core/runframe.c.
 * Trusts: nothing; the table bounds every length before anyone allocates or copies. */
#include "frame.h"

#include "../../core/limits.h"

/* Bounds per type (STYLE §5: "a cap per type"). READY/SPAWN are empty by definition. */
static const struct f16_type qf_types[] = {
    {QF_RUN, QF_RUN_FIXED + 1, QF_RUN_FIXED + QF_CLIENT_MAX + LIM_CODE_MAX},
    {QF_PROBE, 4, 4},
    {QF_HOST_REPLY, QF_HOST_REPLY_FIXED, QF_HOST_REPLY_FIXED + QF_HOST_REPLY_MAX},
    {QF_READY, 0, 0},
    {QF_RESULT, QF_RESULT_FIXED, QF_RESULT_FIXED + 2 * LIM_OUTPUT_MAX},
    {QF_PROBE_RESULT, 12, 12},
    {QF_HOST_CALL, QF_HOST_CALL_FIXED + 2,
     QF_HOST_CALL_FIXED + QF_HOST_METHOD_MAX + QF_HOST_PATH_MAX + QF_HOST_BODY_MAX},
    {QF_SPAWN, 0, 0},
    {QF_SPAWNED, 8, 8},
    {QF_HELLO, 4, 4},
};
#define QF_TYPES (sizeof qf_types / sizeof qf_types[0])

int qf_hdr_decode(const uint8_t in[F16_HDR_LEN], struct f16_hdr *h)
{
    return f16_hdr_decode(in, qf_types, QF_TYPES, h);
}
