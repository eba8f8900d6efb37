/* e2b.h: the e2b provider (providers.md §6): one fresh E2B Firecracker microVM per run, driven
 * through E2B's control plane (REST) and the VM's envd (files + Connect process streams), tier vm
 * once the startup proof passed. Grants reach the guest's host API through the egress guard
 * (guard.h). See docs/e2b.md. */
#pragma once
#include <stdbool.h>
#include <stdint.h>

#include "../../core/provider.h"

struct e2b_config {
    const char *api_key;     /* E2B_API_KEY; NULL: the provider builds, preflight fails */
    const char *template_id; /* E2B_TEMPLATE, default base */
    const char *api_url;     /* E2B_API_URL, default https://api.e2b.app */
    const char *domain;      /* E2B_DOMAIN, default e2b.app */
    const char *envd_url;    /* E2B_ENVD_URL, default https://49983-{sandbox}.<domain> */
    const char *ca_file;     /* E2B_CA_FILE: a private CA bundle */
    const char *guard_url;   /* E2B_GUARD_URL: the public https URL of the egress guard */
    const char *guard_addr;  /* PLIMSOLL_GUARD_ADDR: the guard's listener (host:port) */
    const char *session_grants;  /* E2B_SESSION_GRANTS: "session", "call", or NULL/"" (none) */
    uint32_t memory_mb, disk_mb; /* maxima verified after create; 0 = no cap */
    double cpus;                 /* a whole number of vCPUs, 0 = no cap */
    bool pids_set;               /* SANDBOX_PIDS: a configuration error here */
    uint32_t reconcile_s;        /* period of the reconcile; 0 = 60 s */
    const char *listen_addr;     /* PLIMSOLL_ADDR as configured: part of the instance label */
};

/* Builds the provider without any network call; a malformed variable fails naming it. */
struct plm_provider *e2b_provider_new(const struct e2b_config *cfg, struct plm_err *err);
