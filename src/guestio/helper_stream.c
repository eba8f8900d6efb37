/* helper_stream.c: stream mode of plimsoll-guestio (docs/privsep.md): the guest-to-host half of
 * a microvm's channel. The daemon hands over a descriptor of the VM's channel socket in one CONN
 * and keeps writing host frames to the guest itself; this process is the only reader. Each
 * guest frame is decoded by mvc_decode_guest (vmchan.c), re-encoded by
 * mvc_canon_encode and forwarded as one GUEST frame; when the guest's side ends or breaks the
 * framing, one END says why and the process exits.
 * Owns: the guest descriptor, one frame buffer of the largest guest frame, one outgoing frame.
 * Trusts: the daemon's CONN after gio_hdr_decode; nothing the guest writes.
 * Invariant: at most one forwarded frame is outstanding: the guest is not read while it is
 *   queued, so a guest that writes faster than the daemon reads fills its own socket buffer,
 *   never this process's memory. */
#include <errno.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "vmchan.h"
#include "confine.h"
#include "frame.h"
#include "helper.h"

static uint8_t *out;
static size_t out_len, out_off;

static _Noreturn void quit(int status)
{
    _exit(status);
}

/* The CONN header, with the guest descriptor in SCM_RIGHTS (blocking: nothing else to do). */
static int take_conn(void)
{
    uint8_t hdr[F16_HDR_LEN];
    size_t have = 0;
    int fd = -1;
    while (have < sizeof hdr) {
        union {
            char buf[CMSG_SPACE(sizeof(int))];
            struct cmsghdr align;
        } cm;
        struct iovec iov = {hdr + have, sizeof hdr - have};
        struct msghdr mh = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = cm.buf, .msg_controllen = sizeof cm.buf};
        ssize_t n = recvmsg(GIO_CHAN_FD, &mh, MSG_CMSG_CLOEXEC);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            quit(0);
        if (mh.msg_flags & MSG_CTRUNC)
            quit(GIO_EXIT_PROTOCOL);
        for (struct cmsghdr *h = CMSG_FIRSTHDR(&mh); h; h = CMSG_NXTHDR(&mh, h)) {
            if (h->cmsg_level != SOL_SOCKET || h->cmsg_type != SCM_RIGHTS || fd >= 0 ||
                h->cmsg_len != CMSG_LEN(sizeof(int)))
                quit(GIO_EXIT_PROTOCOL);
            memcpy(&fd, CMSG_DATA(h), sizeof fd);
        }
        have += (size_t)n;
    }
    struct f16_hdr h;
    if (gio_hdr_decode(hdr, GIO_TO_HELPER, &h) < 0 || h.type != GIO_T_CONN || h.seq != 1 || fd < 0)
        quit(GIO_EXIT_PROTOCOL);
    return fd;
}

static void put_frame(uint16_t type, const uint8_t *payload, size_t len)
{
    out = malloc(F16_HDR_LEN + len);
    if (!out)
        quit(GIO_EXIT_NOMEM);
    f16_hdr_encode(out, &(struct f16_hdr){.len = (uint32_t)len, .type = type, .seq = 1});
    if (len)
        memcpy(out + F16_HDR_LEN, payload, len);
    out_len = F16_HDR_LEN + len;
    out_off = 0;
}

/* Sends what it can of the outgoing frame; false when the daemon is gone. */
static bool flush(void)
{
    while (out && out_off < out_len) {
        ssize_t n = send(GIO_CHAN_FD, out + out_off, out_len - out_off, MSG_DONTWAIT | MSG_NOSIGNAL);
        if (n < 0 && (errno == EAGAIN || errno == EINTR))
            return true;
        if (n <= 0)
            return false;
        out_off += (size_t)n;
    }
    free(out);
    out = NULL;
    return true;
}

/* Blocks until the outgoing frame is sent (the daemon gone: exit). */
static void flush_all(void)
{
    while (out) {
        struct pollfd p = {GIO_CHAN_FD, POLLOUT, 0};
        if (poll(&p, 1, -1) < 0 && errno != EINTR)
            quit(GIO_EXIT_PROTOCOL);
        if (!flush())
            quit(0);
    }
}

/* The END frame, sent to the last byte, then exit: the daemon reads it before the close. */
static _Noreturn void end(uint8_t why)
{
    flush_all();
    put_frame(GIO_T_END, &why, 1);
    flush_all();
    quit(0);
}

_Noreturn void gio_stream_helper_main(void)
{
    int guest = take_conn();
    uint8_t *buf = malloc(MVC_CANON_MAX), *enc = malloc(MVC_CANON_MAX);
    if (!buf || !enc)
        quit(GIO_EXIT_NOMEM);
    size_t len = 0;
    for (;;) {
        /* Forward every complete frame already in (one at a time), then read more. */
        while (!out) {
            struct mvc_frame f;
            size_t used = 0;
            enum mvc_decode_status st = mvc_decode_guest(buf, len, &f, &used);
            if (st == MVC_BAD)
                end(GIO_END_PROTOCOL);
            if (st == MVC_NEED_MORE) {
                if (len == MVC_CANON_MAX)
                    end(GIO_END_PROTOCOL); /* cannot happen: the header's cap is checked first */
                break;
            }
            size_t n = mvc_canon_encode(enc, MVC_CANON_MAX, &f);
            if (!n || n != used)
                end(GIO_END_PROTOCOL);
            put_frame(GIO_T_GUEST, enc, n);
            memmove(buf, buf + used, len - used);
            len -= used;
        }
        struct pollfd p[2] = {
            {GIO_CHAN_FD, (short)(POLLIN | (out ? POLLOUT : 0)), 0},
            {out ? -1 : guest, POLLIN, 0},
        };
        if (poll(p, 2, -1) < 0 && errno != EINTR)
            quit(GIO_EXIT_PROTOCOL);
        if (p[0].revents & POLLIN) {
            uint8_t b;
            ssize_t n = recv(GIO_CHAN_FD, &b, 1, MSG_DONTWAIT);
            if (n == 0)
                quit(0); /* the daemon is done with this VM */
            if (n > 0)
                quit(GIO_EXIT_PROTOCOL); /* the daemon sends nothing after CONN in this mode */
        }
        if ((p[0].revents & (POLLOUT | POLLHUP | POLLERR)) && !flush())
            quit(0);
        if (p[1].revents & (POLLIN | POLLHUP | POLLERR)) {
            ssize_t n = recv(guest, buf + len, MVC_CANON_MAX - len, MSG_DONTWAIT);
            if (n < 0 && (errno == EAGAIN || errno == EINTR))
                continue;
            if (n <= 0)
                end(GIO_END_CLOSED);
            len += (size_t)n;
        }
    }
}
