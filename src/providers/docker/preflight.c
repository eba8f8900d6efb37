/* preflight.c: configuration rules and the readiness check served at /readyz (providers.md §3.7).
 * Owns: the endpoint rule (DOCKER_HOST), the image reference and pinning rules, the image ENV
 * rule, and the refresh of the provider's readiness.
 * Trusts: nothing dockerd reports without a type check; the configured strings only after the
 * rules here passed.
 * Invariant: bounded (10 s in all) and cached (success for 5 s); one refresh at a time, a second
 * caller waits at most 2 s; a failed refresh makes the provider not ready and drops the verified
 * runtime (so the tier falls to container at once); images proven at startup are never swapped
 * for what a tag points at later: a re-pointed tag refuses runs (reason environment). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "internal.h"

#define PF_BUDGET_MS 10000
#define PF_CACHE_MS 5000
#define PF_WAIT_MS 2000

int dock_parse_host(const char *h, char sock[108], struct plm_err *err)
{
    const char *path = NULL;
    if (!h || !*h)
        path = "/var/run/docker.sock";
    else if (strncmp(h, "unix://", 7) == 0)
        path = h + 7;
    else if (h[0] == '/')
        path = h;
    /* tcp://, ssh://, https://, npipe://, fd:// or a bare name: a daemon we cannot pin to this host */
    if (!path || path[0] != '/')
        return plm_fail(err, 0, PLM_E_INVALID,
                        "DOCKER_HOST=\"%s\" names a remote daemon; only a local unix socket "
                        "(unix:///path or /path) is accepted",
                        h);
    if (strlen(path) >= 108)
        return plm_fail(err, ENAMETOOLONG, PLM_E_INVALID, "DOCKER_HOST: socket path too long");
    for (const char *p = path; *p; p++)
        if ((unsigned char)*p < 0x20 || *p == 0x7f || *p == '?' || *p == '#')
            return plm_fail(err, 0, PLM_E_INVALID, "DOCKER_HOST: bad character in the socket path");
    snprintf(sock, 108, "%s", path);
    return 0;
}

int dock_ref_check(const char *what, const char *ref, struct plm_err *err)
{
    if (!ref || !*ref)
        return plm_fail(err, 0, PLM_E_INVALID, "%s is empty", what);
    size_t n = strlen(ref);
    if (n > 255)
        return plm_fail(err, 0, PLM_E_INVALID, "%s is longer than 255 bytes", what);
    /* A leading '-' would read as a flag to any tool the string ever reaches (--runtime=runc). */
    if (ref[0] == '-')
        return plm_fail(err, 0, PLM_E_INVALID, "%s=\"%s\" starts with '-'", what, ref);
    for (const char *p = ref; *p; p++) {
        char c = *p;
        bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' || c == '_' ||
                  c == '-' || c == '/' || c == ':' || c == '@';
        if (!ok)
            return plm_fail(err, 0, PLM_E_INVALID, "%s=\"%s\": only [A-Za-z0-9._/:@-] may appear in an image reference",
                            what, ref);
    }
    return 0;
}

bool dock_ref_pinned(const char *ref)
{
    const char *at = strchr(ref, '@');
    if (!at || at == ref || strchr(at + 1, '@') || strncmp(at + 1, "sha256:", 7) != 0)
        return false;
    const char *hex = at + 8;
    size_t n = 0;
    for (; hex[n]; n++)
        if (!((hex[n] >= '0' && hex[n] <= '9') || (hex[n] >= 'a' && hex[n] <= 'f')))
            return false;
    return n == 64;
}

int dock_env_check(const char *e, struct plm_err *err)
{
    const char *eq = strchr(e, '=');
    size_t n = eq ? (size_t)(eq - e) : 0;
    if (!eq || n == 0 || n > 128)
        return plm_fail(err, 0, PLM_E_INVALID, "image ENV entry \"%.60s\" is not NAME=value", e);
    for (size_t i = 0; i < n; i++) {
        char c = e[i];
        bool ok = c == '_' || (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (i && c >= '0' && c <= '9');
        if (!ok)
            return plm_fail(err, 0, PLM_E_INVALID, "image ENV name \"%.*s\" is not an identifier", (int)n, e);
    }
    static const char *const banned[] = {"GLIBC_TUNABLES", "LOCPATH", "NLSPATH", "GCONV_PATH"};
    bool bad = n >= 3 && strncmp(e, "LD_", 3) == 0;
    for (size_t i = 0; i < sizeof banned / sizeof *banned && !bad; i++)
        bad = strlen(banned[i]) == n && strncmp(e, banned[i], n) == 0;
    if (bad)
        return plm_fail(err, 0, PLM_E_INVALID, "the image sets %.*s, which steers the dynamic loader or libc; refused",
                        (int)n, e);
    for (const char *p = eq + 1; *p; p++)
        if ((unsigned char)*p < 0x20 || *p == 0x7f)
            return plm_fail(err, 0, PLM_E_INVALID, "image ENV %.*s holds a control character", (int)n, e);
    return 0;
}

static long budget(int64_t deadline, long cap)
{
    int64_t left = deadline - (int64_t)clock_mono_ms();
    if (left < 1)
        left = 1;
    return left < cap ? (long)left : cap;
}

static void free_env(char **env, size_t n)
{
    for (size_t i = 0; i < n; i++)
        free(env[i]);
    free(env);
}

struct observed {
    char id[DOCK_KINDS][72];
    char platform[DOCK_KINDS][56];
    char **env[DOCK_KINDS];
    size_t n_env[DOCK_KINDS];
    char runtime_path[256], docker_version[64], runc_version[64], cgroup_version[8];
    struct dock_posture posture;
};

static void copy_json_str(char *dst, size_t cap, json_t *v)
{
    const char *s = json_string_value(v);
    size_t k = 0;
    for (; s && *s && k + 1 < cap; s++)
        dst[k++] = (*s >= 0x20 && *s < 0x7f) ? *s : '?';
    dst[k] = 0;
}

static int check_image(struct dock_state *s, int k, int64_t deadline, struct observed *o, struct plm_err *err)
{
    const char *what = k == DOCK_SNIPPET   ? "SANDBOX_DOCKER_IMAGE"
                       : k == DOCK_PROJECT ? "SANDBOX_DOCKER_PROJECT_IMAGE"
                       : k == DOCK_MODULE  ? "SANDBOX_DOCKER_MODULE_IMAGE"
                                           : "SANDBOX_DOCKER_SESSION_IMAGE";
    if (!s->ref[k][0])
        return 0; /* no session or module image: sessions or modules are off */
    char path[400];
    snprintf(path, sizeof path, DOCK_API "/images/%s/json", s->ref[k]);
    json_t *j;
    if (dock_call_json(&s->eng, "GET", path, NULL, 200, budget(deadline, 5000), 4 * 1024 * 1024, &j, err) < 0)
        return plm_err_wrap(err, "%s=%s", what, s->ref[k]);
    int r = 0;
    const char *id = json_string_value(json_object_get(j, "Id"));
    json_t *cfg = json_object_get(j, "Config");
    json_t *vols = json_object_get(cfg, "Volumes");
    json_t *env = json_object_get(cfg, "Env");
    const char *os = json_string_value(json_object_get(j, "Os"));
    if (!id || strncmp(id, "sha256:", 7) != 0 || !dock_id_ok(id + 7))
        r = plm_fail(err, 0, PLM_E_INTERNAL, "%s=%s: dockerd reported no sha256 image ID", what, s->ref[k]);
    else if (!json_is_object(cfg))
        r = plm_fail(err, 0, PLM_E_INTERNAL, "%s=%s: no image Config", what, s->ref[k]);
    else if (vols && !json_is_null(vols) && !(json_is_object(vols) && json_object_size(vols) == 0))
        r = plm_fail(err, 0, PLM_E_INVALID,
                     "%s=%s declares a VOLUME; an anonymous volume would be writable and outlive the run", what,
                     s->ref[k]);
    else if (os && strcmp(os, "linux") != 0)
        r = plm_fail(err, 0, PLM_E_INVALID, "%s=%s is not a linux image", what, s->ref[k]);
    else if (env && !json_is_null(env) && (!json_is_array(env) || json_array_size(env) > 64))
        r = plm_fail(err, 0, PLM_E_INVALID, "%s=%s: ENV is not a list of at most 64 entries", what, s->ref[k]);
    if (!r && dock_platform(j, o->platform[k], sizeof o->platform[k], err) < 0)
        r = plm_err_wrap(err, "%s=%s", what, s->ref[k]);
    if (!r) {
        snprintf(o->id[k], sizeof o->id[k], "%s", id);
        size_t n = json_is_array(env) ? json_array_size(env) : 0;
        o->env[k] = calloc(n + 1, sizeof *o->env[k]);
        if (!o->env[k])
            r = plm_fail(err, ENOMEM, PLM_E_INTERNAL, "out of memory");
        for (size_t i = 0; !r && i < n; i++) {
            const char *e = json_string_value(json_array_get(env, i));
            if (!e || strlen(e) > 4096)
                r = plm_fail(err, 0, PLM_E_INVALID, "%s=%s: an ENV entry is not a short string", what, s->ref[k]);
            else if (dock_env_check(e, err) < 0)
                r = plm_err_wrap(err, "%s=%s", what, s->ref[k]);
            else if (!(o->env[k][o->n_env[k]++] = strdup(e)))
                r = plm_fail(err, ENOMEM, PLM_E_INTERNAL, "out of memory");
        }
    }
    json_decref(j);
    return r;
}

static int check_daemon(struct dock_state *s, int64_t deadline, struct observed *o, struct plm_err *err)
{
    struct dock_reply ping;
    if (dock_call(&s->eng, "GET", "/_ping", NULL, budget(deadline, 3000), 1024, &ping, err) < 0)
        return -1;
    long st = ping.status;
    dock_reply_done(&ping);
    if (st != 200)
        return plm_fail(err, 0, PLM_E_UNAVAILABLE, "dockerd on %s answered /_ping with HTTP %ld", s->eng.sock, st);
    json_t *info cleanup_json = NULL;
    if (dock_call_json(&s->eng, "GET", DOCK_API "/info", NULL, 200, budget(deadline, 5000), 1024 * 1024, &info, err) <
        0)
        return plm_err_wrap(err, "docker info");
    copy_json_str(o->docker_version, sizeof o->docker_version, json_object_get(info, "ServerVersion"));
    copy_json_str(o->cgroup_version, sizeof o->cgroup_version, json_object_get(info, "CgroupVersion"));
    if (dock_posture_from_info(info, dock_peer_uid(s->eng.sock), &o->posture, err) < 0)
        return -1;
    json_t *rt = json_object_get(json_object_get(info, "Runtimes"), s->runtime);
    const char *p = json_string_value(json_object_get(rt, "path"));
    int r = 0;
    if (!json_is_object(rt) || !p)
        r = plm_fail(err, 0, PLM_E_INVALID,
                     "runtime %s is not registered with dockerd (see \"runtimes\" in /etc/docker/daemon.json)",
                     s->runtime);
    else if (s->runsc) {
        /* The tier claim rests on this: the registered program must be gVisor's runsc. */
        const char *base = strrchr(p, '/');
        base = base ? base + 1 : p;
        if (strcmp(base, "runsc") != 0)
            r = plm_fail(err, 0, PLM_E_INVALID,
                         "runtime runsc is registered with path \"%.100s\", which is not a runsc executable", p);
    }
    if (p)
        snprintf(o->runtime_path, sizeof o->runtime_path, "%s", p);
    if (r)
        return r;
    json_t *ver cleanup_json = NULL;
    if (dock_call_json(&s->eng, "GET", DOCK_API "/version", NULL, 200, budget(deadline, 5000), 256 * 1024, &ver, err) <
        0)
        return plm_err_wrap(err, "docker version");
    size_t i;
    json_t *c;
    json_array_foreach(json_object_get(ver, "Components"), i, c)
    {
        const char *name = json_string_value(json_object_get(c, "Name"));
        if (name && !strcmp(name, "runc"))
            copy_json_str(o->runc_version, sizeof o->runc_version, json_object_get(c, "Version"));
    }
    return 0;
}

static int refresh(struct dock_state *s, struct plm_err *err)
{
    int64_t deadline = (int64_t)clock_mono_ms() + PF_BUDGET_MS;
    struct observed o = {0};
    int r = check_daemon(s, deadline, &o, err);
    for (int k = 0; !r && k < DOCK_KINDS; k++)
        r = check_image(s, k, deadline, &o, err);
    if (!r && s->have_ids && o.posture.mode != s->posture.mode)
        r = plm_fail(err, 0, PLM_E_ENVIRONMENT,
                     "dockerd's posture is now %s (%.100s), but %s was proven at startup; restart plimsolld",
                     dock_mode_name(o.posture.mode), o.posture.why, dock_mode_name(s->posture.mode));
    if (!r && s->have_ids) {
        for (int k = 0; k < DOCK_KINDS && !r; k++)
            if (strcmp(o.id[k], s->id[k]) != 0) {
                atomic_store(&s->repointed, true);
                r = plm_fail(err, 0, PLM_E_ENVIRONMENT,
                             "%s now resolves to %.19s, but %.19s was proven at startup; restart plimsolld to "
                             "prove the new image",
                             s->ref[k], o.id[k], s->id[k]);
            }
    } else if (!r) {
        /* First success, before anything is served: these become read-only from here on. */
        for (int k = 0; k < DOCK_KINDS; k++) {
            memcpy(s->id[k], o.id[k], sizeof s->id[k]);
            memcpy(s->platform[k], o.platform[k], sizeof s->platform[k]);
            dock_software_identity(s->platform[k], s->id[k], s->software_identity[k], sizeof s->software_identity[k]);
            s->env[k] = o.env[k];
            s->n_env[k] = o.n_env[k];
            o.env[k] = NULL, o.n_env[k] = 0;
        }
        snprintf(s->runtime_path, sizeof s->runtime_path, "%s", o.runtime_path);
        snprintf(s->docker_version, sizeof s->docker_version, "%s", o.docker_version);
        snprintf(s->runc_version, sizeof s->runc_version, "%s", o.runc_version);
        snprintf(s->cgroup_version, sizeof s->cgroup_version, "%s", o.cgroup_version);
        s->posture = o.posture;
        s->have_ids = true;
    }
    for (int k = 0; k < DOCK_KINDS; k++)
        free_env(o.env[k], o.n_env[k]);
    pthread_mutex_lock(&s->mu);
    if (r == 0) {
        s->pf_ok_ms = (int64_t)clock_mono_ms();
        s->pf_err[0] = 0;
    } else {
        s->pf_ok_ms = 0;
        snprintf(s->pf_err, sizeof s->pf_err, "%.200s", err ? err->msg : "preflight failed");
    }
    pthread_mutex_unlock(&s->mu);
    atomic_store(&s->ready, r == 0);
    atomic_store(&s->runtime_verified, r == 0);
    return r;
}

static bool cached(struct dock_state *s)
{
    pthread_mutex_lock(&s->mu);
    bool ok = s->pf_ok_ms && (int64_t)clock_mono_ms() - s->pf_ok_ms < PF_CACHE_MS;
    pthread_mutex_unlock(&s->mu);
    return ok;
}

int dock_preflight(struct dock_state *s, struct plm_err *err)
{
    if (cached(s))
        return 0;
    int64_t until = (int64_t)clock_mono_ms() + PF_WAIT_MS;
    while (pthread_mutex_trylock(&s->pf_run) != 0) {
        if ((int64_t)clock_mono_ms() >= until)
            return plm_fail(err, EBUSY, PLM_E_UNAVAILABLE, "preflight: already in progress");
        struct timespec ts = {0, 20 * 1000 * 1000};
        nanosleep(&ts, NULL);
        if (cached(s))
            return 0;
    }
    int r = cached(s) ? 0 : refresh(s, err);
    pthread_mutex_unlock(&s->pf_run);
    return r < 0 ? plm_err_wrap(err, "docker preflight") : 0;
}
