/* connect_error.c: Connect error bodies (wire.md §7). The one place plm_err kinds become codes.
 * Invariant: a NotDispatched detail is attached iff the error is a refusal; its value is the
 * binary protobuf (tag 0x08, reason varint) in unpadded standard base64, as connect-go writes it. */
#include "../core/base64.h"
#include "../core/cleanup_json.h"
#include "connect_error.h"

#include <jansson.h>
#include <string.h>

const char *wire_connect_code(enum plm_err_kind kind)
{
    switch (kind) {
    case PLM_E_INVALID:
    case PLM_E_PROTOCOL_UNSET: return "invalid_argument";
    case PLM_E_PROTOCOL:
    case PLM_E_UNSUPPORTED: return "unimplemented";
    case PLM_E_DISABLED:
    case PLM_E_ISOLATION:
    case PLM_E_ENVIRONMENT:
    case PLM_E_ENDED: return "failed_precondition";
    case PLM_E_NOT_FOUND: return "not_found";
    case PLM_E_CAPACITY: return "resource_exhausted";
    case PLM_E_UNAUTHENTICATED: return "unauthenticated";
    case PLM_E_PERMISSION: return "permission_denied";
    case PLM_E_MISMATCH: return "data_loss";
    case PLM_E_DEADLINE: return "deadline_exceeded";
    case PLM_E_CANCELED: return "canceled";
    case PLM_E_UNAVAILABLE: return "unavailable";
    case PLM_E_NONE:
    case PLM_E_INTERNAL: break;
    }
    return "internal";
}

static const struct {
    const char *code;
    unsigned status;
} statuses[] = {
    {"canceled", 499},          {"unknown", 500},           {"invalid_argument", 400},
    {"deadline_exceeded", 504}, {"not_found", 404},         {"already_exists", 409},
    {"permission_denied", 403}, {"resource_exhausted", 429}, {"failed_precondition", 400},
    {"aborted", 409},           {"out_of_range", 400},      {"unimplemented", 501},
    {"internal", 500},          {"unavailable", 503},       {"data_loss", 500},
    {"unauthenticated", 401},
};

unsigned wire_connect_status(const char *code)
{
    for (size_t i = 0; i < sizeof statuses / sizeof *statuses; i++)
        if (strcmp(statuses[i].code, code) == 0)
            return statuses[i].status;
    return 500;
}

char *wire_connect_error_json(const char *code, const char *message, enum plm_refusal refusal, size_t *len_out)
{
    json_t *o cleanup_json = json_object();
    if (!o)
        return NULL;
    json_object_set_new(o, "code", json_string(code));
    /* messages may quote caller input: jansson refuses invalid UTF-8, so fall back to a fixed text */
    json_t *msg = json_string(message ? message : "");
    json_object_set_new(o, "message", msg ? msg : json_string("(message not valid UTF-8)"));
    if (refusal != PLM_REFUSAL_NONE) {
        /* two bytes 08 <reason>: base64 of 16 bits is 3 characters, unpadded */
        const uint8_t raw[2] = {0x08, (uint8_t)((unsigned)refusal & 0x7f)};
        char val[4] = {0};
        b64_encode(raw, sizeof raw, val, B64_STD, false);
        json_t *detail = json_object();
        json_object_set_new(detail, "type", json_string("plimsoll.v1.NotDispatched"));
        json_object_set_new(detail, "value", json_string(val));
        json_t *details = json_array();
        json_array_append_new(details, detail);
        json_object_set_new(o, "details", details);
    }
    char *s = json_dumps(o, JSON_COMPACT);
    if (s && len_out)
        *len_out = strlen(s);
    return s;
}
