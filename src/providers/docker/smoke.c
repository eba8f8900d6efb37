/* smoke.c: the startup proof (providers.md §3.7; issue 5 §6) and the evidence card.
 * Owns: the probe container, one real snippet and one real project, and the card they fill.
 * Trusts: the probe's observations only as observations; every verdict is made here, against
 * the configured lockdown, and for runsc also against what gVisor is expected to look like.
 * Invariant: the provider is `proven` (and serves runs) only when every check on the card
 * passed; the card lists what was expected and what was seen, so a reader can judge it; the
 * tier on the card is kernel only under a verified runsc whose probe showed gVisor answering;
 * grants are offered (grants_proven) only when a granted snippet and a granted project step
 * reached a mounted socket through the real grant path, and their absence never stops startup. */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "internal.h"
#include "session_grant.h"

#define KV_MAX 128

struct kvs {
    size_t n;
    struct {
        char k[64], v[256];
    } e[KV_MAX];
};

/* "key=value" lines; anything else, and anything past KV_MAX, is ignored. */
static void kv_parse(const uint8_t *p, size_t len, struct kvs *o)
{
    o->n = 0;
    size_t i = 0;
    while (i < len && o->n < KV_MAX) {
        const uint8_t *nl = memchr(p + i, '\n', len - i);
        size_t end = nl ? (size_t)(nl - p) : len;
        const uint8_t *eq = memchr(p + i, '=', end - i);
        if (eq) {
            size_t kl = (size_t)(eq - (p + i)), vl = end - (size_t)(eq - p) - 1;
            if (kl < sizeof o->e[0].k && vl < sizeof o->e[0].v) {
                memcpy(o->e[o->n].k, p + i, kl);
                o->e[o->n].k[kl] = 0;
                memcpy(o->e[o->n].v, eq + 1, vl);
                o->e[o->n].v[vl] = 0;
                o->n++;
            }
        }
        i = end + 1;
    }
}

static const char *kv(const struct kvs *o, const char *k)
{
    for (size_t i = 0; i < o->n; i++)
        if (!strcmp(o->e[i].k, k))
            return o->e[i].v;
    return "missing";
}

static bool failed(const char *v)
{
    return strcmp(v, "ok") != 0 && strcmp(v, "missing") != 0;
}

/* ---- host side: the container's cgroup -------------------------------------------------------- */

/* Reads the first line of `file` in the container's cgroup for `controller` (cgroup v1), or the
 * unified hierarchy (v2) when controller is NULL. The cgroup is found through the container's
 * pid, and its path must name the container's ID: a limit read elsewhere proves nothing. */
static int cgroup_read(long pid, const char *id, const char *controller, const char *file, char *out, size_t cap)
{
    char path[512], line[1024];
    snprintf(path, sizeof path, "/proc/%ld/cgroup", pid);
    FILE *f = fopen(path, "re");
    if (!f)
        return -1;
    int r = -1;
    while (r < 0 && fgets(line, sizeof line, f)) {
        line[strcspn(line, "\n")] = 0;
        char *c1 = strchr(line, ':'), *c2 = c1 ? strchr(c1 + 1, ':') : NULL;
        if (!c2)
            continue;
        *c2 = 0;
        const char *ctrls = c1 + 1, *cg = c2 + 1;
        bool match = false;
        if (controller) {
            char tmp[256];
            snprintf(tmp, sizeof tmp, "%s", ctrls);
            char *save = NULL;
            for (char *t = strtok_r(tmp, ",", &save); t && !match; t = strtok_r(NULL, ",", &save))
                match = !strcmp(t, controller);
        } else {
            match = line[0] == '0' && c1 == line + 1 && !*ctrls;
        }
        if (!match || !strstr(cg, id))
            continue;
        snprintf(path, sizeof path, "/sys/fs/cgroup%s%s%s/%s", controller ? "/" : "", controller ? controller : "", cg,
                 file);
        FILE *g = fopen(path, "re");
        if (g && fgets(out, (int)cap, g)) {
            out[strcspn(out, "\n")] = 0;
            r = 0;
        }
        if (g)
            fclose(g);
    }
    fclose(f);
    return r;
}

struct host_cg {
    char pids[32], mem[32], memsw[32], quota[32], period[32];
};

static void host_limits(long pid, const char *id, bool v2, struct host_cg *h)
{
    memset(h, 0, sizeof *h);
    snprintf(h->pids, sizeof h->pids, "unreadable");
    snprintf(h->mem, sizeof h->mem, "unreadable");
    snprintf(h->memsw, sizeof h->memsw, "unreadable");
    snprintf(h->quota, sizeof h->quota, "unreadable");
    if (v2) {
        char cpu[64];
        cgroup_read(pid, id, NULL, "pids.max", h->pids, sizeof h->pids);
        cgroup_read(pid, id, NULL, "memory.max", h->mem, sizeof h->mem);
        cgroup_read(pid, id, NULL, "memory.swap.max", h->memsw, sizeof h->memsw);
        if (cgroup_read(pid, id, NULL, "cpu.max", cpu, sizeof cpu) == 0)
            sscanf(cpu, "%31s %31s", h->quota, h->period);
    } else {
        cgroup_read(pid, id, "pids", "pids.max", h->pids, sizeof h->pids);
        cgroup_read(pid, id, "memory", "memory.limit_in_bytes", h->mem, sizeof h->mem);
        cgroup_read(pid, id, "memory", "memory.memsw.limit_in_bytes", h->memsw, sizeof h->memsw);
        cgroup_read(pid, id, "cpu", "cpu.cfs_quota_us", h->quota, sizeof h->quota);
        cgroup_read(pid, id, "cpu", "cpu.cfs_period_us", h->period, sizeof h->period);
    }
}

/* ---- the probe container --------------------------------------------------------------------- */

struct probe_io {
    struct dock_bytes out, err;
};

static void probe_io_done(struct probe_io *c)
{
    dock_bytes_done(&c->out);
    dock_bytes_done(&c->err);
}
#define cleanup_probe_io __attribute__((cleanup(probe_io_done)))

static void probe_sink(void *ctx, int stream, const uint8_t *p, size_t n)
{
    struct probe_io *c = ctx;
    dock_bytes_add(stream == DOCK_STDERR ? &c->err : &c->out, p, n);
}

static bool probe_done(void *ctx)
{
    struct probe_io *c = ctx;
    return c->out.len && memmem(c->out.data, c->out.len, "probe-done=1\n", 13);
}

#define CARD(ev, name, expected, ok, ...)                                                                              \
    do {                                                                                                               \
        if (ev_add_check(ev, name, expected, ok, __VA_ARGS__) < 0)                                                     \
            return plm_fail(err, 0, PLM_E_INTERNAL, "evidence card full");                                             \
    } while (0)

static int judge_tmpfs(struct dock_state *s, const struct kvs *o, const char *dir, uint32_t mb, struct plm_evidence *ev,
                       struct plm_err *err)
{
    char k[96], name[64], want[128], size_opt[32];
    snprintf(k, sizeof k, "tmpfs_size.%s", dir);
    const char *size = kv(o, k);
    snprintf(k, sizeof k, "tmpfs_exec.%s", dir);
    const char *exec = kv(o, k);
    snprintf(k, sizeof k, "tmpfs_opts.%s", dir);
    const char *opts = kv(o, k);
    char want_size[32];
    snprintf(want_size, sizeof want_size, "%llu", (unsigned long long)mb * 1024 * 1024);
    bool ok = !strcmp(size, want_size) && failed(exec) && strstr(opts, "noexec");
    if (!s->runsc) {
        /* runc: the kernel's own mountinfo must state size=<N*1024>k, noexec and nosuid */
        snprintf(size_opt, sizeof size_opt, "size=%uk", mb * 1024);
        ok = ok && strstr(opts, "nosuid") && strstr(opts, size_opt);
    }
    snprintf(name, sizeof name, "probe.tmpfs.%s", dir);
    snprintf(want, sizeof want, "%u MiB, noexec%s, a written script cannot run", mb,
             s->runsc ? " (gVisor does not list nosuid)" : ", nosuid");
    CARD(ev, name, want, ok, "size %s, exec %s, mountinfo %.90s", size, exec, opts);
    return 0;
}

static const char *const escape_calls[] = {
    "ptrace",
    "process_vm_readv",
    "process_vm_writev",
    "io_uring_setup",
    "userfaultfd",
    "perf_event_open",
    "bpf",
    "keyctl",
    "add_key",
    "request_key",
    "unshare",
    "setns",
    "mount",
    "umount2",
    "pivot_root",
    "chroot",
    "kexec_load",
    "init_module",
    "finit_module",
    "reboot",
    "swapon",
    "modify_ldt",
    "name_to_handle_at",
    "open_by_handle_at",
    "clone3",
};
/* Under runsc these are answered by gVisor's Sentry, inside the sandbox, never by the host kernel. */
static const char *const sentry_calls[] = {
    "ptrace",          "process_vm_readv", "process_vm_writev", "io_uring_setup",   "userfaultfd",
    "perf_event_open", "keyctl",           "add_key",           "request_key",      "unshare",
    "setns",           "clone3",           "name_to_handle_at", "open_by_handle_at"};

/* The walls: root filesystem, network, sockets, identity, privileges. */
static int judge_walls(struct dock_state *s, const struct kvs *o, struct plm_evidence *ev, struct plm_err *err)
{
    const struct dock_lockdown *l = &s->lock;
    char u[64], want[128];
    const char *rw = kv(o, "root_write"), *rm = kv(o, "root_mkdir");
    CARD(ev, "probe.rootfs", "read-only: creating a file or a directory at / fails",
         failed(rw) && failed(rm) && (!strcmp(rw, "EROFS") || !strcmp(rm, "EROFS")), "create %s, mkdir %s", rw, rm);
    const char *ifs = kv(o, "ifaces"), *inet = kv(o, "sock.inet"), *conn = kv(o, "connect.inet");
    bool net_ok = !strcmp(ifs, "lo") && (s->runsc ? failed(conn) : failed(inet) && failed(kv(o, "sock.inet6")));
    CARD(ev, "probe.network",
         s->runsc ? "interfaces exactly lo; 1.1.1.1 unreachable" : "interfaces exactly lo; AF_INET refused", net_ok,
         "interfaces %s; AF_INET %s, connect %s", ifs, inet, conn);
    CARD(ev, "probe.sockets",
         s->runsc ? "AF_PACKET refused; AF_UNIX works" : "AF_PACKET, AF_NETLINK refused; AF_UNIX works",
         failed(kv(o, "sock.packet")) && (s->runsc || failed(kv(o, "sock.netlink"))) &&
             !strcmp(kv(o, "sock.unix"), "ok"),
         "packet %s, netlink %s, unix %s", kv(o, "sock.packet"), kv(o, "sock.netlink"), kv(o, "sock.unix"));
    snprintf(u, sizeof u, "%u,%u,%u,%u", l->uid, l->uid, l->uid, l->uid);
    char g1[16];
    snprintf(g1, sizeof g1, "%u", l->uid);
    const char *groups = kv(o, "groups");
    snprintf(want, sizeof want, "uid, gid and groups all %u", l->uid);
    CARD(ev, "probe.identity", want,
         !strcmp(kv(o, "uid"), u) && !strcmp(kv(o, "gid"), u) && (!strcmp(groups, g1) || !*groups),
         "uid %s gid %s groups %s", kv(o, "uid"), kv(o, "gid"), groups);
    const char *caps[] = {"capinh", "capprm", "capeff", "capbnd", "capamb"};
    bool nocaps = true;
    for (size_t i = 0; i < 5; i++)
        nocaps = nocaps &&
                 (!strcmp(kv(o, caps[i]), "0000000000000000") || (s->runsc && !strcmp(kv(o, caps[i]), "unavailable")));
    CARD(ev, "probe.privileges", s->runsc ? "no capabilities" : "no capabilities; no_new_privs set",
         nocaps && (s->runsc || !strcmp(kv(o, "nonewprivs"), "1")), "CapEff %s CapBnd %s NoNewPrivs %s",
         kv(o, "capeff"), kv(o, "capbnd"), kv(o, "nonewprivs"));
    return 0;
}

/* Who answers the guest's syscalls: gVisor (runsc) or the host kernel behind seccomp (runc). */
static int judge_kernel(struct dock_state *s, const struct kvs *o, const struct dock_gvisor *gv,
                        struct plm_evidence *ev, struct plm_err *err)
{
    char host_rel[128];
    ev_kernel_release(host_rel, sizeof host_rel);
    if (s->runsc) {
        /* The kernel tier's own proof: the guest's syscalls reach gVisor's Sentry, not this kernel. */
        const char *rel = kv(o, "uname_release");
        CARD(ev, "probe.kernel", "gVisor answers: guest release differs from the host's; syslog names gVisor",
             strcmp(rel, host_rel) != 0 && !strcmp(kv(o, "syslog"), "gVisor"), "guest %s, host %s, syslog %s", rel,
             host_rel, kv(o, "syslog"));
        /* Which platform carries the guest's syscalls, from the running sandbox (docs/docker.md). */
        CARD(ev, "probe.platform",
             "the sandbox's stubs show the platform runsc states: systrap (no tracer) or ptrace (Sentry-traced)",
             dock_gvisor_agrees(gv), "%s: %u stub processes, %u threads, %u Sentry-traced; runsc state: %s",
             gv->observed, gv->procs, gv->threads, gv->traced, gv->stated);
        size_t vl = strlen(ev->runtime_version);
        snprintf(ev->runtime_version + vl, sizeof ev->runtime_version - vl, ", platform %s", gv->observed);
    } else {
        CARD(ev, "probe.seccomp", "seccomp filter mode 2; syslog refused",
             !strcmp(kv(o, "seccomp"), "2") && failed(kv(o, "syslog")), "Seccomp %s, syslog %s", kv(o, "seccomp"),
             kv(o, "syslog"));
    }
    return 0;
}

/* The limits: rlimits, the host cgroup's pids, memory and CPU, the tmpfs sizes, the writable mounts. */
static int judge_limits(struct dock_state *s, const struct kvs *o, const struct host_cg *h, struct plm_evidence *ev,
                        struct plm_err *err)
{
    const struct dock_lockdown *l = &s->lock;
    char want[128];
    CARD(ev, "probe.rlimits", "core 0:0, nofile 4096:4096",
         !strcmp(kv(o, "rlimit_core"), "0:0") && !strcmp(kv(o, "rlimit_nofile"), "4096:4096"), "core %s, nofile %s",
         kv(o, "rlimit_core"), kv(o, "rlimit_nofile"));
    char want_pids[16], want_mem[32];
    snprintf(want_pids, sizeof want_pids, "%u", l->pids);
    snprintf(want_mem, sizeof want_mem, "%llu", (unsigned long long)l->memory_mb * 1024 * 1024);
    const char *in_pids = kv(o, "pids_max");
    snprintf(want, sizeof want, "pids.max %u in the host cgroup named by the container ID%s", l->pids,
             s->runsc ? "" : " and inside");
    CARD(ev, "probe.pids", want, !strcmp(h->pids, want_pids) && (s->runsc || !strcmp(in_pids, want_pids)),
         "host %s, inside %s", h->pids, in_pids);
    bool v2 = !strcmp(s->cgroup_version, "2");
    bool swap_ok = v2 ? !strcmp(h->memsw, "0") : (!strcmp(h->memsw, want_mem) || !strcmp(h->memsw, "unreadable"));
    snprintf(want, sizeof want, "memory limit %u MiB, no swap (host cgroup)", l->memory_mb);
    CARD(ev, "probe.memory", want, !strcmp(h->mem, want_mem) && swap_ok, "limit %s, with swap %s", h->mem, h->memsw);
    long long q = strtoll(h->quota, NULL, 10), p = strtoll(h->period, NULL, 10);
    double cpus = p > 0 ? (double)q / (double)p : 0;
    snprintf(want, sizeof want, "CPU quota %.3g CPUs (host cgroup)", l->cpus);
    CARD(ev, "probe.cpu", want, p > 0 && cpus > l->cpus - 0.001 && cpus < l->cpus + 0.001, "quota %s / period %s",
         h->quota, h->period);
    if (judge_tmpfs(s, o, "/tmp", l->tmp_mb, ev, err) < 0 || judge_tmpfs(s, o, "/dev/shm", l->shm_mb, ev, err) < 0 ||
        judge_tmpfs(s, o, "/work", l->work_mb, ev, err) < 0)
        return -1;
    const char *w = kv(o, "writable");
    bool w_ok = true;
    size_t n = 0;
    char tmp[512];
    snprintf(tmp, sizeof tmp, "%s", w);
    char *save = NULL;
    for (char *t = strtok_r(tmp, ",", &save); t; t = strtok_r(NULL, ",", &save), n++)
        w_ok = w_ok && (!strcmp(t, "/tmp") || !strcmp(t, "/dev/shm") || !strcmp(t, "/work"));
    CARD(ev, "probe.writable", "writable mounts exactly /tmp, /dev/shm, /work", w_ok && n == 3, "%s", w);
    return 0;
}

/* Escape syscalls, each made by the probe with arguments that would succeed if allowed. */
static int judge_escapes(struct dock_state *s, const struct kvs *o, struct plm_evidence *ev, struct plm_err *err)
{
    char want[128];
    /* Escape syscalls, made with arguments that would succeed if allowed. */
    char allowed[160] = "", sentry[160] = "";
    size_t n_fail = 0, n_host = 0;
    for (size_t i = 0; i < sizeof escape_calls / sizeof *escape_calls; i++) {
        char key[64];
        snprintf(key, sizeof key, "sys.%s", escape_calls[i]);
        const char *v = kv(o, key);
        bool in_sentry = false;
        for (size_t k = 0; s->runsc && k < sizeof sentry_calls / sizeof *sentry_calls; k++)
            in_sentry = in_sentry || !strcmp(sentry_calls[k], escape_calls[i]);
        if (!in_sentry)
            n_host++;
        if (failed(v)) {
            n_fail++;
        } else if (in_sentry) {
            if (strlen(sentry) + strlen(escape_calls[i]) + 2 < sizeof sentry)
                strcat(strcat(sentry, *sentry ? " " : ""), escape_calls[i]);
        } else if (strlen(allowed) + strlen(escape_calls[i]) + 2 < sizeof allowed) {
            strcat(strcat(allowed, *allowed ? " " : ""), escape_calls[i]);
        }
    }
    size_t total = sizeof escape_calls / sizeof *escape_calls;
    if (s->runsc) {
        snprintf(want, sizeof want, "the %zu host-level calls fail; process-level ones stay inside gVisor", n_host);
        CARD(ev, "probe.escape_syscalls", want, !*allowed, "%zu/%zu failed; allowed: %s; served by gVisor: %.80s",
             n_fail, total, *allowed ? allowed : "none", *sentry ? sentry : "none");
    } else {
        snprintf(want, sizeof want, "all %zu fail (ptrace ... clone3; seccomp and no capabilities)", total);
        CARD(ev, "probe.escape_syscalls", want, n_fail == total, "%zu/%zu failed; allowed: %s", n_fail, total,
             *allowed ? allowed : "none");
    }
    return 0;
}

/* Every verdict on what the probe saw; each stage adds its card lines. */
static int judge_probe(struct dock_state *s, const struct kvs *o, const struct host_cg *h, const struct dock_gvisor *gv,
                       struct plm_evidence *ev, struct plm_err *err)
{
    if (judge_walls(s, o, ev, err) < 0 || judge_kernel(s, o, gv, ev, err) < 0 || judge_limits(s, o, h, ev, err) < 0 ||
        judge_escapes(s, o, ev, err) < 0)
        return -1;
    return 0;
}

static int run_probe(struct dock_state *s, struct plm_evidence *ev, struct plm_err *err)
{
    static const char *const cmd[] = {DOCK_PROBE_PATH, "/tmp", "/dev/shm", "/work"};
    struct dock_box *b = NULL;
    if (dock_box_acquire(s, DOCK_PROJECT, cmd, 4, false, NULL, &b, err) < 0)
        return plm_err_wrap(err, "probe container");
    struct probe_io c cleanup_probe_io = {.out = {.max = 64 * 1024}, .err = {.max = 16 * 1024}};
    dock_bytes_add(&c.out, b->early_out.data, b->early_out.len);
    struct dock_io io = {.close_in = true, .sink = probe_sink, .stop = probe_done, .ctx = &c};
    int r = dock_attach_pump(&b->at, &io, (int64_t)clock_mono_ms() + 15000, err);
    struct host_cg h;
    memset(&h, 0, sizeof h);
    struct dock_gvisor gv;
    dock_gvisor_observe(0, "", &gv);
    json_t *ins cleanup_json = NULL;
    if (r >= 0 && probe_done(&c) && dock_container_inspect(&s->eng, b->id, &ins, err) == 0) {
        json_t *pid = json_object_get(json_object_get(ins, "State"), "Pid");
        host_limits(json_is_integer(pid) ? (long)json_integer_value(pid) : 0, b->id, !strcmp(s->cgroup_version, "2"),
                    &h);
        dock_posture_container(ins, json_is_integer(pid) ? (long)json_integer_value(pid) : 0, &s->posture);
        if (s->runsc) /* the probe still runs: its stubs show the platform */
            dock_gvisor_observe(json_is_integer(pid) ? (long)json_integer_value(pid) : 0, b->id, &gv);
    }
    bool done = probe_done(&c);
    dock_box_release(s, b);
    if (r < 0 || !done)
        return r < 0 ? plm_err_wrap(err, "probe container")
                     : plm_fail(err, 0, PLM_E_INTERNAL, "the probe did not finish within 15 s");
    static struct kvs o; /* startup only, one caller */
    kv_parse(c.out.data, c.out.len, &o);
    return judge_probe(s, &o, &h, &gv, ev, err);
}

/* ---- one real snippet and one real project ---------------------------------------------------- */

static const char smoke_snippet[] =
    "const fs=require('fs'),r={};"
    "try{fs.writeFileSync('/plimsoll-smoke','x');r.root='ok'}catch(e){r.root=e.code}"
    "r.uid=((fs.readFileSync('/proc/self/status','utf8').match(/^Uid:\\s+(.*)$/m)||[])[1]||'').split(/\\s+/).join(',');"
    "const w=[];for(const d of ['/','/etc','/usr','/var','/root','/home','/opt','/run','/srv','/mnt','/dev',"
    "'/dev/mqueue','/dev/shm','/tmp','/var/tmp','/work']){try{const p=(d==='/'?'':d)+'/.plimsoll-smoke-'+process.pid;"
    "fs.writeFileSync(p,'x',{flag:'wx'});fs.unlinkSync(p);w.push(d)}catch(e){}}r.writable=w.join(',');"
    "r.ifaces=fs.readFileSync('/proc/net/dev','utf8').split('\\n').slice(2).map(l=>l.split(':')[0].trim())"
    ".filter(Boolean).join(',');"
    "console.log('plimsoll-snippet-ok '+JSON.stringify(r))";

static int run_snippet(struct dock_state *s, struct plm_evidence *ev, struct plm_err *err)
{
    struct plm_result res = {0};
    if (dock_snippet_exec(s, 10000, smoke_snippet, NULL, &res, err) < 0)
        return plm_err_wrap(err, "smoke snippet");
    const char *tag = "plimsoll-snippet-ok ";
    const uint8_t *at = res.js.out.len ? memmem(res.js.out.data, res.js.out.len, tag, strlen(tag)) : NULL;
    json_t *j = NULL;
    if (at) {
        size_t off = (size_t)(at - res.js.out.data) + strlen(tag);
        j = json_loadb((const char *)res.js.out.data + off, res.js.out.len - off, JSON_DISABLE_EOF_CHECK, NULL);
    }
    char uid[64];
    snprintf(uid, sizeof uid, "%u,%u,%u,%u", s->lock.uid, s->lock.uid, s->lock.uid, s->lock.uid);
    const char *root = json_string_value(json_object_get(j, "root")), *u = json_string_value(json_object_get(j, "uid")),
               *w = json_string_value(json_object_get(j, "writable")),
               *ifs = json_string_value(json_object_get(j, "ifaces"));
    bool ran = res.js.exit_code == 0 && !res.js.timed_out && j;
    int rc = 0;
    if (ev_add_check(ev, "snippet.run", "node - prints plimsoll-snippet-ok, exit 0", ran, "exit %d%s", res.js.exit_code,
                     j ? "" : ", no marker line") < 0 ||
        ev_add_check(
            ev, "snippet.lockdown", "snippet image: uid as configured, / read-only, writable /dev/shm,/tmp, lo",
            ran && root && strcmp(root, "ok") && u && !strcmp(u, uid) && w && !strcmp(w, "/dev/shm,/tmp") && ifs &&
                !strcmp(ifs, "lo"),
            "root %s uid %s writable %s ifaces %s", root ? root : "?", u ? u : "?", w ? w : "?", ifs ? ifs : "?") < 0)
        rc = plm_fail(err, 0, PLM_E_INTERNAL, "evidence card full");
    json_decref(j);
    plm_result_done(&res);
    return rc;
}

static const char key_probe_step[] =
    "for p in /proc/1/mem /proc/1/fd/0 /proc/1/fd/1; do if (exec 3<\"$p\") 2>/dev/null; then echo \"read $p ok\"; "
    "else echo \"read $p denied\"; fi; done; "
    "if (exec 3>/proc/1/fd/1) 2>/dev/null; then echo 'write /proc/1/fd/1 ok'; else echo 'write /proc/1/fd/1 denied'; "
    "fi; "
    "printf '\\n<<<PLIMSOLL_REPORT_V2>>> 2 %064d\\n{}' 0; printf '\\000\\001\\002\\377' > out.bin";

static int run_project(struct dock_state *s, struct plm_evidence *ev, struct plm_err *err)
{
    const struct plm_file files[] = {{"src/main.js", "console.log('sum', 2 + 3, process.version)\n"}};
    const char *steps[] = {"node src/main.js", key_probe_step};
    const char *arts[] = {"out.bin", "missing.txt"};
    struct plm_request req = {
        .kind = PLM_KIND_PROJECT,
        .project = {.files = files, .n_files = 1, .steps = steps, .n_steps = 2, .artifacts = arts, .n_artifacts = 2}};
    struct plm_result res = {0};
    if (dock_project_exec(s, 20000, &req, NULL, &res, err) < 0)
        return plm_err_wrap(err, "smoke project");
    const struct plm_project_result *pr = &res.project;
    bool done = pr->outcome == PLM_OUTCOME_COMPLETED && pr->n_steps == 2;
    const struct plm_step_result *s1 = pr->n_steps > 0 ? &pr->steps[0] : NULL;
    const struct plm_step_result *s2 = pr->n_steps > 1 ? &pr->steps[1] : NULL;
    char node[64] = "?";
    if (s1 && s1->out.len > 6 && s1->out.len < 60 && !memcmp(s1->out.data, "sum 5 ", 6))
        snprintf(node, sizeof node, "%.*s", (int)strcspn((const char *)s1->out.data + 6, "\n"),
                 (const char *)s1->out.data + 6);
    bool art = pr->n_artifacts == 1 && !strcmp(pr->artifacts[0].path, "out.bin") && pr->artifacts[0].content.len == 4 &&
               !memcmp(pr->artifacts[0].content.data, "\x00\x01\x02\xff", 4);
    bool denied[4] = {0}, forged_kept = false;
    int n_denied = 0;
    if (s2 && s2->out.len) {
        static const char *const lines[] = {"read /proc/1/mem denied", "read /proc/1/fd/0 denied",
                                            "read /proc/1/fd/1 denied", "write /proc/1/fd/1 denied"};
        for (size_t i = 0; i < 4; i++)
            n_denied += denied[i] = memmem(s2->out.data, s2->out.len, lines[i], strlen(lines[i])) != NULL;
        forged_kept = memmem(s2->out.data, s2->out.len, "<<<PLIMSOLL_REPORT_V2>>> 2 ", 27) != NULL;
    }
    /* The key lives only in the runner's memory once stdin is read (fd 0 is /dev/null before any
     * step starts). runc refuses all four opens (the runner is non-dumpable); gVisor refuses
     * /proc/1/mem but lets a same-uid process open /proc/1/fd/N, so there a step can add bytes
     * to the report channel, which the MAC turns into a protocol_error of its own run, never a
     * forged result. The card states which case held. */
    bool key_safe = s->runsc ? denied[0] : n_denied == 4;
    int rc = 0;
    if (ev_add_check(ev, "project.run", "completed, 2 steps; node prints sum 5; binary artifact 00 01 02 ff",
                     done && node[0] != '?' && art, "outcome %d, %zu steps, artifact %s", pr->outcome, pr->n_steps,
                     art ? "ok" : "missing or wrong") < 0 ||
        ev_add_check(ev, "project.language", "node runs in the project image", node[0] != '?', "node %s", node) < 0 ||
        ev_add_check(ev, "project.key_isolation",
                     s->runsc ? "a step cannot read the runner's memory (/proc/1/mem)"
                              : "a step cannot open /proc/1/mem, /proc/1/fd/0, /proc/1/fd/1",
                     key_safe, "mem %s, fd/0 %s, fd/1 read %s, write %s", denied[0] ? "denied" : "OPEN",
                     denied[1] ? "denied" : "open", denied[2] ? "denied" : "open", denied[3] ? "denied" : "open") < 0 ||
        ev_add_check(ev, "project.forged_report", "a frame printed by a step stays step output; the MAC decides",
                     done && forged_kept, forged_kept ? "ignored, kept as step output" : "not observed") < 0)
        rc = plm_fail(err, 0, PLM_E_INTERNAL, "evidence card full");
    plm_result_done(&res);
    return rc;
}

/* ---- grants: a container reaches a mounted host socket ------------------------------------------ */

/* The proof's own host api: no broker, no upstream; it answers with what it was asked, so the
 * card shows that method, raw target and body crossed the wall unchanged. */
static void smoke_call(void *cb, const char *method, const char *target, const uint8_t *body, size_t len,
                       struct plm_host_reply *out)
{
    (void)cb;
    (void)body;
    char *b = NULL;
    int n = asprintf(&b, "pong %s %s %zu", method, target, len);
    out->status = n > 0 ? 200 : 500;
    out->body = n > 0 ? (uint8_t *)b : NULL;
    out->len = n > 0 ? (size_t)n : 0;
}

#define GRANT_TAG "plimsoll-grant-smoke "
#define GRANT_TARGET "/plimsoll/smoke/%2e%2e?q=1"
#define GRANT_WANT "{\"pre\":\"preloaded\",\"status\":200,\"body\":\"pong POST " GRANT_TARGET " 4\"}"

/* node, as a snippet and as a project step: the preload ran, $HOST_API_SOCKET is set, and a
 * POST over it comes back. Not the broker's client (that lives above this layer), but the same
 * mount, variable, preload path and HTTP framing it uses. */
static const char grant_code[] =
    "const http=require('http');"
    "const say=o=>console.log('" GRANT_TAG "'+JSON.stringify(o));"
    "const r=http.request({socketPath:process.env.HOST_API_SOCKET,method:'POST',path:'" GRANT_TARGET "',"
    "headers:{'content-length':4},agent:false},res=>{let b='';res.on('data',c=>b+=c);"
    "res.on('end',()=>say({pre:globalThis.__plimsoll_smoke||'',status:res.statusCode,body:b}))});"
    "r.on('error',e=>say({error:String(e.code||e.message)}));r.end('ping');\n";

/* The observed line (or why there is none) into obs. */
static bool grant_seen(const uint8_t *out, size_t len, char *obs, size_t cap)
{
    const uint8_t *at = len ? memmem(out, len, GRANT_TAG, strlen(GRANT_TAG)) : NULL;
    if (!at) {
        snprintf(obs, cap, "no answer line");
        return false;
    }
    const uint8_t *p = at + strlen(GRANT_TAG), *nl = memchr(p, '\n', len - (size_t)(p - out));
    size_t n = nl ? (size_t)(nl - p) : len - (size_t)(p - out), shown = n < cap - 1 ? n : cap - 1;
    for (size_t i = 0; i < shown; i++) /* guest bytes: the card gets printable ASCII only */
        obs[i] = p[i] >= 0x20 && p[i] < 0x7f ? (char)p[i] : '?';
    obs[shown] = 0;
    return n == strlen(GRANT_WANT) && !memcmp(p, GRANT_WANT, n);
}

/* Describe promises grants only when this passes; a failure is recorded on the card and leaves
 * grants refused, but the provider still serves runs without one. */
static int run_grants(struct dock_state *s, struct plm_evidence *ev, struct plm_err *err)
{
    struct plm_host_api api = {.profile = "smoke",
                               .client_js = "",
                               .node_preload = "globalThis.__plimsoll_smoke = 'preloaded';\n",
                               .call = smoke_call};
    char why[160] = "", obs_s[160] = "-", obs_p[160] = "-";
    bool ok_s = false, ok_p = false;
    struct plm_err e = {0};
    if (dock_hs_base_dir(s->grant_dir, s->hs_base, sizeof s->hs_base, &e) < 0) {
        snprintf(why, sizeof why, "%.150s", e.msg);
    } else {
        dock_hs_sweep(s->hs_base, 60); /* what a crashed daemon left; never a live run's */
        dock_sg_sweep(s->hs_base);     /* session directories of daemons gone (session_grant.c) */
        struct plm_result res = {0};
        if (dock_snippet_exec(s, 10000, grant_code, &api, &res, &e) < 0)
            snprintf(obs_s, sizeof obs_s, "%.150s", e.msg);
        else
            ok_s = grant_seen(res.js.out.data, res.js.out.len, obs_s, sizeof obs_s);
        plm_result_done(&res);
        const struct plm_file files[] = {{"grant.js", grant_code}};
        const char *steps[] = {"node grant.js"};
        struct plm_request req = {.kind = PLM_KIND_PROJECT,
                                  .project = {.files = files, .n_files = 1, .steps = steps, .n_steps = 1}};
        struct plm_result pres = {0};
        if (dock_project_exec(s, 20000, &req, &api, &pres, &e) < 0)
            snprintf(obs_p, sizeof obs_p, "%.150s", e.msg);
        else if (pres.project.n_steps == 1)
            ok_p = grant_seen(pres.project.steps[0].out.data, pres.project.steps[0].out.len, obs_p, sizeof obs_p);
        else
            snprintf(obs_p, sizeof obs_p, "outcome %d, %zu steps", pres.project.outcome, pres.project.n_steps);
        plm_result_done(&pres);
    }
    if (ok_s && ok_p) {
        if (ev_add_check(ev, "grants.snippet", "a snippet POSTs over the mounted socket; the raw target arrives", true,
                         "%s", obs_s) < 0 ||
            ev_add_check(ev, "grants.project", "a project step does the same (NODE_OPTIONS preload)", true, "%s",
                         obs_p) < 0 ||
            ev_add_confinement(ev, "grants: a per-run unix socket at " DOCK_HS_SOCK_IN
                                   " and the client at " DOCK_HS_PRELOAD_IN " (read-only); NetworkMode stays none") < 0)
            return plm_fail(err, 0, PLM_E_INTERNAL, "evidence card full");
        atomic_store(&s->grants_proven, true);
        return 0;
    }
    /* Not a failed check (that would stop startup): a line saying why grants are refused. */
    if (ev_add_confinement(ev, "grants off: %.110s", *why ? why : !ok_s ? obs_s : obs_p) < 0)
        return plm_fail(err, 0, PLM_E_INTERNAL, "evidence card full");
    return 0;
}

/* `runsc --version`, with an empty environment and a 5 s bound: the card names the runtime. */
static void runsc_version(const char *path, char *out, size_t cap)
{
    snprintf(out, cap, "unknown");
    int p[2];
    if (!*path || pipe2(p, O_CLOEXEC) < 0)
        return;
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, p[1], 1);
    posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
    posix_spawn_file_actions_addopen(&fa, 2, "/dev/null", O_WRONLY, 0);
    char *argv[] = {(char *)path, "--version", NULL}, *envp[] = {NULL};
    pid_t pid = -1;
    int r = posix_spawn(&pid, path, &fa, NULL, argv, envp);
    posix_spawn_file_actions_destroy(&fa);
    close(p[1]);
    if (r == 0) {
        char buf[256];
        size_t have = 0;
        int64_t deadline = (int64_t)clock_mono_ms() + 5000;
        struct pollfd pf = {p[0], POLLIN, 0};
        while (have < sizeof buf - 1 && (int64_t)clock_mono_ms() < deadline && poll(&pf, 1, 100) >= 0) {
            if (!(pf.revents & (POLLIN | POLLHUP)))
                continue;
            ssize_t n = read(p[0], buf + have, sizeof buf - 1 - have);
            if (n <= 0)
                break;
            have += (size_t)n;
        }
        buf[have] = 0;
        buf[strcspn(buf, "\n")] = 0;
        if (have)
            snprintf(out, cap, "%.150s", buf);
        kill(pid, SIGKILL);
        waitpid(pid, NULL, 0);
    }
    close(p[0]);
}

int dock_smoke(struct dock_state *s, struct plm_err *err)
{
    if (dock_preflight(s, err) < 0)
        return -1;
    struct plm_err e = {0};
    dock_sweep(s, &e); /* orphans of an earlier instance; a failure here is not a proof failure */
    struct plm_evidence *ev = &s->card[0];
    memset(ev, 0, sizeof *ev);
    snprintf(ev->provider, sizeof ev->provider, "docker");
    snprintf(ev->runtime, sizeof ev->runtime, "%s", s->runtime);
    if (s->runsc)
        runsc_version(s->runtime_path, ev->runtime_version, sizeof ev->runtime_version);
    else
        snprintf(ev->runtime_version, sizeof ev->runtime_version, "%.60s",
                 *s->runc_version ? s->runc_version : "unknown");
    ev_kernel_release(ev->kernel_release, sizeof ev->kernel_release);
    ev->checked_unix_ms = clock_unix_ms();
    if (ev_add_check(ev, "preflight.runtime",
                     s->runsc ? "runsc registered; its path's basename is runsc" : "runtime registered with dockerd",
                     true, "%s -> %.120s", s->runtime, s->runtime_path) < 0 ||
        ev_add_check(ev, "host.posture", "rootful, rootless or userns-remap: /info agrees with the socket's peer uid",
                     s->posture.mode != DOCK_MODE_UNKNOWN, "%s: %.140s", dock_mode_name(s->posture.mode),
                     s->posture.why) < 0 ||
        ev_add_check(ev, "preflight.images", "present, launched by ID, no VOLUME, ENV free of loader variables", true,
                     "snippet %.19s, project %.19s", s->id[DOCK_SNIPPET], s->id[DOCK_PROJECT]) < 0)
        return plm_fail(err, 0, PLM_E_INTERNAL, "evidence card full");
    if (run_probe(s, ev, err) < 0 || run_snippet(s, ev, err) < 0 || run_project(s, ev, err) < 0 ||
        dock_python_proof(s, ev, err) < 0 || (s->ref[DOCK_SESSION][0] && dock_session_python_proof(s, ev, err) < 0) ||
        run_grants(s, ev, err) < 0 || (s->ref[DOCK_MODULE][0] && dock_module_proof(s, ev, err) < 0))
        return plm_err_wrap(err, "startup proof");
    if (dock_lockdown_lines(&s->lock, s->seccomp_desc, ev) < 0 ||
        dock_posture_lines(&s->posture, s->runtime, ev->runtime_version, s->seccomp_sha256, ev) < 0 ||
        ev_add_confinement(ev, "dockerd %s, Engine API %s, cgroup v%s", s->docker_version, DOCK_API + 2,
                           s->cgroup_version) < 0 ||
        ev_add_confinement(ev, "image snippet %s", s->id[DOCK_SNIPPET]) < 0 ||
        ev_add_confinement(ev, "image project %s", s->id[DOCK_PROJECT]) < 0)
        return plm_fail(err, 0, PLM_E_INTERNAL, "evidence card full");
    for (size_t i = 0; i < ev->n_checks; i++)
        if (!ev->checks[i].passed)
            return plm_fail(err, 0, PLM_E_INTERNAL, "startup proof failed: %s: expected %s; observed %s",
                            ev->checks[i].name, ev->checks[i].expected, ev->checks[i].observed);
    ev->tier = s->runsc ? PLM_TIER_KERNEL : PLM_TIER_CONTAINER;
    ev_seal(ev);
    s->card[1] = *ev;
    s->card[1].tier = PLM_TIER_CONTAINER;
    ev_seal(&s->card[1]);
    atomic_store(&s->proven, true);
    return dock_bg_start(s, err);
}
