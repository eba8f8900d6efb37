/* vm.c: one VM's life on the host: QEMU's command line, start in the jail, the channel's I/O
 * with deadlines, kill and reap.
 * Owns: per VM, the QEMU pid and our ends of its channel, monitor and stderr pipe.
 * Trusts: nothing the guest writes, and never reads it: a confined guestio helper does
 *   (mv_vm_read); its frames pass mvc_canon_decode (guestio/vmchan.c), every wait bounded by a deadline.
 * Invariant: mv_vm_kill is the one release path: SIGKILL, waitpid, close; it is safe on a
 *   half-started VM and leaves no process, descriptor or file. */
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "../../core/cleanup.h"
#include "../../guestio/guestio.h"
#include "mv_int.h"

void mv_vm_kill(struct mv_vm *vm)
{
    if (vm->pid > 0) {
        kill(vm->pid, SIGKILL);
        /* ECHILD: already reaped (pool.c's liveness check); nothing else waits for our VMs. */
        while (waitpid(vm->pid, NULL, 0) < 0 && errno == EINTR)
            ;
    }
    vm->pid = -1;
    if (vm->chan >= 0)
        close(vm->chan);
    if (vm->qmp >= 0)
        close(vm->qmp);
    if (vm->errp >= 0)
        close(vm->errp);
    vm->chan = vm->qmp = vm->errp = -1;
    gio_stream_close(vm->rd.gs);
    vm->rd = (struct mv_reader){0};
}

/* QEMU's complaint, if it wrote one before dying (bounded, non-blocking). */
static void qemu_said(struct mv_vm *vm, char *out, size_t len)
{
    out[0] = 0;
    if (vm->errp < 0 || len < 2)
        return;
    ssize_t k = read(vm->errp, out, len - 1);
    if (k <= 0) {
        out[0] = 0;
        return;
    }
    out[k] = 0;
    for (ssize_t i = 0; i < k; i++)
        if (out[i] < 0x20 || out[i] > 0x7e)
            out[i] = ' ';
}

struct argv_buf {
    char *argv[64];
    int n;
    char mem[16][256];
    int m;
};

static void arg(struct argv_buf *a, const char *s)
{
    if (a->n < 63)
        a->argv[a->n++] = (char *)s;
    a->argv[a->n] = NULL;
}

__attribute__((format(printf, 2, 3))) static void argf(struct argv_buf *a, const char *fmt, ...)
{
    if (a->m == 16)
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(a->mem[a->m], sizeof a->mem[a->m], fmt, ap);
    va_end(ap);
    arg(a, a->mem[a->m++]);
}

/* The command line. No network device, no disk, no display, no serial, no firmware ROMs; one
 * virtio-serial port on fd 3; QEMU's seccomp sandbox with every deny option. */
static void build_argv(const struct mv_state *s, enum mv_boot how, bool kvm, struct argv_buf *a)
{
    memset(a, 0, sizeof *a);
    arg(a, s->jail.qemu_in_jail);
    arg(a, "-M");
    arg(a, "microvm,x-option-roms=off,isa-serial=off,rtc=off");
    arg(a, "-accel");
    arg(a, kvm ? "kvm" : "tcg,tb-size=128");
    arg(a, "-cpu");
    arg(a, kvm ? "host" : "max");
    arg(a, "-m");
    argf(a, "%u", s->cfg.memory_mb);
    arg(a, "-smp");
    argf(a, "%u", s->cfg.cpus);
    arg(a, "-nodefaults");
    arg(a, "-no-user-config");
    arg(a, "-display");
    arg(a, "none");
    arg(a, "-no-reboot");
    arg(a, "-kernel");
    arg(a, "/vmlinuz");
    arg(a, "-initrd");
    arg(a, "/initrd");
    arg(a, "-append");
    /* tsc_early_khz: under TCG the guest's TSC is the host's; telling the guest its rate skips a
     * PIT calibration that fails on a loaded host and then hangs the boot (docs/microvm.md). */
    /* The engine's cap leaves the guest kernel and PID 1 about 96 MiB. */
    uint32_t jsmem = s->cfg.memory_mb > 128 ? s->cfg.memory_mb - 96 : 32;
    if (s->tsc_khz && !kvm)
        argf(a, "console=none quiet panic=-1 no_timer_check tsc=reliable tsc_early_khz=%u plm.jsmem=%u plm.disk=%u",
             s->tsc_khz, jsmem, s->cfg.disk_mb);
    else
        argf(a, "console=none quiet panic=-1 no_timer_check plm.jsmem=%u plm.disk=%u", jsmem, s->cfg.disk_mb);
    arg(a, "-device");
    arg(a, "virtio-serial-device");
    arg(a, "-chardev");
    arg(a, "socket,id=c0,fd=3");
    arg(a, "-device");
    arg(a, "virtserialport,chardev=c0,name=plm.0");
    if (s->disk_path[0]) {
        /* A project VM's node image: read-only to QEMU (opened O_RDONLY, writes refused to the
         * guest), bound read-only into the jail. */
        arg(a, "-drive");
        arg(a, "file=/disk.img,format=raw,if=none,id=d0,readonly=on");
        arg(a, "-device");
        arg(a, "virtio-blk-device,drive=d0");
    }
    arg(a, "-sandbox");
    arg(a, "on,obsolete=deny,elevateprivileges=deny,spawn=deny,resourcecontrol=deny");
    if (how == MV_BOOT_TEMPLATE) {
        arg(a, "-chardev");
        arg(a, "socket,id=q,fd=4");
        arg(a, "-mon");
        arg(a, "chardev=q,mode=control");
    } else if (how == MV_BOOT_RESTORE) {
        arg(a, "-incoming");
        arg(a, "fd:4");
        /* A monitor for a session's idle suspend (stop, cont: session.c); unused by a run. */
        arg(a, "-chardev");
        arg(a, "socket,id=q,fd=5");
        arg(a, "-mon");
        arg(a, "chardev=q,mode=control");
    }
}

int mv_vm_send(struct mv_vm *vm, uint16_t type, uint64_t seq, const void *a, size_t alen, const void *b, size_t blen,
               const void *c, size_t clen, struct plm_err *err)
{
    uint8_t h[F16_HDR_LEN];
    /* A new request to a VM whose channel helper died while nothing was asked of it (a pooled
     * VM; nothing of the guest's can be lost then): its next read starts a fresh helper. */
    if (seq == 0 && vm->rd.gs && !gio_stream_alive(vm->rd.gs)) {
        gio_stream_close(vm->rd.gs);
        vm->rd = (struct mv_reader){0};
    }
    if (seq == 0)
        seq = ++vm->seq;
    f16_hdr_encode(h, &(struct f16_hdr){.len = (uint32_t)(alen + blen + clen), .type = type, .seq = seq});
    struct iovec iov[4] = {{h, sizeof h}, {(void *)a, alen}, {(void *)b, blen}, {(void *)c, clen}};
    int n = 4;
    struct iovec *v = iov;
    while (n > 0) {
        ssize_t k = writev(vm->chan, v, n);
        if (k < 0 && errno == EINTR)
            continue;
        if (k < 0) /* the peer gone (EPIPE, ECONNRESET) is a VM that went away: the guest can do that */
            return plm_fail(err, errno, errno == EPIPE || errno == ECONNRESET ? PLM_E_UNAVAILABLE : PLM_E_INTERNAL, "microvm: write to the guest: %s", strerror(errno));
        size_t left = (size_t)k;
        while (n > 0 && left >= v->iov_len) {
            left -= v->iov_len;
            v++;
            n--;
        }
        if (n > 0) {
            v->iov_base = (uint8_t *)v->iov_base + left;
            v->iov_len -= left;
        }
    }
    return 0;
}

/* The guest's bytes are read and decoded only by a confined guestio helper in stream mode
 * (docs/privsep.md): it gets its own descriptor of the channel, started at the first read (from
 * the thread that owns the VM then: the pool's refill thread or the run's own), and forwards
 * each guest frame re-encoded; this process only writes to the channel and takes complete
 * canonical frames (mvc_canon_decode). */
int mv_vm_read(struct mv_vm *vm, int64_t deadline_ns, struct mvc_frame *f, struct plm_err *err)
{
    struct mv_reader *r = &vm->rd;
    if (r->failed)
        return plm_fail(err, EPROTO, PLM_E_UNAVAILABLE, "microvm: the guest channel is closed");
    if (!r->gs) {
        int fd = vm->chan >= 0 ? fcntl(vm->chan, F_DUPFD_CLOEXEC, 0) : -1;
        if (fd < 0)
            return plm_fail(err, errno, PLM_E_INTERNAL, "microvm: channel: %s", strerror(errno));
        if (gio_stream_open(fd, NULL, &r->gs, err) < 0) {
            r->failed = true;
            return plm_err_wrap(err, "microvm");
        }
    }
    const uint8_t *p = NULL;
    size_t len = 0;
    int why = 0;
    int k = gio_stream_next(r->gs, deadline_ns / 1000000, &p, &len, &why, err);
    if (k > 0) {
        if (mvc_canon_decode(p, len, f) == 0)
            return 0;
        /* Only a helper a guest has taken over sends a frame the daemon cannot decode. */
        r->failed = true;
        gio_stream_close(r->gs);
        r->gs = NULL;
        return plm_fail(err, EPROTO, PLM_E_UNAVAILABLE,
                           "microvm: the guest channel's parser sent a malformed frame");
    }
    if (k < 0) {
        if (err->errnum != ETIMEDOUT)
            r->failed = true;
        return err->errnum == ETIMEDOUT ? -1 : plm_err_wrap(err, "microvm");
    }
    r->failed = true;
    if (why == GIO_END_PROTOCOL)
        return plm_fail(err, EPROTO, PLM_E_UNAVAILABLE, "microvm: the guest broke the channel protocol");
    char said[200];
    qemu_said(vm, said, sizeof said);
    /* QEMU (or the jail before exec) is gone or going: reap it for its status. */
    int st = 0;
    if (vm->pid > 0) {
        kill(vm->pid, SIGKILL);
        while (waitpid(vm->pid, &st, 0) < 0 && errno == EINTR)
            ;
        vm->pid = -1;
    }
    /* A guest can power off or panic its own VM: the sandbox went away, the code may have run. */
    return plm_fail(err, EPIPE, PLM_E_UNAVAILABLE, "microvm: the VM went away (%s %d)%s%s",
                       WIFEXITED(st) ? "exit" : "signal", WIFEXITED(st) ? WEXITSTATUS(st) : WTERMSIG(st),
                       said[0] ? ": " : "", said);
}

int mv_vm_start(struct mv_state *s, enum mv_boot how, bool kvm, uint32_t boot_timeout_ms, struct mv_vm *vm,
                struct plm_err *err)
{
    *vm = (struct mv_vm){.pid = -1, .chan = -1, .qmp = -1, .errp = -1};
    cleanup_close int ch_guest = -1, aux_guest = -1, err_w = -1, qmp_guest = -1;
    int ch[2], ep[2];
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, ch) < 0)
        return plm_fail(err, errno, PLM_E_INTERNAL, "microvm: socketpair: %s", strerror(errno));
    vm->chan = ch[0];
    ch_guest = ch[1];
    if (pipe2(ep, O_CLOEXEC) < 0) {
        int e = errno;
        mv_vm_kill(vm);
        return plm_fail(err, e, PLM_E_INTERNAL, "microvm: pipe: %s", strerror(e));
    }
    vm->errp = ep[0];
    err_w = ep[1];
    fcntl(vm->errp, F_SETFL, O_NONBLOCK);
    /* A guest that stops reading must not block a daemon thread: writes give up after 10 s. */
    struct timeval tv = {.tv_sec = 10};
    setsockopt(vm->chan, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
    if (how == MV_BOOT_TEMPLATE) {
        int q[2];
        if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, q) < 0) {
            int e = errno;
            mv_vm_kill(vm);
            return plm_fail(err, e, PLM_E_INTERNAL, "microvm: socketpair: %s", strerror(e));
        }
        vm->qmp = q[0];
        aux_guest = q[1];
    } else if (how == MV_BOOT_RESTORE) {
        /* Its own open file description (its own offset) of the sealed template, read-only. */
        char path[64];
        snprintf(path, sizeof path, "/proc/self/fd/%d", s->template_fd);
        aux_guest = open(path, O_RDONLY | O_CLOEXEC);
        if (aux_guest < 0) {
            int e = errno;
            mv_vm_kill(vm);
            return plm_fail(err, e, PLM_E_INTERNAL, "microvm: reopen template: %s", strerror(e));
        }
        int q[2];
        if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, q) < 0) {
            int e = errno;
            mv_vm_kill(vm);
            return plm_fail(err, e, PLM_E_INTERNAL, "microvm: socketpair: %s", strerror(e));
        }
        vm->qmp = q[0];
        qmp_guest = q[1];
    }
    struct argv_buf a;
    build_argv(s, how, kvm, &a);
    int fds[4] = {err_w, ch_guest, aux_guest, qmp_guest};
    int64_t t0 = clock_mono_ns();
    vm->spawned_ns = t0;
    vm->pid = mv_jail_spawn(&s->jail, a.argv, fds, qmp_guest >= 0 ? 4 : aux_guest >= 0 ? 3 : 2, how == MV_BOOT_TEMPLATE ? 1024 : 0, err);
    if (vm->pid < 0) {
        mv_vm_kill(vm);
        return -1;
    }
    close(take_fd(&ch_guest));
    close(take_fd(&err_w));
    if (how == MV_BOOT_RESTORE)
        return 0;
    struct mvc_frame f;
    if (mv_vm_read(vm, t0 + (int64_t)boot_timeout_ms * 1000000, &f, err) < 0) {
        mv_vm_kill(vm);
        return plm_err_wrap(err, "boot");
    }
    if (f.hdr.type != MVC_READY) {
        mv_vm_kill(vm);
        return plm_fail(err, EPROTO, PLM_E_INTERNAL, "microvm: boot: expected READY, got type %u",
                           f.hdr.type);
    }
    memcpy(vm->ready, f.u.text.p, f.u.text.len);
    vm->ready[f.u.text.len] = 0;
    vm->boot_ms = (clock_mono_ns() - t0) / 1000000;
    return 0;
}

int mv_vm_seed(struct mv_vm *vm, uint32_t timeout_ms, struct plm_err *err)
{
    uint8_t seed[MVC_SEED_LEN];
    int64_t t0 = clock_mono_ns();
    if (getrandom(seed, sizeof seed, 0) != (ssize_t)sizeof seed)
        return plm_fail(err, errno, PLM_E_INTERNAL, "microvm: getrandom: %s", strerror(errno));
    if (mv_vm_send(vm, MVC_SEED, 0, seed, sizeof seed, NULL, 0, NULL, 0, err) < 0)
        return -1;
    struct mvc_frame f;
    if (mv_vm_read(vm, t0 + (int64_t)timeout_ms * 1000000, &f, err) < 0)
        return plm_err_wrap(err, "seed");
    if (f.hdr.type != MVC_SEEDED || f.hdr.seq != vm->seq)
        return plm_fail(err, EPROTO, PLM_E_INTERNAL, "microvm: seed: unexpected frame type %u",
                           f.hdr.type);
    if (!vm->boot_ms) /* a restore: spawn to SEEDED */
        vm->boot_ms = (clock_mono_ns() - vm->spawned_ns) / 1000000;
    return 0;
}
