/* qmp.c: QEMU's monitor (QMP) seen from the daemon: one command, its answer line.
 * Used for the template's save (snapshot.c) and a session VM's stop and cont (session.c).
 * Trusts: QEMU's answers only as far as a bounded line reader and a substring test; every read is
 *   bounded by q->deadline_ns. Nothing here is guest bytes: the guest reaches QEMU, never the
 *   monitor socket.
 * Invariant: an answer line is at most MV_QMP_LINE_MAX bytes; a longer one is an error. */
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "mv_int.h"

/* The next line that is an answer ("return" or "error"); events are skipped. */
static int mv_qmp_answer(struct mv_qmp *q, char *out, size_t out_len, struct plm_err *err)
{
    for (;;) {
        char *nl = memchr(q->buf, '\n', q->len);
        if (nl) {
            size_t n = (size_t)(nl - q->buf);
            bool answer = memmem(q->buf, n, "\"return\"", 8) || memmem(q->buf, n, "\"error\"", 7);
            if (answer) {
                size_t c = n < out_len - 1 ? n : out_len - 1;
                memcpy(out, q->buf, c);
                out[c] = 0;
            }
            memmove(q->buf, nl + 1, q->len - n - 1);
            q->len -= n + 1;
            if (answer)
                return 0;
            continue;
        }
        if (q->len == sizeof q->buf)
            return plm_fail(err, EPROTO, PLM_E_INTERNAL, "microvm: QMP line too long");
        int64_t left = (q->deadline_ns - clock_mono_ns()) / 1000000;
        if (left <= 0)
            return plm_fail(err, ETIMEDOUT, PLM_E_INTERNAL, "microvm: QMP timed out");
        struct pollfd p = {.fd = q->fd, .events = POLLIN};
        if (poll(&p, 1, (int)(left > 1000 ? 1000 : left)) <= 0)
            continue;
        ssize_t k = read(q->fd, q->buf + q->len, sizeof q->buf - q->len);
        if (k <= 0)
            return plm_fail(err, EPIPE, PLM_E_INTERNAL, "microvm: QMP closed");
        q->len += (size_t)k;
    }
}

/* One command (with an fd in SCM_RIGHTS when fd >= 0); its answer must not be an error. */
int mv_qmp_cmd(struct mv_qmp *q, const char *cmd, int fd, char *out, size_t out_len, struct plm_err *err)
{
    struct iovec iov = {(void *)cmd, strlen(cmd)};
    union {
        char buf[CMSG_SPACE(sizeof(int))];
        struct cmsghdr align;
    } u;
    struct msghdr m = {.msg_iov = &iov, .msg_iovlen = 1};
    if (fd >= 0) {
        m.msg_control = u.buf;
        m.msg_controllen = sizeof u.buf;
        struct cmsghdr *c = CMSG_FIRSTHDR(&m);
        c->cmsg_level = SOL_SOCKET;
        c->cmsg_type = SCM_RIGHTS;
        c->cmsg_len = CMSG_LEN(sizeof(int));
        memcpy(CMSG_DATA(c), &fd, sizeof fd);
    }
    if (sendmsg(q->fd, &m, MSG_NOSIGNAL) != (ssize_t)iov.iov_len)
        return plm_fail(err, errno, PLM_E_INTERNAL, "microvm: QMP send: %s", strerror(errno));
    if (mv_qmp_answer(q, out, out_len, err) < 0)
        return -1;
    if (strstr(out, "\"error\""))
        return plm_fail(err, 0, PLM_E_INTERNAL, "microvm: QMP: %.200s", out);
    return 0;
}

