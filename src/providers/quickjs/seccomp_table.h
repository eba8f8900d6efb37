/* seccomp_table.h: the worker's syscall allow-list, as data (STYLE.md §6).
 * The worker applies it (confine.c) and the evidence card prints it, so what we claim is what
 * we set. Everything not listed kills the worker (SCMP_ACT_KILL_PROCESS). */
#pragma once
#include <stddef.h>

#include <linux/filter.h>
#include <seccomp.h>

/* The worker's one descriptor: its socket to the monitor. */
#define WK_SOCK_FD 3

enum wk_arg_rule {
    WK_ANY = 0,     /* no argument check */
    WK_SOCK_ONLY,   /* arg0 == WK_SOCK_FD (64-bit compare) */
    WK_NO_EXEC,     /* (arg2 & PROT_EXEC) == 0 (64-bit compare) */
};

struct wk_rule {
    int nr;             /* SCMP_SYS(name): an unknown name fails the build */
    const char *name;
    enum wk_arg_rule arg;
    const char *reason;
};

extern const struct wk_rule wk_allow[];
extern const size_t wk_allow_len;

/* Human-readable condition of a rule ("fd == 3", "prot without PROT_EXEC", "any"). */
const char *wk_rule_cond(enum wk_arg_rule a);

/* Builds the filter context from the table (default kill, bad arch kills, native arch only).
 * Returns NULL on any failure: the caller fails closed. Does not load it. */
scmp_filter_ctx wk_filter_build(void);

/* Zygote, once: the BPF program libseccomp generates for ctx (what seccomp_load would load,
 * with no filter flags), into out->filter (malloc'd). Returns 0, or -1: the caller fails closed. */
int wk_filter_export(scmp_filter_ctx ctx, struct sock_fprog *out);
