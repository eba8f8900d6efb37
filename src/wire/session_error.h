/* session_error.h: Connect error bodies of the session procedures (sessions.md §2.5), which carry
 * SessionEnded and UnansweredCall details beside (or instead of) NotDispatched. */
#pragma once
#include <stddef.h>

#include "../core/err.h"
#include "../core/record.h"
#include "../core/session_end.h"

struct wire_session_details {
    enum plm_session_end ended;          /* NONE: no SessionEnded detail */
    const char *ended_detail;
    bool ended_before_mark;              /* SessionEnded first (an ended session), else after */
    const struct plm_record *unanswered; /* version 3 record, or NULL */
};

/* {"code","message","details":[...]}: UnansweredCall (when given), then SessionEnded and
 * NotDispatched (iff refusal != NONE) in the order d asks. Values are binary protobuf in
 * unpadded standard base64. malloc'd; NULL out of memory. */
char *wire_session_error_json(const char *code, const char *message, enum plm_refusal refusal,
                              const struct wire_session_details *d, size_t *len_out);
/* Unpadded standard base64 of n bytes; malloc'd, NULL out of memory. */
char *wire_b64_unpadded(const uint8_t *p, size_t n);
