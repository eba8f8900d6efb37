/* config_table.c: the honesty rules over the reference's variables (issue 14 item 3).
 * Owns: two tables. `absent` lists the reference variables whose feature this build does not
 * have; `scoped` lists the variables only some providers read. Trusts: nothing in the values.
 * Invariant: a variable is either read by the configured provider (or by the daemon), or setting
 * it stops startup with a message naming it and why. Nothing an operator writes is silently
 * ignored: an operator who asked for module images or a Docker Cloud account
 * must not get a daemon that quietly runs without them.
 * The black-box test over every variable (tests/blackbox/test_config_vars.py) reads its own table
 * (tests/data/config_vars.json) and checks it against `plimsolld -h` and the reference's list. */
#include "config_table.h"

#include <stdio.h>
#include <string.h>

#define CFG_ERR(err, ...) plm_fail(err, 0, PLM_E_INVALID, __VA_ARGS__)
#define P(x) (1u << (x))

/* The reference reads these; this build has no such feature. Set (non-empty) means stop. */
static const struct {
    const char *name;
    const char *why;
} absent[] = {
    {"DOCKER_SBX_TOKEN", "the dockercloud provider is not in this build"},
    {"DOCKER_SBX_USERNAME", "the dockercloud provider is not in this build"},
    {"SANDBOX_DOCKERCLOUD_AUTH_URL", "the dockercloud provider is not in this build"},
    {"SANDBOX_DOCKERCLOUD_API_URL", "the dockercloud provider is not in this build"},
    {"SANDBOX_DOCKERCLOUD_IMAGE", "the dockercloud provider is not in this build"},
    {"SANDBOX_DOCKERCLOUD_GUARD_URL", "the dockercloud provider is not in this build"},
    {"SANDBOX_DOCKERCLOUD_POLICY_URL", "the dockercloud provider is not in this build"},
};

/* Variables only some providers read. DOCKER_HOST is not here: other tools on the host read it. */
static const struct {
    const char *name;
    unsigned providers; /* P(CFG_*) of the providers that read it */
} scoped[] = {
    {"SANDBOX_DOCKER_IMAGE", P(CFG_DOCKER)},
    {"SANDBOX_DOCKER_PROJECT_IMAGE", P(CFG_DOCKER)},
    {"SANDBOX_DOCKER_SESSION_IMAGE", P(CFG_DOCKER)},
    {"SANDBOX_DOCKER_MODULE_IMAGE", P(CFG_DOCKER)},
    {"SANDBOX_DOCKER_RUNTIME", P(CFG_DOCKER)},
    {"SANDBOX_DOCKER_SECCOMP", P(CFG_DOCKER)},
    {"SANDBOX_GUEST_UID", P(CFG_DOCKER)},
    {"E2B_API_KEY", P(CFG_E2B)},
    {"E2B_TEMPLATE", P(CFG_E2B)},
    {"E2B_API_URL", P(CFG_E2B)},
    {"E2B_DOMAIN", P(CFG_E2B)},
    {"E2B_ENVD_URL", P(CFG_E2B)},
    {"E2B_CA_FILE", P(CFG_E2B)},
    {"E2B_GUARD_URL", P(CFG_E2B)},
    {"E2B_SESSION_GRANTS", P(CFG_E2B)},
    {"SANDBOX_MICROVM_QEMU", P(CFG_MICROVM)},
    {"SANDBOX_MICROVM_KERNEL", P(CFG_MICROVM)},
    {"SANDBOX_MICROVM_INITRD", P(CFG_MICROVM)},
    {"SANDBOX_MICROVM_ACCEL", P(CFG_MICROVM)},
    {"SANDBOX_QUICKJS_ZYGOTE_FORKS", P(CFG_QUICKJS)},
    {"SANDBOX_QUICKJS_ZYGOTE_AGE_S", P(CFG_QUICKJS)},
};

static const char *set(const char *(*get)(const char *), const char *name)
{
    const char *v = get(name);
    return v && *v ? v : NULL;
}

static const char *readers(unsigned mask)
{
    return mask == P(CFG_DOCKER)    ? "docker"
           : mask == P(CFG_E2B)     ? "e2b"
           : mask == P(CFG_MICROVM) ? "microvm"
           : mask == P(CFG_QUICKJS) ? "quickjs"
                                    : "another provider";
}

int config_table_check(const char *(*get)(const char *), const struct plm_config *c, struct plm_err *err)
{
    for (size_t i = 0; i < sizeof absent / sizeof *absent; i++)
        if (set(get, absent[i].name)) /* fail closed: the feature asked for is not here */
            return CFG_ERR(err, "%s is set, but %s; unset it", absent[i].name, absent[i].why);
    const char *prov = c->provider_name ? c->provider_name : "disabled";
    for (size_t i = 0; i < sizeof scoped / sizeof *scoped; i++)
        if (set(get, scoped[i].name) && !(scoped[i].providers & P(c->provider)))
            return CFG_ERR(err, "%s is set, but SANDBOX_PROVIDER=%s does not read it (only %s does); unset it",
                           scoped[i].name, prov, readers(scoped[i].providers));
    /* The session image is read only with sessions on; naming one with sessions off is a mistake. */
    if (set(get, "SANDBOX_DOCKER_SESSION_IMAGE") && c->sessions.max_sessions == 0)
        return CFG_ERR(err, "SANDBOX_DOCKER_SESSION_IMAGE is set, but sessions are off (SANDBOX_MAX_SESSIONS=0); unset it");
    /* Asking for pinned images where nothing can be pinned must not pass as if it were met. */
    if (c->require_pinned && c->provider != CFG_DOCKER)
        return CFG_ERR(err, "SANDBOX_REQUIRE_PINNED_IMAGES is true, but SANDBOX_PROVIDER=%s has no image to pin%s",
                       prov, c->provider == CFG_E2B ? " (an E2B template is a mutable name)" : "");
    return 0;
}

void config_table_help(FILE *out)
{
    for (size_t i = 0; i < sizeof absent / sizeof *absent; i++) {
        char help[160];
        snprintf(help, sizeof help, "setting it stops startup: %s", absent[i].why);
        fprintf(out, CFG_HELP_FMT, absent[i].name, "-", help);
    }
}

bool config_table_known(const char *name, size_t n)
{
    for (size_t i = 0; i < sizeof absent / sizeof *absent; i++)
        if (strlen(absent[i].name) == n && strncmp(absent[i].name, name, n) == 0)
            return true;
    return false;
}

int config_memory_budget(uint32_t total_mb, uint32_t run_mb, const char *name, struct plm_err *err)
{
    if (total_mb == 0)
        return 0;
    /* Fail closed: a budget no run reserves from would be a limit that limits nothing. */
    if (run_mb == 0)
        return CFG_ERR(err, "SANDBOX_TOTAL_MEMORY_MB is set, but provider %s states no per-run memory to reserve "
                            "(set SANDBOX_MEMORY_MB, or unset the budget)", name);
    if (total_mb < run_mb)
        return CFG_ERR(err, "SANDBOX_TOTAL_MEMORY_MB=%u is below one run's memory (%u MB): no run could start",
                       total_mb, run_mb);
    return 0;
}
