/* confine.h: the walls of the guestio helper (confine.c is the only guestio file that calls
 * setresuid, capset, prctl, setrlimit or seccomp). */
#pragma once
#include <stdint.h>
#include <sys/types.h>

#include "../confine/filter.h"

/* The helper's descriptors: 0-2 /dev/null, 3 the channel to the daemon, 4 its own binary
 * during exec (closed first thing); connections arrive from 4 up, never in 0-2's place: those
 * stay /dev/null so a stray libc message can never reach a guest. */
#define GIO_CHAN_FD 3
#define GIO_EXE_FD 4

/* Exit statuses the daemon can tell apart. */
#define GIO_EXIT_CONFINE 120  /* a wall could not be put up: nothing was parsed */
#define GIO_EXIT_USAGE 121    /* bad arguments from the daemon */
#define GIO_EXIT_PROTOCOL 122 /* the daemon's frames broke the protocol */
#define GIO_EXIT_NOMEM 123

struct gio_walls {
    pid_t parent; /* the daemon: checked after PR_SET_PDEATHSIG */
    int drop_ids; /* root daemon: switch to uid/gid below (no groups) */
    uid_t uid;
    gid_t gid;
    unsigned max_fds; /* RLIMIT_NOFILE: 4 + the connection cap + slack */
    uint64_t max_mem; /* RLIMIT_AS in bytes */
};

/* The steps of confine/steps.h, in its order, each checked: the parent-death signal and the
 * parent re-checked, every descriptor but 0-3 closed, an empty environment, rlimits, ids and
 * capabilities (a root daemon's helper: the bounding set dropped, no groups, uid/gid below for
 * good; every capability set emptied and verified empty; the parent-death signal armed again),
 * no_new_privs, then the seccomp filter. Returns 0, or -1 when any step failed: the caller exits
 * with GIO_EXIT_CONFINE before it reads a byte. */
int gio_confine(const struct gio_walls *w);

/* The allow-list, as data (printed by docs/privsep.md and checked by the tests): rows of
 * confine/filter.h, CF_FD_ONLY meaning GIO_CHAN_FD. */
extern const struct cf_row gio_allow[];
extern const unsigned gio_allow_len;
