/* evidence.c: filling and sealing the evidence card.
 * Invariant: the digest covers every field in a fixed order, so two cards with the same digest
 * state the same proof; the policy string binds it into each run record. */
#include "evidence.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/utsname.h>

static void copy_str(char *dst, size_t cap, const char *src)
{
    snprintf(dst, cap, "%s", src ? src : "");
}

int ev_add_check(struct plm_evidence *ev, const char *name, const char *expected, bool passed,
                 const char *observed_fmt, ...)
{
    if (ev->n_checks >= EV_CHECKS_MAX)
        return -1;
    struct plm_evidence_check *c = &ev->checks[ev->n_checks++];
    copy_str(c->name, sizeof c->name, name);
    copy_str(c->expected, sizeof c->expected, expected);
    va_list ap;
    va_start(ap, observed_fmt);
    vsnprintf(c->observed, sizeof c->observed, observed_fmt, ap);
    va_end(ap);
    c->passed = passed;
    return 0;
}

int ev_add_confinement(struct plm_evidence *ev, const char *fmt, ...)
{
    if (ev->n_confinement >= EV_CONFINEMENT_MAX)
        return -1;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(ev->confinement[ev->n_confinement++], sizeof ev->confinement[0], fmt, ap);
    va_end(ap);
    return 0;
}

bool ev_all_passed(const struct plm_evidence *ev)
{
    if (ev->n_checks == 0)
        return false;
    for (size_t i = 0; i < ev->n_checks; i++)
        if (!ev->checks[i].passed)
            return false;
    return true;
}

void ev_seal(struct plm_evidence *ev)
{
    struct rec_stream *s = rec_stream_new("plimsoll.evidence.v1");
    rec_stream_str(s, "provider", ev->provider);
    rec_stream_str(s, "isolation", tier_name(ev->tier));
    rec_stream_str(s, "runtime", ev->runtime);
    rec_stream_str(s, "runtime_version", ev->runtime_version);
    rec_stream_str(s, "kernel_release", ev->kernel_release);
    rec_stream_int(s, "checked_unix_ms", ev->checked_unix_ms);
    rec_stream_uint(s, "checks", ev->n_checks);
    for (size_t i = 0; i < ev->n_checks; i++) {
        rec_stream_str(s, "check_name", ev->checks[i].name);
        rec_stream_str(s, "check_expected", ev->checks[i].expected);
        rec_stream_str(s, "check_observed", ev->checks[i].observed);
        rec_stream_bool(s, "check_passed", ev->checks[i].passed);
    }
    rec_stream_uint(s, "confinement", ev->n_confinement);
    for (size_t i = 0; i < ev->n_confinement; i++)
        rec_stream_str(s, "confinement_item", ev->confinement[i]);
    rec_stream_finish(s, ev->digest);
    snprintf(ev->policy, sizeof ev->policy, "plimsoll-evidence:sha256:%s", ev->digest);
}

void ev_kernel_release(char *buf, size_t len)
{
    struct utsname u;
    if (uname(&u) == 0)
        copy_str(buf, len, u.release);
    else
        copy_str(buf, len, "unknown");
}
