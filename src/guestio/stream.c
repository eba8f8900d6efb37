/* stream.c: the daemon's side of a guest byte stream parsed by a guestio helper in stream mode
 * (guestio.h, docs/privsep.md): a microvm's channel. The daemon keeps writing host frames to the
 * guest itself; the helper is the only reader of what the guest writes, and the daemon receives
 * nothing but GUEST frames (one re-encoded guest frame each, for the caller's canonical decoder)
 * and at most one END.
 * Owns: the helper (pid, reaped on close or failure) and the daemon's end of its channel; the
 *   buffer of the frame last returned.
 * Trusts: nothing from the helper: every header goes through gio_hdr_decode, only GUEST and END
 *   are permitted, and a helper that breaks that, dies or goes silent past the caller's
 *   deadline is killed; the caller decodes each payload strictly (mvc_canon_decode).
 * Invariant: every wait is a poll bounded by the caller's deadline; after the first failure or
 *   END every call returns the same outcome without touching the helper again. */
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../core/cleanup.h"
#include "../core/clock.h"
#include "frame.h"
#include "guestio.h"
#include "launch.h"

struct gio_stream {
    pid_t pid;
    int chan;
    int state; /* 0 open, 1 ended (end_why), -1 failed */
    int end_why;
    int status; /* the helper's wait status once reaped, -1 before */
    uint8_t hdr[F16_HDR_LEN];
    size_t hhave, plhave;
    struct f16_hdr h;
    uint8_t *pl;  /* the frame being read */
    uint8_t *last; /* the frame last returned */
};

static void reap(struct gio_stream *s)
{
    if (s->chan >= 0)
        close(s->chan);
    s->chan = -1;
    if (s->pid > 0) {
        kill(s->pid, SIGKILL);
        while (waitpid(s->pid, &s->status, 0) < 0 && errno == EINTR)
            ;
    }
    s->pid = -1;
}

int gio_stream_open(int guest_fd, const char *helper_path, struct gio_stream **out, struct plm_err *err)
{
    *out = NULL;
    cleanup_close int gfd = guest_fd;
    struct gio_spawn sp = {
        .lim = {.conn_max = 1, .head_max = 64, .body_max = 1, .head_ms = 1, .read_ms = 1, .write_ms = 1},
        .mode = "stream:microvm"};
    if (gio_helper_ids(&sp.ids, err) < 0 || (sp.exe_fd = gio_helper_open(helper_path, err)) < 0)
        return plm_err_wrap(err, "guest channel");
    struct gio_stream *s = calloc(1, sizeof *s);
    if (!s) {
        close(sp.exe_fd);
        return plm_fail(err, ENOMEM, PLM_E_INTERNAL, "guest channel: out of memory");
    }
    s->pid = -1;
    s->chan = -1;
    s->status = -1;
    int r = gio_helper_spawn(&sp, &s->pid, &s->chan, &s->status, err);
    close(sp.exe_fd);
    if (r < 0) {
        free(s);
        return plm_err_wrap(err, "guest channel");
    }
    /* CONN with the guest's descriptor: 16 bytes into an empty socket buffer never block. */
    uint8_t conn[F16_HDR_LEN];
    f16_hdr_encode(conn, &(struct f16_hdr){.len = 0, .type = GIO_T_CONN, .seq = 1});
    union {
        char buf[CMSG_SPACE(sizeof(int))];
        struct cmsghdr align;
    } cm;
    memset(&cm, 0, sizeof cm);
    struct iovec iov = {conn, sizeof conn};
    struct msghdr mh = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = cm.buf, .msg_controllen = sizeof cm.buf};
    struct cmsghdr *h = CMSG_FIRSTHDR(&mh);
    h->cmsg_level = SOL_SOCKET;
    h->cmsg_type = SCM_RIGHTS;
    h->cmsg_len = CMSG_LEN(sizeof(int));
    memcpy(CMSG_DATA(h), &gfd, sizeof(int));
    if (sendmsg(s->chan, &mh, MSG_DONTWAIT | MSG_NOSIGNAL) != (ssize_t)sizeof conn) {
        int e = errno;
        reap(s);
        free(s);
        return plm_fail(err, e, PLM_E_INTERNAL, "guest channel: hand-over failed: %s", strerror(e));
    }
    *out = s;
    return 0;
}

static int fail(struct gio_stream *s, struct plm_err *err, const char *what)
{
    reap(s);
    s->state = -1;
    /* Guest bytes can crash the parser: its death is the guest's doing as far as we can tell. */
    return plm_fail(err, EPIPE, PLM_E_UNAVAILABLE, "guest channel parser %s (wait status %d)", what,
                       s->status);
}

int gio_stream_next(struct gio_stream *s, int64_t deadline_ms, const uint8_t **p, size_t *len, int *why,
                    struct plm_err *err)
{
    free(s->last);
    s->last = NULL;
    if (s->state > 0) {
        *why = s->end_why;
        return 0;
    }
    if (s->state < 0)
        return plm_fail(err, EPIPE, PLM_E_UNAVAILABLE, "guest channel parser gone");
    for (;;) {
        uint8_t *dst;
        size_t want;
        if (s->hhave < F16_HDR_LEN) {
            dst = s->hdr + s->hhave;
            want = F16_HDR_LEN - s->hhave;
        } else {
            dst = s->pl + s->plhave;
            want = s->h.len - s->plhave;
        }
        ssize_t n = want ? recv(s->chan, dst, want, MSG_DONTWAIT) : 0;
        if (want && n < 0 && (errno == EAGAIN || errno == EINTR)) {
            int64_t left = deadline_ms - (int64_t)clock_mono_ms();
            if (left <= 0)
                return plm_fail(err, ETIMEDOUT, PLM_E_INTERNAL, "guest channel: deadline");
            struct pollfd pf = {s->chan, POLLIN, 0};
            if (poll(&pf, 1, left > 1000 ? 1000 : (int)left) < 0 && errno != EINTR)
                return fail(s, err, "poll failed");
            continue;
        }
        if (want && n <= 0)
            return fail(s, err, "died");
        if (s->hhave < F16_HDR_LEN) {
            s->hhave += (size_t)n;
            if (s->hhave < F16_HDR_LEN)
                continue;
            if (gio_hdr_decode(s->hdr, GIO_TO_DAEMON, &s->h) < 0 || s->h.seq != 1 ||
                (s->h.type != GIO_T_GUEST && s->h.type != GIO_T_END))
                return fail(s, err, "broke the protocol");
            s->pl = malloc(s->h.len ? s->h.len : 1);
            if (!s->pl)
                return fail(s, err, "frame: out of memory");
            s->plhave = 0;
        } else {
            s->plhave += (size_t)n;
        }
        if (s->plhave < s->h.len)
            continue;
        uint8_t *frame = s->pl;
        s->pl = NULL;
        s->hhave = s->plhave = 0;
        if (s->h.type == GIO_T_END) {
            int w = frame[0];
            free(frame);
            if (w != GIO_END_CLOSED && w != GIO_END_PROTOCOL)
                return fail(s, err, "broke the protocol");
            reap(s); /* it exits after END */
            s->state = 1;
            s->end_why = *why = w;
            return 0;
        }
        s->last = frame;
        *p = frame;
        *len = s->h.len;
        return 1;
    }
}

bool gio_stream_alive(struct gio_stream *s)
{
    if (!s || s->state != 0 || s->pid <= 0)
        return false;
    if (waitpid(s->pid, &s->status, WNOHANG) == s->pid) {
        s->pid = -1; /* reaped here: never signal its pid again */
        reap(s);
        s->state = -1;
        return false;
    }
    return true;
}

pid_t gio_stream_pid(const struct gio_stream *s)
{
    return s ? s->pid : -1;
}

void gio_stream_close(struct gio_stream *s)
{
    if (!s)
        return;
    reap(s);
    free(s->pl);
    free(s->last);
    free(s);
}
