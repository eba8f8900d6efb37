/* session_config_test.c: sessions.md §3.1 vectors (checklist item 48) and the duration syntax. */
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
#define REJECTS(var, val) (load(ENV(var "=" val), &c, &err) < 0 && strstr(err.msg, var))

int main(void)
{
    struct plm_config c;
    struct plm_err err = {0};
    /* defaults: off, 30m, 5m, 1 GiB */
    CHECK(load(ENV("X=1"), &c, &err) == 0);
    CHECK(c.sessions.max_sessions == 0 && c.sessions.per_caller == 0 && c.sessions.per_owner == 0);
    CHECK(c.sessions.lifetime_ms == 30 * 60 * 1000 && c.sessions.idle_ms == 5 * 60 * 1000);
    CHECK(c.sessions.disk_bytes == 1024ull << 20);
    /* the accepted vector */
    CHECK(load(ENV("SANDBOX_MAX_SESSIONS=3", "SANDBOX_MAX_SESSIONS_PER_CALLER=2", "SANDBOX_SESSION_LIFETIME=90s",
                   "SANDBOX_SESSION_IDLE=0", "SANDBOX_SESSION_DISK_MB=0"),
               &c, &err) == 0);
    CHECK(c.sessions.max_sessions == 3 && c.sessions.per_caller == 2 && c.sessions.lifetime_ms == 90000);
    CHECK(c.sessions.idle_ms == 0 && c.sessions.disk_bytes == 0);
    CHECK(load(ENV("SANDBOX_MAX_SESSIONS_PER_OWNER=5", "SANDBOX_SESSION_IDLE=1h30m", "SANDBOX_SESSION_DISK_MB=1048576"),
               &c, &err) == 0);
    CHECK(c.sessions.per_owner == 5 && c.sessions.idle_ms == 5400000 && c.sessions.disk_bytes == 1048576ull << 20);
    CHECK(load(ENV("SANDBOX_SESSION_LIFETIME=12h", "SANDBOX_SESSION_IDLE=1s"), &c, &err) == 0);
    CHECK(c.sessions.lifetime_ms == 12ull * 3600 * 1000 && c.sessions.idle_ms == 1000);
    /* the rejected vectors, each naming its variable; validated with sessions off too */
    CHECK(REJECTS("SANDBOX_MAX_SESSIONS", "-1"));
    CHECK(REJECTS("SANDBOX_MAX_SESSIONS", "two"));
    CHECK(REJECTS("SANDBOX_MAX_SESSIONS_PER_CALLER", "-1"));
    CHECK(REJECTS("SANDBOX_MAX_SESSIONS_PER_OWNER", "x"));
    CHECK(REJECTS("SANDBOX_SESSION_LIFETIME", "30"));
    CHECK(REJECTS("SANDBOX_SESSION_LIFETIME", "13h"));
    CHECK(REJECTS("SANDBOX_SESSION_LIFETIME", "500ms"));
    CHECK(REJECTS("SANDBOX_SESSION_LIFETIME", "0"));
    CHECK(REJECTS("SANDBOX_SESSION_IDLE", "-1s"));
    CHECK(REJECTS("SANDBOX_SESSION_IDLE", "1200h"));
    CHECK(REJECTS("SANDBOX_SESSION_IDLE", "13h"));
    CHECK(REJECTS("SANDBOX_SESSION_IDLE", "500ms"));
    CHECK(REJECTS("SANDBOX_SESSION_DISK_MB", "-5"));
    CHECK(REJECTS("SANDBOX_SESSION_DISK_MB", "1048577"));
    CHECK(REJECTS("SANDBOX_SESSION_DISK_MB", "17592186044416"));
    CHECK(REJECTS("SANDBOX_SESSION_POOL", "1")); /* more than MAX_SESSIONS (0) */
    CHECK(load(ENV("SANDBOX_MAX_SESSIONS=2", "SANDBOX_SESSION_POOL=1"), &c, &err) < 0 &&
          strstr(err.msg, "SANDBOX_SESSION_POOL")); /* no provider here keeps a pool */
    CHECK(load(ENV("SANDBOX_SESSION_POOL=0"), &c, &err) == 0);
    CHECK(load(ENV("SANDBOX_PROVIDER=docker", "SANDBOX_MAX_SESSIONS=2", "SANDBOX_SESSION_POOL=2"), &c, &err) == 0 &&
          c.sessions.pool == 2); /* docker keeps one */
    /* Go duration syntax */
    uint64_t ms = 7;
    CHECK(session_parse_duration("0", &ms) == 0 && ms == 0);
    CHECK(session_parse_duration("1.5h", &ms) == 0 && ms == 5400000);
    CHECK(session_parse_duration("2m3s", &ms) == 0 && ms == 123000);
    CHECK(session_parse_duration("1500us", &ms) == 0 && ms == 1);
    CHECK(session_parse_duration(".5s", &ms) == 0 && ms == 500);
    CHECK(session_parse_duration("", &ms) < 0);
    CHECK(session_parse_duration("s", &ms) < 0);
    CHECK(session_parse_duration("1x", &ms) < 0);
    CHECK(session_parse_duration("1s ", &ms) < 0);
    CHECK(session_parse_duration("99999999999999999999h", &ms) < 0);
    CHECK(session_parse_duration("3000000h", &ms) < 0); /* past int64 nanoseconds, as Go refuses */
    return unit_done();
}
