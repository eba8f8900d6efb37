/* config_test.c: providers.md §8 items 1-5 and the fail-closed rules of the daemon's variables. */
#include <string.h>

#include "config.h"
#include "unit.h"

static const char *const *cur_env;

static const char *fake_get(const char *name)
{
    size_t n = strlen(name);
    for (const char *const *e = cur_env; *e; e++)
        if (strncmp(*e, name, n) == 0 && (*e)[n] == '=')
            return *e + n + 1;
    return NULL;
}

static int load(const char *const *env, struct plm_config *c, struct plm_err *err)
{
    cur_env = env;
    return config_load(fake_get, c, err);
}

#define ENV(...) ((const char *const[]){__VA_ARGS__, NULL})

int main(void)
{
    struct plm_config c;
    struct plm_err err = {0};
    CHECK(load(ENV("X=1"), &c, &err) == 0);
    CHECK(c.provider == CFG_DISABLED && c.max_concurrent == 8 && c.per_key_concurrent == 4);
    CHECK(c.rate_per_min == 30 && c.rate_burst == 30);
    CHECK_STR(c.addr, "127.0.0.1:8746");
    CHECK(load(ENV("SANDBOX_PROVIDER=dokcer"), &c, &err) < 0 && strstr(err.msg, "known providers"));
    CHECK(load(ENV("SANDBOX_PROVIDER= QuickJS "), &c, &err) == 0 && c.provider == CFG_QUICKJS);
    CHECK(load(ENV("SANDBOX_PROVIDER=wasm"), &c, &err) == 0 && c.provider == CFG_QUICKJS);
    CHECK(load(ENV("SANDBOX_MEMORY_MB=-1"), &c, &err) < 0 && strstr(err.msg, "SANDBOX_MEMORY_MB"));
    CHECK(load(ENV("SANDBOX_CPUS=NaN"), &c, &err) < 0 && strstr(err.msg, "SANDBOX_CPUS"));
    CHECK(load(ENV("SANDBOX_PIDS=many"), &c, &err) < 0 && strstr(err.msg, "SANDBOX_PIDS"));
    CHECK(load(ENV("SANDBOX_DISK_MB=1.5"), &c, &err) < 0 && strstr(err.msg, "SANDBOX_DISK_MB"));
    CHECK(load(ENV("SANDBOX_MEMORY_MB=256", "SANDBOX_CPUS=0.5", "SANDBOX_PIDS=64", "SANDBOX_DISK_MB=128"), &c, &err) == 0);
    CHECK(c.memory_mb == 256 && c.cpus == 0.5 && c.pids == 64 && c.disk_mb == 128);
    CHECK(load(ENV("SANDBOX_PROVIDER=quickjs", "SANDBOX_PIDS=64"), &c, &err) < 0 && strstr(err.msg, "SANDBOX_PIDS"));
    CHECK(load(ENV("SANDBOX_PROVIDER=quickjs", "SANDBOX_CPUS=1"), &c, &err) < 0 && strstr(err.msg, "SANDBOX_CPUS"));
    CHECK(load(ENV("SANDBOX_PROVIDER=quickjs", "SANDBOX_DISK_MB=5"), &c, &err) < 0);
    /* microvm: the accelerator, and what a VM cannot enforce */
    CHECK(load(ENV("SANDBOX_PROVIDER=microvm"), &c, &err) == 0 && c.provider == CFG_MICROVM &&
          c.microvm_accel == CFG_ACCEL_AUTO);
    CHECK(load(ENV("SANDBOX_PROVIDER=microvm", "SANDBOX_MICROVM_ACCEL=TCG"), &c, &err) == 0 &&
          c.microvm_accel == CFG_ACCEL_TCG);
    CHECK(load(ENV("SANDBOX_PROVIDER=microvm", "SANDBOX_MICROVM_ACCEL=xen"), &c, &err) < 0 &&
          strstr(err.msg, "SANDBOX_MICROVM_ACCEL"));
    CHECK(load(ENV("SANDBOX_PROVIDER=microvm", "SANDBOX_PIDS=64"), &c, &err) < 0 && strstr(err.msg, "SANDBOX_PIDS"));
    CHECK(load(ENV("SANDBOX_PROVIDER=microvm", "SANDBOX_CPUS=1.5"), &c, &err) < 0 && strstr(err.msg, "SANDBOX_CPUS"));
    CHECK(load(ENV("SANDBOX_PROVIDER=microvm", "SANDBOX_CPUS=2", "SANDBOX_MEMORY_MB=512"), &c, &err) == 0 &&
          c.cpus == 2 && c.memory_mb == 512);
    CHECK(load(ENV("SANDBOX_PROVIDER=docker", "SANDBOX_REQUIRE_PINNED_IMAGES=TRUE"), &c, &err) == 0 && c.require_pinned);
    /* config_table.c: nothing to pin elsewhere; scoped and missing-feature variables stop startup */
    CHECK(load(ENV("SANDBOX_REQUIRE_PINNED_IMAGES=TRUE"), &c, &err) < 0 && strstr(err.msg, "SANDBOX_REQUIRE_PINNED_IMAGES"));
    CHECK(load(ENV("SANDBOX_PROVIDER=quickjs", "SANDBOX_DOCKER_IMAGE=x"), &c, &err) < 0 &&
          strstr(err.msg, "SANDBOX_DOCKER_IMAGE") && strstr(err.msg, "only docker"));
    CHECK(load(ENV("SANDBOX_PROVIDER=docker", "SANDBOX_DOCKER_IMAGE=x"), &c, &err) == 0);
    /* the paid allowance: e2b only (the one provider billed by the second), a whole number */
    CHECK(load(ENV("SANDBOX_PROVIDER=e2b", "SANDBOX_PAID_SECONDS_PER_DAY=3600"), &c, &err) == 0 &&
          c.paid_seconds_per_day == 3600);
    CHECK(load(ENV("SANDBOX_PROVIDER=e2b", "SANDBOX_PAID_SECONDS_PER_DAY=-1"), &c, &err) < 0 &&
          strstr(err.msg, "SANDBOX_PAID_SECONDS_PER_DAY"));
    CHECK(load(ENV("SANDBOX_PROVIDER=e2b", "SANDBOX_PAID_SECONDS_PER_DAY=1h"), &c, &err) < 0 &&
          strstr(err.msg, "SANDBOX_PAID_SECONDS_PER_DAY"));
    CHECK(load(ENV("SANDBOX_PROVIDER=docker", "SANDBOX_PAID_SECONDS_PER_DAY=3600"), &c, &err) < 0 &&
          strstr(err.msg, "SANDBOX_PAID_SECONDS_PER_DAY") && strstr(err.msg, "bills nothing"));
    CHECK(load(ENV("SANDBOX_PROVIDER=docker", "SANDBOX_PAID_SECONDS_PER_DAY=0"), &c, &err) == 0);
    CHECK(load(ENV("SANDBOX_PROVIDER=e2b", "SANDBOX_MAX_SESSIONS=2", "SANDBOX_SESSION_IDLE=0"), &c, &err) < 0 &&
          strstr(err.msg, "SANDBOX_SESSION_IDLE=0"));
    CHECK(load(ENV("SANDBOX_DOCKERCLOUD_IMAGE=x"), &c, &err) < 0 && strstr(err.msg, "dockercloud"));
    CHECK(load(ENV("SANDBOX_REQUIRE_PINNED_IMAGES="), &c, &err) == 0);
    CHECK(load(ENV("SANDBOX_REQUIRE_PINNED_IMAGES=0"), &c, &err) == 0);
    CHECK(load(ENV("SANDBOX_REQUIRE_PINNED_IMAGES=yes"), &c, &err) < 0);
    CHECK(load(ENV("SANDBOX_MAX_CONCURRENT=0"), &c, &err) < 0 && strstr(err.msg, "SANDBOX_MAX_CONCURRENT"));
    CHECK(load(ENV("SANDBOX_MAX_CONCURRENT=1025"), &c, &err) < 0);
    CHECK(load(ENV("SANDBOX_MAX_CONCURRENT=1"), &c, &err) == 0 && c.per_key_concurrent == 1);
    CHECK(load(ENV("SANDBOX_MAX_CONCURRENT=8x"), &c, &err) < 0);
    CHECK(load(ENV("SANDBOX_RATE_PER_MIN=0"), &c, &err) == 0 && c.rate_per_min == 0);
    /* the reference's zeros: no per-caller cap, and a burst of the rate */
    CHECK(load(ENV("SANDBOX_MAX_CONCURRENT=6", "SANDBOX_PER_KEY_CONCURRENT=0"), &c, &err) == 0 &&
          c.per_key_concurrent == 6);
    CHECK(load(ENV("SANDBOX_PER_KEY_CONCURRENT=3"), &c, &err) == 0 && c.per_key_concurrent == 3);
    CHECK(load(ENV("SANDBOX_PER_KEY_CONCURRENT=1025"), &c, &err) < 0 && strstr(err.msg, "SANDBOX_PER_KEY_CONCURRENT"));
    CHECK(load(ENV("SANDBOX_PER_KEY_CONCURRENT=-1"), &c, &err) < 0 && strstr(err.msg, "SANDBOX_PER_KEY_CONCURRENT"));
    CHECK(load(ENV("SANDBOX_RATE_PER_MIN=12", "SANDBOX_RATE_BURST=0"), &c, &err) == 0 && c.rate_burst == 12);
    CHECK(load(ENV("SANDBOX_RATE_PER_MIN=12", "SANDBOX_RATE_BURST=3"), &c, &err) == 0 && c.rate_burst == 3);
    CHECK(load(ENV("SANDBOX_RATE_BURST=1000001"), &c, &err) < 0 && strstr(err.msg, "SANDBOX_RATE_BURST"));
    CHECK(load(ENV("SANDBOX_MIN_ISOLATION=vm"), &c, &err) == 0 && c.min_isolation == PLM_TIER_VM);
    CHECK(load(ENV("SANDBOX_MIN_ISOLATION=VM"), &c, &err) < 0 && strstr(err.msg, "SANDBOX_MIN_ISOLATION"));
    CHECK(load(ENV("PLIMSOLL_TLS_CERT=/x"), &c, &err) < 0 && strstr(err.msg, "PLIMSOLL_TLS_CERT is set without PLIMSOLL_TLS_KEY"));
    CHECK(load(ENV("PLIMSOLL_TLS_KEY=/y"), &c, &err) < 0 && strstr(err.msg, "PLIMSOLL_TLS_KEY is set without PLIMSOLL_TLS_CERT"));
    CHECK(load(ENV("PLIMSOLL_TLS_CERT=/x", "PLIMSOLL_TLS_KEY=/y"), &c, &err) == 0 && !strcmp(c.tls_cert, "/x") &&
          !strcmp(c.tls_key, "/y"));
    CHECK(load(ENV("PLIMSOLL_GRANTS_FILE=/x"), &c, &err) == 0 && strcmp(c.grants_file, "/x") == 0);
    CHECK(load(ENV("SANDBOX_MAX_SESSIONS=4"), &c, &err) == 0 && c.sessions.max_sessions == 4);
    CHECK(load(ENV("PLIMSOLL_INSECURE=yes"), &c, &err) < 0);
    /* the egress guard's listener belongs to the e2b provider only */
    CHECK(load(ENV("PLIMSOLL_GUARD_ADDR=127.0.0.1:0"), &c, &err) < 0 && strstr(err.msg, "PLIMSOLL_GUARD_ADDR"));
    CHECK(load(ENV("SANDBOX_PROVIDER=e2b", "PLIMSOLL_GUARD_ADDR=127.0.0.1:0"), &c, &err) == 0 &&
          c.provider == CFG_E2B && strcmp(c.guard_addr, "127.0.0.1:0") == 0);
    CHECK(load(ENV("PLIMSOLL_INSECURE=1"), &c, &err) == 0 && !c.ui); /* off by default */
    CHECK(load(ENV("PLIMSOLL_UI=1"), &c, &err) == 0 && c.ui);
    CHECK(load(ENV("PLIMSOLL_UI=0"), &c, &err) == 0 && !c.ui);
    CHECK(load(ENV("PLIMSOLL_UI=on"), &c, &err) < 0 && strstr(err.msg, "PLIMSOLL_UI"));
    /* PLIMSOLL_HARDENED=1 (wire.md §17): every unmet requirement named in one error */
    CHECK(load(ENV("PLIMSOLL_HARDENED=yes"), &c, &err) < 0 && strstr(err.msg, "PLIMSOLL_HARDENED"));
    CHECK(load(ENV("PLIMSOLL_HARDENED=0", "SANDBOX_PROVIDER=quickjs"), &c, &err) == 0);
    CHECK(load(ENV("PLIMSOLL_HARDENED=1", "SANDBOX_PROVIDER=quickjs", "PLIMSOLL_ADDR=:8746", "SANDBOX_RATE_PER_MIN=0"),
               &c, &err) < 0);
    CHECK(strstr(err.msg, "verified kernel isolation") && strstr(err.msg, "PLIMSOLL_CLIENTS_FILE") && strstr(err.msg, "PLIMSOLL_ADDR=:8746") &&
          strstr(err.msg, "resource envelope") && strstr(err.msg, "rate cap"));
    CHECK(strstr(err.msg, "5 requirements unmet") != NULL);
#define HARD_MICROVM "PLIMSOLL_HARDENED=1", "SANDBOX_PROVIDER=microvm", "PLIMSOLL_CLIENTS_FILE=/etc/plimsoll/clients.json", \
                     "SANDBOX_MEMORY_MB=256", "SANDBOX_CPUS=1"
    CHECK(load(ENV(HARD_MICROVM), &c, &err) == 0 && c.min_isolation == PLM_TIER_KERNEL);
    CHECK(load(ENV(HARD_MICROVM, "SANDBOX_MIN_ISOLATION=vm"), &c, &err) == 0 && c.min_isolation == PLM_TIER_VM);
    CHECK(load(ENV(HARD_MICROVM, "PLIMSOLL_ADDR=[::1]:8746", "PLIMSOLL_METRICS_ADDR=off"), &c, &err) == 0);
    CHECK(load(ENV(HARD_MICROVM, "PLIMSOLL_METRICS_ADDR=0.0.0.0:9464"), &c, &err) < 0 &&
          strstr(err.msg, "PLIMSOLL_METRICS_ADDR=0.0.0.0:9464") && strstr(err.msg, "1 requirement unmet"));
    /* TLS meets "TLS whenever the listener is not loopback", on RPC and metrics alike */
    CHECK(load(ENV(HARD_MICROVM, "PLIMSOLL_ADDR=0.0.0.0:8746", "PLIMSOLL_METRICS_ADDR=0.0.0.0:9464"), &c, &err) < 0 &&
          strstr(err.msg, "PLIMSOLL_ADDR=0.0.0.0:8746") && strstr(err.msg, "2 requirements unmet"));
    CHECK(load(ENV(HARD_MICROVM, "PLIMSOLL_ADDR=0.0.0.0:8746", "PLIMSOLL_METRICS_ADDR=0.0.0.0:9464", "PLIMSOLL_TLS_CERT=/c.pem",
                   "PLIMSOLL_TLS_KEY=/k.pem"), &c, &err) == 0);
    CHECK(load(ENV(HARD_MICROVM, "PLIMSOLL_INSECURE=1"), &c, &err) < 0 && strstr(err.msg, "multi-client"));
    CHECK(load(ENV(HARD_MICROVM, "SANDBOX_MAX_SESSIONS=4"), &c, &err) < 0 && strstr(err.msg, "SANDBOX_MAX_SESSIONS_PER_CALLER"));
    CHECK(load(ENV(HARD_MICROVM, "SANDBOX_MAX_SESSIONS=4", "SANDBOX_MAX_SESSIONS_PER_CALLER=2"), &c, &err) == 0);
    CHECK(load(ENV(HARD_MICROVM, "SANDBOX_PER_KEY_CONCURRENT=8"), &c, &err) < 0 && strstr(err.msg, "concurrency cap"));
    CHECK(load(ENV("PLIMSOLL_HARDENED=1", "SANDBOX_PROVIDER=docker", "PLIMSOLL_CLIENTS_FILE=/c.json", "SANDBOX_MEMORY_MB=256",
                   "SANDBOX_CPUS=1", "SANDBOX_PIDS=64"), &c, &err) < 0 &&
          strstr(err.msg, "SANDBOX_DOCKER_RUNTIME=runsc") && strstr(err.msg, "SANDBOX_REQUIRE_PINNED_IMAGES"));
#define HARD_DOCKER "PLIMSOLL_HARDENED=1", "SANDBOX_PROVIDER=docker", "SANDBOX_DOCKER_RUNTIME=runsc", \
                    "PLIMSOLL_CLIENTS_FILE=/c.json", "SANDBOX_MEMORY_MB=256", "SANDBOX_CPUS=1", "SANDBOX_PIDS=64", \
                    "SANDBOX_REQUIRE_PINNED_IMAGES=1"
    /* docker also needs the disk cap and the memory budget across runs (issue 23 item 5) */
    CHECK(load(ENV(HARD_DOCKER), &c, &err) < 0 && strstr(err.msg, "SANDBOX_DISK_MB") &&
          strstr(err.msg, "SANDBOX_TOTAL_MEMORY_MB") && strstr(err.msg, "1 requirement unmet"));
    CHECK(load(ENV(HARD_DOCKER, "SANDBOX_DISK_MB=512"), &c, &err) < 0 && strstr(err.msg, "resource envelope"));
    CHECK(load(ENV(HARD_DOCKER, "SANDBOX_TOTAL_MEMORY_MB=2048"), &c, &err) < 0 && strstr(err.msg, "resource envelope"));
    CHECK(load(ENV(HARD_DOCKER, "SANDBOX_DISK_MB=512", "SANDBOX_TOTAL_MEMORY_MB=2048"), &c, &err) == 0 &&
          c.min_isolation == PLM_TIER_KERNEL);
    /* no seccomp filter is no hardened daemon */
    CHECK(load(ENV(HARD_DOCKER, "SANDBOX_DISK_MB=512", "SANDBOX_TOTAL_MEMORY_MB=2048", "SANDBOX_DOCKER_SECCOMP=unconfined"),
               &c, &err) < 0 && strstr(err.msg, "SANDBOX_DOCKER_SECCOMP=unconfined"));
    /* a burst above the rate lets a caller spend more than a minute's runs at once */
    CHECK(load(ENV(HARD_MICROVM, "SANDBOX_RATE_PER_MIN=10", "SANDBOX_RATE_BURST=11"), &c, &err) < 0 &&
          strstr(err.msg, "SANDBOX_RATE_BURST=11"));
    CHECK(load(ENV(HARD_MICROVM, "SANDBOX_RATE_PER_MIN=10", "SANDBOX_RATE_BURST=10"), &c, &err) == 0);
    /* per-caller concurrency below the maximum even at 1 (so a hardened daemon runs 2 at least) */
    CHECK(load(ENV(HARD_MICROVM, "SANDBOX_MAX_CONCURRENT=1", "SANDBOX_PER_KEY_CONCURRENT=1"), &c, &err) < 0 &&
          strstr(err.msg, "concurrency cap"));
    CHECK(load(ENV(HARD_MICROVM, "SANDBOX_MAX_CONCURRENT=2", "SANDBOX_PER_KEY_CONCURRENT=1"), &c, &err) == 0);
    /* e2b passes with an explicit template and the envelope; the per-caller allowance is checked
     * against the clients file once it is read (test_paid_allowance.py) */
    CHECK(load(ENV("PLIMSOLL_HARDENED=1", "SANDBOX_PROVIDER=e2b", "PLIMSOLL_CLIENTS_FILE=/c.json", "SANDBOX_MEMORY_MB=256"),
               &c, &err) < 0 && strstr(err.msg, "E2B_TEMPLATE") && strstr(err.msg, "1 requirement unmet"));
    CHECK(load(ENV("PLIMSOLL_HARDENED=1", "SANDBOX_PROVIDER=e2b", "PLIMSOLL_CLIENTS_FILE=/c.json", "E2B_TEMPLATE=tpl-1",
                   "SANDBOX_MEMORY_MB=256"), &c, &err) == 0 && c.hardened && c.min_isolation == PLM_TIER_KERNEL);
    CHECK(load(ENV("PLIMSOLL_HARDENED=1", "SANDBOX_PROVIDER=e2b", "PLIMSOLL_CLIENTS_FILE=/c.json", "E2B_TEMPLATE=tpl-1"),
               &c, &err) < 0 && strstr(err.msg, "resource envelope"));
    return unit_done();
}
