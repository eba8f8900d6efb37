/* probe_wk.c: the worker side of the negative probes (in the style of bubblewrap's
 * tests/try-syscall.c): raw syscalls made after the filter is loaded, with harmless arguments,
 * so an allowed call would fail with EBADF/EFAULT instead of doing anything.
 * Trusts: the probe id, which only the monitor can send (PROBE frame).
 * Invariant: every probe but NONE and MEMORY names a syscall the filter must kill; the monitor
 *   fails startup when one returns instead. */
#include "probe.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/ptrace.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

#ifndef __X32_SYSCALL_BIT
#define __X32_SYSCALL_BIT 0x40000000
#endif

static int64_t memory_probe(int *err)
{
    /* Address space, not touched pages: RLIMIT_AS refuses the mapping itself. Stops after
     * 64 GiB so a missing limit shows up as a large number, not a hang. */
    const size_t chunk = 16u * 1024 * 1024;
    int64_t mapped = 0;
    *err = 0;
    for (int i = 0; i < 4096; i++) {
        long p = syscall(SYS_mmap, NULL, chunk, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (p == -1) {
            *err = errno; /* refused: the result is the MiB mapped before that */
            break;
        }
        mapped += (int64_t)chunk;
    }
    return mapped / (1024 * 1024);
}

int64_t wk_probe_run(uint32_t probe, int *err)
{
    long r = 0;
    *err = 0;
    switch ((enum wk_probe)probe) {
    case WK_PROBE_NONE:
        return 0;
    case WK_PROBE_OPEN_FILE:
        r = syscall(SYS_openat, AT_FDCWD, "/etc/hostname", O_RDONLY | O_CLOEXEC);
        break;
    case WK_PROBE_SOCKET:
        r = syscall(SYS_socket, AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        break;
    case WK_PROBE_FORK:
        r = syscall(SYS_clone, (long)SIGCHLD, 0L, 0L, 0L, 0L);
        if (r == 0)
            _exit(0); /* only if the filter failed: the child leaves at once */
        break;
    case WK_PROBE_PTRACE:
        r = syscall(SYS_ptrace, PTRACE_TRACEME, 0L, 0L, 0L);
        break;
    case WK_PROBE_MMAP_EXEC:
        r = syscall(SYS_mmap, NULL, 4096L, PROT_READ | PROT_EXEC, MAP_PRIVATE | MAP_ANONYMOUS, -1L, 0L);
        break;
    case WK_PROBE_MPROTECT_EXEC: {
        long p = syscall(SYS_mmap, NULL, 4096L, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1L, 0L);
        if (p == -1) {
            *err = errno;
            return -1;
        }
        r = syscall(SYS_mprotect, p, 4096L, PROT_READ | PROT_EXEC);
        break;
    }
    case WK_PROBE_WRITE_STDERR:
        r = syscall(SYS_write, 2L, "x", 1L);
        break;
    case WK_PROBE_EXECVE: {
        static char *const argv[] = {"true", NULL};
        static char *const envp[] = {NULL};
        r = syscall(SYS_execve, "/bin/true", argv, envp);
        break;
    }
    case WK_PROBE_KILL:
        r = syscall(SYS_kill, 1L, 0L);
        break;
    case WK_PROBE_X32:
#if defined(__x86_64__)
        r = syscall(__X32_SYSCALL_BIT | SYS_getpid);
        break;
#else
        return 0;
#endif
    case WK_PROBE_MEMORY:
        return memory_probe(err);
    case WK_PROBE_COUNT:
        break;
    }
    if (r == -1)
        *err = errno;
    return r;
}
