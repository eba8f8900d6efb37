/* filter.c: the syscall-row -> libseccomp translation (filter.h).
 * Owns: a context while it builds it (released on every failure), the exported program's
 *   buffer until handed to the caller.
 * Trusts: nothing; the filtered process runs hostile input once the filter is on.
 * Invariant: the default action is SCMP_ACT_KILL_PROCESS, a foreign architecture kills, and a
 *   row allows exactly its syscall under exactly its argument check; nothing else is allowed. */
#include "filter.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

const char *cf_arg_cond(enum cf_arg a, int fd, char *buf, size_t cap)
{
    switch (a) {
    case CF_FD_ONLY: snprintf(buf, cap, "fd == %d only", fd); break;
    case CF_NO_EXEC: snprintf(buf, cap, "prot without PROT_EXEC"); break;
    case CF_NO_ADDR: snprintf(buf, cap, "no socket address"); break;
    case CF_ANY:
    default: snprintf(buf, cap, "any arguments"); break;
    }
    return buf;
}

static int add_row(scmp_filter_ctx ctx, const struct cf_row *r, int fd)
{
    if (r->nr < 0)
        return 0; /* a pseudo number: the syscall does not exist on this architecture */
    switch (r->arg) {
    case CF_FD_ONLY:
        return seccomp_rule_add_exact(ctx, SCMP_ACT_ALLOW, r->nr, 1, SCMP_A0(SCMP_CMP_EQ, (scmp_datum_t)fd));
    case CF_NO_EXEC:
        return seccomp_rule_add_exact(ctx, SCMP_ACT_ALLOW, r->nr, 1,
                                      SCMP_A2(SCMP_CMP_MASKED_EQ, (scmp_datum_t)PROT_EXEC, 0));
    case CF_NO_ADDR:
        return seccomp_rule_add_exact(ctx, SCMP_ACT_ALLOW, r->nr, 1, SCMP_A4(SCMP_CMP_EQ, (scmp_datum_t)0));
    case CF_ANY: break;
    }
    return seccomp_rule_add_exact(ctx, SCMP_ACT_ALLOW, r->nr, 0);
}

int cf_filter_add(scmp_filter_ctx ctx, const struct cf_row *rows, size_t n, int fd)
{
    for (size_t i = 0; i < n; i++)
        if (add_row(ctx, &rows[i], fd) < 0)
            return -1;
    return 0;
}

scmp_filter_ctx cf_filter_build(const struct cf_row *rows, size_t n, int fd)
{
    scmp_filter_ctx ctx = seccomp_init(SCMP_ACT_KILL_PROCESS);
    if (!ctx)
        return NULL;
    if (seccomp_attr_set(ctx, SCMP_FLTATR_ACT_BADARCH, SCMP_ACT_KILL_PROCESS) < 0 || cf_filter_add(ctx, rows, n, fd) < 0) {
        seccomp_release(ctx);
        return NULL;
    }
    return ctx;
}

/* seccomp_load regenerates the program from the rule tree on every call (for the quickjs worker
 * ~0.5 ms of CPU and copy-on-write faults each); the program is the same every time, so a
 * parent generates it once and each child hands the kernel the bytes. */
int cf_filter_export(scmp_filter_ctx ctx, struct sock_fprog *out)
{
    int fd = memfd_create("plimsoll-bpf", MFD_CLOEXEC);
    if (fd < 0)
        return -1;
    int rc = -1;
    uint8_t *buf = NULL;
    off_t n = seccomp_export_bpf(ctx, fd) == 0 ? lseek(fd, 0, SEEK_CUR) : -1;
    /* A whole number of instructions, and no more than the kernel accepts (BPF_MAXINSNS). */
    if (n <= 0 || n % (off_t)sizeof(struct sock_filter) != 0 || n / (off_t)sizeof(struct sock_filter) > BPF_MAXINSNS)
        goto out;
    buf = malloc((size_t)n);
    if (!buf || pread(fd, buf, (size_t)n, 0) != n)
        goto out;
    out->len = (unsigned short)(n / (off_t)sizeof(struct sock_filter));
    out->filter = (struct sock_filter *)buf;
    buf = NULL;
    rc = 0;
out: /* one exit: the memfd and a partial buffer are released on every path */
    free(buf);
    close(fd);
    return rc;
}
