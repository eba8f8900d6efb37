/* session_smoke.c: the startup session smoke test (sessions.md §7), run once before the daemon
 * claims supports_sessions. It uses the provider's session ops directly (no registry, no
 * admission): what it proves is the provider's session behaviour, on one real sandbox.
 * Steps that need processes (the detached `sleep 600`, the relays) apply to providers whose
 * sessions run processes; the quickjs provider has none, and says so in its docs. */
#include <stdio.h>
#include <string.h>

#include "../core/clock.h"
#include "log.h"
#include "session_int.h"

#define SMOKE_LIFETIME_MS (5u * 60 * 1000)
#define SMOKE_CALL_MS 20000u

static int cell(struct sess_svc *svc, struct plm_session *h, const char *lang, const char *code,
                struct plm_result *out, struct plm_err *err)
{
    struct plm_request q = {.protocol = PLM_PROTOCOL, .kind = PLM_KIND_CELL};
    q.cell.language = lang;
    q.cell.code = code;
    struct plm_run_ctx ctx = {.caller = "", .timeout_ms = SMOKE_CALL_MS};
    enum plm_session_end ended = PLM_END_NONE;
    memset(out, 0, sizeof *out);
    if (svc->provider->ops->session_run_cell(svc->provider, h, &ctx, &q, out, &ended, err) < 0)
        return -1;
    if (ended != PLM_END_NONE)
        return plm_fail(err, 0, PLM_E_INTERNAL, "a %s cell ended the session (%s)", lang, plm_session_end_name(ended));
    return 0;
}

static bool out_is(const struct plm_result *r, const char *want)
{
    return r->cell.out.len == strlen(want) && memcmp(r->cell.out.data, want, r->cell.out.len) == 0;
}

static int smoke_steps(struct sess_svc *svc, struct plm_session *h, const struct plm_payload_env *env,
                       struct plm_err *err)
{
    const struct plm_provider_ops *ops = svc->provider->ops;
    struct plm_result r = {0};
    int rc = 0;
    /* 2: per stated cell language, a value set by one cell is read by the next */
    const char *langs[4] = {env->languages[0] ? env->languages[0] : "javascript",
                            env->languages[0] ? env->languages[1] : NULL, NULL, NULL};
    for (size_t i = 0; i < 3 && langs[i] && rc == 0; i++) {
        const char *set = !strcmp(langs[i], "python") ? "smoke_v = 41" : "globalThis.smokeV = 41";
        const char *get = !strcmp(langs[i], "python") ? "print(smoke_v + 1)" : "console.log(smokeV + 1)";
        if (strcmp(langs[i], "python") && strcmp(langs[i], "javascript"))
            return plm_fail(err, 0, PLM_E_INTERNAL, "stated language %s has no check", langs[i]);
        if ((rc = cell(svc, h, langs[i], set, &r, err)) == 0 && r.cell.exit_code != 0)
            rc = plm_fail(err, 0, PLM_E_INTERNAL, "the %s cell setting a value exited %d", langs[i], r.cell.exit_code);
        plm_result_done(&r);
        if (rc == 0 && (rc = cell(svc, h, langs[i], get, &r, err)) == 0 && !out_is(&r, "42\n"))
            rc = plm_fail(err, 0, PLM_E_INTERNAL, "the next %s cell did not see the value (exit %d)", langs[i],
                          r.cell.exit_code);
        plm_result_done(&r);
    }
    /* 4: suspend, then a JavaScript cell sees the old value or says it is a fresh interpreter */
    if (rc == 0 && ops->session_suspend) {
        bool mem = false;
        if ((rc = ops->session_suspend(svc->provider, h, &mem, err)) == 0 &&
            (rc = cell(svc, h, langs[0], !strcmp(langs[0], "python") ? "print(smoke_v + 1)" : "console.log(smokeV + 1)",
                       &r, err)) == 0 &&
            !out_is(&r, "42\n") && !r.cell.interpreter_started)
            rc = plm_fail(err, 0, PLM_E_INTERNAL, "after a suspend the cell neither kept its value nor said it restarted");
        plm_result_done(&r);
    }
    /* 5: a snippet exiting 3 is a result with exit 3, not an error */
    if (rc == 0 && ops->session_run) {
        struct plm_request q = {.protocol = PLM_PROTOCOL, .kind = PLM_KIND_JAVASCRIPT};
        q.js.code = "process.exit(3)";
        q.js.grant_profile = "";
        struct plm_run_ctx ctx = {.caller = "", .timeout_ms = SMOKE_CALL_MS};
        enum plm_session_end ended = PLM_END_NONE;
        if ((rc = ops->session_run(svc->provider, h, &ctx, &q, &r, &ended, err)) == 0 && r.js.exit_code != 3)
            rc = plm_fail(err, 0, PLM_E_INTERNAL, "a snippet exiting 3 reported exit %d", r.js.exit_code);
        plm_result_done(&r);
    }
    return rc;
}

int sess_svc_smoke_test(struct sess_svc *svc, struct plm_err *err)
{
    const struct plm_provider_ops *ops = svc->provider->ops;
    struct plm_payload_env env = {0};
    if (ops->session_env)
        ops->session_env(svc->provider, &env);
    if (!ops->session_run_cell)
        return plm_fail(err, 0, PLM_E_INTERNAL, "provider %s keeps sessions without cells", ops->name);
    uint64_t lifetime = svc->cfg.lifetime_ms < SMOKE_LIFETIME_MS ? svc->cfg.lifetime_ms : SMOKE_LIFETIME_MS;
    struct plm_session_spec spec = {.caller = "", .lifetime_ms = lifetime, .disk_bytes = svc->cfg.disk_bytes};
    struct plm_session_opened info = {0};
    struct plm_session *h = NULL;
    uint64_t t0 = clock_mono_ms();
    if (ops->session_open(svc->provider, &spec, &h, &info, err) < 0)
        return plm_err_wrap(err, "opening the smoke session");
    int rc = smoke_steps(svc, h, &env, err);
    struct plm_err cerr = {0};
    if (ops->session_close(svc->provider, h, &cerr) < 0 && rc == 0) /* 6 */
        rc = plm_fail(err, 0, PLM_E_INTERNAL, "closing the smoke session: %s", cerr.msg);
    if (rc == 0) {
        json_t *f = json_object();
        json_object_set_new(f, "provider", json_string(ops->name));
        json_object_set_new(f, "tier", json_string(tier_name(info.tier)));
        json_object_set_new(f, "duration_ms", json_integer((json_int_t)(clock_mono_ms() - t0)));
        log_event("info", "session_smoke_passed", f);
    }
    return rc;
}
