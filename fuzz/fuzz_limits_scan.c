/* fuzz_limits_scan.c: libFuzzer target for the count limits on raw request bytes. The first
 * byte picks JSON or binary; whatever the scan lets through and the decoder then accepts must
 * hold no repeated field over its limit (the scan and the decoder must agree on structure). */
#include <stdint.h>
#include <stdlib.h>

#include "../src/core/arena.h"
#include "../src/core/limits.h"
#include "../src/wire/arena_alloc.h"
#include "../src/wire/json_codec.h"
#include "../src/wire/limits_scan.h"
#include "sandbox.pb-c.h"

static void check(const Plimsoll__V1__RunRequest *m)
{
    if (m->software_rule && m->software_rule->n_identities > LIM_RULE_IDENTITIES_MAX)
        abort();
    /* the payload members share a union: only the set one may be read */
    if (m->payload_case == PLIMSOLL__V1__RUN_REQUEST__PAYLOAD_PROJECT && (m->project->n_files > LIM_FILES_MAX || m->project->n_steps > LIM_STEPS_MAX ||
                       m->project->n_artifacts > LIM_ARTIFACTS_MAX))
        abort();
    if (m->payload_case == PLIMSOLL__V1__RUN_REQUEST__PAYLOAD_CELL && m->cell->n_files > LIM_FILES_MAX)
        abort();
    if (m->payload_case == PLIMSOLL__V1__RUN_REQUEST__PAYLOAD_MODULE) {
        if (m->module->n_rows > LIM_ROWS_MAX)
            abort();
        for (size_t i = 0; i < m->module->n_rows; i++)
            if (m->module->rows[i]->n_values > LIM_ROW_VALUES_MAX)
                abort();
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    const ProtobufCMessageDescriptor *d = &plimsoll__v1__run_request__descriptor;
    struct plm_err err;
    struct plm_arena *a = plm_arena_new(LIM_DECODE_ARENA_MAX);
    ProtobufCAllocator alloc = wire_arena_allocator(a);
    ProtobufCMessage *m = NULL;
    if (data[0] & 1) {
        if (wire_scan_json(d, (const char *)data + 1, size - 1, &err) == 0)
            m = wire_json_decode_with(d, (const char *)data + 1, size - 1, &alloc, WIRE_JSON_REFUSE_UNKNOWN, &err);
    } else if (wire_scan_binary(d, data + 1, size - 1, &err) == 0) {
        m = protobuf_c_message_unpack(d, &alloc, size - 1, data + 1);
    }
    if (m)
        check((const Plimsoll__V1__RunRequest *)m);
    plm_arena_free(a);
    return 0;
}
