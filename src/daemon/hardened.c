/* hardened.c: the PLIMSOLL_HARDENED=1 policy (hardened.h). */
#include "hardened.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "../core/hostport.h"

/* "TLS whenever the listener is not loopback": PLIMSOLL_TLS_CERT/_KEY serve TLS on the RPC and
 * metrics listeners; the guard listener has no TLS in this build, so it must be loopback. */
static bool addr_is_loopback(const char *addr)
{
    struct sockaddr_storage ss;
    socklen_t sl;
    if (plm_parse_hostport(addr, &ss, &sl) < 0)
        return false;
    if (ss.ss_family == AF_INET)
        return (ntohl(((struct sockaddr_in *)&ss)->sin_addr.s_addr) >> 24) == 127;
    if (ss.ss_family == AF_INET6)
        return IN6_IS_ADDR_LOOPBACK(&((struct sockaddr_in6 *)&ss)->sin6_addr);
    return false;
}

struct unmet {
    char text[480]; /* fits plm_err's message with its prefix */
    size_t len;
    unsigned n;
};

static void add(struct unmet *u, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void add(struct unmet *u, const char *fmt, ...)
{
    u->n++; /* counted even when the text has no room left: the count is never understated */
    if (u->len + 8 >= sizeof u->text)
        return;
    int k = snprintf(u->text + u->len, sizeof u->text - u->len, "%s(%u) ", u->n > 1 ? "; " : "", u->n);
    if (k > 0)
        u->len += (size_t)k < sizeof u->text - u->len ? (size_t)k : sizeof u->text - u->len - 1;
    va_list ap;
    va_start(ap, fmt);
    k = vsnprintf(u->text + u->len, sizeof u->text - u->len, fmt, ap);
    va_end(ap);
    if (k > 0)
        u->len += (size_t)k < sizeof u->text - u->len ? (size_t)k : sizeof u->text - u->len - 1;
}

int hardened_check(const char *(*get)(const char *), struct plm_config *c, struct plm_err *err)
{
    struct unmet u = {.len = 0};
    const char *runtime = get("SANDBOX_DOCKER_RUNTIME");

    /* vm, or kernel isolation that the startup proof verifies (runsc); the proven tier itself is
     * checked after the smoke test through min_isolation. */
    bool can_reach = c->provider == CFG_MICROVM || c->provider == CFG_E2B ||
                     (c->provider == CFG_DOCKER && runtime && !strcmp(runtime, "runsc"));
    if (!can_reach)
        add(&u, "vm or verified kernel isolation (SANDBOX_PROVIDER=%s proves neither; use microvm, e2b or "
                "docker with SANDBOX_DOCKER_RUNTIME=runsc)",
            c->provider_name ? c->provider_name : "disabled");
    if (!c->clients_file || c->insecure)
        add(&u, "multi-client authentication (PLIMSOLL_CLIENTS_FILE, not insecure)");
    bool tls = c->tls_cert && c->tls_key;
    if (!tls && !addr_is_loopback(c->addr))
        add(&u, "TLS on PLIMSOLL_ADDR=%s (set PLIMSOLL_TLS_CERT and PLIMSOLL_TLS_KEY, or listen on loopback)", c->addr);
    if (!tls && c->metrics_addr && strcasecmp(c->metrics_addr, "off") && !addr_is_loopback(c->metrics_addr))
        add(&u, "TLS on PLIMSOLL_METRICS_ADDR=%s (set PLIMSOLL_TLS_CERT and PLIMSOLL_TLS_KEY)", c->metrics_addr);
    if (c->guard_addr && !addr_is_loopback(c->guard_addr))
        add(&u, "TLS on PLIMSOLL_GUARD_ADDR=%s (the guard listener has no TLS in this build)", c->guard_addr);
    if (c->provider == CFG_DOCKER && !c->require_pinned)
        add(&u, "pinned images (SANDBOX_REQUIRE_PINNED_IMAGES=1)");
    /* An E2B template is a name, not a digest: the operator must at least name the one meant
     * rather than take the default "base". */
    const char *tpl = get("E2B_TEMPLATE");
    if (c->provider == CFG_E2B && !(tpl && *tpl))
        add(&u, "an explicit E2B_TEMPLATE (the default template is whatever \"base\" means today)");
    bool docker = c->provider == CFG_DOCKER;
    if (!c->memory_set || (c->provider != CFG_E2B && !c->cpus_set) || (docker && !c->pids_set) ||
        (docker && !c->disk_set) || (docker && c->total_memory_mb == 0))
        add(&u, "a resource envelope (SANDBOX_MEMORY_MB%s%s)", c->provider != CFG_E2B ? ", SANDBOX_CPUS" : "",
            docker ? ", SANDBOX_PIDS, SANDBOX_DISK_MB, SANDBOX_TOTAL_MEMORY_MB" : "");
    const char *seccomp = get("SANDBOX_DOCKER_SECCOMP");
    if (docker && seccomp && !strcasecmp(seccomp, "unconfined"))
        add(&u, "a seccomp filter (SANDBOX_DOCKER_SECCOMP=unconfined turns it off)");
    if (c->rate_per_min == 0)
        add(&u, "a per-caller rate cap (SANDBOX_RATE_PER_MIN is 0)");
    else if (c->rate_burst > c->rate_per_min)
        add(&u, "a burst within the rate (SANDBOX_RATE_BURST=%u above SANDBOX_RATE_PER_MIN=%u)", c->rate_burst,
            c->rate_per_min);
    /* even at SANDBOX_MAX_CONCURRENT=1: one caller must never be able to hold every slot */
    if (c->per_key_concurrent >= c->max_concurrent)
        add(&u, "a per-caller concurrency cap (SANDBOX_PER_KEY_CONCURRENT below SANDBOX_MAX_CONCURRENT)");
    if (c->sessions.max_sessions > 0 && c->sessions.per_caller == 0)
        add(&u, "session caps (SANDBOX_MAX_SESSIONS_PER_CALLER)");
    /* e2b also needs paid_seconds_per_day on every client: checked once the clients file is read
     * (main.c), before any billed sandbox is created. */

    if (u.n)
        return plm_fail(err, 0, PLM_E_INVALID, "PLIMSOLL_HARDENED=1: %u requirement%s unmet: %s", u.n, u.n == 1 ? "" : "s", u.text);
    if (c->min_isolation == PLM_TIER_UNKNOWN || !tier_meets(c->min_isolation, PLM_TIER_KERNEL))
        c->min_isolation = PLM_TIER_KERNEL;
    return 0;
}
