/* log_hook.h: the daemon's log as the layers below it reach it. Core knows nothing of the log's
 * format or sink: the daemon sets the hook once at startup (src/daemon/main.c), as it does for
 * plm_progress; unset (unit tests), lines go nowhere. Any thread may log. */
#pragma once

/* fields: the members of one JSON object as text (`"sandbox":"i12","n":3`, "" for none); the
 * caller passes only IDs, numbers and fixed words, never tokens, bodies or guest output. */
typedef void (*plm_log_fn)(const char *level, const char *event, const char *fields);

void plm_log_set(plm_log_fn fn);
void plm_log(const char *level, const char *event, const char *fields);
