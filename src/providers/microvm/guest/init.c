/* init.c: the microvm guest's PID 1 and agent, linked statically into the initramfs as /init.
 * Owns: the guest's mounts, opening its virtio-serial port (the only channel out of the VM,
 *   port.c), one QuickJS engine (built and warmed at boot, before the host may save the VM as a
 *   template), and the request loop; the run process is serve.c's.
 * Trusts: the host's frames only after mvc_hdr_decode()/qf_run_decode()/qf_host_reply_decode();
 *   nothing in the snippet, which runs in a child process as uid/gid 65534 with no_new_privs.
 * Invariant: one VM serves one request: READY, then SEED (fresh entropy for this VM alone, also
 *   after a snapshot restore), then RUN or PROBE, answered once; then PID 1 idles until the host
 *   kills the VM. PID 1 never exits (that would panic the guest kernel, which the host reports
 *   as a fault anyway). A run process that ends without its RESULT is reported as DIED. */
#include <dirent.h>
#include <fcntl.h>
#include <linux/random.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/syscall.h>
#include <sys/utsname.h>
#include <unistd.h>

#include "../../../core/exact_io.h"
#include "../../../jsrt/jsrt.h"
#include "../../../guestio/vmchan.h"
#include "guest.h"

#define GUEST_JS_STACK (8u * 1024 * 1024)

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
    snprintf(tmpopt, sizeof tmpopt, "size=%um,mode=1777", gs_cmdline_u32("plm.disk=", 16));
    mount("tmpfs", "/tmp", "tmpfs", MS_NOSUID | MS_NODEV | MS_NOEXEC, tmpopt);
    load_modules();
    int port = open_port();
    gs_port_set(port);
    if (port < 0)
        gs_idle_forever(); /* the host times the boot out */
    mount_node_disk();

    struct jsrt *engine = jsrt_new(gs_cmdline_u32("plm.jsmem=", 192), GUEST_JS_STACK, gs_finish_run);
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
