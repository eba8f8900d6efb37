/* describe_test.c: the kept Describe answer (describe.c) is the answer a fresh encoding gives,
 * for either format, and changes as soon as anything the provider states changes: its tier, an
 * identity, a flag, the evidence card (even one observed string changed in place, unsealed).
 * The request is still decoded on every call. */
#include <jansson.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../core/evidence.h"
#include "describe.h"
#include "rpc.h"
#include "unit.h"

static struct {
    enum plm_tier tier;
    char identity[160];
    bool grants;
    struct plm_evidence ev;
    bool proven;
} F;

static void f_describe(struct plm_provider *p, struct plm_describe *d)
{
    (void)p;
    memset(d, 0, sizeof *d);
    d->sandbox = "fake";
    d->tier = F.tier;
    snprintf(d->javascript.identity, sizeof d->javascript.identity, "%s", F.identity);
    d->javascript.max_timeout_ms = 30000;
    d->javascript.languages[0] = "javascript";
    d->supports_javascript_grants = F.grants;
    d->memory_mb = 256;
    d->policy = F.proven ? F.ev.policy : "";
    d->evidence = F.proven ? &F.ev : NULL;
}

static const struct plm_provider_ops fake_ops = {.name = "fake", .describe = f_describe};

/* Describe's body, NUL-terminated, its length in *out_len (NULL on a non-200), through env. */
static char *describe_n(const struct rpc_env *env, enum rpc_fmt fmt, const char *req, size_t len, size_t *out_len)
{
    struct rpc_answer a = {0};
    struct rpc_call c = rpc_call_plain(NULL, "", fmt, req, len);
    rpc_describe(env, &c, &a);
    if (a.status != 200) {
        free(a.body);
        return NULL;
    }
    char *s = malloc(a.len + 1);
    memcpy(s, a.body, a.len);
    s[a.len] = 0;
    *out_len = a.len;
    free(a.body);
    return s;
}

static char *describe(const struct rpc_env *env, enum rpc_fmt fmt, const char *req, size_t len)
{
    size_t n;
    return describe_n(env, fmt, req, len, &n);
}

/* The kept answer equals a fresh encoding (an env without the cache). */
static bool same_as_fresh(const struct rpc_env *kept, const struct rpc_env *fresh, enum rpc_fmt fmt)
{
    const char *req = fmt == RPC_JSON ? "{}" : "";
    size_t len = fmt == RPC_JSON ? 2 : 0;
    size_t na = 0, nb = 0;
    char *a = describe_n(kept, fmt, req, len, &na), *b = describe_n(fresh, fmt, req, len, &nb);
    bool same = a && b && na == nb && memcmp(a, b, na) == 0;
    free(a);
    free(b);
    return same;
}

static bool mentions(const struct rpc_env *env, const char *needle)
{
    char *s = describe(env, RPC_JSON, "{}", 2);
    bool found = s && strstr(s, needle);
    free(s);
    return found;
}

int main(void)
{
    struct plm_provider prov = {.ops = &fake_ops};
    struct rpc_env fresh = {.provider = &prov};
    struct rpc_env kept = fresh;
    kept.describe_cache = describe_cache_new();
    CHECK(kept.describe_cache != NULL);
    F.tier = PLM_TIER_PROCESS;
    snprintf(F.identity, sizeof F.identity, "fake:sha256:one");

    /* twice the same, and equal to a fresh encoding, in both formats */
    CHECK(same_as_fresh(&kept, &fresh, RPC_JSON));
    CHECK(same_as_fresh(&kept, &fresh, RPC_JSON));
    CHECK(same_as_fresh(&kept, &fresh, RPC_PROTO));
    CHECK(same_as_fresh(&kept, &fresh, RPC_PROTO));
    CHECK(mentions(&kept, "\"isolation\":\"process\""));

    /* every change the provider states shows at once */
    F.tier = PLM_TIER_CONTAINER;
    CHECK(mentions(&kept, "\"isolation\":\"container\""));
    CHECK(same_as_fresh(&kept, &fresh, RPC_PROTO));
    snprintf(F.identity, sizeof F.identity, "fake:sha256:two");
    CHECK(mentions(&kept, "fake:sha256:two"));
    F.grants = true;
    CHECK(mentions(&kept, "supportsJavascriptGrants"));

    /* the evidence card: proved, then one observed string changed in place, sealed or not */
    snprintf(F.ev.provider, sizeof F.ev.provider, "fake");
    F.ev.tier = PLM_TIER_CONTAINER;
    CHECK(ev_add_check(&F.ev, "probe.one", "refused", true, "%s", "killed by SIGSYS") == 0);
    ev_seal(&F.ev);
    F.proven = true;
    CHECK(mentions(&kept, "killed by SIGSYS"));
    CHECK(same_as_fresh(&kept, &fresh, RPC_JSON));
    snprintf(F.ev.checks[0].observed, sizeof F.ev.checks[0].observed, "EACCES");
    CHECK(mentions(&kept, "EACCES"));
    CHECK(!mentions(&kept, "killed by SIGSYS"));
    F.proven = false;
    CHECK(!mentions(&kept, "EACCES"));
    CHECK(same_as_fresh(&kept, &fresh, RPC_JSON));

    /* the request is still decoded strictly on a kept answer */
    char *bad = describe(&kept, RPC_JSON, "{\"x\":1}", 7);
    CHECK(bad == NULL);
    free(bad);
    CHECK(describe(&kept, RPC_PROTO, "\xff", 1) == NULL);

    describe_cache_free(kept.describe_cache);
    return unit_done();
}
