/* connect_error.h: Connect error bodies and statuses (wire.md §7). The only place that maps
 * plm_err kinds to Connect codes. */
#pragma once
#include <stddef.h>

#include "../core/err.h"

/* The lowercase Connect code for a kind ("invalid_argument", ...). */
const char *wire_connect_code(enum plm_err_kind kind);
/* The HTTP status for a Connect code name (wire.md §7.2); 500 for an unknown name. */
unsigned wire_connect_status(const char *code);
/* {"code":..,"message":..[,"details":[{"type":"plimsoll.v1.NotDispatched","value":"<b64>"}]]}
 * The detail is present iff refusal != NONE. malloc'd; NULL out of memory. */
char *wire_connect_error_json(const char *code, const char *message, enum plm_refusal refusal, size_t *len_out);
