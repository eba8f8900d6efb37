/* placement.c: one request, several daemons. Filters the pool by what each daemon states in its
 * (cached) Describe, ranks the survivors, sends, and tries the next one only when the refusal proves
 * nothing ran and another daemon might answer differently (docs/library.md).
 * Owns: the choice record (who was skipped, who refused); never a request or an answer (the caller's
 * send function and call struct hold those).
 * Trusts: a Describe only to choose; the floor is stamped on the request so the daemon checks it
 * before dispatch and the client checks the evidence after, whatever the Describe said.
 * Invariant: a request goes to a second backend only after a bound refusal marked unsupported,
 * isolation or capacity, or a connection that provably carried none of it. */
#include <stdlib.h>
#include <string.h>

#include "../core/clock.h"
#include "client.h"

bool plc_retryable(int reason)
{
    return reason == PLM_REFUSAL_UNSUPPORTED || reason == PLM_REFUSAL_ISOLATION || reason == PLM_REFUSAL_CAPACITY;
}

int plc_merge_floor(const char *request_floor, const char *required, char out[16], enum plm_tier *tier)
{
    enum plm_tier a = PLM_TIER_UNKNOWN, b = PLM_TIER_UNKNOWN;
    if (tier_parse_floor(request_floor ? request_floor : "", &a, NULL) < 0 ||
        tier_parse_floor(required ? required : "", &b, NULL) < 0)
        return -1;
    *tier = a > b ? a : b; /* PLM_TIER_UNKNOWN (0) is "no floor"; the tiers rise in strength */
    snprintf(out, 16, "%s", *tier == PLM_TIER_UNKNOWN ? "" : tier_name(*tier));
    return 0;
}

static double pool_now(const struct plc_pool *p)
{
    if (p->now)
        return p->now(p->now_ctx);
    return (double)clock_mono_us() / 1e6;
}

int plc_describe(struct plc_pool *p, struct plc_backend *b)
{
    double now = pool_now(p);
    if (b->desc && !b->stale && now - b->described_at < p->ttl_s)
        return 0;
    struct cli_outcome o;
    Plimsoll__V1__DescribeResponse *d = cli_describe_call(&b->conn, &o);
    if (b->desc)
        protobuf_c_message_free_unpacked(&b->desc->base, NULL);
    b->desc = NULL;
    b->stale = false;
    if (!d) {
        snprintf(b->why, sizeof b->why, "Describe failed (%s): %.200s", cli_verdict_name(o.verdict), o.message);
        return -1;
    }
    if (d->protocol != CLI_PROTOCOL) {
        snprintf(b->why, sizeof b->why, "speaks protocol %u, this client %d", d->protocol, CLI_PROTOCOL);
        protobuf_c_message_free_unpacked(&d->base, NULL);
        return -1;
    }
    b->desc = d;
    b->described_at = now;
    b->why[0] = '\0';
    return 0;
}

void plc_refresh(struct plc_pool *p)
{
    for (size_t i = 0; i < p->n; i++) {
        p->b[i].stale = true;
        (void)plc_describe(p, &p->b[i]);
    }
}

static const Plimsoll__V1__PayloadEnvironment *kind_env(const Plimsoll__V1__DescribeResponse *d, enum plc_kind k)
{
    switch (k) {
    case PLC_JAVASCRIPT: return d->javascript_environment;
    case PLC_PROJECT: return d->project_environment;
    case PLC_MODULE: return d->module_environment;
    case PLC_SESSION: return d->session_environment;
    }
    return NULL;
}

static bool env_lists(const Plimsoll__V1__PayloadEnvironment *e, const char *language)
{
    for (size_t i = 0; e && i < e->n_languages; i++)
        if (e->languages[i] && strcmp(e->languages[i], language) == 0)
            return true;
    return false;
}

/* The Describe flags a payload kind needs; NULL when they are all there. */
static const char *kind_unsupported(const Plimsoll__V1__DescribeResponse *d, enum plc_kind k, const struct plc_requirement *req)
{
    switch (k) {
    case PLC_JAVASCRIPT:
        return req->grant_profile && !d->supports_javascript_grants ? "does not support grants for snippets" : NULL;
    case PLC_PROJECT:
        if (!d->supports_project)
            return "does not support projects";
        return req->grant_profile && !d->supports_project_grants ? "does not support grants for projects" : NULL;
    case PLC_MODULE:
        if (req->grant_profile)
            return "a module run cannot carry a grant";
        return d->supports_module ? NULL : "does not support module runs";
    case PLC_SESSION:
        if (!d->supports_sessions)
            return "does not support sessions";
        return req->language && !env_lists(d->session_environment, req->language) ? "does not list the session language"
                                                                                 : NULL;
    }
    return "unknown payload kind";
}

const char *plc_filter(const struct plc_backend *b, enum plc_kind kind, const struct plc_requirement *req,
                       enum plm_tier floor, char *why, size_t n)
{
    const Plimsoll__V1__DescribeResponse *d = b->desc;
    if (!d)
        return snprintf(why, n, "%s", b->why[0] ? b->why : "not described"), why;
    if (req->provider && *req->provider && strcmp(req->provider, d->sandbox ? d->sandbox : ""))
        return snprintf(why, n, "provider %.40s, not %.40s", d->sandbox, req->provider), why;
    if (floor != PLM_TIER_UNKNOWN && !tier_meets(tier_parse(d->isolation), floor))
        return snprintf(why, n, "isolation %.20s is below the floor %s", d->isolation, tier_name(floor)), why;
    const char *u = kind_unsupported(d, kind, req);
    if (u)
        return snprintf(why, n, "%s", u), why;
    if (req->environment && *req->environment) {
        const Plimsoll__V1__PayloadEnvironment *e = kind_env(d, kind);
        const char *id = e && e->identity ? e->identity : "";
        /* An empty identity claims nothing, so it never matches. */
        if (!*id || strcmp(id, req->environment))
            return snprintf(why, n, "environment %.80s, not the one required", *id ? id : "(none stated)"), why;
    }
    return NULL;
}

/* The candidates in the order they are tried: the pool's order, the prefer function's rank
 * first (a stable insertion sort: the pool is at most PLC_BACKENDS_MAX long). */
static size_t candidates(struct plc_pool *p, enum plc_kind kind, const struct plc_requirement *req, enum plm_tier floor,
                         struct plc_backend **out, struct plc_choice *choice)
{
    size_t n = 0;
    for (size_t i = 0; i < p->n; i++) {
        struct plc_backend *b = &p->b[i];
        if (req->backend && *req->backend && strcmp(req->backend, b->name))
            continue;
        char why[320];
        (void)plc_describe(p, b);
        if (plc_filter(b, kind, req, floor, why, sizeof why)) {
            struct plc_pass *s = &choice->skipped[choice->n_skipped++];
            snprintf(s->backend, sizeof s->backend, "%s", b->name);
            snprintf(s->why, sizeof s->why, "%s", why);
            continue;
        }
        size_t j = n++;
        while (req->prefer && j > 0 && req->prefer(b->desc, out[j - 1]->desc, req->prefer_ctx) < 0) {
            out[j] = out[j - 1];
            j--;
        }
        out[j] = b;
    }
    return n;
}

/* The refusal built here when no backend could be sent the request: it proves nothing ran. */
static void none_taken(const struct plc_requirement *req, const struct plc_choice *choice, struct cli_outcome *o)
{
    memset(o, 0, sizeof *o);
    o->verdict = CLI_V_REFUSED;
    bool all_isolation = choice->n_skipped > 0;
    for (size_t i = 0; i < choice->n_skipped; i++)
        all_isolation = all_isolation && strstr(choice->skipped[i].why, "below the floor") != NULL;
    o->refusal = all_isolation ? PLM_REFUSAL_ISOLATION : PLM_REFUSAL_UNSUPPORTED;
    snprintf(o->code, sizeof o->code, "%s", all_isolation ? "failed_precondition" : "unimplemented");
    size_t off = 0;
    if (req->backend && *req->backend && choice->n_skipped == 0)
        off += (size_t)snprintf(o->message, sizeof o->message, "no backend is named %.64s", req->backend);
    else
        off += (size_t)snprintf(o->message, sizeof o->message, "no backend can take this request (nothing was sent)");
    for (size_t i = 0; i < choice->n_skipped && off < sizeof o->message; i++)
        off += (size_t)snprintf(o->message + off, sizeof o->message - off, "%s %s: %s", i ? ";" : ":",
                                choice->skipped[i].backend, choice->skipped[i].why);
}

/* Whether the outcome of one attempt lets the next backend be tried; fills the refusal entry. */
static bool passed_over(struct plc_backend *b, const struct cli_outcome *o, struct plc_pass *r)
{
    snprintf(r->backend, sizeof r->backend, "%s", b->name);
    if (o->verdict == CLI_V_REFUSED && plc_retryable(o->refusal)) {
        char rn[32];
        cli_reason_name(o->refusal, rn, sizeof rn);
        snprintf(r->why, sizeof r->why, "refused: %s", rn);
        r->reason = o->refusal;
        r->sent = true;
        /* Its tier or support changed since the Describe: look again before the next request. */
        if (o->refusal != PLM_REFUSAL_CAPACITY)
            b->stale = true;
        return true;
    }
    if (o->verdict == CLI_V_TRANSPORT && o->not_sent) {
        snprintf(r->why, sizeof r->why, "not reached: %.200s", o->message);
        b->stale = true;
        return true;
    }
    return false;
}

int plc_run(struct plc_pool *p, enum plc_kind kind, const char *request_floor, const struct plc_requirement *req,
            plc_send_fn send, void *ctx, struct cli_run_call *call, struct plc_choice *choice)
{
    memset(choice, 0, sizeof *choice);
    memset(call, 0, sizeof *call);
    enum plm_tier floor = PLM_TIER_UNKNOWN;
    if (plc_merge_floor(request_floor, req->min_isolation, choice->floor, &floor) < 0) {
        call->o.verdict = CLI_V_REFUSED;
        call->o.refusal = PLM_REFUSAL_REQUEST;
        snprintf(call->o.code, sizeof call->o.code, "invalid_argument");
        snprintf(call->o.message, sizeof call->o.message, "a floor is not process, container, kernel or vm");
        call->rep.o = &call->o;
        call->rep.exit_status = CLI_EXIT_USAGE;
        return -1;
    }
    struct plc_backend *order[PLC_BACKENDS_MAX];
    size_t n = candidates(p, kind, req, floor, order, choice);
    if (n == 0) {
        none_taken(req, choice, &call->o);
        call->floor = choice->floor;
        call->rep.floor = choice->floor;
        call->rep.o = &call->o;
        call->rep.elapsed_s = 0;
        call->rep.exit_status = CLI_EXIT_REFUSED;
        return -1;
    }
    for (size_t i = 0; i < n; i++) {
        if (i > 0)
            cli_run_call_done(call);
        if (send(&order[i]->conn, choice->floor, ctx, call) < 0)
            return -1; /* the floor was checked above: only a caller's bad argument lands here */
        snprintf(choice->backend, sizeof choice->backend, "%s", order[i]->name);
        if (i + 1 == n || !passed_over(order[i], &call->o, &choice->refused[choice->n_refused]))
            break;
        choice->n_refused++;
    }
    return 0;
}

int plc_session_open(struct plc_pool *p, const struct plc_requirement *req, struct cli_session *s, const char *owner,
                     struct plc_choice *choice)
{
    memset(choice, 0, sizeof *choice);
    enum plm_tier floor = PLM_TIER_UNKNOWN;
    if (plc_merge_floor(s->floor, req->min_isolation, choice->floor, &floor) < 0) {
        fprintf(s->err, "session: a floor is not process, container, kernel or vm; nothing was sent\n");
        return CLI_EXIT_USAGE;
    }
    s->floor = choice->floor;
    s->floor_tier = floor;
    struct plc_requirement r = *req;
    if (!r.language)
        r.language = s->language;
    struct plc_backend *order[PLC_BACKENDS_MAX];
    size_t n = candidates(p, PLC_SESSION, &r, floor, order, choice);
    if (n == 0) {
        struct cli_outcome o;
        none_taken(req, choice, &o);
        s->opened = o;
        fprintf(s->err, "session: refused before anything was sent: ");
        cli_put_safe(s->err, o.message, "");
        fputc('\n', s->err);
        return CLI_EXIT_REFUSED;
    }
    int rc = CLI_EXIT_REFUSED;
    for (size_t i = 0; i < n; i++) {
        s->conn = order[i]->conn;
        snprintf(choice->backend, sizeof choice->backend, "%s", order[i]->name);
        rc = cli_session_open(s, owner);
        if (rc == 0 || i + 1 == n || !passed_over(order[i], &s->opened, &choice->refused[choice->n_refused]))
            break;
        choice->n_refused++;
    }
    return rc;
}

void plc_choice_refused_text(const struct plc_choice *c, char *buf, size_t n)
{
    size_t off = 0;
    buf[0] = '\0';
    for (size_t i = 0; i < c->n_refused && off < n; i++)
        off += (size_t)snprintf(buf + off, n - off, "%s%s (%s)", i ? ", " : "", c->refused[i].backend, c->refused[i].why);
}
