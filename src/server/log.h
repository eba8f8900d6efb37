/* log.h: the one funnel for daemon log lines: one JSON object per line on stderr with fixed keys
 * `ts`, `level`, `event`, then the caller's fields. Never pass tokens, bodies, code or guest output. */
#pragma once
#include <jansson.h>
#include <stdbool.h>

/* PLIMSOLL_LOG_FORMAT=text: the same fields as logfmt (log_text.h). Call before any thread starts. */
void log_set_text(bool text);

/* Takes ownership of fields (may be NULL). Thread-safe; each line is written with one write(2). */
void log_event(const char *level, const char *event, json_t *fields);
/* Logs detail (cut to 4 KiB) under a fresh 16-hex id and writes the id into id_out[17]. */
void log_internal_error(const char *request_id, const char *detail, char id_out[17]);
