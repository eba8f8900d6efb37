/* seccomp_table.c: the QuickJS worker's syscall allow-list, one row per syscall with its reason.
 * Owns: the table and the translation into a libseccomp context (loading is confine.c's job).
 * Trusts: nothing; the worker runs hostile JavaScript once this filter is on.
 * Invariant: default action SCMP_ACT_KILL_PROCESS, a foreign architecture (including the x32
 * ABI on x86-64) kills, no row permits PROT_EXEC (QuickJS has no JIT), and file descriptors are
 * restricted to the one socket where the call takes one. No errno-deny rows: nothing in the
 * worker's path calls a syscall that libc tolerates failing. */
#include "seccomp_table.h"

#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

#define ROW(sys, arg, why) { SCMP_SYS(sys), #sys, arg, why }

const struct wk_rule wk_allow[] = {
    ROW(read,           WK_SOCK_ONLY, "the request frame (and a grant's HOST_REPLYs) from the monitor socket"),
    ROW(write,          WK_SOCK_ONLY, "READY, RESULT (and a grant's HOST_CALLs) to the monitor socket"),
    ROW(brk,            WK_ANY,       "glibc malloc main-arena growth (QuickJS heap)"),
    ROW(mmap,           WK_NO_EXEC,   "glibc malloc for large blocks; never PROT_EXEC"),
    ROW(munmap,         WK_ANY,       "glibc free of large blocks"),
    ROW(mremap,         WK_ANY,       "glibc realloc of large blocks (growing strings/arrays)"),
    ROW(madvise,        WK_ANY,       "glibc free returning pages of large blocks"),
    ROW(clock_gettime,  WK_ANY,       "deadline checks and Date when the vDSO falls back"),
    ROW(gettimeofday,   WK_ANY,       "QuickJS Date.now and Math.random seed (vDSO fallback)"),
    ROW(exit_group,     WK_ANY,       "leave after the one snippet"),
    ROW(exit,           WK_ANY,       "leave after the one snippet (single thread)"),
};
const size_t wk_allow_len = sizeof wk_allow / sizeof wk_allow[0];

/* Sanitizer builds only: the ASan/UBSan runtimes report through stderr and inspect their own
 * mappings. meson.build never sanitizes the worker executable, so this block is empty in every
 * shipped build; it exists so a developer who sanitizes the worker by hand gets reports instead
 * of SIGSYS. Never ship a worker built with it. */
#if defined(__SANITIZE_ADDRESS__) || defined(QJS_WORKER_SANITIZED)
static const struct wk_rule wk_sanitizer_extra[] = {
    ROW(write,          WK_ANY,       "SANITIZER ONLY: reports on stderr"),
    ROW(mprotect,       WK_NO_EXEC,   "SANITIZER ONLY: shadow memory"),
    ROW(rt_sigaction,   WK_ANY,       "SANITIZER ONLY: fatal signal handlers"),
    ROW(rt_sigprocmask, WK_ANY,       "SANITIZER ONLY: report path"),
    ROW(sigaltstack,    WK_ANY,       "SANITIZER ONLY: report path"),
    ROW(getpid,         WK_ANY,       "SANITIZER ONLY: report header"),
    ROW(gettid,         WK_ANY,       "SANITIZER ONLY: report header"),
};
#endif

const char *wk_rule_cond(enum wk_arg_rule a)
{
    switch (a) {
    case WK_SOCK_ONLY: return "fd == 3 only";
    case WK_NO_EXEC: return "prot without PROT_EXEC";
    case WK_ANY: break;
    }
    return "any arguments";
}

static int add_rule(scmp_filter_ctx ctx, const struct wk_rule *r)
{
    switch (r->arg) {
    case WK_SOCK_ONLY:
        return seccomp_rule_add_exact(ctx, SCMP_ACT_ALLOW, r->nr, 1,
                                      SCMP_A0(SCMP_CMP_EQ, (scmp_datum_t)WK_SOCK_FD));
    case WK_NO_EXEC:
        return seccomp_rule_add_exact(ctx, SCMP_ACT_ALLOW, r->nr, 1,
                                      SCMP_A2(SCMP_CMP_MASKED_EQ, (scmp_datum_t)PROT_EXEC, 0));
    case WK_ANY:
        break;
    }
    return seccomp_rule_add_exact(ctx, SCMP_ACT_ALLOW, r->nr, 0);
}

scmp_filter_ctx wk_filter_build(void)
{
    scmp_filter_ctx ctx = seccomp_init(SCMP_ACT_KILL_PROCESS);
    if (!ctx)
        return NULL;
    /* A syscall made through another ABI (i386 int 0x80, x32) kills: the table speaks only of
     * the native one. */
    if (seccomp_attr_set(ctx, SCMP_FLTATR_ACT_BADARCH, SCMP_ACT_KILL_PROCESS) < 0)
        goto fail;
    /* No TSYNC and no log: the worker is single-threaded, and a kill is the report. */
    for (size_t i = 0; i < wk_allow_len; i++)
        if (add_rule(ctx, &wk_allow[i]) < 0)
            goto fail;
#if defined(__SANITIZE_ADDRESS__) || defined(QJS_WORKER_SANITIZED)
    for (size_t i = 0; i < sizeof wk_sanitizer_extra / sizeof wk_sanitizer_extra[0]; i++)
        if (add_rule(ctx, &wk_sanitizer_extra[i]) < 0)
            goto fail;
#endif
    return ctx;
fail:
    seccomp_release(ctx);
    return NULL;
}

/* seccomp_load regenerates the program from the rule tree on every call, which cost each worker
 * ~0.5 ms of CPU and heap writes (copy-on-write faults); the program is the same every time, so
 * the zygote generates it once and each worker hands the kernel the bytes. */
int wk_filter_export(scmp_filter_ctx ctx, struct sock_fprog *out)
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
out:
    free(buf);
    close(fd);
    return rc;
}
