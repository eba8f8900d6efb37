/* convert.h: between generated protobuf-c messages and the core's transport-agnostic types.
 * Views borrow every string from the message they were built from: keep the message alive while
 * the view is used, then call the matching *_done (which frees only the view's own arrays).
 * Built messages (wire_*_to_pb) own deep copies: free with protobuf_c_message_free_unpacked(m, NULL). */
#pragma once
#include "../core/err.h"
#include "../core/provider.h"
#include "../core/record.h"
#include "../core/request.h"
#include "sandbox.pb-c.h"

struct wire_request_view {
    struct plm_request req;
    struct plm_file *files; /* owned by the view */
    struct plm_row *rows;   /* owned by the view */
};

/* Never fails on a decoded message except out of memory (PLM_E_INTERNAL). */
int wire_request_view(const Plimsoll__V1__RunRequest *m, struct wire_request_view *v, struct plm_err *err);
int wire_session_request_view(const Plimsoll__V1__SessionRunRequest *m, struct wire_request_view *v,
                              struct plm_err *err);
void wire_request_view_done(struct wire_request_view *v);

struct wire_result_view {
    struct plm_result res; /* strings and byte pointers borrowed; arrays owned by the view */
};
int wire_result_view(const Plimsoll__V1__RunResponse *m, struct wire_result_view *v, struct plm_err *err);
void wire_result_view_done(struct wire_result_view *v);

/* Borrowing view of a record message (strings point into m). */
void wire_record_view(const Plimsoll__V1__RunRecord *m, struct plm_record *out);

/* A RunResponse built from a provider's result and the stamped record; deep copies.
 * Strings from provider data are repaired to valid UTF-8 (U+FFFD), wire.md §8.2. NULL out of memory. */
Plimsoll__V1__RunResponse *wire_response_to_pb(const struct plm_result *r, const struct plm_record *rec);
Plimsoll__V1__DescribeResponse *wire_describe_to_pb(const struct plm_describe *d, uint32_t protocol);

/* Copies s with every invalid UTF-8 sequence replaced by U+FFFD; malloc'd, NULL out of memory. */
char *wire_utf8_repair(const char *s);
