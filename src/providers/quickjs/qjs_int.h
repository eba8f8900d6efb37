/* qjs_int.h: the monitor side of the quickjs provider, shared by its files and its test. */
#pragma once
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "../../core/err.h"
#include "../../core/evidence.h"
#include "../../core/request.h"

/* The environment identity is this prefix and the SHA-256 of the worker binary, which statically
 * contains the engine, the prelude and the confinement (docs/quickjs.md, Engine and identity). */
#define QJS_IDENTITY_PREFIX "quickjs-ng:sha256:"

/* ---- pool.c: the zygote and the ready workers ---- */

struct qjs_pool;
struct qjs_worker {
    pid_t pid; /* the daemon's own child (CLONE_PARENT): killed and reaped by whoever holds it */
    int fd;    /* non-blocking, CLOEXEC stream socket to the worker */
};

struct qjs_pool_cfg {
    int exe_fd;           /* the worker binary, opened and hashed once; the pool execs this fd */
    uint32_t memory_mb;
    uint32_t cpu_seconds; /* RLIMIT_CPU of a worker */
    uint32_t size;        /* ready workers to keep (at most QJS_MAX_POOL, quickjs.h) */
    uint32_t zygote_forks;  /* a zygote is replaced after this many workers (>= 1) */
    uint32_t zygote_age_ms; /* or once it is this old (>= 1) */
};

/* Starts the refill thread, which starts the zygote; returns once the zygote said HELLO. */
struct qjs_pool *qjs_pool_new(const struct qjs_pool_cfg *cfg, struct plm_err *err);
/* Kills and reaps every ready worker and the zygote; joins the thread. NULL-safe. */
void qjs_pool_free(struct qjs_pool *p);
/* Hands out a never-used worker, waiting up to wait_ms for the refill thread. */
int qjs_pool_take(struct qjs_pool *p, uint32_t wait_ms, struct qjs_worker *out, struct plm_err *err);
/* WK_NS_* flags the current zygote applied. */
unsigned qjs_pool_ns(struct qjs_pool *p);
/* Zygotes replaced so far for their fork count or age. */
uint64_t qjs_pool_recycled(struct qjs_pool *p);
/* The current zygote's pid (0 while none is up), for tests that look at it from outside. */
pid_t qjs_pool_zygote_pid(struct qjs_pool *p);
/* Whether the zygote is up (cheap, for preflight). */
bool qjs_pool_alive(struct qjs_pool *p);
/* SIGKILL now, close, and leave the wait to the pool's reaper thread (off the run's path). */
void qjs_pool_discard(struct qjs_pool *p, struct qjs_worker *w);
/* SIGKILL, reap (retrying EINTR), close; returns the wait status (or -1). */
int qjs_worker_end(struct qjs_worker *w);
/* A worker still owned at scope exit is killed and reaped (STYLE.md §4, like cleanup_pid). */
static inline void qjs_worker_cleanup(struct qjs_worker *w)
{
    if (w->pid > 0 || w->fd >= 0)
        qjs_worker_end(w);
}
#define cleanup_worker __attribute__((cleanup(qjs_worker_cleanup)))

/* ---- monitor.c: one request to one worker ---- */

/* Grace after the deadline before the monitor kills a worker that has not answered. */
#define MON_GRACE_MS 1000u
/* How long a taken worker may take to say READY. */
#define MON_READY_MS 5000u

/* Runs one snippet. On return >= 0, out->js is filled (a timeout, an uncaught error, OOM and
 * process.exit are all results). < 0: PLM_E_INTERNAL with refusal NONE (the worker died, broke
 * the protocol or could not be had), except that a worker which never said READY is replaced
 * before the code is sent, and a client script over QF_CLIENT_MAX is refused before anything.
 * Grants: client_js != NULL offers the worker the transport (the native __plimsoll_host_send,
 * then this script before the code); api != NULL is what lets the monitor answer HOST_CALLs.
 * quickjs.c passes both or neither; the test passes a client without an api to play a worker
 * that calls without a grant (which is killed as a protocol violation). */
struct plm_host_api;
int mon_run_js(struct qjs_pool *p, const char *code, size_t len, const char *client_js, const struct plm_host_api *api,
               uint32_t timeout_ms, struct plm_js_result *out, int64_t *duration_ms, struct plm_err *err);

/* A process's credentials as /proc/<pid>/status shows them. */
struct mon_creds {
    bool known;              /* the file was read and every field below was found */
    long uid[4], gid[4];     /* real, effective, saved, filesystem */
    int n_groups;            /* supplementary groups */
    uint64_t cap_inh, cap_prm, cap_eff, cap_bnd, cap_amb;
};
/* Reads pid's credentials; c->known false when they could not all be read. */
void mon_proc_creds(pid_t pid, struct mon_creds *c);
/* The integer after "key:" in /proc/<pid>/status, or -1. */
int mon_proc_field(pid_t pid, const char *key);
/* How many descriptors the process holds, or -1. */
int mon_proc_fds(pid_t pid);
/* Whether the process is in another `ns` namespace than ours (false when unreadable). */
bool mon_proc_other_ns(pid_t pid, const char *ns);
/* The worker's uid/gid, every one of the four, is this one and not 0; no groups. */
bool mon_creds_unprivileged(const struct mon_creds *c, long id);
/* No capability in the effective, permitted, inheritable or ambient set. */
bool mon_creds_no_caps(const struct mon_creds *c);

/* The monitor's protocol on a socket the caller owns (no pool, no process): READY, RUN, host calls
 * with `api`, RESULT, with mon_table enforced exactly as in mon_run_js. For the negative tests,
 * which play a misbehaving worker on the other end. < 0: PLM_E_INTERNAL ("broke the protocol"). */
int mon_play(int fd, const char *code, size_t len, const char *client_js, const struct plm_host_api *api,
             uint32_t timeout_ms, struct plm_js_result *out, struct plm_err *err);

/* Sessions: a READY worker taken out of the pool to serve a session's runs. */
int mon_session_take(struct qjs_pool *p, struct qjs_worker *w, struct plm_err *err);
/* One run on a session's worker (QF_RUN_SESSION), without a grant. *ended: the interpreter ended
 * with this run (deadline, process.exit), and the worker has been reaped. < 0 (never marked): the
 * worker died or broke the protocol after the code was sent; it has been reaped too. */
int mon_session_run(struct qjs_worker *w, const char *code, size_t len, uint32_t timeout_ms,
                    struct plm_js_result *out, int64_t *duration_ms, bool *ended, struct plm_err *err);

struct mon_probe_outcome {
    bool returned;      /* the worker answered PROBE_RESULT */
    int64_t ret;        /* the syscall's result */
    int err;            /* its errno */
    bool killed;        /* the worker died by a signal instead */
    int signal;         /* which one */
    int exit_status;    /* or exited (no answer) with this status; -1 when not applicable */
    /* Seen from outside on the READY worker, before the probe: */
    int seccomp_mode;   /* /proc/<pid>/status Seccomp: (2 = filter), -1 unknown */
    int no_new_privs;   /* NoNewPrivs:, -1 unknown */
    int n_fds;          /* entries in /proc/<pid>/fd, -1 unknown */
    bool own_netns, own_ipcns, own_mntns; /* differs from the daemon's */
    struct mon_creds creds;               /* its uid, gid, groups and capabilities */
};
/* Runs one probe (probe.h) in a fresh worker. < 0 only when no worker could be had. */
int mon_probe(struct qjs_pool *p, uint32_t probe, struct mon_probe_outcome *o, struct plm_err *err);

/* ---- quickjs.c ---- */

struct plm_provider;
/* The provider's pool, for tests that drive probes directly. */
struct qjs_pool *qjs_provider_pool(struct plm_provider *p);

/* ---- smoke.c: the startup proof ---- */

struct qjs_proof_cfg {
    uint32_t memory_mb;
    uint32_t default_timeout_ms, max_timeout_ms;
    uint32_t cpu_seconds;
    uint32_t zygote_forks, zygote_age_s; /* the zygote's recycling bounds */
    const char *identity;  /* quickjs-ng:sha256:<hex> */
};
/* Fills and seals ev. Returns 0 when every check passed, else -1 with err set (startup must
 * stop). */
int qjs_prove(struct qjs_pool *p, const struct qjs_proof_cfg *cfg, struct plm_evidence *ev,
              struct plm_err *err);

/* ---- session.c: JavaScript sessions (the provider's session ops) ---- */

struct plm_payload_env;
struct plm_session;
struct plm_session_spec;
struct plm_session_opened;
struct plm_run_ctx;
enum plm_session_end;
void qjs_session_env(struct plm_provider *p, struct plm_payload_env *e);
int qjs_session_open(struct plm_provider *p, const struct plm_session_spec *spec, struct plm_session **out,
                     struct plm_session_opened *info, struct plm_err *err);
int qjs_session_run_cell(struct plm_provider *p, struct plm_session *s, const struct plm_run_ctx *ctx,
                         const struct plm_request *req, struct plm_result *out, enum plm_session_end *ended,
                         struct plm_err *err);
int qjs_session_run(struct plm_provider *p, struct plm_session *s, const struct plm_run_ctx *ctx,
                    const struct plm_request *req, struct plm_result *out, enum plm_session_end *ended,
                    struct plm_err *err);
int qjs_session_suspend(struct plm_provider *p, struct plm_session *s, bool *holds_memory, struct plm_err *err);
int qjs_session_close(struct plm_provider *p, struct plm_session *s, struct plm_err *err);
