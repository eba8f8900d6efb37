/* gvisor.c: which gVisor platform a running runsc sandbox uses, seen from the host (issue 26).
 * Owns: nothing past one call; reads /proc and, when readable, runsc's state file.
 * Trusts: the host kernel's /proc (TracerPid, the process tree) as the observation; runsc's
 *   state file only as the runtime's own statement, which the observation must agree with.
 * Invariant: the platform is named only from what the running sandbox shows: under gVisor's
 *   ptrace platform the Sentry ptrace-attaches every stub thread that runs guest code, so some
 *   thread below the sandbox process has a tracer that is a thread of the sandbox; under
 *   systrap the stubs run guest code under a seccomp trap filter with no tracer at all. No
 *   stub process at all (KVM, or a sandbox we misread) is "unknown", which never passes. */
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "internal.h"

#define GV_MAX_PROCS 256

const char *dock_gvisor_classify(unsigned procs, unsigned traced)
{
    if (traced > 0)
        return "ptrace";
    return procs > 0 ? "systrap" : "unknown";
}

bool dock_gvisor_agrees(const struct dock_gvisor *g)
{
    if (!strcmp(g->observed, "unknown"))
        return false;
    /* The runtime's statement, when there is one, must name what the host saw. */
    bool stated = strcmp(g->stated, "ptrace") == 0 || strcmp(g->stated, "systrap") == 0 ||
                  strcmp(g->stated, "kvm") == 0;
    return !stated || !strcmp(g->stated, g->observed);
}

/* Child pids of every thread of pid into kids (at most cap); returns how many. */
static size_t children_of(long pid, long *kids, size_t cap)
{
    char path[96];
    snprintf(path, sizeof path, "/proc/%ld/task", pid);
    DIR *d = opendir(path);
    size_t n = 0;
    struct dirent *e;
    while (d && n < cap && (e = readdir(d))) {
        if (!isdigit((unsigned char)e->d_name[0]))
            continue;
        char cpath[160];
        snprintf(cpath, sizeof cpath, "/proc/%ld/task/%.20s/children", pid, e->d_name);
        FILE *f = fopen(cpath, "re");
        long k;
        while (f && n < cap && fscanf(f, "%ld", &k) == 1)
            kids[n++] = k;
        if (f)
            fclose(f);
    }
    if (d)
        closedir(d);
    return n;
}

static long tracer_of(long pid, const char *tid)
{
    char path[160], line[256];
    snprintf(path, sizeof path, "/proc/%ld/task/%.20s/status", pid, tid);
    FILE *f = fopen(path, "re");
    long t = -1;
    while (f && fgets(line, sizeof line, f))
        if (!strncmp(line, "TracerPid:", 10))
            t = strtol(line + 10, NULL, 10);
    if (f)
        fclose(f);
    return t;
}

/* Counts the threads of pid, and those whose tracer is a thread of the sandbox process. */
static void count_threads(long sandbox, long pid, struct dock_gvisor *g)
{
    char path[96];
    snprintf(path, sizeof path, "/proc/%ld/task", pid);
    DIR *d = opendir(path);
    struct dirent *e;
    while (d && (e = readdir(d))) {
        if (!isdigit((unsigned char)e->d_name[0]))
            continue;
        g->threads++;
        long t = tracer_of(pid, e->d_name);
        char tpath[96];
        snprintf(tpath, sizeof tpath, "/proc/%ld/task/%ld", sandbox, t);
        if (t > 0 && access(tpath, F_OK) == 0)
            g->traced++;
    }
    if (d)
        closedir(d);
}

/* runsc's --root, from the sandbox process's command line (runsc put it there, not us). */
static bool runsc_root(long pid, char *out, size_t cap)
{
    char path[64], buf[8192];
    snprintf(path, sizeof path, "/proc/%ld/cmdline", pid);
    FILE *f = fopen(path, "re");
    if (!f)
        return false;
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = 0;
    for (size_t i = 0; i < n; i += strlen(buf + i) + 1)
        if (!strncmp(buf + i, "--root=", 7) && strlen(buf + i + 7) < cap) {
            snprintf(out, cap, "%s", buf + i + 7);
            return true;
        }
    return false;
}

/* sandbox.metricMetadata.platform from runsc's state file for this (root) container. */
static void stated_platform(long pid, const char *id, char *out, size_t cap)
{
    char root[256], path[512];
    if (!runsc_root(pid, root, sizeof root)) {
        snprintf(out, cap, "no --root on the sandbox command line");
        return;
    }
    snprintf(path, sizeof path, "%s/%.64s_sandbox:%.64s.state", root, id, id);
    FILE *f = fopen(path, "re");
    if (!f) {
        snprintf(out, cap, "state file %s", errno == EACCES ? "unreadable (not root)" : "absent");
        return;
    }
    json_error_t je;
    json_t *j = json_loadf(f, JSON_REJECT_DUPLICATES, &je);
    fclose(f);
    const char *p =
        json_string_value(json_object_get(json_object_get(json_object_get(j, "sandbox"), "metricMetadata"), "platform"));
    snprintf(out, cap, "%.20s", p && *p ? p : "not recorded");
    json_decref(j);
}

void dock_gvisor_observe(long sandbox_pid, const char *id, struct dock_gvisor *g)
{
    memset(g, 0, sizeof *g);
    snprintf(g->observed, sizeof g->observed, "unknown");
    snprintf(g->stated, sizeof g->stated, "unknown");
    if (sandbox_pid <= 0)
        return;
    long queue[GV_MAX_PROCS];
    size_t head = 0, tail = children_of(sandbox_pid, queue, GV_MAX_PROCS);
    while (head < tail) {
        long p = queue[head++];
        g->procs++;
        count_threads(sandbox_pid, p, g);
        tail += children_of(p, queue + tail, GV_MAX_PROCS - tail);
    }
    snprintf(g->observed, sizeof g->observed, "%s", dock_gvisor_classify(g->procs, g->traced));
    stated_platform(sandbox_pid, id, g->stated, sizeof g->stated);
}
