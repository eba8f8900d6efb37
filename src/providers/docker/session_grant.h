/* session_grant.h: the grant transport of a docker session (session_grant.c): a per-session host
 * directory mounted once at open, a per-call socket and preload in it under a random name. */
#pragma once
#include <stddef.h>

#include "../../core/err.h"
#include "../../core/provider.h"
#include "hostsock.h"

#define DOCK_SG_DIR_IN "/run/plimsoll-session" /* where a session container sees its directory */

/* Makes <base>/plimsoll-session-<pid>-XXXXXX (0711) into out; "" and -1 on failure. */
int dock_sg_dir_make(const char *base, char *out, size_t cap, struct plm_err *err);
/* Removes the directory and whatever a call left in it; NULL/""-safe. */
void dock_sg_dir_remove(const char *dir);
/* Removes session directories under base whose daemon no longer runs (or is this process, at
 * startup); returns how many went. */
int dock_sg_sweep(const char *base);

/* One granted call: its socket and preload served from the session directory, and the paths the
 * container sees them at. */
struct dock_sg_call {
    struct dock_hostsock *hs;
    char sock_in[96], preload_in[96];
};
int dock_sg_begin(const char *dir, const struct plm_host_api *api, struct dock_sg_call *c, struct plm_err *err);
/* Ends serving and removes the call's two files; safe on a call that never began. */
void dock_sg_end(struct dock_sg_call *c);
