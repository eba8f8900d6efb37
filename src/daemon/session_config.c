/* session_config.c: SANDBOX_MAX_SESSIONS* and SANDBOX_SESSION_* (sessions.md §3.1).
 * The durations take Go's syntax because that is what operators of the reference write; a bare
 * number ("30") is refused rather than guessed as seconds or minutes. */
#include "session_config.h"

#include <ctype.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#define S_MS 1000ull
#define H12_MS (12ull * 3600 * S_MS)
#define CFG_ERR(err, ...) plm_fail(err, 0, PLM_E_INVALID, __VA_ARGS__)

/* Nanoseconds per unit, longest names first so "ms" is not read as "m". */
static const struct {
    const char *name;
    uint64_t ns;
} units[] = {{"ns", 1},       {"us", 1000},        {"\xc2\xb5s", 1000}, {"\xce\xbcs", 1000},
             {"ms", 1000000}, {"s", 1000000000ull}, {"m", 60000000000ull}, {"h", 3600000000000ull}};

int session_parse_duration(const char *s, uint64_t *ms_out)
{
    if (!s || !*s)
        return -1;
    if (*s == '+')
        s++;
    else if (*s == '-') /* a negative duration is never a valid session time */
        return strcmp(s, "-0") == 0 ? (*ms_out = 0, 0) : -1;
    if (strcmp(s, "0") == 0)
        return *ms_out = 0, 0;
    /* Sum in nanoseconds as a double-free integer: each term bounded well below 2^63. */
    unsigned __int128 total_ns = 0;
    const char *p = s;
    if (!*p)
        return -1;
    while (*p) {
        uint64_t whole = 0, frac = 0, frac_scale = 1;
        bool digits = false;
        while (isdigit((unsigned char)*p)) {
            if (whole > UINT64_MAX / 10 - 10)
                return -1;
            whole = whole * 10 + (uint64_t)(*p++ - '0');
            digits = true;
        }
        if (*p == '.') {
            p++;
            while (isdigit((unsigned char)*p)) {
                if (frac_scale < 1000000000000000000ull) {
                    frac = frac * 10 + (uint64_t)(*p - '0');
                    frac_scale *= 10;
                }
                p++;
                digits = true;
            }
        }
        if (!digits)
            return -1;
        size_t k = 0, n = sizeof units / sizeof *units;
        for (; k < n; k++)
            if (strncmp(p, units[k].name, strlen(units[k].name)) == 0)
                break;
        if (k == n)
            return -1; /* a number without a unit */
        p += strlen(units[k].name);
        total_ns += (unsigned __int128)whole * units[k].ns + (unsigned __int128)frac * units[k].ns / frac_scale;
        if (total_ns > (unsigned __int128)INT64_MAX) /* Go's own overflow bound */
            return -1;
    }
    *ms_out = (uint64_t)(total_ns / 1000000);
    return 0;
}

static int parse_count(const char *name, const char *v, uint64_t hi, uint64_t *out, struct plm_err *err)
{
    char *end;
    errno = 0;
    if (!isdigit((unsigned char)v[0]))
        return CFG_ERR(err, "%s=\"%s\": expected a whole number from 0 to %llu", name, v, (unsigned long long)hi);
    unsigned long long x = strtoull(v, &end, 10);
    if (errno || *end || x > hi)
        return CFG_ERR(err, "%s=\"%s\": expected a whole number from 0 to %llu", name, v, (unsigned long long)hi);
    *out = x;
    return 0;
}

static int parse_time(const char *name, const char *v, bool zero_ok, uint64_t *out, struct plm_err *err)
{
    uint64_t ms;
    if (session_parse_duration(v, &ms) < 0)
        return CFG_ERR(err, "%s=\"%s\": expected a duration such as 90s, 30m or 2h", name, v);
    if ((ms == 0 && !zero_ok) || (ms != 0 && (ms < S_MS || ms > H12_MS)))
        return CFG_ERR(err, "%s=\"%s\": expected %s1s to 12h", name, v, zero_ok ? "0 (never) or " : "");
    *out = ms;
    return 0;
}

static const char *set(const char *(*get)(const char *), const char *name)
{
    const char *v = get(name);
    return v && *v ? v : NULL;
}

int session_config_load(const char *(*get)(const char *), struct plm_session_config *c, struct plm_err *err)
{
    *c = (struct plm_session_config){.lifetime_ms = 30 * 60 * S_MS, .idle_ms = 5 * 60 * S_MS,
                                     .disk_bytes = 1024ull << 20};
    const char *v;
    uint64_t x;
    if ((v = set(get, "SANDBOX_MAX_SESSIONS"))) {
        if (parse_count("SANDBOX_MAX_SESSIONS", v, 1000000, &x, err) < 0)
            return -1;
        c->max_sessions = (uint32_t)x;
    }
    if ((v = set(get, "SANDBOX_MAX_SESSIONS_PER_CALLER"))) {
        if (parse_count("SANDBOX_MAX_SESSIONS_PER_CALLER", v, 1000000, &x, err) < 0)
            return -1;
        c->per_caller = (uint32_t)x;
    }
    if ((v = set(get, "SANDBOX_MAX_SESSIONS_PER_OWNER"))) {
        if (parse_count("SANDBOX_MAX_SESSIONS_PER_OWNER", v, 1000000, &x, err) < 0)
            return -1;
        c->per_owner = (uint32_t)x;
    }
    if ((v = set(get, "SANDBOX_SESSION_LIFETIME")) && parse_time("SANDBOX_SESSION_LIFETIME", v, false, &c->lifetime_ms, err) < 0)
        return -1;
    if ((v = set(get, "SANDBOX_SESSION_IDLE")) && parse_time("SANDBOX_SESSION_IDLE", v, true, &c->idle_ms, err) < 0)
        return -1;
    if ((v = set(get, "SANDBOX_SESSION_DISK_MB"))) {
        if (parse_count("SANDBOX_SESSION_DISK_MB", v, 1048576, &x, err) < 0)
            return -1;
        c->disk_bytes = x << 20;
    }
    if ((v = set(get, "SANDBOX_SESSION_POOL"))) {
        if (parse_count("SANDBOX_SESSION_POOL", v, 1000000, &x, err) < 0)
            return -1;
        c->pool = (uint32_t)x;
        if (c->pool > c->max_sessions)
            return CFG_ERR(err, "SANDBOX_SESSION_POOL=%u exceeds SANDBOX_MAX_SESSIONS=%u (and needs sessions on)",
                           c->pool, c->max_sessions);
        /* Only docker keeps a session pool: asking another provider for one must not pass silently. */
        const char *prov = get("SANDBOX_PROVIDER");
        if (c->pool > 0 && !(prov && !strcmp(prov, "docker")))
            return CFG_ERR(err, "SANDBOX_SESSION_POOL=%u: only the docker provider keeps a session pool; unset it",
                           c->pool);
    }
    return 0;
}
