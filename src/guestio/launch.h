/* launch.h: finding, identifying and starting the guestio helper (launch.c); used by client.c. */
#pragma once
#include <stdbool.h>
#include <sys/types.h>

#include "../core/err.h"
#include "guestio.h"

#define GIO_HELPER_NAME "plimsoll-guestio"

/* The ids the helper drops to: only when the daemon is root. */
struct gio_ids {
    bool drop;
    uid_t uid;
    gid_t gid;
};

struct gio_spawn {
    int exe_fd;
    struct gio_ids ids;
    struct gio_limits lim;
    const char *mode; /* the helper's mode argument: "http", "guard:<path>", "stream:microvm" */
};

/* The helper binary, opened O_CLOEXEC at a descriptor above 4; -1 with err when there is none
 * or it could be swapped by someone else. */
int gio_helper_open(const char *configured, struct plm_err *err);
/* A root daemon's helper runs as GIO_HELPER_USER when it exists, else GIO_HELPER_UID, never as
 * an account that exists for something else (err then names the fix). */
int gio_helper_ids(struct gio_ids *ids, struct plm_err *err);
/* Spawns one helper and waits up to GIO_HELLO_MS for its HELLO. On success *pid and *chan (the
 * daemon's end, non-blocking, CLOEXEC) are the caller's; on failure the helper is reaped and
 * *status is its wait status (-1 when none was spawned). */
int gio_helper_spawn(const struct gio_spawn *s, pid_t *pid, int *chan, int *status, struct plm_err *err);
