/* sweep.c: the after-call process sweep of an e2b session (sessions.md §4.1, item 46: no process
 * outlives its call). envd's process API names only the processes envd itself started, not their
 * children, so a cell's detached child (a child of the interpreter) or a snippet's `sleep &`
 * (reparented to init) is invisible to process.Process/List and out of SendSignal's reach. The
 * sweep therefore runs one small POSIX sh program through process.Process/Start, which reads the
 * VM's process table in /proc and SIGKILLs every user-space process that is neither in the
 * baseline (the VM's own processes, recorded at open as pid:start-time pairs, so a reused pid is
 * not spared) nor a live interpreter of the session (by the pid envd's start event gave), nor
 * itself. It repeats until a scan finds nothing (a process forking while it is killed), bounded.
 * Owns: nothing past the call (the program's text is static; the spare list is freed here).
 * Trusts: the program's exit status and output only as far as they are checked here; guest code
 * cannot spoof being spared (the spare list comes from the daemon, pids from envd).
 * Invariant: a sweep that did not prove the table clean returns -1; the caller ends the session. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../core/cleanup.h"
#include "sweep.h"

#define E2B_SWEEP_MS 15000         /* one sweep's own deadline (envd start, the scans, the answer) */
#define E2B_BASELINE_MAX (64 * 1024) /* the open's process list; a VM at rest has far fewer */

/* $1 = list | sweep, $2 = the spare tokens ("pid" or "pid:start"). Builtins only while it scans
 * (read, kill, echo, test), so the program itself adds no process to the table it reads, and kernel
 * threads (flag PF_KTHREAD, 0x200000) and zombies (dead, only unreaped) are never counted. stat's
 * fields after "pid (comm) " are $1 state ... $7 flags ... $20 start time. Exit 3: survivors
 * (a process the sandbox's user may not signal, or one forking faster than the rounds). */
static const char sweep_sh[] =
    "mode=$1 spare=\" $2 \" found=\n"
    "scan() {\n"
    "  found=\n"
    "  for d in /proc/[0-9]*; do\n"
    "    p=${d#/proc/}\n"
    "    [ \"$p\" = \"$$\" ] && continue\n"
    "    read -r l 2>/dev/null <\"$d/stat\" || continue\n"
    "    set -- ${l##*\") \"}\n"
    "    case $1 in Z|X|x) continue;; esac\n"
    "    [ $(( $7 & 2097152 )) -eq 0 ] || continue\n"
    "    case $spare in *\" $p \"*|*\" $p:${20} \"*) continue;; esac\n"
    "    found=\"$found $p:${20}\"\n"
    "    [ \"$mode\" = sweep ] && kill -9 \"$p\" 2>/dev/null\n"
    "  done\n"
    "}\n"
    "if [ \"$mode\" = list ]; then scan; echo \"$found\"; exit 0; fi\n"
    "n=0\n"
    "while :; do\n"
    "  scan\n"
    "  [ -z \"$found\" ] && exit 0\n"
    "  n=$((n + 1))\n"
    "  [ $n -ge 60 ] && { echo \"survivors:$found\"; exit 3; }\n"
    "  [ $n -ge 3 ] && sleep 0.05\n"
    "done\n";

static void result_done(struct e2b_proc_result *r)
{
    free(r->out.data);
    free(r->err.data);
    memset(r, 0, sizeof *r);
}

/* Runs the program in mode with the spare tokens; r gets its exit status and stdout. */
static int run_program(struct e2b_state *s, const struct e2b_sandbox *sb, const char *mode, const char *spare,
                       struct e2b_proc_result *r, struct plm_err *err)
{
    const char *args[] = {"-c", sweep_sh, "plimsoll-sweep", mode, spare};
    if (e2b_process(s, sb, "/bin/sh", args, 5, NULL, NULL, 0, e2b_mono_ms() + E2B_SWEEP_MS, r, err) < 0)
        return -1;
    if (r->timed_out) {
        result_done(r);
        return plm_fail(err, 0, PLM_E_UNAVAILABLE, "the process %s did not finish within %d ms", mode, E2B_SWEEP_MS);
    }
    return 0;
}

/* The list's answer holds only tokens of digits and one colon, separated by blanks. */
static bool baseline_valid(const struct plm_bytes *b)
{
    if (b->len > E2B_BASELINE_MAX)
        return false;
    for (size_t i = 0; i < b->len; i++) {
        uint8_t c = b->data[i];
        if (!(c >= '0' && c <= '9') && c != ':' && c != ' ' && c != '\n')
            return false;
    }
    return true;
}

int e2b_sweep_baseline(struct e2b_state *s, const struct e2b_sandbox *sb, char **baseline, struct plm_err *err)
{
    *baseline = NULL;
    struct e2b_proc_result r;
    if (run_program(s, sb, "list", "", &r, err) < 0)
        return plm_err_wrap(err, "e2b: listing the sandbox's processes at open");
    int rc = 0;
    if (r.exit_code != 0 || !baseline_valid(&r.out)) {
        rc = plm_fail(err, 0, PLM_E_UNAVAILABLE,
                      "e2b: listing the sandbox's processes at open answered exit %d with %zu bytes of another shape",
                      (int)r.exit_code, r.out.len);
    } else if (!(*baseline = strndup(r.out.len ? (const char *)r.out.data : "", r.out.len))) {
        rc = plm_fail(err, ENOMEM, PLM_E_INTERNAL, "out of memory keeping the sandbox's process list");
    } else {
        for (char *c = *baseline; *c; c++)
            *c = *c == '\n' ? ' ' : *c;
    }
    result_done(&r);
    return rc;
}

/* baseline plus the live interpreters' pids, blank-separated; malloc'd, NULL out of memory. */
static char *spare_list(const char *baseline, const int64_t *keep, size_t nkeep)
{
    size_t cap = strlen(baseline) + nkeep * 24 + 1;
    char *out = malloc(cap);
    if (!out)
        return NULL;
    size_t at = (size_t)snprintf(out, cap, "%s", baseline);
    for (size_t i = 0; i < nkeep; i++)
        if (keep[i] > 0)
            at += (size_t)snprintf(out + at, cap - at, " %lld", (long long)keep[i]);
    return out;
}

int e2b_sweep_after_call(struct e2b_state *s, const struct e2b_sandbox *sb, const char *baseline,
                         const int64_t *keep, size_t nkeep, struct plm_err *err)
{
    cleanup_free char *spare = spare_list(baseline, keep, nkeep);
    if (!spare)
        return plm_fail(err, ENOMEM, PLM_E_INTERNAL, "out of memory before the after-call sweep");
    struct e2b_proc_result r;
    if (run_program(s, sb, "sweep", spare, &r, err) < 0)
        return plm_err_wrap(err, "e2b: the after-call process sweep");
    int rc = 0;
    if (r.exit_code == 3) {
        rc = plm_fail(err, 0, PLM_E_UNAVAILABLE, "e2b: the after-call sweep could not kill every process the call left (%.*s)",
                      (int)(r.out.len > 120 ? 120 : r.out.len), r.out.len ? (const char *)r.out.data : "");
    } else if (r.exit_code != 0) {
        rc = plm_fail(err, 0, PLM_E_UNAVAILABLE, "e2b: the after-call process sweep exited %d", (int)r.exit_code);
    }
    result_done(&r);
    return rc;
}
