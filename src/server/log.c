/* log.c: structured log lines. jansson escapes every outside string, so a caller's or guest's
 * control characters cannot forge a line. */
#include "log.h"
#include "log_text.h"
#include "../core/cleanup.h"

#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

static pthread_mutex_t log_mu = PTHREAD_MUTEX_INITIALIZER;
static bool log_text; /* PLIMSOLL_LOG_FORMAT=text: set once at startup, before any thread */

void log_set_text(bool text) { log_text = text; }

void log_event(const char *level, const char *event, json_t *fields)
{
    json_t *o = json_object();
    if (!o) {
        json_decref(fields);
        return;
    }
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    struct tm tm;
    gmtime_r(&ts.tv_sec, &tm);
    char when[80];
    snprintf(when, sizeof when, "%04d-%02d-%02dT%02d:%02d:%02d.%06ldZ", tm.tm_year + 1900, tm.tm_mon + 1,
             tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, ts.tv_nsec / 1000);
    json_object_set_new(o, "ts", json_string(when));
    json_object_set_new(o, "level", json_string(level));
    json_object_set_new(o, "event", json_string(event));
    if (fields)
        json_object_update(o, fields);
    json_decref(fields);
    cleanup_free char *line = log_text ? log_text_line(o) : json_dumps(o, JSON_COMPACT | JSON_ENSURE_ASCII);
    json_decref(o);
    if (!line)
        return;
    size_t n = strlen(line);
    line[n] = '\n'; /* overwrite the NUL: one write per line keeps lines whole across threads */
    pthread_mutex_lock(&log_mu);
    ssize_t w = write(STDERR_FILENO, line, n + 1);
    pthread_mutex_unlock(&log_mu);
    (void)w;
}

void log_internal_error(const char *request_id, const char *detail, char id_out[17])
{
    unsigned char b[8];
    if (getrandom(b, sizeof b, 0) != sizeof b)
        memset(b, 0, sizeof b);
    for (int i = 0; i < 8; i++)
        snprintf(id_out + 2 * i, 3, "%02x", b[i]);
    char cut[4097];
    snprintf(cut, sizeof cut, "%s", detail ? detail : "");
    json_t *f = json_object();
    json_object_set_new(f, "error_id", json_string(id_out));
    if (request_id && *request_id)
        json_object_set_new(f, "request_id", json_string(request_id));
    json_t *d = json_string(cut);
    json_object_set_new(f, "detail", d ? d : json_string("(detail not UTF-8)"));
    log_event("error", "internal_error", f);
}
