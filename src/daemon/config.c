/* config.c: reading and checking every variable of wire.md §17 that this daemon honours.
 * Variables for features this build does not have stop startup when set (in config_table.c, with
 * the provider-scoped ones): serving plaintext, or running without a feature
 * the operator asked for, would be a silent downgrade.
 * One table (vars) drives both the reading and `plimsolld -h`: each row names a variable, its
 * default and help, and how it is read; config_load runs named stages over it (defaults, the
 * session variables, the table, what derives from other values, the combinations). */
#include "config.h"
#include "config_table.h"
#include "hardened.h"
#include "../server/hostcheck.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <stddef.h>
#include <strings.h>

#define CFG_ERR(err, ...) plm_fail(err, 0, PLM_E_INVALID, __VA_ARGS__)

/* How a row is read. */
enum var_kind {
    V_ELSEWHERE, /* read by session_config.c, a provider or config_table.c: listed for -h here */
    V_STR,       /* kept as written */
    V_FLAG,      /* 1 or 0 */
    V_U32,       /* a whole number from lo to hi */
    V_FN         /* its own parser */
};

typedef int var_parse_fn(const char *v, struct plm_config *c, struct plm_err *err);

struct var {
    const char *name;
    const char *def;
    const char *help;
    enum var_kind kind;
    size_t off;      /* V_STR, V_FLAG, V_U32: the field of struct plm_config */
    uint32_t lo, hi; /* V_U32 */
    size_t set_off;  /* V_U32: a bool field made true once the variable is set (0: none) */
    var_parse_fn *parse;
};

#define ELSEWHERE V_ELSEWHERE, 0, 0, 0, 0, NULL
#define STR(f) V_STR, offsetof(struct plm_config, f), 0, 0, 0, NULL
#define FLAG(f) V_FLAG, offsetof(struct plm_config, f), 0, 0, 0, NULL
#define U32(f, lo, hi) V_U32, offsetof(struct plm_config, f), lo, hi, 0, NULL
#define U32_SET(f, lo, hi, s) V_U32, offsetof(struct plm_config, f), lo, hi, offsetof(struct plm_config, s), NULL
#define FN(fn) V_FN, 0, 0, 0, 0, fn

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

static int parse_provider(const char *v, struct plm_config *c, struct plm_err *err)
{
    static char lowered[32];
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

static int parse_cpus(const char *v, struct plm_config *c, struct plm_err *err)
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
    c->cpus = x;
    c->cpus_set = true;
    return 0;
}

static int parse_log_format(const char *v, struct plm_config *c, struct plm_err *err)
{
    if (strcmp(v, "json") && strcmp(v, "text"))
        return CFG_ERR(err, "PLIMSOLL_LOG_FORMAT=\"%s\": expected json or text", v);
    c->log_text = strcmp(v, "text") == 0;
    return 0;
}

static int parse_allowed_hosts(const char *v, struct plm_config *c, struct plm_err *err)
{
    char why[300];
    if (hostcheck_parse_list(v, why, sizeof why) < 0)
        return CFG_ERR(err, "PLIMSOLL_ALLOWED_HOSTS=\"%s\": %s", v, why);
    c->allowed_hosts = v;
    return 0;
}

static int parse_min_isolation(const char *v, struct plm_config *c, struct plm_err *err)
{
    c->min_isolation = tier_parse(v);
    if (c->min_isolation == PLM_TIER_UNKNOWN)
        return CFG_ERR(err, "SANDBOX_MIN_ISOLATION=\"%s\": expected none, process, container, kernel or vm", v);
    return 0;
}

static int parse_memory(const char *v, struct plm_config *c, struct plm_err *err)
{
    if (parse_u32("SANDBOX_MEMORY_MB", v, 0, 1048576, &c->memory_mb, err) < 0)
        return -1;
    c->memory_set = c->memory_mb > 0;
    return 0;
}

static int parse_accel(const char *v, struct plm_config *c, struct plm_err *err)
{
    if (!strcasecmp(v, "auto"))
        c->microvm_accel = CFG_ACCEL_AUTO;
    else if (!strcasecmp(v, "kvm"))
        c->microvm_accel = CFG_ACCEL_KVM;
    else if (!strcasecmp(v, "tcg"))
        c->microvm_accel = CFG_ACCEL_TCG;
    else
        return CFG_ERR(err, "SANDBOX_MICROVM_ACCEL=\"%s\": expected auto, kvm or tcg", v);
    return 0;
}

static int parse_pinned(const char *v, struct plm_config *c, struct plm_err *err)
{
    if (strcasecmp(v, "0") && strcasecmp(v, "false") && strcasecmp(v, "1") && strcasecmp(v, "true"))
        return CFG_ERR(err, "SANDBOX_REQUIRE_PINNED_IMAGES=\"%s\": expected \"\", 0, false, 1 or true", v);
    c->require_pinned = !strcasecmp(v, "1") || !strcasecmp(v, "true");
    return 0;
}

static const struct var vars[] = {
    {"PLIMSOLL_ADDR", "127.0.0.1:8746", "RPC and health listener (host:port, [v6]:port, :port = all interfaces)", STR(addr)},
    {"PLIMSOLL_METRICS_ADDR", "127.0.0.1:9464", "metrics listener; off disables it", STR(metrics_addr)},
    {"PLIMSOLL_TOKEN", "-", "one shared bearer token, at least 32 characters", STR(token)},
    {"PLIMSOLL_CLIENTS_FILE", "-", "JSON clients file (token SHA-256, scopes); wins over PLIMSOLL_TOKEN", STR(clients_file)},
    {"PLIMSOLL_INSECURE", "-", "1 allows open dev mode (no token) with a real provider", FLAG(insecure)},
    {"PLIMSOLL_LOG_FORMAT", "json", "json (one object per line) or text (logfmt key=value lines)", FN(parse_log_format)},
    {"PLIMSOLL_HARDENED", "0", "1 enforces the production policy (wire.md §17; docs/operations.md): every unmet requirement stops startup", FLAG(hardened)},
    {"PLIMSOLL_TLS_CERT", "-", "PEM certificate (chain): TLS 1.2+ on the RPC and metrics listeners; SIGHUP reloads", STR(tls_cert)},
    {"PLIMSOLL_TLS_KEY", "-", "PEM private key of PLIMSOLL_TLS_CERT; both or neither", STR(tls_key)},
    {"PLIMSOLL_GRANTS_FILE", "-", "host-API grant profiles (docs/grants.md); a bad file stops startup", STR(grants_file)},
    {"PLIMSOLL_GUARD_ADDR", "-", "e2b egress-guard listener (host:port); required with E2B_GUARD_URL, e2b only", STR(guard_addr)},
    {"PLIMSOLL_UI", "0", "1 serves the read-only run-card page on GET / and /ui (docs/ui.md)", FLAG(ui)},
    {"PLIMSOLL_ALLOWED_HOSTS", "-", "extra Host names the listeners answer (name or name:port, comma-separated); without a token only localhost, 127.0.0.1, [::1] and the listener's address; with one, setting it turns the Host check on", FN(parse_allowed_hosts)},
    {"SANDBOX_PROVIDER", "disabled", "disabled | quickjs (alias wasm) | docker | microvm | e2b", FN(parse_provider)},
    {"SANDBOX_MIN_ISOLATION", "-", "refuse to start when the provider's proven tier is below this", FN(parse_min_isolation)},
    {"SANDBOX_MAX_CONCURRENT", "8", "global run concurrency, 1-1024; also sizes the worker pool", U32(max_concurrent, 1, 1024)},
    {"SANDBOX_PER_KEY_CONCURRENT", "SANDBOX_MAX_CONCURRENT/2", "runs in flight per caller, 0-1024; 0 = no per-caller cap", U32(per_key_concurrent, 0, 1024)},
    {"SANDBOX_RATE_PER_MIN", "30", "runs per minute per caller; 0 disables the rate limit", U32(rate_per_min, 0, 1000000)},
    {"SANDBOX_RATE_BURST", "SANDBOX_RATE_PER_MIN", "token-bucket burst, 0-1000000; 0 = the rate", U32(rate_burst, 0, 1000000)},
    {"SANDBOX_MEMORY_MB", "0 (provider default: 256)", "memory per run", FN(parse_memory)},
    {"SANDBOX_CPUS", "0 (provider default)", "CPUs per run (docker only)", FN(parse_cpus)},
    {"SANDBOX_PIDS", "0 (provider default)", "processes per run (docker only)", U32_SET(pids, 0, 4194304, pids_set)},
    {"SANDBOX_DISK_MB", "0 (provider default)", "writable disk per run (docker only)", U32_SET(disk_mb, 0, 1048576, disk_set)},
    {"SANDBOX_PAID_SECONDS_PER_DAY", "0 (none)", "e2b (billed by the second): the daemon's paid seconds per UTC day; each caller's own is paid_seconds_per_day in PLIMSOLL_CLIENTS_FILE (docs/decisions.md)", U32(paid_seconds_per_day, 0, 86400000u)},
    {"SANDBOX_TOTAL_MEMORY_MB", "0 (no budget)", "memory budget across runs in flight: each reserves its per-run memory; a run that does not fit is shed", U32(total_memory_mb, 0, 1u << 30)},
    {"SANDBOX_MAX_SESSIONS", "0 (off)", "open sessions daemon-wide (docs/sessions.md)", ELSEWHERE},
    {"SANDBOX_MAX_SESSIONS_PER_CALLER", "0 (no cap)", "open sessions per caller", ELSEWHERE},
    {"SANDBOX_MAX_SESSIONS_PER_OWNER", "0 (no cap)", "open sessions per (caller, owner); least recently used replaced", ELSEWHERE},
    {"SANDBOX_SESSION_POOL", "0", "docker sessions: containers kept started, at most SANDBOX_MAX_SESSIONS", ELSEWHERE},
    {"SANDBOX_SESSION_LIFETIME", "30m", "a session's absolute lifetime, 1s to 12h", ELSEWHERE},
    {"SANDBOX_SESSION_IDLE", "5m", "idle time before a suspend, 0 (never) or 1s to 12h", ELSEWHERE},
    {"SANDBOX_SESSION_DISK_MB", "1024", "a session's disk budget, 0 (unmeasured) to 1048576", ELSEWHERE},
    {"SANDBOX_DOCKER_IMAGE", "-", "docker provider", ELSEWHERE},
    {"SANDBOX_DOCKER_PROJECT_IMAGE", "-", "docker provider", ELSEWHERE},
    {"SANDBOX_DOCKER_SESSION_IMAGE", "plimsoll/session:latest", "docker provider, sessions on", ELSEWHERE},
    {"SANDBOX_DOCKER_MODULE_IMAGE", "- (no modules)", "docker provider: module runs (plimsoll/module:latest from make images; docs/modules.md)", ELSEWHERE},
    {"SANDBOX_DOCKER_RUNTIME", "- (runc)", "docker provider: runsc for gVisor (runsc-<name>: another gVisor registration)", ELSEWHERE},
    {"SANDBOX_DOCKER_SECCOMP", "-", "docker provider", ELSEWHERE},
    {"SANDBOX_GUEST_UID", "61000", "docker provider", ELSEWHERE},
    {"DOCKER_HOST", "- (/var/run/docker.sock)", "docker provider: a local unix socket only (unix:///path or /path)", ELSEWHERE},
    {"E2B_API_KEY", "-", "e2b provider: the API key (never logged)", ELSEWHERE},
    {"E2B_TEMPLATE", "base", "e2b provider: the sandbox template", ELSEWHERE},
    {"E2B_API_URL", "https://api.e2b.app", "e2b provider: control plane (http only to loopback); stated on the card", ELSEWHERE},
    {"E2B_DOMAIN", "e2b.app", "e2b provider: the data-plane domain", ELSEWHERE},
    {"E2B_ENVD_URL", "https://49983-{sandbox}.<domain>", "e2b provider: envd URL template; stated on the card", ELSEWHERE},
    {"E2B_CA_FILE", "- (system CA store)", "e2b provider: a private CA bundle", ELSEWHERE},
    {"E2B_GUARD_URL", "-", "e2b provider: public https URL of the egress guard (grants)", ELSEWHERE},
    {"E2B_SESSION_GRANTS", "-", "e2b provider: grants in sessions, session (one guard credential) or call (one per call)", ELSEWHERE},
    {"SANDBOX_MICROVM_QEMU", "/usr/bin/qemu-system-x86_64", "microvm provider: QEMU binary (Debian qemu-system-x86)", ELSEWHERE},
    {"SANDBOX_MICROVM_KERNEL", "- (the build's)", "microvm provider: guest kernel (vmlinuz)", ELSEWHERE},
    {"SANDBOX_MICROVM_INITRD", "- (the build's)", "microvm provider: guest initramfs", ELSEWHERE},
    {"SANDBOX_MICROVM_ACCEL", "auto", "microvm provider: auto (KVM when a probe guest boots, else TCG) | kvm | tcg", FN(parse_accel)},
    {"SANDBOX_QUICKJS_ZYGOTE_FORKS", "1000", "quickjs provider: forks before a zygote is replaced (1-1000000)", ELSEWHERE},
    {"SANDBOX_QUICKJS_ZYGOTE_AGE_S", "600", "quickjs provider: a zygote's age limit in seconds (1-86400)", ELSEWHERE},
    {"SANDBOX_REQUIRE_PINNED_IMAGES", "false", "strict boolean: \"\", 0, false, 1, true", FN(parse_pinned)},
};

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

/* Stage 1: what an unset variable means. SANDBOX_PER_KEY_CONCURRENT and SANDBOX_RATE_BURST
 * derive from others once everything is read (stage 4). */
#define PER_KEY_UNSET UINT32_MAX /* beyond its range: the variable was not set */
static void config_defaults(struct plm_config *c)
{
    *c = (struct plm_config){.addr = "127.0.0.1:8746", .metrics_addr = "127.0.0.1:9464", .provider = CFG_DISABLED,
                             .provider_name = "disabled", .min_isolation = PLM_TIER_UNKNOWN, .max_concurrent = 8,
                             .per_key_concurrent = PER_KEY_UNSET, .rate_per_min = 30, .rate_burst = 0,
                             .microvm_accel = CFG_ACCEL_AUTO};
}

/* One row, when its variable is set (non-empty). */
static int read_var(const struct var *r, const char *v, struct plm_config *c, struct plm_err *err)
{
    char *field = (char *)c + r->off;
    switch (r->kind) {
    case V_STR: *(const char **)field = v; return 0;
    case V_FLAG:
        if (strcmp(v, "1") && strcmp(v, "0"))
            return CFG_ERR(err, "%s=\"%s\": expected 1 or 0", r->name, v);
        *(bool *)field = strcmp(v, "1") == 0;
        return 0;
    case V_U32:
        if (parse_u32(r->name, v, r->lo, r->hi, (uint32_t *)field, err) < 0)
            return -1;
        if (r->set_off)
            *(bool *)((char *)c + r->set_off) = true;
        return 0;
    case V_FN: return r->parse(v, c, err);
    case V_ELSEWHERE: return 0;
    }
    return 0;
}

/* Stage 3: every row of the table, in its order. */
static int config_read_table(const char *(*get)(const char *), struct plm_config *c, struct plm_err *err)
{
    for (size_t i = 0; i < sizeof vars / sizeof *vars; i++) {
        const char *v = get(vars[i].name);
        if (v && *v && read_var(&vars[i], v, c, err) < 0)
            return -1;
    }
    return 0;
}

/* Stage 4: the values that follow from others. */
static void config_derive(struct plm_config *c)
{
    if (c->per_key_concurrent == PER_KEY_UNSET)
        c->per_key_concurrent = c->max_concurrent / 2 ? c->max_concurrent / 2 : 1;
    /* 0 is the reference's "no per-caller cap": one caller may hold every slot, which a cap equal
     * to the global one states exactly (admission keeps its invariant of a cap >= 1). */
    if (c->per_key_concurrent == 0)
        c->per_key_concurrent = c->max_concurrent;
    if (c->rate_burst == 0) /* unset or 0: the reference's burst of one minute's rate */
        c->rate_burst = c->rate_per_min;
}

/* Stage 5: values that are each fine but wrong together. */
static int config_check_combinations(const struct plm_config *c, struct plm_err *err)
{
    if (!c->tls_cert != !c->tls_key) /* never half a TLS setup, never plaintext instead */
        return CFG_ERR(err, "%s is set without %s; set both or neither", c->tls_cert ? "PLIMSOLL_TLS_CERT" : "PLIMSOLL_TLS_KEY",
                       c->tls_cert ? "PLIMSOLL_TLS_KEY" : "PLIMSOLL_TLS_CERT");
    /* An allowance that applies to nothing must not look applied (only e2b bills by the second). */
    if (c->paid_seconds_per_day > 0 && c->provider != CFG_E2B)
        return CFG_ERR(err, "SANDBOX_PAID_SECONDS_PER_DAY applies only to a provider billed by the second (e2b); "
                            "SANDBOX_PROVIDER=%s bills nothing: unset it", c->provider_name ? c->provider_name : "disabled");
    /* A metered session must suspend to stop billing (sessions.md §3.1). */
    if (c->provider == CFG_E2B && c->sessions.max_sessions > 0 && c->sessions.idle_ms == 0)
        return CFG_ERR(err, "SANDBOX_SESSION_IDLE=0 on e2b, which bills every second a session runs: a session "
                            "that never suspends would bill until its lifetime ends; set an idle time");
    if (c->guard_addr && c->provider != CFG_E2B)
        return CFG_ERR(err, "PLIMSOLL_GUARD_ADDR is set, but only the e2b provider has an egress guard");
    /* A VM has whole vCPUs and no process-count limit the host could prove. */
    if (c->provider == CFG_MICROVM && c->pids_set)
        return CFG_ERR(err, "SANDBOX_PIDS is set, but the microvm provider cannot enforce it; unset it");
    if (c->provider == CFG_MICROVM && c->cpus_set && (c->cpus != (double)(uint32_t)c->cpus || c->cpus > 8))
        return CFG_ERR(err, "SANDBOX_CPUS=%g: the microvm provider needs a whole number of vCPUs (0..8)", c->cpus);
    if (c->provider == CFG_QUICKJS && (c->cpus_set || c->pids_set || c->disk_set))
        return CFG_ERR(err, "%s is set, but the quickjs provider cannot enforce it; unset it",
                       c->cpus_set ? "SANDBOX_CPUS" : c->pids_set ? "SANDBOX_PIDS" : "SANDBOX_DISK_MB");
    return 0;
}

int config_load(const char *(*get)(const char *), struct plm_config *c, struct plm_err *err)
{
    config_defaults(c);                                    /* 1 */
    if (session_config_load(get, &c->sessions, err) < 0 || /* 2 */
        config_read_table(get, c, err) < 0)                /* 3 */
        return -1;
    config_derive(c);                                      /* 4 */
    if (config_check_combinations(c, err) < 0 ||           /* 5 */
        config_table_check(get, c, err) < 0) /* reference variables this build or provider does not read */
        return -1;
    /* Last: the policy looks at the whole, validated configuration. */
    return c->hardened ? hardened_check(get, c, err) : 0;
}
