/* log_text.h: a log object as one logfmt line (PLIMSOLL_LOG_FORMAT=text; log_text.c). */
#pragma once
#include <jansson.h>

#define LOG_TEXT_MAX (1u << 20) /* a line longer than this is not written */

/* o's members in order as key=value pairs; malloc'd, without the newline; NULL out of memory. */
char *log_text_line(json_t *o);
