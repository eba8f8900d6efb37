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

int mv_snapshot_save(struct mv_state *s, struct plm_err *err)
{
    struct mv_vm vm;
    if (mv_vm_start(s, MV_BOOT_TEMPLATE, s->kvm, MV_BOOT_TIMEOUT_MS, &vm, err) < 0)
        return plm_err_wrap(err, "template");
    int mfd = memfd_create("plimsoll-microvm-template", MFD_CLOEXEC | MFD_ALLOW_SEALING);
    if (mfd < 0) {
        int e = errno;
        mv_vm_kill(&vm);
        return plm_fail(err, e, PLM_E_INTERNAL, "microvm: memfd_create: %s", strerror(e));
    }
    memcpy(s->guest_ready, vm.ready, sizeof s->guest_ready);
    s->boot_ms = vm.boot_ms;
    int64_t t0 = clock_mono_ns();
    struct mv_qmp q = {.fd = vm.qmp, .deadline_ns = t0 + (int64_t)MV_SAVE_TIMEOUT_MS * 1000000};
    char ans[MV_QMP_LINE_MAX];
    /* The greeting is a line without "return": qmp_answer skips it. */
    int r = mv_qmp_cmd(&q, "{\"execute\":\"qmp_capabilities\"}", -1, ans, sizeof ans, err);
    if (r == 0)
        r = mv_qmp_cmd(&q, "{\"execute\":\"getfd\",\"arguments\":{\"fdname\":\"tmpl\"}}", mfd, ans, sizeof ans, err);
    /* Live: the guest is idle in read(), so it converges at once, and the saved run state is
     * "running", so a restored VM runs without a `cont`. */
    if (r == 0)
        r = mv_qmp_cmd(&q, "{\"execute\":\"migrate\",\"arguments\":{\"uri\":\"fd:tmpl\"}}", -1, ans, sizeof ans, err);
    while (r == 0) {
        r = mv_qmp_cmd(&q, "{\"execute\":\"query-migrate\"}", -1, ans, sizeof ans, err);
        if (r == 0 && strstr(ans, "\"completed\""))
            break;
        if (r == 0 && (strstr(ans, "\"failed\"") || strstr(ans, "\"cancelled\"")))
            r = plm_fail(err, 0, PLM_E_INTERNAL, "microvm: template save failed: %.200s", ans);
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
        return plm_fail(err, e, PLM_E_INTERNAL, "microvm: seal template: %s", strerror(e));
    }
    s->save_ms = (clock_mono_ns() - t0) / 1000000;
    if (s->template_fd >= 0)
        close(s->template_fd);
    s->template_fd = mfd;
    return 0;
}
