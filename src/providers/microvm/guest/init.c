/* init.c: the microvm guest's PID 1 and agent, linked statically into the initramfs as /init.
 * Owns: the guest's mounts, its virtio-serial port (the only channel out of the VM), one
 *   QuickJS engine (built and warmed at boot, before the host may save the VM as a template),
 *   and at most one run process.
 * Trusts: the host's frames only after mvc_hdr_decode()/qf_run_decode()/qf_host_reply_decode();
 *   nothing in the snippet, which runs in a child process as uid/gid 65534 with no_new_privs.
 * Invariant: one VM serves one request: READY, then SEED (fresh entropy for this VM alone, also
 *   after a snapshot restore), then RUN or PROBE, answered once; then PID 1 idles until the host
 *   kills the VM. PID 1 never exits (that would panic the guest kernel, which the host reports
 *   as a fault anyway). A run process that ends without its RESULT is reported as DIED. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <linux/random.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../../../core/exact_io.h"
#include "../../../jsrt/jsrt.h"
#include "../../../guestio/vmchan.h"
#include "guest.h"

#define GUEST_JS_STACK (8u * 1024 * 1024)
/* The run process's real stack (RLIMIT_STACK): twice the engine's limit, as the quickjs worker
 * has (confine.h). With the kernel's default of 8 MiB, equal to the engine's limit, a deep
 * recursion or a deeply nested JSON.parse reached the guard page before the engine's check and
 * the run died of SIGSEGV (exit 139) where the process tier throws a catchable RangeError. */
#define GUEST_C_STACK (16u * 1024 * 1024)

static int port = -1;
static uint32_t cmdline_u32(const char *key, uint32_t def);
static uint64_t request_seq;
jsrt_finish_fn *gs_session_finish;

int gs_port(void)
{
    return port;
}

int gs_send(uint16_t type, uint64_t seq, const void *payload, uint32_t len)
{
    uint8_t h[F16_HDR_LEN];
    f16_hdr_encode(h, &(struct f16_hdr){.len = len, .type = type, .flags = 0, .seq = seq});
    if (plm_write_exact(port, h, sizeof h) < 0)
        return -1;
    return len ? plm_write_exact(port, payload, len) : 0;
}

void gs_idle_forever(void)
{
    for (;;)
        pause();
}

/* ---- the run process (uid 65534) ---- */

/* jsrt_finish_fn: one RESULT frame, then exit 0. Buffers were allocated before the run. */
__attribute__((noreturn)) static void finish_run(int32_t exit_code, bool timed_out, const struct jsrt_out *out,
                                                 const struct jsrt_out *err)
{
    if (gs_session_finish) /* a session's JavaScript kernel (session.c) */
        gs_session_finish(exit_code, timed_out, out, err);
    uint8_t fixed[QF_RESULT_FIXED];
    uint8_t flags = (uint8_t)((timed_out ? QF_RES_TIMED_OUT : 0) | (out->truncated ? QF_RES_OUT_TRUNC : 0) |
                              (err->truncated ? QF_RES_ERR_TRUNC : 0));
    qf_result_encode_fixed(fixed, exit_code, flags, out->len, err->len);
    uint32_t len = QF_RESULT_FIXED + out->len + err->len;
    uint8_t h[F16_HDR_LEN];
    f16_hdr_encode(h, &(struct f16_hdr){.len = len, .type = MVC_RESULT, .flags = 0, .seq = request_seq});
    if (plm_write_exact(port, h, sizeof h) < 0 || plm_write_exact(port, fixed, sizeof fixed) < 0 || plm_write_exact(port, out->data, out->len) < 0 ||
        plm_write_exact(port, err->data, err->len) < 0)
        _exit(GS_EXIT_IO);
    _exit(0);
}

/* jsrt_host_fn: a grant's call goes out as HOST_CALL; only its HOST_REPLY may come back. */
static void host_call(uint32_t call_no, const uint8_t *method, size_t method_len, const uint8_t *path, size_t path_len,
                      const uint8_t *body, size_t body_len, struct jsrt_host_reply *out)
{
    uint8_t fixed[QF_HOST_CALL_FIXED];
    qf_host_call_encode_fixed(fixed, call_no, (uint32_t)method_len, (uint32_t)path_len, (uint32_t)body_len);
    uint32_t len = (uint32_t)(QF_HOST_CALL_FIXED + method_len + path_len + body_len);
    uint8_t h[F16_HDR_LEN];
    f16_hdr_encode(h, &(struct f16_hdr){.len = len, .type = MVC_HOST_CALL, .flags = 0, .seq = request_seq});
    if (plm_write_exact(port, h, sizeof h) < 0 || plm_write_exact(port, fixed, sizeof fixed) < 0 || plm_write_exact(port, method, method_len) < 0 ||
        plm_write_exact(port, path, path_len) < 0 || plm_write_exact(port, body, body_len) < 0)
        _exit(GS_EXIT_IO);
    uint8_t hb[F16_HDR_LEN];
    struct f16_hdr rh;
    if (plm_read_exact(port, hb, sizeof hb) < 0)
        _exit(GS_EXIT_IO);
    if (mvc_hdr_decode(hb, &rh) < 0 || rh.type != MVC_HOST_REPLY || rh.seq != request_seq)
        _exit(GS_EXIT_PROTOCOL);
    uint8_t *payload = malloc(rh.len ? rh.len : 1);
    if (!payload)
        _exit(GS_EXIT_MEMORY);
    if (plm_read_exact(port, payload, rh.len) < 0)
        _exit(GS_EXIT_IO);
    struct qf_host_reply rep;
    if (qf_host_reply_decode(payload, rh.len, &rep) < 0 || rep.call_no != call_no)
        _exit(GS_EXIT_PROTOCOL);
    *out = (struct jsrt_host_reply){.status = rep.status,
                                    .deadline = (rep.flags & QF_HR_DEADLINE) != 0,
                                    .body = rep.body,
                                    .body_len = rep.body_len,
                                    .buf = payload};
}

/* Drops to the run uid: no way back to PID 1's root (no_new_privs, no capabilities). */
int gs_drop_privileges(void)
{
    struct rlimit core = {0, 0}, stack = {GUEST_C_STACK, GUEST_C_STACK};
    if (setrlimit(RLIMIT_CORE, &core) < 0 || setrlimit(RLIMIT_STACK, &stack) < 0 || setgroups(0, NULL) < 0 || setresgid(GS_RUN_UID, GS_RUN_UID, GS_RUN_UID) < 0 ||
        setresuid(GS_RUN_UID, GS_RUN_UID, GS_RUN_UID) < 0 || prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0)
        return -1;
    return 0;
}

void gs_serve_run(struct jsrt *engine, uint64_t seed, uint64_t seq, uint16_t type, const uint8_t *payload, uint32_t len)
{
    request_seq = seq;
    struct qf_run run;
    if (type == MVC_RUN && qf_run_decode(payload, len, &run) < 0)
        _exit(GS_EXIT_PROTOCOL);
    if (type == MVC_PROJECT) {
        char opt[64];
        snprintf(opt, sizeof opt, "size=%um,mode=1777", cmdline_u32("plm.disk=", 16));
        mount("tmpfs", "/work", "tmpfs", MS_NOSUID | MS_NODEV, opt);
    }
    pid_t child = fork();
    if (child == 0) {
        if (gs_drop_privileges() < 0)
            _exit(GS_EXIT_CONFINE);
        if (type == MVC_PROJECT)
            gs_project(request_seq, payload, len);
        if (jsrt_adopt(engine, seed) < 0)
            _exit(GS_EXIT_ENGINE);
        char *client = NULL;
        if (run.flags & QF_RUN_GRANT) {
            client = malloc((size_t)run.client_len + 1);
            if (!client)
                _exit(GS_EXIT_MEMORY);
            memcpy(client, run.client, run.client_len);
            client[run.client_len] = 0;
        }
        jsrt_run(engine, (const char *)run.code, run.code_len, run.timeout_ms, client, run.client_len,
                 (run.flags & QF_RUN_GRANT) ? host_call : NULL);
    }
    int status = 0;
    if (child < 0) {
        status = GS_EXIT_FORK << 8;
    } else {
        while (waitpid(child, &status, 0) < 0 && errno == EINTR)
            ;
    }
    if (!(WIFEXITED(status) && WEXITSTATUS(status) == 0)) {
        uint8_t b[4];
        f16_put_u32(b, (uint32_t)status);
        gs_send(MVC_DIED, request_seq, b, sizeof b);
    }
}

/* ---- boot ---- */

static void load_modules(void)
{
    struct dirent **names = NULL;
    int n = scandir("/mod", &names, NULL, alphasort);
    for (int i = 0; i < n; i++) {
        if (names[i]->d_name[0] != '.') {
            char path[300];
            snprintf(path, sizeof path, "/mod/%s", names[i]->d_name);
            int fd = open(path, O_RDONLY | O_CLOEXEC);
            if (fd >= 0) {
                syscall(SYS_finit_module, fd, "", 0);
                close(fd);
            }
        }
        free(names[i]);
    }
    free(names);
}

static int open_port(void)
{
    /* The port appears within milliseconds of virtio_console's probe; wait up to 5 s. */
    for (int tries = 0; tries < 500; tries++) {
        for (int i = 0; i < 4; i++) {
            char path[32];
            snprintf(path, sizeof path, "/dev/vport%dp1", i);
            int fd = open(path, O_RDWR | O_CLOEXEC);
            if (fd >= 0)
                return fd;
        }
        usleep(10000);
    }
    return -1;
}

/* A project VM's node disk (virtio-blk, the only block device a VM can have) on /usr, read-only.
 * Snippet VMs have no disk: nothing to do. */
static void mount_node_disk(void)
{
    if (access("/sys/block/vda", F_OK) < 0)
        return;
    /* devtmpfs creates the node shortly after the driver's probe. */
    for (int tries = 0; tries < 200 && access("/dev/vda", F_OK) < 0; tries++)
        usleep(5000);
    mount("/dev/vda", "/usr", "ext4", MS_RDONLY | MS_NOSUID | MS_NODEV, NULL);
}

static uint32_t cmdline_u32(const char *key, uint32_t def)
{
    char buf[1024];
    int fd = open("/proc/cmdline", O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return def;
    ssize_t k = read(fd, buf, sizeof buf - 1);
    close(fd);
    if (k <= 0)
        return def;
    buf[k] = 0;
    char *p = strstr(buf, key);
    if (!p)
        return def;
    unsigned long v = strtoul(p + strlen(key), NULL, 10);
    return v > 0 && v < 65536 ? (uint32_t)v : def;
}

static void ready_text(char *buf, size_t len)
{
    struct utsname u;
    char cpu[128] = "unknown";
    if (uname(&u) < 0)
        snprintf(u.release, sizeof u.release, "unknown");
    FILE *f = fopen("/proc/cpuinfo", "re");
    if (f) {
        char line[256];
        while (fgets(line, sizeof line, f)) {
            if (strncmp(line, "model name", 10) == 0) {
                char *c = strchr(line, ':');
                if (c) {
                    c += 1 + (c[1] == ' ');
                    c[strcspn(c, "\n")] = 0;
                    snprintf(cpu, sizeof cpu, "%s", c);
                }
                break;
            }
        }
        fclose(f);
    }
    snprintf(buf, len, "%s\n%s\n", u.release, cpu);
    for (char *p = buf; *p; p++)
        if (*p != '\n' && (*p < 0x20 || *p > 0x7e))
            *p = '?';
}

/* Fresh entropy for this VM alone: credited to the guest kernel's pool (so getrandom in the
 * guest differs between VMs restored from one template) and Math.random's seed. */
static uint64_t take_seed(const uint8_t *p)
{
    struct {
        struct rand_pool_info info;
        uint8_t bytes[32];
    } e;
    e.info.entropy_count = 256;
    e.info.buf_size = 32;
    memcpy(e.bytes, p + 8, 32);
    int fd = open("/dev/urandom", O_WRONLY | O_CLOEXEC);
    if (fd >= 0) {
        ioctl(fd, RNDADDENTROPY, &e);
        close(fd);
    }
    uint64_t s = 0;
    for (int i = 0; i < 8; i++)
        s = s << 8 | p[i];
    return s;
}

int main(void)
{
    mount("devtmpfs", "/dev", "devtmpfs", MS_NOSUID | MS_NOEXEC, "mode=0755");
    mount("proc", "/proc", "proc", MS_NOSUID | MS_NOEXEC | MS_NODEV, NULL);
    mount("sysfs", "/sys", "sysfs", MS_NOSUID | MS_NOEXEC | MS_NODEV | MS_RDONLY, NULL);
    char tmpopt[64];
    snprintf(tmpopt, sizeof tmpopt, "size=%um,mode=1777", cmdline_u32("plm.disk=", 16));
    mount("tmpfs", "/tmp", "tmpfs", MS_NOSUID | MS_NODEV | MS_NOEXEC, tmpopt);
    load_modules();
    port = open_port();
    if (port < 0)
        gs_idle_forever(); /* the host times the boot out */
    mount_node_disk();

    struct jsrt *engine = jsrt_new(cmdline_u32("plm.jsmem=", 192), GUEST_JS_STACK, finish_run);
    if (!engine)
        gs_idle_forever();
    char ready[MVC_READY_MAX];
    ready_text(ready, sizeof ready);
    if (gs_send(MVC_READY, 0, ready, (uint32_t)strlen(ready)) < 0)
        gs_idle_forever();

    uint64_t seed = 0;
    bool seeded = false;
    for (;;) {
        uint8_t hb[F16_HDR_LEN];
        struct f16_hdr h;
        if (plm_read_exact(port, hb, sizeof hb) < 0 || mvc_hdr_decode(hb, &h) < 0 || h.type >= MVC_READY)
            gs_idle_forever();
        uint8_t *payload = malloc((size_t)h.len + 1);
        if (!payload || plm_read_exact(port, payload, h.len) < 0)
            gs_idle_forever();
        payload[h.len] = 0; /* the code is then NUL-terminated: it is the payload's tail */
        request_seq = h.seq;
        if (h.type == MVC_SEED) {
            seed = take_seed(payload);
            seeded = true;
            free(payload);
            if (gs_send(MVC_SEEDED, h.seq, NULL, 0) < 0)
                gs_idle_forever();
            continue;
        }
        if (!seeded)
            gs_idle_forever(); /* never run on a template's shared entropy */
#ifdef MV_GUEST_PANIC_TEST
        /* The test build only (its own initramfs, tests/blackbox/test_microvm.py): PID 1 exits on
         * this marker, and the guest kernel panics ("Attempted to kill init"); with panic=-1 and
         * -no-reboot QEMU then exits. Never in the initramfs the daemon ships with. */
        if (h.type == MVC_RUN && memmem(payload, h.len, "plimsoll-test:panic", 19))
            _exit(1);
#endif
        if (h.type == MVC_SESSION)
            gs_session(engine, seed, h.seq, payload, h.len);
        if (h.type == MVC_RUN || h.type == MVC_PROJECT)
            gs_serve_run(engine, seed, h.seq, h.type, payload, h.len);
        else if (h.type == MVC_PROBE)
            gs_probe(h.seq);
        gs_idle_forever();
    }
}
