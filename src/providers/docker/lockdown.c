/* lockdown.c: the one place the container's walls are written down (providers.md §3.1-3.2).
 * Owns: the create body every container of this provider gets, and its rendering as evidence
 * lines; the rules for the seccomp profile, the guest uid and the disk budget.
 * Trusts: struct dock_lockdown, which the constructor filled from checked configuration.
 * Invariant: dock_spec() and dock_lockdown_lines() read the same struct, so what the evidence
 * card claims is what every container is created with; nothing else builds a create body. */
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "internal.h"
#include "session_grant.h"

#define UID_DEFAULT 61000u

static json_t *strings(const char *const *v, size_t n)
{
    json_t *a = json_array();
    for (size_t i = 0; a && i < n; i++)
        json_array_append_new(a, json_string(v[i]));
    return a;
}

static json_t *ulimit(const char *name, json_int_t v)
{
    return json_pack("{s:s, s:I, s:I}", "Name", name, "Soft", v, "Hard", v);
}

static char *tmpfs_opts(uint32_t mb, bool work)
{
    char *s = NULL;
    /* mode=1777 on /work: the mount is root's, the guest uid writes into it. WorkingDir stays "/"
     * and images carry no /work: dockerd would create or copy up a 0755 directory there and its
     * mode would win over this one. */
    if (asprintf(&s, "rw,noexec,nosuid,nodev,size=%um%s", mb, work ? ",mode=1777" : "") < 0)
        return NULL;
    return s;
}

/* json_object_set_new() takes v even on failure (and fails on a NULL o), so a failed allocation
 * anywhere only clears *ok and leaks nothing. */
static void set(json_t *o, const char *k, json_t *v, bool *ok)
{
    if (!v || json_object_set_new(o, k, v) < 0)
        *ok = false;
}

/* The grant's mounts (providers.md §3.2 item 10). Mounts rather than Binds: a bind whose source
 * vanished is an error there, where Binds would create an empty root-owned directory in its
 * place. rprivate: nothing mounted later on either side propagates across. */
static json_t *grant_mounts(const struct dock_grant_paths *g)
{
    /* A session's directory, writable by its owner only (0711), where each granted call's
     * socket appears under a random name (session_grant.c). */
    if (g->session_dir)
        return json_pack("[{s:s, s:s, s:s, s:b, s:{s:s}}]", "Type", "bind", "Source", g->session_dir, "Target",
                         DOCK_SG_DIR_IN, "ReadOnly", 0, "BindOptions", "Propagation", "rprivate");
    return json_pack("[{s:s, s:s, s:s, s:b, s:{s:s}}, {s:s, s:s, s:s, s:b, s:{s:s}}]", "Type", "bind", "Source",
                     g->sock, "Target", DOCK_HS_SOCK_IN, "ReadOnly", 0, "BindOptions", "Propagation", "rprivate",
                     "Type", "bind", "Source", g->preload, "Target", DOCK_HS_PRELOAD_IN, "ReadOnly", 1, "BindOptions",
                     "Propagation", "rprivate");
}

/* The HostConfig half of the spec: every wall of the lockdown. *ok turns false on any failure. */
static json_t *host_config(const struct dock_lockdown *l, enum dock_kind k, const struct dock_grant_paths *g, bool *okp)
{
    bool ok = *okp;
    json_int_t mem = (json_int_t)l->memory_mb * 1024 * 1024;
    char *t_tmp cleanup_free = tmpfs_opts(l->tmp_mb, false), *t_shm cleanup_free = tmpfs_opts(l->shm_mb, false),
                *t_work cleanup_free = tmpfs_opts(l->work_mb, true), *seccomp cleanup_free = NULL;

    json_t *h = json_object();
    if (!h)
        ok = false;
    set(h, "NetworkMode", json_string("none"), &ok);
    set(h, "ReadonlyRootfs", json_true(), &ok);
    set(h, "CapDrop", json_pack("[s]", "ALL"), &ok);
    json_t *sec = json_pack("[s]", "no-new-privileges");
    if (l->seccomp) {
        /* The Engine API wants the profile's JSON text itself, not a path. */
        if (asprintf(&seccomp, "seccomp=%s", l->seccomp) < 0)
            seccomp = NULL;
        if (!seccomp || !sec || json_array_append_new(sec, json_string(seccomp)) < 0)
            ok = false;
    }
    set(h, "SecurityOpt", sec, &ok);
    set(h, "Memory", json_integer(mem), &ok);
    set(h, "MemorySwap", json_integer(mem), &ok); /* = Memory: no swap */
    set(h, "PidsLimit", json_integer((json_int_t)l->pids), &ok);
    set(h, "NanoCpus", json_integer((json_int_t)(l->cpus * 1e9 + 0.5)), &ok);
    json_t *tmpfs = json_object();
    set(tmpfs, "/tmp", t_tmp ? json_string(t_tmp) : NULL, &ok);
    set(tmpfs, "/dev/shm", t_shm ? json_string(t_shm) : NULL, &ok);
    /* An empty read-only tmpfs hides the IPC namespace's mqueue fs, which dockerd mounts world-
     * writable (1777): the writable set is then exactly /tmp, /dev/shm (and /work). */
    set(tmpfs, "/dev/mqueue", json_string("ro,noexec,nosuid,nodev,size=4k"), &ok);
    if (k != DOCK_SNIPPET) /* projects and sessions */
        set(tmpfs, "/work", t_work ? json_string(t_work) : NULL, &ok);
    set(h, "Tmpfs", tmpfs, &ok);
    if (g)
        set(h, "Mounts", grant_mounts(g), &ok);
    set(h, "Ulimits", json_pack("[o,o]", ulimit("core", 0), ulimit("nofile", 4096)), &ok);
    set(h, "IpcMode", json_string("private"), &ok);
    set(h, "LogConfig", json_pack("{s:s, s:{}}", "Type", "none", "Config"), &ok);
    set(h, "Runtime", json_string(l->runtime), &ok);
    set(h, "Privileged", json_false(), &ok);
    set(h, "Init", json_false(), &ok);
    set(h, "AutoRemove", json_false(), &ok); /* we remove, after reading the result */
    set(h, "RestartPolicy", json_pack("{s:s}", "Name", "no"), &ok);
    *okp = ok;
    return h;
}

json_t *dock_spec(const struct dock_lockdown *l, enum dock_kind k, const char *image_id, const char *const *argv,
                  size_t argc, int64_t deadline_unix_s, const char *instance, const struct dock_grant_paths *g)
{
    bool ok = true;
    char user[32], deadline[24];
    snprintf(user, sizeof user, "%u:%u", l->uid, l->uid);
    snprintf(deadline, sizeof deadline, "%lld", (long long)deadline_unix_s);
    json_t *h = host_config(l, k, g, &ok);
    json_t *spec cleanup_json = json_object();
    if (!spec)
        ok = false;
    set(spec, "Image", json_string(image_id), &ok); /* the content ID preflight verified */
    set(spec, "Entrypoint", json_pack("[s]", "/usr/bin/env"), &ok);
    set(spec, "Cmd", strings(argv, argc), &ok);
    set(spec, "Env", json_array(), &ok);
    set(spec, "User", json_string(user), &ok);
    set(spec, "WorkingDir", json_string("/"), &ok);
    set(spec, "AttachStdin", json_true(), &ok);
    set(spec, "AttachStdout", json_true(), &ok);
    set(spec, "AttachStderr", json_true(), &ok);
    set(spec, "OpenStdin", json_true(), &ok);
    set(spec, "StdinOnce", json_true(), &ok);
    set(spec, "Tty", json_false(), &ok);
    set(spec, "NetworkDisabled", json_true(), &ok);
    set(spec, "Healthcheck", json_pack("{s:[s]}", "Test", "NONE"), &ok);
    json_t *labels = json_pack("{s:s, s:s}", DOCK_LABEL, instance, DOCK_LABEL_DEADLINE, deadline);
    if (k == DOCK_SESSION) { /* the startup sweep removes those whose daemon is gone (session.c) */
        char pid[24];
        snprintf(pid, sizeof pid, "%ld", (long)getpid());
        set(labels, DOCK_LABEL_SESSION, json_string(pid), &ok);
    }
    set(spec, "Labels", labels, &ok);
    set(spec, "StopSignal", json_string("SIGKILL"), &ok);
    set(spec, "HostConfig", h, &ok);
    return ok ? take_ptr(&spec) : NULL;
}

int dock_lockdown_lines(const struct dock_lockdown *l, const char *seccomp_desc, struct plm_evidence *ev)
{
    int r = 0;
    r |= ev_add_confinement(ev, "runtime %s", l->runtime);
    r |= ev_add_confinement(ev, "NetworkMode none, NetworkDisabled");
    r |= ev_add_confinement(ev, "ReadonlyRootfs");
    r |= ev_add_confinement(ev, "CapDrop ALL, no-new-privileges, not privileged");
    if (l->seccomp)
        r |= ev_add_confinement(ev, "seccomp %s", seccomp_desc);
    else
        r |= ev_add_confinement(ev, "seccomp: none sent (runsc: gVisor's kernel is the wall)");
    r |= ev_add_confinement(ev, "Memory %u MiB = MemorySwap (no swap)", l->memory_mb);
    r |= ev_add_confinement(ev, "PidsLimit %u", l->pids);
    r |= ev_add_confinement(ev, "NanoCpus %lld (%.3g CPUs)", (long long)(l->cpus * 1e9 + 0.5), l->cpus);
    r |= ev_add_confinement(ev, "Tmpfs /tmp rw,noexec,nosuid,nodev,size=%um", l->tmp_mb);
    r |= ev_add_confinement(ev, "Tmpfs /dev/shm rw,noexec,nosuid,nodev,size=%um", l->shm_mb);
    r |= ev_add_confinement(ev, "Tmpfs /work rw,noexec,nosuid,nodev,size=%um,mode=1777 (projects)", l->work_mb);
    r |= ev_add_confinement(ev, "Tmpfs /dev/mqueue ro,size=4k (hides the writable mqueue fs)");
    r |= ev_add_confinement(ev, "User %u:%u (no passwd entry)", l->uid, l->uid);
    r |= ev_add_confinement(ev, "Ulimits core=0 nofile=4096:4096");
    r |= ev_add_confinement(ev, "IpcMode private, Healthcheck NONE, LogConfig none, no restart");
    r |= ev_add_confinement(ev, "Entrypoint /usr/bin/env -i PATH=%s, then the image's verified ENV", DOCK_GUEST_PATH);
    r |= ev_add_confinement(ev, "image launched by ID; label %s with the run's deadline", DOCK_LABEL_DEADLINE);
    return r < 0 ? -1 : 0;
}

static bool is_action(const char *a, bool allow_kill)
{
    return a && (!strcmp(a, "SCMP_ACT_ERRNO") || !strcmp(a, "SCMP_ACT_TRAP") ||
                 (allow_kill && (!strcmp(a, "SCMP_ACT_KILL") || !strcmp(a, "SCMP_ACT_KILL_PROCESS") ||
                                 !strcmp(a, "SCMP_ACT_KILL_THREAD"))));
}

int dock_seccomp_check(const char *text, size_t len, size_t *allowed, struct plm_err *err)
{
    *allowed = 0;
    json_error_t je;
    json_t *j cleanup_json = json_loadb(text, len, JSON_REJECT_DUPLICATES, &je);
    if (!j || !json_is_object(j))
        return plm_fail(err, 0, PLM_E_INVALID, "seccomp profile: not a JSON object (%s)", j ? "wrong type" : je.text);
    int r = 0;
    /* Fail closed: a profile whose default allows would be an allow-list in name only. */
    if (!is_action(json_string_value(json_object_get(j, "defaultAction")), true))
        r = plm_fail(err, 0, PLM_E_INVALID, "seccomp profile: defaultAction must be SCMP_ACT_ERRNO, _TRAP or _KILL*");
    json_t *calls = json_object_get(j, "syscalls");
    if (!r && (!json_is_array(calls) || json_array_size(calls) == 0))
        r = plm_fail(err, 0, PLM_E_INVALID, "seccomp profile: no syscalls list");
    size_t i;
    json_t *rule;
    json_array_foreach(calls, i, rule)
    {
        if (r)
            break;
        json_t *names = json_object_get(rule, "names");
        const char *act = json_string_value(json_object_get(rule, "action"));
        if (!json_is_array(names) || !act) {
            r = plm_fail(err, 0, PLM_E_INVALID, "seccomp profile: rule %zu lacks names or action", i);
            break;
        }
        size_t k;
        json_t *nm;
        json_array_foreach(names, k, nm)
        {
            if (!json_is_string(nm))
                r = plm_fail(err, 0, PLM_E_INVALID, "seccomp profile: rule %zu: a name is not a string", i);
        }
        if (!strcmp(act, "SCMP_ACT_ALLOW"))
            *allowed += json_array_size(names);
    }
    return r;
}

/* ---- guest uid ------------------------------------------------------------------------------- */

static bool in_band(uint32_t u)
{
    return (u >= 60001 && u <= 60513) || (u >= 60578 && u <= 60705) || (u >= 61184 && u <= 65519);
}

/* Does `id` appear in colon-separated field f1 (or f2, if >= 0) of any line of path? A missing
 * file holds nothing; an unreadable one is an error (we cannot prove the uid is unused). */
static int id_listed(const char *path, uint32_t id, int f1, int f2, bool *found, struct plm_err *err)
{
    *found = false;
    FILE *f = fopen(path, "re");
    if (!f) {
        if (errno == ENOENT)
            return 0;
        return plm_fail(err, errno, PLM_E_INVALID, "read %s: %s", path, strerror(errno));
    }
    char line[4096];
    while (fgets(line, sizeof line, f)) {
        char *fields[8] = {0};
        int nf = 0;
        for (char *p = line, *s; nf < 8 && (s = strsep(&p, ":\n"));)
            fields[nf++] = s;
        for (int which = 0; which < 2; which++) {
            int fi = which ? f2 : f1;
            if (fi < 0 || fi >= nf || !fields[fi] || !*fields[fi])
                continue;
            char *end;
            errno = 0;
            unsigned long v = strtoul(fields[fi], &end, 10);
            if (!errno && !*end && v == id)
                *found = true;
        }
    }
    fclose(f);
    return 0;
}

int dock_guest_uid(const char *text, const char *passwd, const char *group, uint32_t *uid, struct plm_err *err)
{
    uint32_t u = UID_DEFAULT;
    if (text && *text) {
        char *end;
        errno = 0;
        unsigned long v = strtoul(text, &end, 10);
        if (!isdigit((unsigned char)text[0]) || errno || *end || v < 1 || v > 65532)
            return plm_fail(err, 0, PLM_E_INVALID, "SANDBOX_GUEST_UID=\"%s\": expected a whole number from 1 to 65532",
                            text);
        u = (uint32_t)v;
    }
    if (in_band(u) || in_band(u + 1))
        return plm_fail(err, 0, PLM_E_INVALID,
                        "SANDBOX_GUEST_UID=%u: it or %u lies in a systemd-reserved band "
                        "(60001-60513, 60578-60705, 61184-65519)",
                        u, u + 1);
    for (uint32_t c = u; c <= u + 1; c++) {
        bool in_passwd, in_group;
        if (id_listed(passwd, c, 2, 3, &in_passwd, err) < 0 || id_listed(group, c, 2, -1, &in_group, err) < 0)
            return -1;
        if (in_passwd || in_group)
            return plm_fail(err, 0, PLM_E_INVALID,
                            "SANDBOX_GUEST_UID=%u: id %u exists on this host (%s); a guest must not share an "
                            "identity with a host account",
                            u, c, in_passwd ? passwd : group);
    }
    *uid = u;
    return 0;
}

int dock_disk_budget(uint32_t disk_mb, uint32_t tmp_mb, uint32_t shm_mb, uint32_t *work_mb, struct plm_err *err)
{
    if (disk_mb == 0) {
        *work_mb = 128;
        return 0;
    }
    if (disk_mb < tmp_mb + shm_mb + 1)
        return plm_fail(err, 0, PLM_E_INVALID,
                        "SANDBOX_DISK_MB=%u: /tmp (%u MiB) and /dev/shm (%u MiB) leave less than 1 MiB for /work",
                        disk_mb, tmp_mb, shm_mb);
    *work_mb = disk_mb - tmp_mb - shm_mb;
    return 0;
}
