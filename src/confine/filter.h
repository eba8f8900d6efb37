/* filter.h: a seccomp allow-list as data, and its one translation into libseccomp. Each
 * confined process (the quickjs worker, the guestio helper) keeps its own table of rows, one
 * per syscall with its reason; the evidence card and the docs print the same table the filter
 * is built from, so what we claim is what we set. */
#pragma once
#include <stddef.h>

#include <linux/filter.h>
#include <seccomp.h>

/* The argument check of a row. */
enum cf_arg {
    CF_ANY = 0,  /* no argument check */
    CF_FD_ONLY,  /* arg0 == the table's one descriptor (64-bit compare) */
    CF_NO_EXEC,  /* (arg2 & PROT_EXEC) == 0: no executable mapping */
    CF_NO_ADDR,  /* arg4 (a socket address) == NULL: only the connected socket's peer */
};

struct cf_row {
    int nr;           /* SCMP_SYS(name): an unknown name fails the build; negative: not on this arch */
    const char *name;
    enum cf_arg arg;
    const char *reason;
};
/* clang-format off */
#define CF_ROW(sys, arg, why) {SCMP_SYS(sys), #sys, arg, why}
/* clang-format on */

/* A row's condition as the card prints it ("fd == 3 only", "prot without PROT_EXEC", ...),
 * written into buf (cap bytes); returns buf. */
const char *cf_arg_cond(enum cf_arg a, int fd, char *buf, size_t cap);

/* A context whose default kills the process, where a syscall through a foreign ABI (i386
 * int 0x80, x32) kills too, holding every row of the table (fd: the CF_FD_ONLY descriptor).
 * No TSYNC and no log: the confined processes are single-threaded, and a kill is the report.
 * Returns NULL on any failure: the caller fails closed. Does not load it. */
scmp_filter_ctx cf_filter_build(const struct cf_row *rows, size_t n, int fd);
/* Adds more rows to a context cf_filter_build made (0 or -1). */
int cf_filter_add(scmp_filter_ctx ctx, const struct cf_row *rows, size_t n, int fd);
/* The BPF program libseccomp generates for ctx (what seccomp_load would load, with no filter
 * flags), into out->filter (malloc'd): for a parent that builds once and hands the bytes to each
 * child. Returns 0, or -1: the caller fails closed. */
int cf_filter_export(scmp_filter_ctx ctx, struct sock_fprog *out);
