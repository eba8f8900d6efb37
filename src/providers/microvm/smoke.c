/* smoke.c: the startup proof of the microvm provider (issue 10, 7). Chooses the accelerator,
 * saves the template, then proves on real VMs: a snippet's known output, negative probes from
 * inside the guest, a memory bomb ending as a result, and host-side checks of the QEMU process.
 * Fills the evidence card; a failed check fails startup.
 * Invariant: the card states what ran (accelerator, QEMU version, the guest's own kernel release
 *   and CPU) as observed, never as configured; every VM started here is killed before return. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "../../core/clock.h"
#include "../../core/limits.h"
#include "../../core/pylang.h"
#include "mv_int.h"

#define CHECK(name, expected, ok, ...)                                                                       \
    do {                                                                                                     \
        if (ev_add_check(&s->ev, name, expected, ok, __VA_ARGS__) < 0)                                       \
            return plm_fail(err, 0, PLM_E_INTERNAL, "microvm: evidence card is full"); \
    } while (0)

/* One line's value from /proc/<pid>/status ("" when absent). */
static void status_field(pid_t pid, const char *key, char *out, size_t len)
{
    char path[64], line[256];
    out[0] = 0;
    snprintf(path, sizeof path, "/proc/%d/status", (int)pid);
    FILE *f = fopen(path, "re");
    if (!f)
        return;
    size_t k = strlen(key);
    while (fgets(line, sizeof line, f)) {
        if (strncmp(line, key, k) == 0 && line[k] == ':') {
            char *v = line + k + 1;
            while (*v == ' ' || *v == '\t')
                v++;
            v[strcspn(v, "\n")] = 0;
            snprintf(out, len, "%s", v);
            break;
        }
    }
    fclose(f);
}

/* 1 when QEMU's descriptor fd is open read-only (its fdinfo's access mode). */
static bool fd_read_only(pid_t pid, const char *fd)
{
    char path[96], line[128];
    snprintf(path, sizeof path, "/proc/%d/fdinfo/%.16s", (int)pid, fd);
    FILE *f = fopen(path, "re");
    unsigned flags = 3;
    bool found = false;
    while (f && !found && fgets(line, sizeof line, f))
        found = sscanf(line, "flags: %o", &flags) == 1;
    if (f)
        fclose(f);
    return found && (flags & 3) == 0;
}

/* Every descriptor QEMU holds is a pipe, socket, anonymous inode or /dev/kvm: no host file;
 * a project VM's also the node image, read-only (disk). */
static bool fds_expected(pid_t pid, bool disk, char *seen, size_t len)
{
    char dir[64];
    snprintf(dir, sizeof dir, "/proc/%d/fd", (int)pid);
    DIR *d = opendir(dir);
    if (!d) {
        snprintf(seen, len, "cannot list: %s", strerror(errno));
        return false;
    }
    bool ok = true;
    int n = 0;
    struct dirent *e;
    seen[0] = 0;
    while ((e = readdir(d))) {
        if (e->d_name[0] == '.')
            continue;
        char p[320], t[256];
        snprintf(p, sizeof p, "%s/%s", dir, e->d_name);
        ssize_t k = readlink(p, t, sizeof t - 1);
        if (k < 0)
            continue;
        t[k] = 0;
        n++;
        if (disk && strcmp(t, "/disk.img") == 0 && fd_read_only(pid, e->d_name))
            continue;
        if (strncmp(t, "pipe:", 5) && strncmp(t, "socket:", 7) && strncmp(t, "anon_inode:", 11) &&
            strcmp(t, "/dev/kvm") && strncmp(t, "/memfd:plimsoll-microvm-template", 32)) {
            ok = false;
            snprintf(seen, len, "fd %.16s -> %.100s", e->d_name, t);
        }
    }
    closedir(d);
    if (ok)
        snprintf(seen, len, "%d descriptors, all pipes, sockets or anonymous inodes%s", n,
                 disk ? " but the node image, read-only" : "");
    return ok;
}

static bool other_ns(pid_t pid, const char *ns)
{
    char a[64], b[64], ta[64] = "", tb[64] = "";
    snprintf(a, sizeof a, "/proc/%d/ns/%s", (int)pid, ns);
    snprintf(b, sizeof b, "/proc/self/ns/%s", ns);
    return readlink(a, ta, sizeof ta - 1) > 0 && readlink(b, tb, sizeof tb - 1) > 0 && strcmp(ta, tb) != 0;
}

static int host_checks(struct mv_state *s, pid_t pid, struct plm_err *err)
{
    if (s->disk_path[0])
        return plm_fail(err, 0, PLM_E_INTERNAL, "microvm: host checks take the snippet state");
    char v[128], want[32];
    snprintf(want, sizeof want, "%u", s->cfg.uid);
    status_field(pid, "Uid", v, sizeof v);
    CHECK("host.qemu_uid", "the unprivileged uid in all four fields", strncmp(v, want, strlen(want)) == 0 && strstr(v, " 0") == NULL && strstr(v, "\t0") == NULL, "Uid %s", v);
    status_field(pid, "Seccomp", v, sizeof v);
    CHECK("host.qemu_seccomp", "2 (filter mode)", strcmp(v, "2") == 0, "Seccomp %s", v);
    status_field(pid, "NoNewPrivs", v, sizeof v);
    CHECK("host.qemu_no_new_privs", "1", strcmp(v, "1") == 0, "NoNewPrivs %s", v);
    status_field(pid, "CapEff", v, sizeof v);
    CHECK("host.qemu_capabilities", "none effective", strcmp(v, "0000000000000000") == 0, "CapEff %s", v);
    char seen[200];
    bool ok = fds_expected(pid, false, seen, sizeof seen);
    CHECK("host.qemu_descriptors", "no host file open", ok, "%s", seen);
    bool ns = other_ns(pid, "user") && other_ns(pid, "mnt") && other_ns(pid, "pid") && other_ns(pid, "net") &&
              other_ns(pid, "ipc");
    CHECK("host.qemu_namespaces", "own user, mount, pid, net, ipc namespaces", ns, "%s", ns ? "all five separate" : "shared");
    return 0;
}

/* A line "name=value" of the guest's probe answer. */
static void probe_value(const char *text, const char *name, char *out, size_t len)
{
    out[0] = 0;
    size_t k = strlen(name);
    for (const char *l = text; l && *l; l = strchr(l, '\n') ? strchr(l, '\n') + 1 : NULL) {
        if (strncmp(l, name, k) == 0 && l[k] == '=') {
            size_t n = strcspn(l + k + 1, "\n");
            snprintf(out, len, "%.*s", (int)n, l + k + 1);
            return;
        }
    }
}

static int one_vm(struct mv_state *s, struct mv_vm *vm, struct plm_err *err)
{
    enum mv_boot how = s->template_fd >= 0 ? MV_BOOT_RESTORE : MV_BOOT_COLD;
    /* The proofs run once, often while the host is busiest (every pool filling, CI's lanes side
     * by side): a restore that has not seeded within the runs' bound is late, not wrong, so
     * here it gets the boot bound. A guest that never seeds still fails the proof. */
    if (mv_vm_start(s, how, s->kvm, MV_BOOT_TIMEOUT_MS, vm, err) < 0 || mv_vm_seed(vm, MV_BOOT_TIMEOUT_MS, err) < 0) {
        mv_vm_kill(vm);
        return -1;
    }
    if (how == MV_BOOT_COLD && !s->guest_ready[0])
        memcpy(s->guest_ready, vm->ready, sizeof s->guest_ready);
    return 0;
}

int mv_proof_vm(struct mv_state *s, struct mv_vm *vm, struct plm_err *err)
{
    return one_vm(s, vm, err);
}

/* Sends PROBE and copies the guest's PROBE_RESULT text into text (NUL-terminated); the VM is
 * killed either way. */
static int probe_text(struct mv_vm *vm, char text[MVC_PROBE_RESULT_MAX + 1], struct plm_err *err)
{
    struct mvc_frame f;
    int r = mv_vm_send(vm, MVC_PROBE, 0, NULL, 0, NULL, 0, NULL, 0, err);
    if (r == 0)
        r = mv_vm_read(vm, clock_mono_ns() + 60 * 1000000000LL, &f, err);
    if (r == 0 && f.hdr.type != MVC_PROBE_RESULT)
        r = plm_fail(err, EPROTO, PLM_E_INTERNAL, "microvm: probe: unexpected frame %u", f.hdr.type);
    if (r == 0) {
        memcpy(text, f.u.text.p, f.u.text.len);
        text[f.u.text.len] = 0;
    }
    mv_vm_kill(vm);
    return r < 0 ? plm_err_wrap(err, "probe") : 0;
}

static int probes(struct mv_state *s, struct plm_err *err)
{
    struct mv_vm vm;
    if (one_vm(s, &vm, err) < 0)
        return plm_err_wrap(err, "probe VM");
    s->restore_ms = vm.boot_ms;
    if (host_checks(s, vm.pid, err) < 0) {
        mv_vm_kill(&vm);
        return -1;
    }
    char text[MVC_PROBE_RESULT_MAX + 1], v[256];
    if (probe_text(&vm, text, err) < 0)
        return -1;
    probe_value(text, "net", v, sizeof v);
    CHECK("guest.network_interfaces", "lo only", strcmp(v, "lo") == 0, "%s", v);
    probe_value(text, "block", v, sizeof v);
    CHECK("guest.block_devices", "none", v[0] == 0, "%s", v[0] ? v : "none");
    probe_value(text, "fs", v, sizeof v);
    CHECK("guest.filesystems", "rootfs,devtmpfs,proc,sysfs,tmpfs (no host share)",
          strcmp(v, "rootfs,devtmpfs,proc,sysfs,tmpfs") == 0, "%s", v);
    probe_value(text, "disk", v, sizeof v);
    CHECK("guest.disk", "absent", strcmp(v, "absent") == 0, "%s", v);
    probe_value(text, "host_file", v, sizeof v);
    CHECK("guest.host_file", "/etc/passwd absent", strcmp(v, "No such file or directory") == 0, "%s", v);
    probe_value(text, "fork_bomb", v, sizeof v);
    CHECK("guest.fork_bomb", "bounded", strncmp(v, "bounded after", 13) == 0, "%s", v);
    probe_value(text, "memory_bomb", v, sizeof v);
    CHECK("guest.memory_bomb", "killed or refused inside the guest; the VM answers",
          strcmp(v, "killed by signal 9") == 0 || strcmp(v, "allocation refused") == 0, "%s", v);
    return 0;
}

/* The project VM's own probes (its template, its disk): on the snippet state's card. */
static int project_probes(struct mv_state *s, struct plm_err *err)
{
    struct mv_state *ps = s->proj;
    struct mv_vm vm;
    if (one_vm(ps, &vm, err) < 0)
        return plm_err_wrap(err, "project probe VM");
    char seen[200];
    bool fds_ok = fds_expected(vm.pid, true, seen, sizeof seen);
    char text[MVC_PROBE_RESULT_MAX + 1], v[256];
    if (probe_text(&vm, text, err) < 0)
        return plm_err_wrap(err, "project");
    CHECK("host.project_qemu_descriptors", "no host file open but the node image, read-only", fds_ok, "%s", seen);
    probe_value(text, "net", v, sizeof v);
    CHECK("guest.project_network_interfaces", "lo only", strcmp(v, "lo") == 0, "%s", v);
    probe_value(text, "block", v, sizeof v);
    CHECK("guest.project_block_devices", "vda only (node's image)", strcmp(v, "vda") == 0, "%s", v[0] ? v : "none");
    probe_value(text, "fs", v, sizeof v);
    CHECK("guest.project_filesystems", "rootfs,devtmpfs,proc,sysfs,tmpfs,ext4 (node's image on /usr)",
          strcmp(v, "rootfs,devtmpfs,proc,sysfs,tmpfs,ext4") == 0, "%s", v);
    probe_value(text, "disk", v, sizeof v);
    /* Root in the guest: the kernel's read-only flag, a refused write, a read-only mount. */
    CHECK("guest.project_disk_read_only", "ro 1, the write refused, no new file in /usr",
          strncmp(v, "ro 1, write: ", 13) == 0 && !strstr(v, "write: written") &&
              strstr(v, "new file in /usr: Read-only file system") != NULL,
          "%s", v);
    probe_value(text, "host_file", v, sizeof v);
    CHECK("guest.project_host_file", "/etc/passwd absent", strcmp(v, "No such file or directory") == 0, "%s", v);
    return 0;
}

static int snippet(struct mv_state *s, const char *name, const char *code, const char *expected,
                   bool (*ok)(const struct plm_js_result *), struct plm_err *err)
{
    struct mv_vm vm;
    if (one_vm(s, &vm, err) < 0)
        return plm_err_wrap(err, "%s", name);
    struct plm_js_result res;
    int64_t ms = 0;
    /* The longest a snippet may run: the memory bomb touches ~160 MiB under TCG, which took
     * 5-7 s at load 14 here and over 20 s in load spikes. */
    int r = mv_run_snippet(s, &vm, code, strlen(code), NULL, MV_MAX_TIMEOUT_MS, &res, &ms, err);
    mv_vm_kill(&vm);
    if (r < 0)
        return plm_err_wrap(err, "%s", name);
    bool pass = ok(&res);
    /* The output is bytes with a length, not a string. */
    int shown = res.out.len > 40 ? 40 : (int)res.out.len;
    CHECK(name, expected, pass, "exit %d, timed_out %d, stdout \"%.*s\"", res.exit_code, res.timed_out, shown,
          shown ? (const char *)res.out.data : "");
    plm_bytes_done(&res.out);
    plm_bytes_done(&res.err);
    return 0;
}

static bool says_two(const struct plm_js_result *r)
{
    return r->exit_code == 0 && !r->timed_out && r->out.len == 2 && memcmp(r->out.data, "2\n", 2) == 0;
}

static bool ended_as_result(const struct plm_js_result *r)
{
    return r->exit_code != 0 && !r->timed_out;
}

/* A project's proof: a file in, a `sh -c` step that also runs Debian's node (it writes the
 * artifact), an artifact out. */
static int project(struct mv_state *s, struct plm_err *err)
{
    struct mv_state *ps = s->proj;
    struct mv_vm vm;
    if (one_vm(ps, &vm, err) < 0)
        return plm_err_wrap(err, "project VM");
    const struct plm_file files[] = {{"in/a.txt", "plimsoll"}};
    const char *steps[] = {"cat in/a.txt && echo \" $(id -u)\" && node -e \"require('fs').writeFileSync('out.txt', 'made\\\\n')\""};
    const char *arts[] = {"out.txt"};
    struct plm_request req = {.kind = PLM_KIND_PROJECT};
    req.project.files = files;
    req.project.n_files = 1;
    req.project.steps = steps;
    req.project.n_steps = 1;
    req.project.artifacts = arts;
    req.project.n_artifacts = 1;
    struct plm_result res = {.kind = PLM_KIND_PROJECT};
    int64_t ms = 0;
    int r = mv_run_project(ps, &vm, &req, MV_MAX_TIMEOUT_MS, &res.project, &ms, err); /* as the snippets' */
    mv_vm_kill(&vm);
    if (r < 0) {
        plm_result_done(&res);
        return plm_err_wrap(err, "project");
    }
    const struct plm_project_result *pr = &res.project;
    bool ok = pr->outcome == PLM_OUTCOME_COMPLETED && pr->n_steps == 1 && pr->steps[0].exit_code == 0 &&
              pr->steps[0].out.len == 15 && memcmp(pr->steps[0].out.data, "plimsoll 65534\n", 15) == 0 &&
              pr->n_artifacts == 1 && pr->artifacts[0].content.len == 5 &&
              memcmp(pr->artifacts[0].content.data, "made\n", 5) == 0;
    int shown = pr->n_steps && pr->steps[0].out.len < 40 ? (int)pr->steps[0].out.len : 0;
    int c = ev_add_check(&s->ev, "guest.project", "step stdout \"plimsoll 65534\", artifact out.txt written by node, completed", ok,
                         "outcome %d (%.60s), %zu steps, stdout \"%.*s\", %zu artifacts", (int)pr->outcome,
                         pr->detail ? pr->detail : "", pr->n_steps, shown, shown ? (const char *)pr->steps[0].out.data : "",
                         pr->n_artifacts);
    plm_result_done(&res);
    if (c < 0)
        return plm_fail(err, 0, PLM_E_INTERNAL, "microvm: evidence card is full");
    return 0;
}

/* Python on the project disk (docs/python.md): the probe step in a real project VM. A pass is a
 * check with the versions; an absence is a card line, and Python projects are then refused
 * (microvm.c) while node and shell projects still run. Under TCG importing pandas takes tens of
 * seconds on this machine kind, so the probe gets the project ceiling. */
static int python_probe(struct mv_state *s, struct plm_err *err)
{
    struct mv_state *ps = s->proj;
    struct mv_vm vm;
    if (one_vm(ps, &vm, err) < 0)
        return plm_err_wrap(err, "python probe VM");
    const char *steps[] = {PLM_PY_PROBE_STEP};
    struct plm_request req = {.kind = PLM_KIND_PROJECT};
    req.project.steps = steps;
    req.project.n_steps = 1;
    struct plm_result res = {.kind = PLM_KIND_PROJECT};
    int64_t ms = 0;
    struct plm_err e = {0};
    char obs[160];
    bool ok = false;
    if (mv_run_project(ps, &vm, &req, MV_PROJECT_MAX_MS, &res.project, &ms, &e) < 0)
        snprintf(obs, sizeof obs, "absent: the probe project failed: %.120s", e.msg);
    else
        ok = plm_py_probe_judge(res.project.n_steps == 1 ? &res.project.steps[0] : NULL, obs, sizeof obs);
    mv_vm_kill(&vm);
    plm_result_done(&res);
    int c = ok ? ev_add_check(&s->ev, "guest.project_python", "python3 imports numpy, pandas, matplotlib from the disk",
                              true, "%s (%lld ms)", obs, (long long)ms)
               : ev_add_confinement(&s->ev, "python: %.120s", obs);
    if (c < 0)
        return plm_fail(err, 0, PLM_E_INTERNAL, "microvm: evidence card is full");
    if (ok)
        __atomic_store_n(&s->python_proven, 1, __ATOMIC_RELEASE);
    return 0;
}

/* Saves s's template; on failure s cold-boots (speed, not a wall) and err says why. */
static void save_or_cold(struct mv_state *s, struct plm_err *err)
{
    if (mv_snapshot_save(s, err) < 0) {
        if (s->template_fd >= 0)
            close(s->template_fd);
        s->template_fd = -1;
    }
}

struct save_job {
    struct mv_state *s;
    pthread_t thread;
    struct plm_err err;
};

/* The template VM dies with this thread (PR_SET_PDEATHSIG), after its save at the latest. */
static void *save_thread(void *arg)
{
    struct save_job *j = arg;
    save_or_cold(j->s, &j->err);
    return NULL;
}

/* Chooses KVM when a KVM guest boots under a timeout (auto) or must (kvm); else TCG. */
static int choose_accel(struct mv_state *s, struct plm_err *err)
{
    s->kvm = false;
    if (s->cfg.accel == MV_ACCEL_TCG) {
        snprintf(s->accel_note, sizeof s->accel_note, "tcg (SANDBOX_MICROVM_ACCEL=tcg)");
        return 0;
    }
    char why[160] = "";
    struct stat kst;
    int fd = open("/dev/kvm", O_RDWR | O_CLOEXEC);
    if (fd < 0) {
        snprintf(why, sizeof why, "/dev/kvm: %s", strerror(errno));
    } else if (fstat(fd, &kst) < 0 || (kst.st_mode & 060) != 060) {
        close(fd);
        /* QEMU runs as an unprivileged uid: it can open /dev/kvm only through its group. */
        snprintf(why, sizeof why, "/dev/kvm is not group read-write (mode %04o): the jailed QEMU cannot open it",
                 (unsigned)(kst.st_mode & 07777));
    } else {
        close(fd);
        struct mv_jail tcg_jail = s->jail;
        if (mv_state_jail(s, true, kst.st_gid, err) < 0)
            return -1;
        struct mv_vm vm;
        struct plm_err e2 = {0};
        uint32_t t = s->cfg.accel == MV_ACCEL_KVM ? MV_BOOT_TIMEOUT_MS : MV_KVM_PROBE_TIMEOUT_MS;
        if (mv_vm_start(s, MV_BOOT_COLD, true, t, &vm, &e2) == 0) {
            mv_vm_kill(&vm);
            s->kvm = true;
            snprintf(s->accel_note, sizeof s->accel_note, "kvm (a probe guest booted in %lld ms)", (long long)vm.boot_ms);
            return 0;
        }
        s->jail = tcg_jail;
        snprintf(why, sizeof why, "a KVM guest did not boot within %u ms (%.80s)", t, e2.msg);
    }
    if (s->cfg.accel == MV_ACCEL_KVM)
        return plm_fail(err, 0, PLM_E_UNAVAILABLE, "SANDBOX_MICROVM_ACCEL=kvm: %s", why);
    snprintf(s->accel_note, sizeof s->accel_note, "tcg (auto: %s)", why);
    return 0;
}

/* Reports the checks added to the card since *seen (startup progress, one line each). */
static void note_checks(const struct mv_state *s, size_t *seen)
{
    for (; *seen < s->ev.n_checks; (*seen)++)
        plm_progress("microvm", "check", "%s: %s", s->ev.checks[*seen].name,
                     s->ev.checks[*seen].passed ? "passed" : "FAILED");
}

/* Stage 1: the accelerator, then both templates saved (the project state gets the accelerator
 * chosen for the snippets and its own template; the two boots overlap on two CPUs). A template
 * that cannot be saved leaves cold boots, said on the card (serr). */
static int prepare(struct mv_state *s, struct plm_err *serr, struct plm_err *err)
{
    plm_progress("microvm", "accelerator", "choosing (SANDBOX_MICROVM_ACCEL=%s)",
                 s->cfg.accel == MV_ACCEL_TCG ? "tcg" : s->cfg.accel == MV_ACCEL_KVM ? "kvm" : "auto");
    if (choose_accel(s, err) < 0)
        return -1;
    plm_progress("microvm", "accelerator", "%s", s->accel_note);
    struct mv_state *ps = s->proj;
    ps->kvm = s->kvm;
    if (s->kvm && mv_state_jail(ps, true, s->jail.gid, err) < 0)
        return -1;
    struct save_job pjob = {.s = ps};
    plm_progress("microvm", "template", "booting the snippet and project templates to save them");
    bool parallel = pthread_create(&pjob.thread, NULL, save_thread, &pjob) == 0;
    save_or_cold(s, serr);
    if (parallel)
        pthread_join(pjob.thread, NULL);
    else
        save_or_cold(ps, &pjob.err);
    plm_progress("microvm", "template", "snippet template %s, project template %s",
                 s->template_fd >= 0 ? "saved" : "not saved (cold boots)",
                 ps->template_fd >= 0 ? "saved" : "not saved (cold boots)");
    return 0;
}

/* Stage 2: the checks on real guests, in order, each stopping the proof when it fails. */
static int guest_checks(struct mv_state *s, size_t *seen, struct plm_err *err)
{
    plm_progress("microvm", "proof", "probing a guest (negative probes)");
    int r = probes(s, err);
    note_checks(s, seen);
    if (r == 0) {
        plm_progress("microvm", "proof", "running snippets in guests");
        r = snippet(s, "guest.snippet", "console.log(1+1)", "stdout \"2\\n\", exit 0", says_two, err);
        note_checks(s, seen);
    }
    if (r == 0) {
        r = snippet(s, "guest.memory_bomb_snippet", "let a=[];for(;;)a.push('x'.repeat(1<<24)+a.length)",
                    "ends as a result with a non-zero exit", ended_as_result, err);
        note_checks(s, seen);
    }
    if (r == 0) {
        plm_progress("microvm", "proof", "probing a project guest and running a project");
        r = project_probes(s, err);
        note_checks(s, seen);
    }
    if (r == 0) {
        r = project(s, err);
        note_checks(s, seen);
    }
    if (r == 0) {
        plm_progress("microvm", "proof", "importing numpy, pandas and matplotlib in a project guest");
        r = python_probe(s, err);
        note_checks(s, seen);
    }
    if (r == 0) {
        plm_progress("microvm", "proof", "running a module row in a project guest");
        r = mv_module_proof(s, err);
        note_checks(s, seen);
    }
    return r;
}

/* Stage 3: what ran, as the guest kernel itself reported it, and the walls, on the card. */
static int describe(struct mv_state *s, size_t *seen, const struct plm_err *serr, struct plm_err *err)
{
    struct mv_state *ps = s->proj;
    char release[128] = "", cpu[128] = "";
    sscanf(s->guest_ready, "%127[^\n]\n%127[^\n]", release, cpu);
    char host_release[128];
    ev_kernel_release(host_release, sizeof host_release);
    CHECK("guest.kernel", "reported by the guest kernel itself", release[0] != 0, "%s (host %s)", release, host_release);
    note_checks(s, seen);
    snprintf(s->ev.runtime, sizeof s->ev.runtime, "qemu-microvm/%s", s->kvm ? "kvm" : "tcg");
    snprintf(s->ev.runtime_version, sizeof s->ev.runtime_version, "%s", s->qemu_version);
    snprintf(s->ev.kernel_release, sizeof s->ev.kernel_release, "%s", release);
    ev_add_confinement(&s->ev, "accelerator: %s", s->accel_note);
    ev_add_confinement(&s->ev, "guest cpu: %.100s", cpu);
    ev_add_confinement(&s->ev, "vm: %u MiB RAM, %u vCPU, /tmp %u MiB, no network device, no disk", s->cfg.memory_mb,
                       s->cfg.cpus, s->cfg.disk_mb);
    ev_add_confinement(&s->ev, "jail: uid %u, user/mnt/pid/ipc/net/uts ns, read-only minimal root", s->cfg.uid);
    ev_add_confinement(&s->ev, "qemu -sandbox on with obsolete/elevateprivileges/spawn/resourcecontrol=deny");
    ev_add_confinement(&s->ev, "project vm: the same RAM, node and python on a read-only virtio-blk disk (/usr), %s",
                       ps->template_fd >= 0 ? "own template and pool" : "cold boots (template save failed)");
    if (s->template_fd >= 0) {
        ev_add_confinement(&s->ev, "pool: restored from one template, fresh seed per VM");
        ev_add_confinement(&s->ev, "shared by restored VMs: guest kernel layout (KASLR), boot-time state");
    } else {
        ev_add_confinement(&s->ev, "pool: cold boots (template save failed: %.80s)", serr->msg);
    }
    return 0;
}

int mv_prove(struct mv_state *s, struct plm_err *err)
{
    memset(&s->ev, 0, sizeof s->ev);
    snprintf(s->ev.provider, sizeof s->ev.provider, "microvm");
    s->ev.tier = PLM_TIER_VM;
    struct plm_err serr = {0};
    size_t seen = 0;
    if (prepare(s, &serr, err) < 0 || guest_checks(s, &seen, err) < 0 || describe(s, &seen, &serr, err) < 0)
        return -1;
    for (size_t i = 0; i < s->ev.n_checks; i++)
        if (!s->ev.checks[i].passed)
            return plm_fail(err, 0, PLM_E_INTERNAL, "microvm startup proof failed: %s: expected %s, observed %s",
                            s->ev.checks[i].name, s->ev.checks[i].expected, s->ev.checks[i].observed);
    s->ev.checked_unix_ms = clock_unix_ms();
    ev_seal(&s->ev);
    return 0;
}
