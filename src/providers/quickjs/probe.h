/* probe.h: negative probes a worker runs in C after its filter is on (startup evidence and the
 * filter's own tests). Selected only by the monitor through a PROBE frame; no JavaScript can
 * reach them. */
#pragma once
#include <stdint.h>

enum wk_probe {
    WK_PROBE_NONE = 0,        /* control: returns 0 without a syscall */
    WK_PROBE_OPEN_FILE,       /* openat("/etc/hostname") */
    WK_PROBE_SOCKET,          /* socket(AF_INET, SOCK_STREAM) */
    WK_PROBE_FORK,            /* clone(SIGCHLD): a fork */
    WK_PROBE_PTRACE,          /* ptrace(PTRACE_TRACEME) */
    WK_PROBE_MMAP_EXEC,       /* mmap(PROT_READ|PROT_EXEC) */
    WK_PROBE_MPROTECT_EXEC,   /* mprotect of a heap page to PROT_EXEC */
    WK_PROBE_WRITE_STDERR,    /* write(2, ...): a descriptor other than the socket */
    WK_PROBE_EXECVE,          /* execve("/bin/true") */
    WK_PROBE_KILL,            /* kill(1, 0) */
    WK_PROBE_X32,             /* getpid through the x32 ABI (x86-64 only; else like NONE) */
    WK_PROBE_MEMORY,          /* map 16 MiB chunks until refused: MiB mapped, err ENOMEM */
    WK_PROBE_COUNT,
};

/* Worker side: performs the probe. Returns the raw syscall result; *err gets errno on failure.
 * A forbidden syscall never returns: the kernel kills the worker with SIGSYS. */
int64_t wk_probe_run(uint32_t probe, int *err);
