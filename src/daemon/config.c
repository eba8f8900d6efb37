/* config.c: reading and checking every variable of wire.md §17 that this daemon honours.
 * Variables for features this build does not have stop startup when set (in config_table.c, with
 * the provider-scoped ones): serving plaintext, or running without a feature
 * the operator asked for, would be a silent downgrade. */
#include "config.h"
#include "config_table.h"
#include "hardened.h"
#include "../server/hostcheck.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

struct var {
    const char *name;
    const char *def;
    const char *help;
};

static const struct var vars[] = {
    {"PLIMSOLL_ADDR", "127.0.0.1:8746", "RPC and health listener (host:port, [v6]:port, :port = all interfaces)"},
    {"PLIMSOLL_METRICS_ADDR", "127.0.0.1:9464", "metrics listener; off disables it"},
    {"PLIMSOLL_TOKEN", "-", "one shared bearer token, at least 32 characters"},
    {"PLIMSOLL_CLIENTS_FILE", "-", "JSON clients file (token SHA-256, scopes); wins over PLIMSOLL_TOKEN"},
    {"PLIMSOLL_INSECURE", "-", "1 allows open dev mode (no token) with a real provider"},
    {"PLIMSOLL_LOG_FORMAT", "json", "json (one object per line) or text (logfmt key=value lines)"},
    {"PLIMSOLL_HARDENED", "0", "1 enforces the production policy (wire.md §17; docs/operations.md): every unmet requirement stops startup"},
    {"PLIMSOLL_TLS_CERT", "-", "PEM certificate (chain): TLS 1.2+ on the RPC and metrics listeners; SIGHUP reloads"},
    {"PLIMSOLL_TLS_KEY", "-", "PEM private key of PLIMSOLL_TLS_CERT; both or neither"},
    {"PLIMSOLL_GRANTS_FILE", "-", "host-API grant profiles (docs/grants.md); a bad file stops startup"},
    {"PLIMSOLL_GUARD_ADDR", "-", "e2b egress-guard listener (host:port); required with E2B_GUARD_URL, e2b only"},
    {"PLIMSOLL_UI", "0", "1 serves the read-only run-card page on GET / and /ui (docs/ui.md)"},
    {"PLIMSOLL_ALLOWED_HOSTS", "-", "extra Host names the listeners answer (name or name:port, comma-separated); without a token only localhost, 127.0.0.1, [::1] and the listener's address; with one, setting it turns the Host check on"},
    {"SANDBOX_PROVIDER", "disabled", "disabled | quickjs (alias wasm) | docker | microvm | e2b"},
    {"SANDBOX_MIN_ISOLATION", "-", "refuse to start when the provider's proven tier is below this"},
    {"SANDBOX_MAX_CONCURRENT", "8", "global run concurrency, 1-1024; also sizes the worker pool"},
    {"SANDBOX_PER_KEY_CONCURRENT", "SANDBOX_MAX_CONCURRENT/2", "runs in flight per caller, 0-1024; 0 = no per-caller cap"},
    {"SANDBOX_RATE_PER_MIN", "30", "runs per minute per caller; 0 disables the rate limit"},
    {"SANDBOX_RATE_BURST", "SANDBOX_RATE_PER_MIN", "token-bucket burst, 0-1000000; 0 = the rate"},
    {"SANDBOX_MEMORY_MB", "0 (provider default: 256)", "memory per run"},
    {"SANDBOX_CPUS", "0 (provider default)", "CPUs per run (docker only)"},
    {"SANDBOX_PIDS", "0 (provider default)", "processes per run (docker only)"},
    {"SANDBOX_DISK_MB", "0 (provider default)", "writable disk per run (docker only)"},
    {"SANDBOX_PAID_SECONDS_PER_DAY", "0 (none)", "e2b (billed by the second): the daemon's paid seconds per UTC day; each caller's own is paid_seconds_per_day in PLIMSOLL_CLIENTS_FILE (docs/decisions.md)"},
    {"SANDBOX_TOTAL_MEMORY_MB", "0 (no budget)", "memory budget across runs in flight: each reserves its per-run memory; a run that does not fit is shed"},
    {"SANDBOX_MAX_SESSIONS", "0 (off)", "open sessions daemon-wide (docs/sessions.md)"},
    {"SANDBOX_MAX_SESSIONS_PER_CALLER", "0 (no cap)", "open sessions per caller"},
    {"SANDBOX_MAX_SESSIONS_PER_OWNER", "0 (no cap)", "open sessions per (caller, owner); least recently used replaced"},
    {"SANDBOX_SESSION_POOL", "0", "docker sessions: containers kept started, at most SANDBOX_MAX_SESSIONS"},
    {"SANDBOX_SESSION_LIFETIME", "30m", "a session's absolute lifetime, 1s to 12h"},
    {"SANDBOX_SESSION_IDLE", "5m", "idle time before a suspend, 0 (never) or 1s to 12h"},
    {"SANDBOX_SESSION_DISK_MB", "1024", "a session's disk budget, 0 (unmeasured) to 1048576"},
    {"SANDBOX_DOCKER_IMAGE", "-", "docker provider"},
    {"SANDBOX_DOCKER_PROJECT_IMAGE", "-", "docker provider"},
    {"SANDBOX_DOCKER_SESSION_IMAGE", "plimsoll/session:latest", "docker provider, sessions on"},
    {"SANDBOX_DOCKER_MODULE_IMAGE", "- (no modules)", "docker provider: module runs (plimsoll/module:latest from make images; docs/modules.md)"},
    {"SANDBOX_DOCKER_RUNTIME", "- (runc)", "docker provider: runsc for gVisor (runsc-<name>: another gVisor registration)"},
    {"SANDBOX_DOCKER_SECCOMP", "-", "docker provider"},
    {"SANDBOX_GUEST_UID", "61000", "docker provider"},
    {"DOCKER_HOST", "- (/var/run/docker.sock)", "docker provider: a local unix socket only (unix:///path or /path)"},
    {"E2B_API_KEY", "-", "e2b provider: the API key (never logged)"},
    {"E2B_TEMPLATE", "base", "e2b provider: the sandbox template"},
    {"E2B_API_URL", "https://api.e2b.app", "e2b provider: control plane (http only to loopback); stated on the card"},
    {"E2B_DOMAIN", "e2b.app", "e2b provider: the data-plane domain"},
    {"E2B_ENVD_URL", "https://49983-{sandbox}.<domain>", "e2b provider: envd URL template; stated on the card"},
    {"E2B_CA_FILE", "- (system CA store)", "e2b provider: a private CA bundle"},
    {"E2B_GUARD_URL", "-", "e2b provider: public https URL of the egress guard (grants)"},
    {"E2B_SESSION_GRANTS", "-", "e2b provider: grants in sessions, session (one guard credential) or call (one per call)"},
    {"SANDBOX_MICROVM_QEMU", "/usr/bin/qemu-system-x86_64", "microvm provider: QEMU binary (Debian qemu-system-x86)"},
    {"SANDBOX_MICROVM_KERNEL", "- (the build's)", "microvm provider: guest kernel (vmlinuz)"},
    {"SANDBOX_MICROVM_INITRD", "- (the build's)", "microvm provider: guest initramfs"},
    {"SANDBOX_MICROVM_ACCEL", "auto", "microvm provider: auto (KVM when a probe guest boots, else TCG) | kvm | tcg"},
    {"SANDBOX_QUICKJS_ZYGOTE_FORKS", "1000", "quickjs provider: forks before a zygote is replaced (1-1000000)"},
    {"SANDBOX_QUICKJS_ZYGOTE_AGE_S", "600", "quickjs provider: a zygote's age limit in seconds (1-86400)"},
    {"SANDBOX_REQUIRE_PINNED_IMAGES", "false", "strict boolean: \"\", 0, false, 1, true"},
};

#define CFG_ERR(err, ...) plm_fail(err, 0, PLM_E_INVALID, __VA_ARGS__)

void config_help(FILE *out)
{
    fprintf(out, "plimsolld: runs untrusted JavaScript behind a proven isolation tier.\n"
                 "It takes no arguments; it is configured by these environment variables:\n\n");
    for (size_t i = 0; i < sizeof vars / sizeof *vars; i++)
        fprintf(out, CFG_HELP_FMT, vars[i].name, vars[i].def, vars[i].help);
    config_table_help(out);
}

void config_warn_unknown(char **env)
{
    for (char **e = env; e && *e; e++) {
        if (strncmp(*e, "PLIMSOLL_", 9) && strncmp(*e, "SANDBOX_", 8))
            continue;
        size_t n = strcspn(*e, "=");
        bool known = config_table_known(*e, n);
        for (size_t i = 0; i < sizeof vars / sizeof *vars && !known; i++)
            known = strlen(vars[i].name) == n && strncmp(vars[i].name, *e, n) == 0;
        if (!known)
            fprintf(stderr, "plimsolld: warning: unknown variable %.*s is ignored\n", (int)(n > 64 ? 64 : n), *e);
    }
}

static int parse_u32(const char *name, const char *v, uint32_t lo, uint32_t hi, uint32_t *out, struct plm_err *err)
{
    char *end;
    errno = 0;
    if (!v || !*v || !isdigit((unsigned char)v[0]))
        return CFG_ERR(err, "%s=\"%s\": expected a whole number from %u to %u", name, v ? v : "", lo, hi);
    unsigned long long x = strtoull(v, &end, 10);
    if (errno || *end || x < lo || x > hi)
        return CFG_ERR(err, "%s=\"%s\": expected a whole number from %u to %u", name, v, lo, hi);
    *out = (uint32_t)x;
    return 0;
}

static const char *nonempty(const char *(*get)(const char *), const char *name)
{
    const char *v = get(name);
    return v && *v ? v : NULL;
}

static int parse_provider(const char *v, struct plm_config *c, struct plm_err *err)
{
    static char lowered[32];
    if (!v) {
        c->provider = CFG_DISABLED;
        c->provider_name = "disabled";
        return 0;
    }
    /* trimmed and lower-cased, as the reference's factory reads it */
    while (isspace((unsigned char)*v))
        v++;
    size_t n = strlen(v);
    while (n && isspace((unsigned char)v[n - 1]))
        n--;
    if (n >= sizeof lowered)
        n = sizeof lowered - 1;
    for (size_t i = 0; i < n; i++)
        lowered[i] = (char)tolower((unsigned char)v[i]);
    lowered[n] = 0;
    c->provider_name = lowered;
    if (!*lowered || !strcmp(lowered, "disabled"))
        c->provider = CFG_DISABLED, c->provider_name = "disabled";
    else if (!strcmp(lowered, "quickjs") || !strcmp(lowered, "wasm"))
        c->provider = CFG_QUICKJS;
    else if (!strcmp(lowered, "docker"))
        c->provider = CFG_DOCKER;
    else if (!strcmp(lowered, "e2b"))
        c->provider = CFG_E2B;
    else if (!strcmp(lowered, "microvm"))
        c->provider = CFG_MICROVM;
    else
        return CFG_ERR(err, "SANDBOX_PROVIDER=\"%s\" is unknown; known providers: disabled, quickjs (alias wasm), "
                            "docker, microvm, e2b", v);
    return 0;
}

static int parse_cpus(const char *v, double *out, struct plm_err *err)
{
    char *end;
    errno = 0;
    double x = strtod(v, &end);
    /* strtod accepts "nan", "inf" and hex floats: only plain decimals are allowed */
    for (const char *p = v; *p; p++)
        if (!isdigit((unsigned char)*p) && *p != '.')
            return CFG_ERR(err, "SANDBOX_CPUS=\"%s\": expected a finite non-negative decimal", v);
    if (errno || *end || end == v || !isfinite(x) || x < 0 || x > 1024)
        return CFG_ERR(err, "SANDBOX_CPUS=\"%s\": expected a finite non-negative decimal", v);
    *out = x;
    return 0;
}

int config_load(const char *(*get)(const char *), struct plm_config *c, struct plm_err *err)
{
    memset(c, 0, sizeof *c);
    const char *v;
    c->addr = nonempty(get, "PLIMSOLL_ADDR") ? get("PLIMSOLL_ADDR") : "127.0.0.1:8746";
    c->metrics_addr = nonempty(get, "PLIMSOLL_METRICS_ADDR") ? get("PLIMSOLL_METRICS_ADDR") : "127.0.0.1:9464";
    c->token = nonempty(get, "PLIMSOLL_TOKEN");
    c->clients_file = nonempty(get, "PLIMSOLL_CLIENTS_FILE");
    c->grants_file = nonempty(get, "PLIMSOLL_GRANTS_FILE");
    if ((v = nonempty(get, "PLIMSOLL_INSECURE"))) {
        if (strcmp(v, "1") && strcmp(v, "0"))
            return CFG_ERR(err, "PLIMSOLL_INSECURE=\"%s\": expected 1 or 0", v);
        c->insecure = strcmp(v, "1") == 0;
    }
    if ((v = nonempty(get, "PLIMSOLL_UI"))) {
        if (strcmp(v, "1") && strcmp(v, "0"))
            return CFG_ERR(err, "PLIMSOLL_UI=\"%s\": expected 1 or 0", v);
        c->ui = strcmp(v, "1") == 0;
    }
    if ((v = nonempty(get, "PLIMSOLL_ALLOWED_HOSTS"))) {
        char why[300];
        if (hostcheck_parse_list(v, why, sizeof why) < 0)
            return CFG_ERR(err, "PLIMSOLL_ALLOWED_HOSTS=\"%s\": %s", v, why);
        c->allowed_hosts = v;
    }
    if ((v = nonempty(get, "PLIMSOLL_LOG_FORMAT"))) {
        if (strcmp(v, "json") && strcmp(v, "text"))
            return CFG_ERR(err, "PLIMSOLL_LOG_FORMAT=\"%s\": expected json or text", v);
        c->log_text = strcmp(v, "text") == 0;
    }
    bool hardened = false;
    if ((v = nonempty(get, "PLIMSOLL_HARDENED"))) {
        if (strcmp(v, "1") && strcmp(v, "0"))
            return CFG_ERR(err, "PLIMSOLL_HARDENED=\"%s\": expected 1 or 0", v);
        hardened = strcmp(v, "1") == 0;
        c->hardened = hardened;
    }
    c->tls_cert = nonempty(get, "PLIMSOLL_TLS_CERT");
    c->tls_key = nonempty(get, "PLIMSOLL_TLS_KEY");
    if (!c->tls_cert != !c->tls_key) /* never half a TLS setup, never plaintext instead */
        return CFG_ERR(err, "%s is set without %s; set both or neither", c->tls_cert ? "PLIMSOLL_TLS_CERT" : "PLIMSOLL_TLS_KEY",
                       c->tls_cert ? "PLIMSOLL_TLS_KEY" : "PLIMSOLL_TLS_CERT");
    if (session_config_load(get, &c->sessions, err) < 0)
        return -1;

    if (parse_provider(nonempty(get, "SANDBOX_PROVIDER"), c, err) < 0)
        return -1;
    if ((v = nonempty(get, "SANDBOX_MIN_ISOLATION"))) {
        c->min_isolation = tier_parse(v);
        if (c->min_isolation == PLM_TIER_UNKNOWN)
            return CFG_ERR(err, "SANDBOX_MIN_ISOLATION=\"%s\": expected none, process, container, kernel or vm", v);
    }

    c->max_concurrent = 8;
    if ((v = nonempty(get, "SANDBOX_MAX_CONCURRENT")) && parse_u32("SANDBOX_MAX_CONCURRENT", v, 1, 1024, &c->max_concurrent, err) < 0)
        return -1;
    c->per_key_concurrent = c->max_concurrent / 2 ? c->max_concurrent / 2 : 1;
    if ((v = nonempty(get, "SANDBOX_PER_KEY_CONCURRENT")) &&
        parse_u32("SANDBOX_PER_KEY_CONCURRENT", v, 0, 1024, &c->per_key_concurrent, err) < 0)
        return -1;
    /* 0 is the reference's "no per-caller cap": one caller may hold every slot, which a cap equal
     * to the global one states exactly (admission keeps its invariant of a cap >= 1). */
    if (c->per_key_concurrent == 0)
        c->per_key_concurrent = c->max_concurrent;
    c->rate_per_min = 30;
    if ((v = nonempty(get, "SANDBOX_RATE_PER_MIN")) && parse_u32("SANDBOX_RATE_PER_MIN", v, 0, 1000000, &c->rate_per_min, err) < 0)
        return -1;
    c->rate_burst = 0;
    if ((v = nonempty(get, "SANDBOX_RATE_BURST")) && parse_u32("SANDBOX_RATE_BURST", v, 0, 1000000, &c->rate_burst, err) < 0)
        return -1;
    if (c->rate_burst == 0) /* unset or 0: the reference's burst of one minute's rate */
        c->rate_burst = c->rate_per_min;

    if ((v = nonempty(get, "SANDBOX_MEMORY_MB"))) {
        if (parse_u32("SANDBOX_MEMORY_MB", v, 0, 1048576, &c->memory_mb, err) < 0)
            return -1;
        c->memory_set = c->memory_mb > 0;
    }
    if ((v = nonempty(get, "SANDBOX_TOTAL_MEMORY_MB")) && /* checked against a run's memory in main.c */
        parse_u32("SANDBOX_TOTAL_MEMORY_MB", v, 0, 1u << 30, &c->total_memory_mb, err) < 0)
        return -1;
    if ((v = nonempty(get, "SANDBOX_PAID_SECONDS_PER_DAY")) &&
        parse_u32("SANDBOX_PAID_SECONDS_PER_DAY", v, 0, 86400000u, &c->paid_seconds_per_day, err) < 0)
        return -1;
    /* An allowance that applies to nothing must not look applied (only e2b bills by the second). */
    if (c->paid_seconds_per_day > 0 && c->provider != CFG_E2B)
        return CFG_ERR(err, "SANDBOX_PAID_SECONDS_PER_DAY applies only to a provider billed by the second (e2b); "
                            "SANDBOX_PROVIDER=%s bills nothing: unset it", c->provider_name ? c->provider_name : "disabled");
    /* A metered session must suspend to stop billing (sessions.md §3.1). */
    if (c->provider == CFG_E2B && c->sessions.max_sessions > 0 && c->sessions.idle_ms == 0)
        return CFG_ERR(err, "SANDBOX_SESSION_IDLE=0 on e2b, which bills every second a session runs: a session "
                            "that never suspends would bill until its lifetime ends; set an idle time");
    if ((v = nonempty(get, "SANDBOX_PIDS"))) {
        if (parse_u32("SANDBOX_PIDS", v, 0, 4194304, &c->pids, err) < 0)
            return -1;
        c->pids_set = true;
    }
    if ((v = nonempty(get, "SANDBOX_DISK_MB"))) {
        if (parse_u32("SANDBOX_DISK_MB", v, 0, 1048576, &c->disk_mb, err) < 0)
            return -1;
        c->disk_set = true;
    }
    if ((v = nonempty(get, "SANDBOX_CPUS"))) {
        if (parse_cpus(v, &c->cpus, err) < 0)
            return -1;
        c->cpus_set = true;
    }
    if ((v = get("SANDBOX_REQUIRE_PINNED_IMAGES"))) {
        if (*v && strcasecmp(v, "0") && strcasecmp(v, "false") && strcasecmp(v, "1") && strcasecmp(v, "true"))
            return CFG_ERR(err, "SANDBOX_REQUIRE_PINNED_IMAGES=\"%s\": expected \"\", 0, false, 1 or true", v);
        c->require_pinned = !strcasecmp(v, "1") || !strcasecmp(v, "true");
    }
    c->guard_addr = nonempty(get, "PLIMSOLL_GUARD_ADDR");
    if (c->guard_addr && c->provider != CFG_E2B)
        return CFG_ERR(err, "PLIMSOLL_GUARD_ADDR is set, but only the e2b provider has an egress guard");
    if ((v = nonempty(get, "SANDBOX_MICROVM_ACCEL"))) {
        if (!strcasecmp(v, "auto"))
            c->microvm_accel = CFG_ACCEL_AUTO;
        else if (!strcasecmp(v, "kvm"))
            c->microvm_accel = CFG_ACCEL_KVM;
        else if (!strcasecmp(v, "tcg"))
            c->microvm_accel = CFG_ACCEL_TCG;
        else
            return CFG_ERR(err, "SANDBOX_MICROVM_ACCEL=\"%s\": expected auto, kvm or tcg", v);
    }
    /* A VM has whole vCPUs and no process-count limit the host could prove. */
    if (c->provider == CFG_MICROVM && c->pids_set)
        return CFG_ERR(err, "SANDBOX_PIDS is set, but the microvm provider cannot enforce it; unset it");
    if (c->provider == CFG_MICROVM && c->cpus_set && (c->cpus != (double)(uint32_t)c->cpus || c->cpus > 8))
        return CFG_ERR(err, "SANDBOX_CPUS=%g: the microvm provider needs a whole number of vCPUs (0..8)", c->cpus);
    if (c->provider == CFG_QUICKJS && (c->cpus_set || c->pids_set || c->disk_set))
        return CFG_ERR(err, "%s is set, but the quickjs provider cannot enforce it; unset it",
                       c->cpus_set ? "SANDBOX_CPUS" : c->pids_set ? "SANDBOX_PIDS" : "SANDBOX_DISK_MB");
    if (config_table_check(get, c, err) < 0) /* reference variables this build or provider does not read */
        return -1;
    /* Last: the policy looks at the whole, validated configuration. */
    if (hardened && hardened_check(get, c, err) < 0)
        return -1;
    return 0;
}
