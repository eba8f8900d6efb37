/* evidence.h: the evidence card, what a provider proved at startup (DESIGN.md, "Evidence").
 * Owns: fixed-size fields only, so a provider fills it without allocation.
 * Invariant: a provider claims a tier only when every check on its card passed; the digest
 * covers every field and is bound into each record's policy as plimsoll-evidence:sha256:<hex>. */
#pragma once
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "record.h"
#include "tier.h"

#define EV_CHECKS_MAX 48
#define EV_CONFINEMENT_MAX 48

struct plm_evidence_check {
    char name[64];      /* e.g. "probe.open_file" */
    char expected[128]; /* e.g. "killed or EACCES" */
    char observed[160]; /* e.g. "killed by SIGSYS" */
    bool passed;
};

struct plm_evidence {
    char provider[32];
    enum plm_tier tier;
    char runtime[64];
    char runtime_version[160];
    char kernel_release[128];
    int64_t checked_unix_ms;
    struct plm_evidence_check checks[EV_CHECKS_MAX];
    size_t n_checks;
    /* Confinement actually applied, one human-readable line each ("seccomp allow-list: 23 syscalls"). */
    char confinement[EV_CONFINEMENT_MAX][128];
    size_t n_confinement;
    char digest[PLM_HEX_SHA256]; /* ev_seal() fills it */
    char policy[128];            /* "plimsoll-evidence:sha256:<digest>" */
};

/* Appends a check; returns -1 when the card is full (the caller must treat that as a failure). */
int ev_add_check(struct plm_evidence *ev, const char *name, const char *expected, bool passed,
                 const char *observed_fmt, ...) __attribute__((format(printf, 5, 6)));
int ev_add_confinement(struct plm_evidence *ev, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* True when the card has at least one check and all passed. */
bool ev_all_passed(const struct plm_evidence *ev);
/* Computes digest and policy over every field (domain plimsoll.evidence.v1). */
void ev_seal(struct plm_evidence *ev);
/* The host kernel release (uname -r) into buf. */
void ev_kernel_release(char *buf, size_t len);
