/* card.c: what the client prints about a call: the run card (text, on stderr), its --json form,
 * and the Describe summary.
 * Owns: formatting only; every decision was made in check.c.
 * Trusts: no server string. Text output escapes control characters so an answer cannot forge
 * card lines; JSON output goes through jansson, with guest output as text only when it is
 * valid UTF-8 and as base64 otherwise.
 * Invariant: the words "no code ran" appear only for a refusal or a transport failure that
 * provably sent nothing. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../core/cleanup.h"
#include "card.h"

static const char *S(const char *s) { return s ? s : ""; }

static void verdict_text(const struct cli_outcome *o, char *buf, size_t len)
{
    char reason[32];
    switch (o->verdict) {
    case CLI_V_RAN:
        snprintf(buf, len, "ran");
        return;
    case CLI_V_REFUSED:
        cli_reason_name(o->refusal, reason, sizeof reason);
        snprintf(buf, len, "refused before dispatch: %s (no code ran)", reason);
        return;
    case CLI_V_EVIDENCE_MISMATCH:
        snprintf(buf, len, "evidence mismatch: code may have run");
        return;
    case CLI_V_RECORD_MISMATCH:
        snprintf(buf, len, "record mismatch: code may have run");
        return;
    case CLI_V_TRANSPORT:
        snprintf(buf, len, "transport error: %s", o->not_sent ? "nothing was sent, no code ran" : "code may have run");
        return;
    case CLI_V_ERROR:
        snprintf(buf, len, "error (may have run): %s", o->code);
        return;
    }
    snprintf(buf, len, "error (may have run)");
}

static const char *code_ran(const struct cli_outcome *o)
{
    switch (o->verdict) {
    case CLI_V_RAN:
    case CLI_V_EVIDENCE_MISMATCH: return "yes";
    case CLI_V_REFUSED: return "no";
    case CLI_V_TRANSPORT: return o->not_sent ? "no" : "unknown";
    case CLI_V_RECORD_MISMATCH:
    case CLI_V_ERROR: break;
    }
    return "unknown";
}

static void line(FILE *f, const char *label, const char *value, const char *empty);

/* Placement: the backend that answered, those that refused before it (each proved nothing ran
 * there), and, when none was sent anything, why each was left out. */
static void card_placement(FILE *f, const struct plc_choice *c)
{
    line(f, "backend:", c->backend[0] ? c->backend : NULL, "");
    for (size_t i = 0; i < c->n_refused; i++) {
        fprintf(f, "%-16s %s: ", i ? "" : "refused before:", c->refused[i].backend);
        cli_put_safe(f, c->refused[i].why, "");
        fputc('\n', f);
    }
}

void cli_print_placement(FILE *f, const struct plc_choice *c)
{
    fputs("[backend ", f);
    cli_put_safe(f, c->backend, "");
    fputc(']', f);
    for (size_t i = 0; i < c->n_refused; i++) {
        fprintf(f, "%s%s: ", i ? "; " : " refused before: ", c->refused[i].backend);
        cli_put_safe(f, c->refused[i].why, "");
    }
    fputc('\n', f);
}

static bool has_checked_result(const struct cli_run_report *r)
{
    return r->resp && (r->o->verdict == CLI_V_RAN || r->o->verdict == CLI_V_EVIDENCE_MISMATCH);
}

static void line(FILE *f, const char *label, const char *value, const char *empty)
{
    fprintf(f, "%-16s ", label);
    cli_put_safe(f, value, empty);
    fputc('\n', f);
}

void cli_card_print(FILE *f, const struct cli_run_report *r)
{
    const struct cli_outcome *o = r->o;
    const Plimsoll__V1__RunResponse *resp = r->resp;
    const Plimsoll__V1__JavaScriptResult *js =
        resp && resp->result_case == PLIMSOLL__V1__RUN_RESPONSE__RESULT_JAVASCRIPT ? resp->javascript : NULL;
    char v[128];
    verdict_text(o, v, sizeof v);

    fputs("--- plimsoll run card ---\n", f);
    line(f, "requested floor:", r->floor, "(none)");
    line(f, "actual tier:", resp ? S(resp->isolation) : NULL, "(empty)");
    line(f, "provider:", resp ? S(resp->sandbox) : NULL, "(empty)");
    if (r->choice)
        card_placement(f, r->choice);
    line(f, "environment:", resp ? S(resp->environment) : NULL, "(empty)");
    if (resp && resp->software_identity && *resp->software_identity)
        line(f, "software:", resp->software_identity, "");
    line(f, "policy:", resp && resp->record ? S(resp->record->policy) : NULL, "(none stated)");
    fprintf(f, "%-16s %s\n", "verdict:", v);
    if (o->verdict == CLI_V_REFUSED || o->verdict == CLI_V_ERROR) {
        fprintf(f, "%-16s %s: ", "error:", o->code);
        cli_put_safe(f, o->message, "");
        fputc('\n', f);
    } else if (o->message[0]) {
        line(f, "reason:", o->message, "");
    }
    if (o->detail_disregarded)
        fprintf(f, "%-16s the error was not bound to this request; its not-dispatched mark was disregarded\n",
                "note:");
    if (js && has_checked_result(r)) {
        int32_t ec = js->exit_code;
        fprintf(f, "%-16s %d\n", "exit code:", ec);
        fprintf(f, "%-16s %s\n", "timed out:", js->timed_out ? "yes" : "no");
        fprintf(f, "%-16s stdout %s, stderr %s\n", "truncated:", js->stdout_truncated ? "yes" : "no",
                js->stderr_truncated ? "yes" : "no");
    }
    if (r->output_withheld && js)
        fprintf(f, "%-16s withheld (%zu bytes stdout, %zu bytes stderr): the record does not vouch for it\n",
                "guest output:", js->stdout.len, js->stderr.len);
    if (resp && resp->result_case == PLIMSOLL__V1__RUN_RESPONSE__RESULT_PROJECT && resp->project)
        cli_card_print_project(f, resp->project, has_checked_result(r));
    if (resp && r->elapsed_s < 0) /* the daemon's own view (its UI ring): no round trip */
        fprintf(f, "%-16s %lld ms\n", "duration:", (long long)resp->duration_ms);
    else if (resp)
        fprintf(f, "%-16s %lld ms (round trip %.0f ms)\n", "duration:", (long long)resp->duration_ms,
                r->elapsed_s * 1000.0);
    else if (r->elapsed_s > 0)
        fprintf(f, "%-16s round trip %.0f ms\n", "duration:", r->elapsed_s * 1000.0);
    if (resp && resp->record) {
        fprintf(f, "%-16s v%u ", "record:", resp->record->version);
        cli_put_safe(f, S(resp->record->record_sha256), "(empty)");
        fputs(has_checked_result(r) ? " (checked)\n" : " (NOT verified)\n", f);
    } else {
        fprintf(f, "%-16s -\n", "record:");
    }
    fprintf(f, "%-16s %s\n", "request id:", r->request_id ? r->request_id : "-");
    fprintf(f, "%-16s %d\n", "exit status:", r->exit_status);
}

/* ---- --json ---- */

static int set_str(json_t *o, const char *k, const char *v)
{
    v = S(v);
    json_t *s = json_string(v);
    if (!s) {
        /* Not UTF-8 (cannot come from a JSON-decoded answer, but fail safe): escape it. */
        cleanup_free char *buf = NULL;
        size_t sz = 0;
        FILE *m = open_memstream(&buf, &sz);
        if (!m)
            return -1;
        cli_put_safe(m, v, "");
        fclose(m);
        s = json_string(buf ? buf : "");
        if (!s)
            return -1;
    }
    return json_object_set_new(o, k, s);
}

static int json_placement(json_t *j, const struct plc_choice *c)
{
    json_t *refused = json_array(), *skipped = json_array();
    int bad = json_object_set_new(j, "refused_before", refused) | json_object_set_new(j, "skipped", skipped);
    bad |= c->backend[0] ? set_str(j, "backend", c->backend) : json_object_set_new(j, "backend", json_null());
    const struct plc_pass *lists[2] = {c->refused, c->skipped};
    size_t ns[2] = {c->n_refused, c->n_skipped};
    json_t *arrays[2] = {refused, skipped};
    for (size_t k = 0; k < 2 && !bad; k++) {
        for (size_t i = 0; i < ns[k] && !bad; i++) {
            json_t *e = json_object();
            bad |= json_array_append_new(arrays[k], e);
            bad |= set_str(e, "backend", lists[k][i].backend) | set_str(e, "why", lists[k][i].why);
        }
    }
    return bad ? -1 : 0;
}

json_t *cli_card_json(const struct cli_run_report *r)
{
    const struct cli_outcome *o = r->o;
    const Plimsoll__V1__RunResponse *resp = r->resp;
    const Plimsoll__V1__JavaScriptResult *js =
        resp && resp->result_case == PLIMSOLL__V1__RUN_RESPONSE__RESULT_JAVASCRIPT ? resp->javascript : NULL;
    cli_cleanup_json json_t *j = json_object();
    if (!j)
        return NULL;
    char v[128];
    verdict_text(o, v, sizeof v);
    int bad = 0;
    bad |= set_str(j, "verdict", cli_verdict_name(o->verdict));
    bad |= set_str(j, "verdict_text", v);
    bad |= set_str(j, "code_ran", code_ran(o));
    bad |= json_object_set_new(j, "exit_status", json_integer(r->exit_status));
    bad |= set_str(j, "request_id", r->request_id);
    bad |= json_object_set_new(j, "bound", json_boolean(o->bound));
    bad |= set_str(j, "requested_floor", r->floor);
    if (o->verdict == CLI_V_REFUSED) {
        char reason[32];
        cli_reason_name(o->refusal, reason, sizeof reason);
        bad |= set_str(j, "refusal_reason", reason);
    }
    if (o->verdict == CLI_V_REFUSED || o->verdict == CLI_V_ERROR) {
        json_t *e = json_object();
        bad |= json_object_set_new(j, "error", e);
        if (e) {
            bad |= set_str(e, "code", o->code);
            bad |= set_str(e, "message", o->message);
        }
    } else if (o->message[0]) {
        bad |= set_str(j, "reason", o->message);
    }
    if (o->detail_disregarded)
        bad |= json_object_set_new(j, "not_dispatched_disregarded", json_true());
    bad |= json_object_set_new(j, "round_trip_ms", json_integer((json_int_t)llround(r->elapsed_s * 1000.0)));
    if (r->choice)
        bad |= json_placement(j, r->choice);
    if (resp) {
        bad |= set_str(j, "isolation", resp->isolation);
        bad |= set_str(j, "provider", resp->sandbox);
        bad |= set_str(j, "environment", resp->environment);
        bad |= set_str(j, "software_identity", resp->software_identity);
        bad |= set_str(j, "policy", resp->record ? resp->record->policy : "");
        bad |= json_object_set_new(j, "duration_ms", json_integer(resp->duration_ms));
        if (resp->record) {
            json_t *rec = json_object();
            bad |= json_object_set_new(j, "record", rec);
            if (rec) {
                bad |= json_object_set_new(rec, "version", json_integer(resp->record->version));
                bad |= set_str(rec, "record_sha256", resp->record->record_sha256);
                bad |= set_str(rec, "request_sha256", resp->record->request_sha256);
                bad |= set_str(rec, "result_sha256", resp->record->result_sha256);
                bad |= json_object_set_new(rec, "started_unix_ms", json_integer(resp->record->started_unix_ms));
                bad |= json_object_set_new(rec, "ended_unix_ms", json_integer(resp->record->ended_unix_ms));
                bad |= json_object_set_new(rec, "verified", json_boolean(has_checked_result(r)));
            }
        }
    }
    if (js) {
        bad |= json_object_set_new(j, "exit_code", json_integer(js->exit_code));
        bad |= json_object_set_new(j, "timed_out", json_boolean(js->timed_out));
        bad |= json_object_set_new(j, "stdout_truncated", json_boolean(js->stdout_truncated));
        bad |= json_object_set_new(j, "stderr_truncated", json_boolean(js->stderr_truncated));
        if (r->output_withheld) {
            bad |= json_object_set_new(j, "output_withheld", json_true());
        } else {
            bad |= cli_json_set_bytes(j, "stdout", "stdout_encoding", &js->stdout);
            bad |= cli_json_set_bytes(j, "stderr", "stderr_encoding", &js->stderr);
        }
    }
    if (resp && resp->result_case == PLIMSOLL__V1__RUN_RESPONSE__RESULT_PROJECT && resp->project)
        bad |= cli_card_json_project(j, resp->project, r->output_withheld);
    if (bad)
        return NULL;
    return take_ptr(&j);
}

/* ---- describe ---- */

static void env_print(FILE *f, const char *label, const Plimsoll__V1__PayloadEnvironment *e)
{
    fprintf(f, "%-16s ", label);
    if (!e || (!*S(e->identity) && !e->max_timeout_ms && !*S(e->software_identity) && !e->n_languages)) {
        fputs("(unsupported or unstated)\n", f);
        return;
    }
    cli_put_safe(f, S(e->identity), "(no identity)");
    if (e->max_timeout_ms)
        fprintf(f, ", max timeout %u ms", e->max_timeout_ms);
    if (*S(e->software_identity)) {
        fputs(", software ", f);
        cli_put_safe(f, e->software_identity, "");
    }
    for (size_t i = 0; i < e->n_languages; i++) {
        fputs(i ? "," : ", languages ", f);
        cli_put_safe(f, e->languages[i], "\"\"");
    }
    fputc('\n', f);
}

static const char *yes_no(protobuf_c_boolean b) { return b ? "yes" : "no"; }

void cli_describe_print(FILE *f, const Plimsoll__V1__DescribeResponse *d)
{
    line(f, "provider:", S(d->sandbox), "(empty)");
    line(f, "tier:", S(d->isolation), "(empty)");
    fprintf(f, "%-16s %u%s\n", "protocol:", d->protocol, d->protocol == CLI_PROTOCOL ? "" : " (this client speaks 3)");
    fprintf(f, "%-16s javascript grants %s, project %s, project grants %s, module %s, sessions %s\n",
            "supports:", yes_no(d->supports_javascript_grants), yes_no(d->supports_project),
            yes_no(d->supports_project_grants), yes_no(d->supports_module), yes_no(d->supports_sessions));
    env_print(f, "javascript:", d->javascript_environment);
    if (d->supports_project || d->project_environment)
        env_print(f, "project:", d->project_environment);
    if (d->supports_module || d->module_environment)
        env_print(f, "module:", d->module_environment);
    if (d->supports_sessions) {
        env_print(f, "session:", d->session_environment);
        fprintf(f, "%-16s lifetime %u ms, idle %u ms, per caller %u, per owner %u\n", "sessions:",
                d->session_lifetime_ms, d->session_idle_timeout_ms, d->max_sessions_per_caller,
                d->max_sessions_per_owner);
    }
    const Plimsoll__V1__RunResources *r = d->resources;
    if (r)
        fprintf(f, "%-16s memory %u MB, cpus %g, pids %u, disk %u MB (0 = provider default)\n", "resources:",
                r->memory_mb, r->cpus, r->pids, r->disk_mb);
    else
        fprintf(f, "%-16s provider defaults\n", "resources:");
    line(f, "policy:", S(d->policy), "(none stated)");

    const Plimsoll__V1__EvidenceCard *ev = d->evidence;
    if (!ev) {
        fprintf(f, "%-16s none (the daemon states no evidence card)\n", "evidence:");
        return;
    }
    size_t passed = 0;
    for (size_t i = 0; i < ev->n_checks; i++)
        passed += ev->checks[i] && ev->checks[i]->passed;
    fprintf(f, "%-16s %zu of %zu checks passed\n", "evidence:", passed, ev->n_checks);
    line(f, "  provider:", S(ev->provider), "(empty)");
    line(f, "  tier:", S(ev->isolation), "(empty)");
    line(f, "  runtime:", S(ev->runtime), "(none)");
    line(f, "  version:", S(ev->runtime_version), "(none)");
    line(f, "  kernel:", S(ev->kernel_release), "(unknown)");
    if (ev->checked_unix_ms) {
        char when[64] = "?";
        time_t t = (time_t)(ev->checked_unix_ms / 1000);
        struct tm tm;
        if (gmtime_r(&t, &tm))
            strftime(when, sizeof when, "%Y-%m-%dT%H:%M:%SZ", &tm);
        fprintf(f, "%-16s %s\n", "  checked:", when);
    }
    line(f, "  digest:", S(ev->digest), "(none)");
    for (size_t i = 0; i < ev->n_checks; i++) {
        const Plimsoll__V1__EvidenceCheck *c = ev->checks[i];
        if (!c)
            continue;
        fprintf(f, "  [%s] ", c->passed ? "pass" : "FAIL");
        cli_put_safe(f, S(c->name), "(unnamed)");
        fputs(": expected ", f);
        cli_put_safe(f, S(c->expected), "\"\"");
        fputs(", observed ", f);
        cli_put_safe(f, S(c->observed), "\"\"");
        fputc('\n', f);
    }
    for (size_t i = 0; i < ev->n_confinement; i++) {
        fputs("  confinement: ", f);
        cli_put_safe(f, ev->confinement[i], "");
        fputc('\n', f);
    }
}
