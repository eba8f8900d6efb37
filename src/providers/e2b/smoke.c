/* smoke.c: the e2b startup proof (providers.md §6 SmokeTest, 90 s): a reconcile of orphans left
 * by an earlier daemon of this instance label, then one real VM: created with the run's network
 * policy, its resources read back, a probe through the project-step path that must report node's
 * version and the project directory, and two negative probes (https://1.1.1.1 and
 * https://example.com must be unreachable). The outcomes, the template, the endpoints and the
 * VM's reported kernel and envd versions go on the evidence card; tier vm is claimed only when
 * every check passed. A failure stops startup.
 * What this cannot prove: that the guest is a Firecracker VM. That is E2B's claim; the card says
 * so (docs/e2b.md). */
#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

static const char probe_js[] =
    "const os = require('os');\n"
    "async function reach(u) {\n"
    "  try { await fetch(u, {signal: AbortSignal.timeout(4000)}); return 'reached'; }\n"
    "  catch (e) { return 'blocked: ' + String((e.cause && (e.cause.code || e.cause.message)) || e.name)"
    ".slice(0, 60); }\n"
    "}\n"
    "(async () => {\n"
    "  const r = {node: process.version, cwd: process.cwd(), kernel: os.release()};\n"
    "  try { r.python = require('child_process').execFileSync('python3', ['-I', '-c',\n"
    "    'import sys; print(\"%d.%d.%d\" % sys.version_info[:3])'], {timeout: 10000, encoding: 'utf8'}).trim(); }\n"
    "  catch (e) { r.python = ''; }\n"
    "  r.one = await reach('https://1.1.1.1');\n"
    "  r.example = await reach('https://example.com');\n"
    "  console.log(JSON.stringify(r));\n"
    "})();\n";

#define PROBE_FILE ".plimsoll-probe.cjs"

static void printable(char *s)
{
    for (; *s; s++)
        if (*s < 0x20 || *s > 0x7e)
            *s = '?';
}

static void str_field(json_t *o, const char *k, char *dst, size_t cap)
{
    json_t *v = json_object_get(o, k);
    snprintf(dst, cap, "%s", json_is_string(v) ? json_string_value(v) : "");
    printable(dst);
}

static int run_probe(struct e2b_state *s, struct plm_evidence *ev, char *why, size_t wcap)
{
    int64_t deadline = e2b_mono_ms() + E2B_SMOKE_MS - 5000;
    struct plm_err err = {0};
    struct e2b_sandbox sb;
    if (e2b_create(s, E2B_SMOKE_MS, NULL, &sb, &err) < 0) {
        ev_add_check(ev, "vm.create", "a sandbox, secure, deny-all network", false, "%s", err.msg);
        snprintf(why, wcap, "%.200s", err.msg);
        return -1;
    }
    snprintf(s->envd_version, sizeof s->envd_version, "%s", sb.envd_version[0] ? sb.envd_version : "unreported");
    ev_add_check(ev, "vm.create", "a sandbox, secure, deny-all network", true, "sandbox created (envd %s)",
                 s->envd_version);
    char observed[160] = "";
    int rc = e2b_check_resources(s, &sb, observed, sizeof observed, &err);
    ev_add_check(ev, "vm.resources", "read back, within the configured caps", rc == 0, "%s%s%s", observed,
                 rc ? ": " : "", rc ? err.msg : "");
    char path[128];
    snprintf(path, sizeof path, "%s/%s", E2B_PROJECT_DIR, PROBE_FILE);
    struct e2b_upload up[2] = {{path, probe_js, strlen(probe_js)}, {E2B_STEP_PATH, "node " PROBE_FILE "\n", 0}};
    up[1].len = strlen(up[1].data);
    struct e2b_proc_result pr = {0};
    if (rc == 0 && (rc = e2b_write_files(s, &sb, up, 2, deadline, &err)) == 0) {
        const char *args[] = {E2B_STEP_PATH};
        rc = e2b_process(s, &sb, "sh", args, 1, E2B_PROJECT_DIR, NULL, 0, deadline, &pr, &err);
    }
    int del = e2b_delete(s, sb.id);
    ev_add_check(ev, "vm.delete", "the sandbox is deleted", del == 0, "%s", del == 0 ? "deleted" : "delete failed");
    if (rc < 0) {
        ev_add_check(ev, "probe.run", "the probe step runs", false, "%s", err.msg);
        snprintf(why, wcap, "%.200s", err.msg);
        return -1;
    }
    char text[1024] = "";
    snprintf(text, sizeof text, "%.*s", (int)(pr.out.len < 1023 ? pr.out.len : 1023), pr.out.data ? (char *)pr.out.data : "");
    plm_bytes_done(&pr.out);
    plm_bytes_done(&pr.err);
    json_error_t je;
    json_t *j = json_loads(text, 0, &je);
    char node[64], cwd[256], one[96], example[96], python[32];
    str_field(j, "node", node, sizeof node);
    str_field(j, "cwd", cwd, sizeof cwd);
    str_field(j, "kernel", s->kernel, sizeof s->kernel);
    str_field(j, "one", one, sizeof one);
    str_field(j, "example", example, sizeof example);
    str_field(j, "python", python, sizeof python);
    json_decref(j);
    ev_add_check(ev, "probe.exit", "exit 0", pr.exit_code == 0 && !pr.timed_out, "exit %d%s", pr.exit_code,
                 pr.timed_out ? " (timed out)" : "");
    ev_add_check(ev, "probe.node", "a node version", node[0] == 'v', "%s", node[0] ? node : "none reported");
    /* What sessions assume of the template: node (checked above) and, for python cells, python3
     * on PATH. Its absence is a fact, not a failure: python cells are then refused. */
    bool py = python[0] >= '0' && python[0] <= '9';
    snprintf(s->python_version, sizeof s->python_version, "%s", py ? python : "");
    atomic_store(&s->python3, py);
    ev_add_confinement(ev, "template python3: %s", py ? python : "absent (session python cells are refused)");
    ev_add_check(ev, "probe.cwd", E2B_PROJECT_DIR, !strcmp(cwd, E2B_PROJECT_DIR), "%s", cwd[0] ? cwd : "none");
    ev_add_check(ev, "net.https_1.1.1.1", "unreachable", !strncmp(one, "blocked", 7), "%s", one[0] ? one : "no answer");
    ev_add_check(ev, "net.https_example.com", "unreachable", !strncmp(example, "blocked", 7), "%s",
                 example[0] ? example : "no answer");
    snprintf(ev->kernel_release, sizeof ev->kernel_release, "%.100s (guest, as reported)", s->kernel[0] ? s->kernel : "?");
    if (!ev_all_passed(ev)) {
        snprintf(why, wcap, "a check of the startup proof failed (see the card)");
        return -1;
    }
    return 0;
}

int e2b_smoke(struct e2b_state *s, struct plm_err *err)
{
    if (!s->api_key[0])
        return plm_fail(err, 0, PLM_E_INVALID, "e2b: E2B_API_KEY is not set");
    struct plm_err rerr = {0};
    int killed = e2b_reconcile_once(s, E2B_ORPHAN_AGE_S, &rerr);
    if (killed < 0)
        return plm_fail(err, 0, PLM_E_UNAVAILABLE, "e2b startup proof: %s", rerr.msg);
    struct plm_evidence *ev = &s->card;
    memset(ev, 0, sizeof *ev);
    snprintf(ev->provider, sizeof ev->provider, "e2b");
    ev->tier = PLM_TIER_VM;
    snprintf(ev->runtime, sizeof ev->runtime, "e2b firecracker microVM");
    ev->checked_unix_ms = clock_unix_ms();
    ev_add_confinement(ev, "template: %s", s->template_id);
    ev_add_confinement(ev, "control plane: %.100s%s", s->api_base, s->endpoints_default ? "" : " (NOT E2B's default)");
    ev_add_confinement(ev, "envd: %.100s%s", s->envd_tmpl, s->endpoints_default ? "" : " (NOT E2B's default)");
    ev_add_confinement(ev, "network: secure, denyOut 0.0.0.0/0, no public traffic%s",
                       s->guard ? ", a granted run allows only the guard host" : "");
    if (s->guard)
        ev_add_confinement(ev, "egress guard: %.90s", s->guard_url);
    if (s->memory_mb || s->cpus || s->disk_mb)
        ev_add_confinement(ev, "caps read back after create: memory %u MB, cpus %u, disk %u MB (0 = none)",
                           s->memory_mb, s->cpus, s->disk_mb);
    ev_add_confinement(ev, "hypervisor: E2B's claim (Firecracker); checked here only by behaviour");
    char why[256] = "";
    int rc = run_probe(s, ev, why, sizeof why);
    snprintf(ev->runtime_version, sizeof ev->runtime_version, "envd %s", s->envd_version[0] ? s->envd_version : "?");
    ev_add_check(ev, "reconcile.start", "orphans of this instance label deleted", true, "%d deleted", killed);
    ev_seal(ev);
    if (rc < 0)
        return plm_fail(err, 0, PLM_E_UNAVAILABLE, "e2b startup proof: %s", why);
    atomic_store(&s->proven, true);
    return e2b_reconciler_start(s, err);
}
