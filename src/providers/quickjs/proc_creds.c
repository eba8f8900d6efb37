/* proc_creds.c: a process read from outside, in /proc/<pid> (monitor side): its credentials, a
 * status field, its descriptors and its namespaces (the probes' look from outside).
 * Owns: nothing beyond one short-lived FILE per call.
 * Trusts: the kernel's text format (Uid/Gid: four decimals; Cap*: hex; Groups: a list).
 * Invariant: a field that is missing or does not parse leaves `known` false, and every check
 *   below then fails: the card and the tests never pass on a status they could not read. */
#include "qjs_int.h"

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

static int parse_ids(const char *v, long out[4])
{
    char *end;
    for (int i = 0; i < 4; i++) {
        errno = 0;
        out[i] = strtol(v, &end, 10);
        if (errno || end == v)
            return -1;
        v = end;
    }
    return 0;
}

static int parse_caps(const char *v, uint64_t *out)
{
    char *end;
    errno = 0;
    unsigned long long x = strtoull(v, &end, 16);
    if (errno || end == v)
        return -1;
    *out = x;
    return 0;
}

void mon_proc_creds(pid_t pid, struct mon_creds *c)
{
    memset(c, 0, sizeof *c);
    char path[64], line[1024];
    snprintf(path, sizeof path, "/proc/%d/status", (int)pid);
    FILE *f = fopen(path, "re");
    if (!f)
        return;
    unsigned seen = 0, bad = 0;
    while (fgets(line, sizeof line, f)) {
        char *colon = strchr(line, ':');
        if (!colon)
            continue;
        *colon = 0;
        const char *v = colon + 1;
        if (strcmp(line, "Uid") == 0)
            bad |= parse_ids(v, c->uid) < 0, seen |= 1;
        else if (strcmp(line, "Gid") == 0)
            bad |= parse_ids(v, c->gid) < 0, seen |= 2;
        else if (strcmp(line, "Groups") == 0) {
            seen |= 4;
            char *save = NULL;
            for (char *t = strtok_r(colon + 1, " \t\n", &save); t; t = strtok_r(NULL, " \t\n", &save))
                c->n_groups++;
        } else if (strcmp(line, "CapInh") == 0)
            bad |= parse_caps(v, &c->cap_inh) < 0, seen |= 8;
        else if (strcmp(line, "CapPrm") == 0)
            bad |= parse_caps(v, &c->cap_prm) < 0, seen |= 16;
        else if (strcmp(line, "CapEff") == 0)
            bad |= parse_caps(v, &c->cap_eff) < 0, seen |= 32;
        else if (strcmp(line, "CapBnd") == 0)
            bad |= parse_caps(v, &c->cap_bnd) < 0, seen |= 64;
        else if (strcmp(line, "CapAmb") == 0)
            bad |= parse_caps(v, &c->cap_amb) < 0, seen |= 128;
    }
    fclose(f);
    c->known = seen == 255 && !bad;
}

bool mon_creds_unprivileged(const struct mon_creds *c, long id)
{
    if (!c->known || id == 0 || c->n_groups != 0)
        return false;
    for (int i = 0; i < 4; i++)
        if (c->uid[i] != id || c->gid[i] != id)
            return false;
    return true;
}

bool mon_creds_no_caps(const struct mon_creds *c)
{
    return c->known && !c->cap_inh && !c->cap_prm && !c->cap_eff && !c->cap_amb;
}

int mon_proc_field(pid_t pid, const char *key)
{
    char path[64], line[256];
    snprintf(path, sizeof path, "/proc/%d/status", (int)pid);
    FILE *f = fopen(path, "re");
    if (!f)
        return -1;
    int v = -1;
    size_t klen = strlen(key);
    while (fgets(line, sizeof line, f))
        if (strncmp(line, key, klen) == 0 && line[klen] == ':') {
            v = (int)strtol(line + klen + 1, NULL, 10);
            break;
        }
    fclose(f);
    return v;
}

int mon_proc_fds(pid_t pid)
{
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/fd", (int)pid);
    DIR *d = opendir(path);
    if (!d)
        return -1;
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)))
        if (e->d_name[0] != '.')
            n++;
    closedir(d);
    return n;
}

bool mon_proc_other_ns(pid_t pid, const char *ns)
{
    char a[64], b[64];
    struct stat sa, sb;
    snprintf(a, sizeof a, "/proc/%d/ns/%s", (int)pid, ns);
    snprintf(b, sizeof b, "/proc/self/ns/%s", ns);
    if (stat(a, &sa) < 0 || stat(b, &sb) < 0)
        return false;
    return sa.st_ino != sb.st_ino || sa.st_dev != sb.st_dev;
}
