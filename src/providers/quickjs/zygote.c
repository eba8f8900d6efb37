/* zygote.c: main() of plimsoll-qjs-worker, the single-threaded process that forks workers.
 * The daemon is multi-threaded, so it never forks itself to run library code; it execs this
 * binary once (posix_spawn, empty environment, fd 3 = a SOCK_SEQPACKET control socket), and
 * this process forks one worker per SPAWN request.
 * Owns: fd 3 (control), the engine (runtime, context, prelude evaluated) and the seccomp
 *   program every worker inherits, and the Math.random seed each worker gets.
 * Trusts: the monitor (our parent) for SPAWN frames, still validated; nothing else exists.
 * Invariant: the zygote never runs guest code (its engine ran only our prelude and warm-up) and
 *   never reads from a worker; each worker is a child of the daemon (CLONE_PARENT), so the
 *   daemon kills and reaps it directly and a dying zygote strands no running snippet. */
#include <errno.h>
#include <limits.h>
#include <malloc.h>
#include <sched.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/random.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "frame.h"
#include "../../jsrt/jsrt.h"
#include "seccomp_table.h"
#include "worker.h"

static int parse_u32(const char *s, uint32_t min, uint32_t max, uint32_t *out)
{
    char *end;
    errno = 0;
    unsigned long v = strtoul(s, &end, 10);
    if (errno || end == s || *end || s[0] == '-' || v < min || v > max)
        return -1;
    *out = (uint32_t)v;
    return 0;
}

static int send_ctl(uint16_t type, uint64_t seq, const uint8_t *payload, uint32_t len)
{
    uint8_t buf[F16_HDR_LEN + 8];
    if (len > 8)
        return -1;
    f16_hdr_encode(buf, &(struct f16_hdr){.len = len, .type = type, .flags = 0, .seq = seq});
    memcpy(buf + F16_HDR_LEN, payload, len);
    ssize_t k = send(WK_SOCK_FD, buf, F16_HDR_LEN + len, MSG_NOSIGNAL);
    return k == (ssize_t)(F16_HDR_LEN + len) ? 0 : -1;
}

/* One SPAWN: exactly a 16-byte header of type SPAWN with an empty payload and exactly one
 * descriptor. Anything else ends the zygote (the monitor then starts a new one). */
static int recv_spawn(uint64_t *seq, int *fd)
{
    uint8_t buf[F16_HDR_LEN + 1];
    union {
        struct cmsghdr h;
        char space[CMSG_SPACE(sizeof(int) * 2)];
    } cm;
    struct iovec iov = {.iov_base = buf, .iov_len = sizeof buf};
    struct msghdr msg = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = &cm, .msg_controllen = sizeof cm};
    ssize_t n;
    do
        n = recvmsg(WK_SOCK_FD, &msg, MSG_CMSG_CLOEXEC);
    while (n < 0 && errno == EINTR);
    if (n == 0)
        exit(0); /* the monitor closed the control socket: we are done */
    *fd = -1;
    struct cmsghdr *c = CMSG_FIRSTHDR(&msg);
    if (c && c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS &&
        c->cmsg_len == CMSG_LEN(sizeof(int)))
        memcpy(fd, CMSG_DATA(c), sizeof(int));
    struct f16_hdr h;
    if (n != F16_HDR_LEN || (msg.msg_flags & (MSG_TRUNC | MSG_CTRUNC)) || *fd < 0 ||
        qf_hdr_decode(buf, &h) < 0 || h.type != QF_SPAWN)
        return -1;
    *seq = h.seq;
    return 0;
}

/* Math.random's seed for the next worker (jsrt_adopt): drawn here because the worker's filter
 * has no getrandom, and per fork because the engine every worker inherits is one. Should the
 * kernel refuse (it does not block once booted), the clock and a counter still make it
 * differ between workers; it was never a cryptographic generator. */
static uint64_t next_seed(void)
{
    static uint64_t n;
    uint64_t s = 0;
    if (getrandom(&s, sizeof s, GRND_NONBLOCK) != (ssize_t)sizeof s) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        s = ((uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec) ^ (++n * 0x9E3779B97F4A7C15ULL);
    }
    return s;
}

int main(int argc, char **argv)
{
    struct wk_params p = {0};
    uint32_t ppid;
    /* argv: --zygote <memory_mb> <cpu_seconds> <monitor pid> */
    if (argc != 5 || strcmp(argv[1], "--zygote") != 0 ||
        parse_u32(argv[2], 1, 1u << 20, &p.limits.memory_mb) < 0 ||
        parse_u32(argv[3], 1, 86400, &p.limits.cpu_seconds) < 0 ||
        parse_u32(argv[4], 2, INT_MAX, &ppid) < 0)
        return 2;
    p.monitor_pid = (pid_t)ppid;

    unsigned ns = wk_zygote_setup(p.monitor_pid, WK_SOCK_FD);
    scmp_filter_ctx filter = wk_filter_build();
    int exported = filter ? cf_filter_export(filter, &p.filter) : -1;
    if (filter)
        seccomp_release(filter); /* the program is all a worker needs: fork copies less */
    /* The engine, started once here (Android's zygote): building a runtime and context and
     * evaluating the prelude cost a worker ~150 page faults, most of them copy-on-write faults
     * on this process's heap, each with a TLB flush. A worker now inherits the finished engine
     * and only copies the pages its run writes. Only our prelude and warm-up run here. */
    if (exported < 0 || !(p.engine = wk_engine_new(p.limits.memory_mb)))
        return WK_EXIT_ENGINE;
    /* Give freed heap back to the kernel: a page a worker writes that is still shared with us
     * costs a copy-on-write fault (and a TLB flush); one we no longer hold costs a cheaper
     * zero-fill. */
    malloc_trim(0);
    uint8_t hello[4];
    f16_put_u32(hello, ns);
    if (send_ctl(QF_HELLO, 0, hello, sizeof hello) < 0)
        return WK_EXIT_IO;

    for (;;) {
        uint64_t seq;
        int fd;
        if (recv_spawn(&seq, &fd) < 0)
            return WK_EXIT_PROTOCOL;
        p.seed = next_seed();
        /* A fork whose child becomes the daemon's child (CLONE_PARENT), so the daemon reaps it
         * and sees its exact wait status (SIGSYS, SIGKILL...). The raw clone does not refresh
         * glibc's cached thread id in the child; the worker never uses it (raise/abort would
         * need tgkill, which the filter kills anyway). */
        long pid = syscall(SYS_clone, (long)(CLONE_PARENT | SIGCHLD), 0L, 0L, 0L, 0L);
        if (pid == 0)
            wk_worker_main(fd, &p);
        int e = pid < 0 ? errno : 0;
        close(fd);
        uint8_t rep[8];
        f16_put_u32(rep, pid < 0 ? 0 : (uint32_t)pid);
        f16_put_u32(rep + 4, (uint32_t)e);
        if (send_ctl(QF_SPAWNED, seq, rep, sizeof rep) < 0)
            return WK_EXIT_IO;
    }
}
