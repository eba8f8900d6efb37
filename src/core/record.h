/* record.h: run records v1-v3 and their SHA-256 digests (wire.md §13).
 * The stream is length-prefixed values: 8-byte big-endian length, then bytes. The domain string
 * comes first, then (name, content) pairs in the fixed order of §13.2-13.4. Digests are 64
 * lowercase hex characters plus NUL. */
#pragma once
#include <stdint.h>

#include "request.h"

#define PLM_HEX_SHA256 65

struct plm_record {
    uint32_t version;
    char request_sha256[PLM_HEX_SHA256];
    char result_sha256[PLM_HEX_SHA256];
    const char *provider;
    const char *isolation;
    const char *environment;
    const char *policy;
    int64_t started_unix_ms;
    int64_t ended_unix_ms;
    const char *session;
    uint64_t sequence;
    const char *previous_sha256;
    const char *software_identity;
    const char *software_rule_id; /* see rec_rule_id() */
    const char *unanswered;       /* version 3 only */
    char record_sha256[PLM_HEX_SHA256];
};

void rec_request_digest(const struct plm_request *r, char out[PLM_HEX_SHA256]);
void rec_result_digest(const struct plm_result *r, char out[PLM_HEX_SHA256]);
/* Digests every field but record_sha256 itself. NULL strings read as "". */
void rec_record_digest(const struct plm_record *rec, char out[PLM_HEX_SHA256]);
/* "" (no rule), "exact:<id>" or "approved:sha256:<hex of sorted unique ids joined by 0x00>".
 * Returns a malloc'd string, NULL only when out of memory. */
char *rec_rule_id(const char *mode, const char *const *ids, size_t n_ids);
/* Hex SHA-256 of the session id's bytes. */
void rec_session_fingerprint(const char *session_id, char out[PLM_HEX_SHA256]);
void rec_sha256_hex(const void *data, size_t len, char out[PLM_HEX_SHA256]);

/* The incremental length-prefixed stream, shared with the evidence card digest. */
struct rec_stream;
struct rec_stream *rec_stream_new(const char *domain);
void rec_stream_str(struct rec_stream *s, const char *name, const char *value);
void rec_stream_bytes(struct rec_stream *s, const char *name, const void *data, size_t len);
void rec_stream_int(struct rec_stream *s, const char *name, int64_t v);
void rec_stream_uint(struct rec_stream *s, const char *name, uint64_t v);
void rec_stream_bool(struct rec_stream *s, const char *name, int v);
/* Finishes, writes the hex digest and frees the stream. */
void rec_stream_finish(struct rec_stream *s, char out[PLM_HEX_SHA256]);
