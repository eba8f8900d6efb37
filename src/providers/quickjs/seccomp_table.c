/* seccomp_table.c: the QuickJS worker's syscall allow-list, one row per syscall with its reason.
 * Owns: the table; its translation into libseccomp is confine/filter.c's, loading confine.c's.
 * Trusts: nothing; the worker runs hostile JavaScript once this filter is on.
 * Invariant: default action SCMP_ACT_KILL_PROCESS, a foreign architecture (including the x32
 * ABI on x86-64) kills, no row permits PROT_EXEC (QuickJS has no JIT), and file descriptors are
 * restricted to the one socket where the call takes one. No errno-deny rows: nothing in the
 * worker's path calls a syscall that libc tolerates failing. */
#include "seccomp_table.h"

const struct cf_row wk_allow[] = {
    CF_ROW(read,           CF_FD_ONLY, "the request frame (and a grant's HOST_REPLYs) from the monitor socket"),
    CF_ROW(write,          CF_FD_ONLY, "READY, RESULT (and a grant's HOST_CALLs) to the monitor socket"),
    CF_ROW(brk,            CF_ANY,     "glibc malloc main-arena growth (QuickJS heap)"),
    CF_ROW(mmap,           CF_NO_EXEC, "glibc malloc for large blocks; never PROT_EXEC"),
    CF_ROW(munmap,         CF_ANY,     "glibc free of large blocks"),
    CF_ROW(mremap,         CF_ANY,     "glibc realloc of large blocks (growing strings/arrays)"),
    CF_ROW(madvise,        CF_ANY,     "glibc free returning pages of large blocks"),
    CF_ROW(clock_gettime,  CF_ANY,     "deadline checks and Date when the vDSO falls back"),
    CF_ROW(gettimeofday,   CF_ANY,     "QuickJS Date.now and Math.random seed (vDSO fallback)"),
    CF_ROW(exit_group,     CF_ANY,     "leave after the one snippet"),
    CF_ROW(exit,           CF_ANY,     "leave after the one snippet (single thread)"),
};
const size_t wk_allow_len = sizeof wk_allow / sizeof wk_allow[0];

/* Sanitizer builds only: the ASan/UBSan runtimes report through stderr and inspect their own
 * mappings. meson.build never sanitizes the worker executable, so this block is empty in every
 * shipped build; it exists so a developer who sanitizes the worker by hand gets reports instead
 * of SIGSYS. Never ship a worker built with it. */
#if defined(__SANITIZE_ADDRESS__) || defined(QJS_WORKER_SANITIZED)
static const struct cf_row wk_sanitizer_extra[] = {
    CF_ROW(write,          CF_ANY,     "SANITIZER ONLY: reports on stderr"),
    CF_ROW(mprotect,       CF_NO_EXEC, "SANITIZER ONLY: shadow memory"),
    CF_ROW(rt_sigaction,   CF_ANY,     "SANITIZER ONLY: fatal signal handlers"),
    CF_ROW(rt_sigprocmask, CF_ANY,     "SANITIZER ONLY: report path"),
    CF_ROW(sigaltstack,    CF_ANY,     "SANITIZER ONLY: report path"),
    CF_ROW(getpid,         CF_ANY,     "SANITIZER ONLY: report header"),
    CF_ROW(gettid,         CF_ANY,     "SANITIZER ONLY: report header"),
};
#endif

scmp_filter_ctx wk_filter_build(void)
{
    /* No TSYNC and no log: the worker is single-threaded, and a kill is the report. */
    scmp_filter_ctx ctx = cf_filter_build(wk_allow, wk_allow_len, WK_SOCK_FD);
#if defined(__SANITIZE_ADDRESS__) || defined(QJS_WORKER_SANITIZED)
    if (ctx && cf_filter_add(ctx, wk_sanitizer_extra, sizeof wk_sanitizer_extra / sizeof wk_sanitizer_extra[0],
                             WK_SOCK_FD) < 0) {
        seccomp_release(ctx);
        return NULL;
    }
#endif
    return ctx;
}
