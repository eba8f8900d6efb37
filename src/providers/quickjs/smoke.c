/* smoke.c: the quickjs provider's startup proof, the evidence card (DESIGN.md, issue 4 §5).
 * Owns: the card's content: checks run in real workers, and the confinement lines printed
 *   from the same data the worker applies (seccomp_table.c, confine.h).
 * Trusts: only outcomes observed from the monitor side (results, wait statuses, /proc).
 * Invariant: the card claims tier `process` only when every check passed; any probe that
 *   returned instead of failing or killing the worker fails the proof, and startup stops. */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/time.h>
#include <unistd.h>

#include "../../core/limits.h"
#include "confine.h"
#include "probe.h"
#include "qjs_int.h"
#include "../../confine/steps.h"
#include "seccomp_table.h"

/* The engine's version, from meson.build (the one scripts/fetch-quickjs-ng.sh pins). */
#ifndef QJS_ENGINE_VERSION
#error "QJS_ENGINE_VERSION must come from meson.build"
#endif

static bool bytes_eq(const struct plm_bytes *b, const char *s)
{
    size_t n = strlen(s);
    return b->len == n && (n == 0 || memcmp(b->data, s, n) == 0);
}

static bool bytes_has(const struct plm_bytes *b, const char *s)
{
    size_t n = strlen(s);
    if (b->len < n)
        return false;
    for (size_t i = 0; i + n <= b->len; i++)
        if (memcmp(b->data + i, s, n) == 0)
            return true;
    return false;
}

/* One snippet with an expectation; records what was seen. */
static void check_snippet(struct qjs_pool *p, struct plm_evidence *ev, const char *name, const char *expected,
                          const char *code, uint32_t timeout_ms,
                          bool (*ok)(const struct plm_js_result *r))
{
    struct plm_js_result r;
    struct plm_err err = {0};
    int64_t ms = 0;
    if (mon_run_js(p, code, strlen(code), NULL, NULL, timeout_ms, &r, &ms, &err) < 0) {
        ev_add_check(ev, name, expected, false, "error: %.120s", err.msg);
        return;
    }
    ev_add_check(ev, name, expected, ok(&r), "exit %d%s, %zu/%zu bytes out/err, %lld ms", r.exit_code,
                 r.timed_out ? " (timed out)" : "", r.out.len, r.err.len, (long long)ms);
    plm_bytes_done(&r.out);
    plm_bytes_done(&r.err);
}

static bool ok_known(const struct plm_js_result *r)
{
    return r->exit_code == 0 && !r->timed_out && bytes_eq(&r->out, "plimsoll-smoke 42\n") &&
           bytes_eq(&r->err, "to-stderr\n");
}
static bool ok_no_host(const struct plm_js_result *r)
{
    return r->exit_code == 0 && bytes_eq(&r->out, "undefined undefined undefined undefined\n");
}
static bool ok_timeout(const struct plm_js_result *r)
{
    return r->timed_out && r->exit_code == 124;
}
static bool ok_oom(const struct plm_js_result *r)
{
    return r->exit_code != 0 && !r->timed_out && bytes_has(&r->err, "out of memory");
}

struct probe_case {
    uint32_t id;
    const char *name;
    const char *what;
};

static const struct probe_case kill_probes[] = {
    {WK_PROBE_OPEN_FILE, "probe.open_file", "openat(/etc/hostname)"},
    {WK_PROBE_SOCKET, "probe.socket", "socket(AF_INET)"},
    {WK_PROBE_FORK, "probe.fork", "clone(SIGCHLD)"},
    {WK_PROBE_PTRACE, "probe.ptrace", "ptrace(TRACEME)"},
    {WK_PROBE_MMAP_EXEC, "probe.mmap_exec", "mmap(PROT_EXEC)"},
    {WK_PROBE_MPROTECT_EXEC, "probe.mprotect_exec", "mprotect(PROT_EXEC)"},
    {WK_PROBE_WRITE_STDERR, "probe.write_other_fd", "write(2)"},
    {WK_PROBE_EXECVE, "probe.execve", "execve(/bin/true)"},
    {WK_PROBE_KILL, "probe.kill", "kill(1, 0)"},
#if defined(__x86_64__)
    {WK_PROBE_X32, "probe.x32_abi", "getpid via the x32 ABI"},
#endif
};

static void outcome_text(const struct mon_probe_outcome *o, char *buf, size_t len)
{
    if (o->killed)
        snprintf(buf, len, "killed by %s", o->signal == SIGSYS ? "SIGSYS" : strsignal(o->signal));
    else if (o->returned)
        snprintf(buf, len, "returned %lld (%s)", (long long)o->ret, o->err ? strerror(o->err) : "no error");
    else
        snprintf(buf, len, "worker exited %d without answering", o->exit_status);
}

static void check_probes(struct qjs_pool *p, struct plm_evidence *ev, const struct qjs_proof_cfg *cfg, unsigned ns)
{
    char obs[160];
    struct mon_probe_outcome o;
    struct plm_err err = {0};

    /* Control: a worker that is READY, seen from outside, then answers a no-op probe. */
    if (mon_probe(p, WK_PROBE_NONE, &o, &err) < 0) {
        ev_add_check(ev, "worker.start", "a worker says READY", false, "%.150s", err.msg);
        return;
    }
    ev_add_check(ev, "worker.control_probe", "answers 0", o.returned && o.ret == 0, "%s",
                 (outcome_text(&o, obs, sizeof obs), obs));
    ev_add_check(ev, "worker.seccomp", "Seccomp: 2 (filter)", o.seccomp_mode == 2, "Seccomp: %d", o.seccomp_mode);
    ev_add_check(ev, "worker.no_new_privs", "NoNewPrivs: 1", o.no_new_privs == 1, "NoNewPrivs: %d", o.no_new_privs);
    ev_add_check(ev, "worker.fds", "1 descriptor (its socket)", o.n_fds == 1, "%d descriptors", o.n_fds);
    const struct mon_creds *c = &o.creds;
    if (ns & WK_NS_UNPRIV_ID) {
        char want[96];
        snprintf(want, sizeof want, "uid and gid %u (real, effective, saved, fs), no supplementary groups", WK_UNPRIV_ID);
        ev_add_check(ev, "worker.uid", want, mon_creds_unprivileged(c, WK_UNPRIV_ID), "uid %ld/%ld/%ld/%ld gid %ld/%ld/%ld/%ld, %d groups",
                     c->uid[0], c->uid[1], c->uid[2], c->uid[3], c->gid[0], c->gid[1], c->gid[2], c->gid[3], c->n_groups);
    } else if (geteuid() == 0) {
        ev_add_check(ev, "worker.uid", "not root", false, "the zygote did not report dropping root");
    }
    ev_add_check(ev, "worker.capabilities", "none (CapEff, CapPrm, CapInh, CapAmb all 0)", mon_creds_no_caps(c),
                 "CapEff %llx CapPrm %llx CapInh %llx CapAmb %llx CapBnd %llx", (unsigned long long)c->cap_eff,
                 (unsigned long long)c->cap_prm, (unsigned long long)c->cap_inh, (unsigned long long)c->cap_amb,
                 (unsigned long long)c->cap_bnd);
    if (ns & WK_NS_NET)
        ev_add_check(ev, "worker.netns", "not the daemon's", o.own_netns, "%s", o.own_netns ? "separate" : "shared");
    if (ns & WK_NS_IPC)
        ev_add_check(ev, "worker.ipcns", "not the daemon's", o.own_ipcns, "%s", o.own_ipcns ? "separate" : "shared");
    if (ns & WK_NS_MNT)
        ev_add_check(ev, "worker.mntns", "not the daemon's", o.own_mntns, "%s", o.own_mntns ? "separate" : "shared");

    for (size_t i = 0; i < sizeof kill_probes / sizeof kill_probes[0]; i++) {
        const struct probe_case *c = &kill_probes[i];
        char expected[128];
        snprintf(expected, sizeof expected, "%s kills the worker (SIGSYS)", c->what);
        if (mon_probe(p, c->id, &o, &err) < 0) {
            ev_add_check(ev, c->name, expected, false, "%.150s", err.msg);
            continue;
        }
        outcome_text(&o, obs, sizeof obs);
        ev_add_check(ev, c->name, expected, o.killed && o.signal == SIGSYS, "%s", obs);
    }

    /* Address space: RLIMIT_AS must refuse mappings a little past cap + headroom. */
    uint32_t limit = cfg->memory_mb + WK_AS_HEADROOM_MB;
    char expected[128];
    snprintf(expected, sizeof expected, "mmap refused (ENOMEM) before %u MiB", limit);
    if (mon_probe(p, WK_PROBE_MEMORY, &o, &err) < 0) {
        ev_add_check(ev, "probe.exceed_memory", expected, false, "%.150s", err.msg);
    } else {
        bool ok = o.returned && o.err == ENOMEM && o.ret >= 0 && o.ret < (int64_t)limit;
        if (o.returned)
            snprintf(obs, sizeof obs, "refused after %lld MiB (%s)", (long long)o.ret,
                     o.err ? strerror(o.err) : "never refused");
        else
            outcome_text(&o, obs, sizeof obs);
        ev_add_check(ev, "probe.exceed_memory", expected, ok, "%s", obs);
    }
}

static void confinement_lines(struct plm_evidence *ev, const struct qjs_proof_cfg *cfg, unsigned ns)
{
    ev_add_confinement(ev, "worker: own process forked by an exec'd zygote, one snippet, then SIGKILL+reap");
    ev_add_confinement(ev, "zygote: replaced after %u workers or %u s, whichever comes first", cfg->zygote_forks,
                       cfg->zygote_age_s);
    ev_add_confinement(ev, "fds: only its socket to the daemon; environment empty; TZ=UTC0");
    ev_add_confinement(ev, "rlimits: AS %u MiB, CPU %u s, FSIZE/CORE/NPROC/MEMLOCK/MSGQUEUE/NOFILE 0",
                       cfg->memory_mb + WK_AS_HEADROOM_MB, cfg->cpu_seconds);
    ev_add_confinement(ev, "no_new_privs; parent-death SIGKILL");
    /* The order the walls go up in, read off the one step table the worker runs (confine/steps.h). */
    ev_add_confinement(ev, "walls, in order: %s, %s, %s, %s, %s (the zygote's), %s, %s", cf_step_name[CF_STEP_PARENT_DEATH],
                       cf_step_name[CF_STEP_CLOSE_RANGE], cf_step_name[CF_STEP_CLEARENV], cf_step_name[CF_STEP_RLIMITS],
                       cf_step_name[CF_STEP_IDS_CAPS], cf_step_name[CF_STEP_NO_NEW_PRIVS], cf_step_name[CF_STEP_FILTER]);
    if (ns & WK_NS_UNPRIV_ID)
        ev_add_confinement(ev, "credentials: uid/gid %u, no supplementary groups, no capabilities (zygote and workers)",
                           WK_UNPRIV_ID);
    else
        ev_add_confinement(ev, "credentials: the daemon's own non-root uid, no capabilities");
    ev_add_confinement(ev, "seccomp: default KILL_PROCESS, foreign arch kills, %zu allowed syscalls", wk_allow_len);
    char cond[32];
    for (size_t i = 0; i < wk_allow_len; i++)
        ev_add_confinement(ev, "seccomp allow %s (%s)", wk_allow[i].name,
                           cf_arg_cond(wk_allow[i].arg, WK_SOCK_FD, cond, sizeof cond));
    if (ns & ~WK_NS_UNPRIV_ID)
        ev_add_confinement(ev, "namespaces:%s%s%s%s%s", ns & WK_NS_USER ? " user" : "", ns & WK_NS_NET ? " net(empty)" : "",
                           ns & WK_NS_IPC ? " ipc" : "", ns & WK_NS_MNT ? " mnt" : "",
                           ns & WK_NS_EMPTY_ROOT ? " (empty read-only root)" : "");
    else
        ev_add_confinement(ev, "namespaces: none (the host allows neither root nor user namespaces)");
    ev_add_confinement(ev, "engine: memory cap %u MiB, JS stack %u KiB, no quickjs-libc (no std/os)",
                       cfg->memory_mb, WK_JS_STACK_BYTES / 1024);
    ev_add_confinement(ev, "limits: timeout %u ms default, %u ms ceiling; output %u KiB per stream; code %u KiB",
                       cfg->default_timeout_ms, cfg->max_timeout_ms, LIM_OUTPUT_MAX / 1024, LIM_CODE_MAX / 1024);
}

int qjs_prove(struct qjs_pool *p, const struct qjs_proof_cfg *cfg, struct plm_evidence *ev, struct plm_err *err)
{
    memset(ev, 0, sizeof *ev);
    snprintf(ev->provider, sizeof ev->provider, "quickjs");
    snprintf(ev->runtime, sizeof ev->runtime, "quickjs-ng");
    snprintf(ev->runtime_version, sizeof ev->runtime_version, "%s %s", QJS_ENGINE_VERSION, cfg->identity);
    ev_kernel_release(ev->kernel_release, sizeof ev->kernel_release);
    struct timeval tv;
    gettimeofday(&tv, NULL);
    ev->checked_unix_ms = (int64_t)tv.tv_sec * 1000 + tv.tv_usec / 1000;
    unsigned ns = qjs_pool_ns(p);

    check_snippet(p, ev, "snippet.known_value", "exit 0, stdout 'plimsoll-smoke 42', stderr 'to-stderr'",
                  "console.log('plimsoll-smoke', 6 * 7); console.error('to-stderr')", 5000, ok_known);
    check_snippet(p, ev, "snippet.no_host_api", "fetch, require, std, os are undefined",
                  "console.log(typeof fetch, typeof require, typeof std, typeof os)", 5000, ok_no_host);
    check_snippet(p, ev, "snippet.deadline", "while(true){} at 300 ms: timed out, exit 124", "while (true) {}", 300,
                  ok_timeout);
    check_snippet(p, ev, "snippet.memory_cap", "allocating past the cap: non-zero exit, 'out of memory'",
                  "const a = []; for (;;) a.push(new Uint8Array(1 << 20).fill(1));", 20000, ok_oom);
    check_probes(p, ev, cfg, ns);
    confinement_lines(ev, cfg, ns);

    bool passed = ev_all_passed(ev);
    ev->tier = passed ? PLM_TIER_PROCESS : PLM_TIER_UNKNOWN;
    ev_seal(ev);
    if (!passed) {
        for (size_t i = 0; i < ev->n_checks; i++)
            if (!ev->checks[i].passed)
                return plm_fail(err, 0, PLM_E_INTERNAL,
                                   "quickjs startup proof failed: %s: expected %s, observed %s",
                                   ev->checks[i].name, ev->checks[i].expected, ev->checks[i].observed);
        return plm_fail(err, 0, PLM_E_INTERNAL, "quickjs startup proof recorded no checks");
    }
    return 0;
}
