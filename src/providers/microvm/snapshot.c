/* snapshot.c: the template VM: booted once to the point where its agent waits for a request (the
 * engine built and warm), saved through QMP into a sealed memfd, from which every pool VM is
 * restored with `-incoming fd:4` (QEMU's seccomp sandbox forbids `exec:` migration).
 * Owns: the template's QEMU for the duration of the save; the memfd (s->template_fd) after it.
 * Trusts: QEMU's QMP answers only as far as "completed" (a bounded line reader); a failed save
 *   leaves the provider on cold boots, it never weakens a wall.
 * Invariant: the saved state holds no request and no entropy the runs use: every restored VM gets
 *   its own SEED before it enters the pool. What stays shared between restored VMs is the guest
 *   kernel's randomised layout (KASLR) and anything else decided at boot (docs/microvm.md). */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "mv_int.h"

#define QMP_LINE_MAX 4096

struct qmp {
    int fd;
    char buf[QMP_LINE_MAX];
    size_t len;
    int64_t deadline_ns;
};

/* The next line that is an answer ("return" or "error"); events are skipped. */
static int qmp_answer(struct qmp *q, char *out, size_t out_len, struct plm_err *err)
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
            return plm_err_set(err, EPROTO, PLM_E_INTERNAL, PLM_REFUSAL_NONE, "microvm: QMP line too long");
        int64_t left = (q->deadline_ns - mv_now_ns()) / 1000000;
        if (left <= 0)
            return plm_err_set(err, ETIMEDOUT, PLM_E_INTERNAL, PLM_REFUSAL_NONE, "microvm: QMP timed out");
        struct pollfd p = {.fd = q->fd, .events = POLLIN};
        if (poll(&p, 1, (int)(left > 1000 ? 1000 : left)) <= 0)
            continue;
        ssize_t k = read(q->fd, q->buf + q->len, sizeof q->buf - q->len);
        if (k <= 0)
            return plm_err_set(err, EPIPE, PLM_E_INTERNAL, PLM_REFUSAL_NONE, "microvm: QMP closed");
        q->len += (size_t)k;
    }
}

/* One command (with an fd in SCM_RIGHTS when fd >= 0); its answer must not be an error. */
static int qmp_cmd(struct qmp *q, const char *cmd, int fd, char *out, size_t out_len, struct plm_err *err)
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
        return plm_err_set(err, errno, PLM_E_INTERNAL, PLM_REFUSAL_NONE, "microvm: QMP send: %s", strerror(errno));
    if (qmp_answer(q, out, out_len, err) < 0)
        return -1;
    if (strstr(out, "\"error\""))
        return plm_err_set(err, 0, PLM_E_INTERNAL, PLM_REFUSAL_NONE, "microvm: QMP: %.200s", out);
    return 0;
}

int mv_snapshot_save(struct mv_state *s, struct plm_err *err)
{
    struct mv_vm vm;
    if (mv_vm_start(s, MV_BOOT_TEMPLATE, s->kvm, MV_BOOT_TIMEOUT_MS, &vm, err) < 0)
        return plm_err_wrap(err, "template");
    int mfd = memfd_create("plimsoll-microvm-template", MFD_CLOEXEC | MFD_ALLOW_SEALING);
    if (mfd < 0) {
        int e = errno;
        mv_vm_kill(&vm);
        return plm_err_set(err, e, PLM_E_INTERNAL, PLM_REFUSAL_NONE, "microvm: memfd_create: %s", strerror(e));
    }
    memcpy(s->guest_ready, vm.ready, sizeof s->guest_ready);
    s->boot_ms = vm.boot_ms;
    int64_t t0 = mv_now_ns();
    struct qmp q = {.fd = vm.qmp, .deadline_ns = t0 + (int64_t)MV_SAVE_TIMEOUT_MS * 1000000};
    char ans[QMP_LINE_MAX];
    /* The greeting is a line without "return": qmp_answer skips it. */
    int r = qmp_cmd(&q, "{\"execute\":\"qmp_capabilities\"}", -1, ans, sizeof ans, err);
    if (r == 0)
        r = qmp_cmd(&q, "{\"execute\":\"getfd\",\"arguments\":{\"fdname\":\"tmpl\"}}", mfd, ans, sizeof ans, err);
    /* Live: the guest is idle in read(), so it converges at once, and the saved run state is
     * "running", so a restored VM runs without a `cont`. */
    if (r == 0)
        r = qmp_cmd(&q, "{\"execute\":\"migrate\",\"arguments\":{\"uri\":\"fd:tmpl\"}}", -1, ans, sizeof ans, err);
    while (r == 0) {
        r = qmp_cmd(&q, "{\"execute\":\"query-migrate\"}", -1, ans, sizeof ans, err);
        if (r == 0 && strstr(ans, "\"completed\""))
            break;
        if (r == 0 && (strstr(ans, "\"failed\"") || strstr(ans, "\"cancelled\"")))
            r = plm_err_set(err, 0, PLM_E_INTERNAL, PLM_REFUSAL_NONE, "microvm: template save failed: %.200s", ans);
        if (r == 0)
            nanosleep(&(struct timespec){.tv_nsec = 20000000}, NULL);
    }
    mv_vm_kill(&vm);
    if (r < 0) {
        close(mfd);
        return plm_err_wrap(err, "template save");
    }
    if (fcntl(mfd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_WRITE | F_SEAL_SEAL) < 0) {
        int e = errno;
        close(mfd);
        return plm_err_set(err, e, PLM_E_INTERNAL, PLM_REFUSAL_NONE, "microvm: seal template: %s", strerror(e));
    }
    s->save_ms = (mv_now_ns() - t0) / 1000000;
    if (s->template_fd >= 0)
        close(s->template_fd);
    s->template_fd = mfd;
    return 0;
}
