/* evil_helper_test.c: stand-ins for a guestio helper that a guest has taken over (test only,
 * built once per EVIL_* mode by meson.build). Each speaks just enough of the protocol to get
 * a connection and then breaks it in one way; guestio_test.c checks that the daemon side kills
 * it, answers the guest 503 and never calls the handler with anything it did not validate.
 * The GCALL_BADPATH and WRONG_MODE ones break guard mode, the STREAM_ ones stream mode
 * (modes_test.c). EVIL_ESCAPE puts up the real walls (gio_confine) first and then tries a syscall the filter
 * forbids, chosen by its conn_max argument, to prove the filter kills it. */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ptrace.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <unistd.h>

#include "confine.h"
#include "frame.h"

__attribute__((unused)) static void put(uint16_t type, uint64_t seq, const uint8_t *p, uint32_t len)
{
    uint8_t h[F16_HDR_LEN];
    f16_hdr_encode(h, &(struct f16_hdr){.len = len, .type = type, .flags = 0, .seq = seq});
    if (send(GIO_CHAN_FD, h, sizeof h, MSG_NOSIGNAL) < 0 || (len && send(GIO_CHAN_FD, p, len, MSG_NOSIGNAL) < 0))
        _exit(1);
}

__attribute__((unused)) static void hello(void)
{
    uint8_t v[4];
    gio_hello_encode(v, GIO_VERSION);
    put(GIO_T_HELLO, 0, v, 4);
}

/* Waits for one CONN; returns its id (the descriptor is kept open, in last_fd). */
static int last_fd = -1;
__attribute__((unused)) static uint64_t wait_conn(void)
{
    uint8_t h[F16_HDR_LEN];
    size_t have = 0;
    while (have < sizeof h) {
        char cm[CMSG_SPACE(sizeof(int))];
        struct iovec iov = {h + have, sizeof h - have};
        struct msghdr mh = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = cm, .msg_controllen = sizeof cm};
        ssize_t n = recvmsg(GIO_CHAN_FD, &mh, 0);
        if (n <= 0)
            _exit(0);
        struct cmsghdr *c = CMSG_FIRSTHDR(&mh);
        if (c && c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS)
            memcpy(&last_fd, CMSG_DATA(c), sizeof last_fd);
        have += (size_t)n;
    }
    struct f16_hdr d;
    if (gio_hdr_decode(h, GIO_TO_HELPER, &d) < 0 || d.type != GIO_T_CONN)
        _exit(2);
    return d.seq;
}

__attribute__((unused)) static void call(uint64_t id, const char *target)
{
    uint8_t buf[256];
    struct gio_call c = {(const uint8_t *)"GET", (const uint8_t *)target, NULL, 3, strlen(target), 0};
    size_t n = gio_call_encode(buf, sizeof buf, &c);
    if (n) {
        put(GIO_T_CALL, id, buf, (uint32_t)n);
        return;
    }
    /* hand-made, past the encoder's checks: the daemon's decoder must refuse it */
    size_t tl = strlen(target);
    buf[0] = 3;
    memcpy(buf + 1, "GET", 3);
    buf[4] = (uint8_t)(tl >> 8);
    buf[5] = (uint8_t)tl;
    memcpy(buf + 6, target, tl);
    memset(buf + 6 + tl, 0, 4);
    put(GIO_T_CALL, id, buf, (uint32_t)(10 + tl));
}

__attribute__((unused)) static void idle(void)
{
    for (;;)
        pause();
}

int main(int argc, char **argv)
{
    (void)argc;
    (void)argv;
#if defined(EVIL_NOHELLO)
    _exit(0);
#elif defined(EVIL_BADCALL)
    hello();
    call(wait_conn(), "/a\nHost: evil"); /* a line break smuggled into the target */
    idle();
#elif defined(EVIL_DONE_IN_CALL)
    hello();
    uint64_t id = wait_conn();
    call(id, "/first");
    put(GIO_T_DONE, id, NULL, 0); /* closing a connection whose answer is still owed */
    idle();
#elif defined(EVIL_WRONG_ID)
    hello();
    uint64_t id = wait_conn();
    call(id + 1000, "/not-yours");
    idle();
#elif defined(EVIL_TWICE)
    hello();
    uint64_t id = wait_conn();
    call(id, "/once");
    call(id, "/twice");
    idle();
#elif defined(EVIL_HUGE)
    hello();
    uint64_t id = wait_conn();
    uint8_t h[F16_HDR_LEN];
    f16_hdr_encode(h, &(struct f16_hdr){.len = 0x7fffffff, .type = GIO_T_CALL, .flags = 0, .seq = id});
    if (send(GIO_CHAN_FD, h, sizeof h, MSG_NOSIGNAL) < 0)
        _exit(1);
    idle();
#elif defined(EVIL_TRICKLE)
    /* Not evil: correct frames, written one byte at a time, to prove the daemon's reader
     * reassembles them; then it relays the REPLY to the guest itself. */
    hello();
    uint64_t id = wait_conn();
    uint8_t f[F16_HDR_LEN + 64];
    struct gio_call c = {(const uint8_t *)"POST", (const uint8_t *)"/trickle", (const uint8_t *)"abc", 4, 8, 3};
    size_t n = gio_call_encode(f + F16_HDR_LEN, sizeof f - F16_HDR_LEN, &c);
    f16_hdr_encode(f, &(struct f16_hdr){.len = (uint32_t)n, .type = GIO_T_CALL, .flags = 0, .seq = id});
    for (size_t i = 0; i < F16_HDR_LEN + n; i++) {
        if (send(GIO_CHAN_FD, f + i, 1, MSG_NOSIGNAL) != 1)
            _exit(1);
        usleep(2000);
    }
    uint8_t h[F16_HDR_LEN], p[4096];
    struct f16_hdr d;
    struct gio_reply r;
    if (recv(GIO_CHAN_FD, h, sizeof h, MSG_WAITALL) != (ssize_t)sizeof h || gio_hdr_decode(h, GIO_TO_HELPER, &d) < 0 ||
        d.type != GIO_T_REPLY || d.seq != id || d.len > sizeof p ||
        recv(GIO_CHAN_FD, p, d.len, MSG_WAITALL) != (ssize_t)d.len || gio_reply_decode(p, d.len, &r) < 0)
        _exit(3);
    char head[128];
    int hn = snprintf(head, sizeof head, "HTTP/1.1 %d OK\r\nContent-Length: %zu\r\n\r\n", r.status, r.body_len);
    if (send(last_fd, head, (size_t)hn, MSG_NOSIGNAL) < 0 || send(last_fd, r.body, r.body_len, MSG_NOSIGNAL) < 0)
        _exit(4);
    close(last_fd);
    put(GIO_T_DONE, id, NULL, 0);
    idle();
#elif defined(EVIL_GCALL_BADPATH)
    /* guard mode: a GCALL whose path is not UTF-8 (hand-made past the encoder) */
    hello();
    uint64_t id = wait_conn();
    uint8_t g[64] = {5, 'c', 'r', 'g', '_', 'x', GIO_V_CALL, GIO_GM_GET, 0, 2, '/', 0xff, 0, 0, 0, 0};
    put(GIO_T_GCALL, id, g, 16);
    idle();
#elif defined(EVIL_WRONG_MODE)
    /* a docker-style CALL to a guard-mode server */
    hello();
    call(wait_conn(), "/v1/e2b/guard");
    idle();
#elif defined(EVIL_STREAM_BADTYPE)
    /* stream mode: a DONE where only GUEST and END may come */
    hello();
    put(GIO_T_DONE, wait_conn(), NULL, 0);
    idle();
#elif defined(EVIL_STREAM_GARBAGE)
    /* stream mode: a GUEST frame that is no guest frame at all */
    hello();
    uint64_t id = wait_conn();
    put(GIO_T_GUEST, id, (const uint8_t *)"this is not a microvm frame", 27);
    idle();
#elif defined(EVIL_SILENT)
    hello();
    wait_conn();
    idle(); /* holds the connection and never answers */
#elif defined(EVIL_ESCAPE)
    /* argv as the real helper's: parent uid gid conn_max ... */
    struct gio_walls w = {.parent = (pid_t)atoi(argv[1]),
                          .drop_ids = strcmp(argv[2], "-") != 0,
                          .uid = (uid_t)atoi(argv[2]),
                          .gid = (gid_t)atoi(argv[3]),
                          .max_fds = 64,
                          .max_mem = 256u << 20};
    int attempt = atoi(argv[4]);
    if (gio_confine(&w) < 0)
        _exit(GIO_EXIT_CONFINE);
    hello();
    wait_conn();
    switch (attempt) {
    case 1: syscall(SYS_openat, AT_FDCWD, "/etc/passwd", O_RDONLY); break;
    case 2: syscall(SYS_socket, AF_UNIX, SOCK_STREAM, 0); break;
    case 3: syscall(SYS_kill, w.parent, 0); break;
    case 4: syscall(SYS_ptrace, PTRACE_ATTACH, w.parent, 0, 0); break;
    case 5: syscall(SYS_execve, "/bin/sh", NULL, NULL); break;
    case 6: syscall(SYS_mprotect, NULL, 4096, 7); break;
    case 7: syscall(SYS_mmap, NULL, 4096, 7, 0x22, -1, 0); break; /* PROT_EXEC */
    case 8: {                                                     /* send() with a destination address */
        struct sockaddr_un sa = {.sun_family = AF_UNIX};
        syscall(SYS_sendto, GIO_CHAN_FD, "x", 1, 0, &sa, sizeof sa);
        break;
    }
    default: _exit(98);
    }
    _exit(99); /* the filter let it through */
#else
#error "pick an EVIL_ mode"
#endif
}
