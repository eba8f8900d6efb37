/* config.h: the daemon's configuration, from the environment only (wire.md §17).
 * Invariant: malformed values stop startup with a message naming the variable; nothing is
 * silently defaulted past a value the operator wrote. */
#pragma once
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "../core/err.h"
#include "../core/tier.h"
#include "session_config.h"

enum cfg_provider { CFG_DISABLED, CFG_QUICKJS, CFG_DOCKER, CFG_E2B, CFG_MICROVM };
/* SANDBOX_MICROVM_ACCEL */
enum cfg_accel { CFG_ACCEL_AUTO, CFG_ACCEL_KVM, CFG_ACCEL_TCG };

struct plm_config {
    const char *addr;
    const char *metrics_addr;
    const char *allowed_hosts; /* PLIMSOLL_ALLOWED_HOSTS, checked; NULL: unset */
    const char *token;
    const char *clients_file;
    const char *grants_file;
    const char *guard_addr; /* PLIMSOLL_GUARD_ADDR: the e2b egress guard's listener */
    const char *tls_cert, *tls_key; /* PLIMSOLL_TLS_CERT/_KEY: both or neither (loaded by main) */
    bool insecure;
    bool ui; /* PLIMSOLL_UI=1 */
    bool log_text; /* PLIMSOLL_LOG_FORMAT=text */
    enum cfg_provider provider;
    const char *provider_name; /* as the operator wrote it, lower-cased: "quickjs" or "wasm" ... */
    enum plm_tier min_isolation; /* UNKNOWN when unset */
    uint32_t max_concurrent, per_key_concurrent, rate_per_min, rate_burst;
    uint32_t memory_mb, pids, disk_mb;
    uint32_t total_memory_mb; /* SANDBOX_TOTAL_MEMORY_MB; 0 = no budget */
    uint32_t paid_seconds_per_day; /* SANDBOX_PAID_SECONDS_PER_DAY; 0 = none (e2b only) */
    bool hardened; /* PLIMSOLL_HARDENED=1 */
    double cpus;
    bool memory_set, pids_set, disk_set, cpus_set;
    bool require_pinned; /* SANDBOX_REQUIRE_PINNED_IMAGES */
    struct plm_session_config sessions; /* sessions.md §3.1 (session_config.c) */
    enum cfg_accel microvm_accel; /* SANDBOX_MICROVM_ACCEL: auto (default), kvm or tcg */
};

/* getenv_fn lets tests supply an environment. */
int config_load(const char *(*getenv_fn)(const char *), struct plm_config *c, struct plm_err *err);
void config_help(FILE *out);
/* Warns on stderr about PLIMSOLL_* and SANDBOX_* variables this daemon does not know. */
void config_warn_unknown(char **env);
