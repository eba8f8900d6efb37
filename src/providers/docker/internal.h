/* internal.h: what the docker provider's files share; docker.h is the public interface.
 * One section per file, in the order a run passes through them. */
#pragma once
#include <curl/curl.h>
#include <jansson.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "../../core/cleanup.h"
#include "../../core/cleanup_curl.h"
#include "../../core/cleanup_json.h"
#include "../../core/clock.h"
#include "../../core/err.h"
#include "../../core/evidence.h"
#include "../../core/provider.h"
#include "docker.h"
#include "frames.h"
#include "hostsock.h"

#define DOCK_API "/v1.41"                           /* pinned: Docker 20.10+; newer daemons still serve it */
#define DOCK_LABEL "org.plimsoll.sandbox"           /* value: the provider instance id */
#define DOCK_LABEL_DEADLINE "org.plimsoll.deadline" /* value: unix seconds */
#define DOCK_LABEL_SESSION "org.plimsoll.session"   /* value: the daemon's pid (session.c) */
#define DOCK_REAP_GRACE_S 300                       /* reaped when past deadline + 5 min */
#define DOCK_MARKER_PREFIX "plimsoll-started:"
#define DOCK_MARKER_LEN (sizeof DOCK_MARKER_PREFIX - 1 + 16 + 1) /* prefix, 16 hex, '\n' */

#define DOCK_GUEST_PATH "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
#define DOCK_RUNNER_PATH "/opt/plimsoll/runner"
#define DOCK_PROBE_PATH "/opt/plimsoll/probe"
#define DOCK_START_MS 30000 /* a container must print its marker within this */
#define DOCK_POOL_MAX 8
#define DOCK_POOL_MAX_AGE_S 300 /* a warm container older than this is replaced */
#define DOCK_SNIPPET_DEFAULT_MS 5000u
#define DOCK_SNIPPET_MAX_MS 30000u
#define DOCK_PROJECT_DEFAULT_MS 30000u
#define DOCK_PROJECT_MAX_MS 120000u
#define DOCK_PROJECT_GRACE_MS 5000u
#define DOCK_REAPERS 4 /* threads removing used containers in parallel */
#define DOCK_FILLERS 2 /* threads refilling the warm pool: at most this many cold starts in flight */
#define DOCK_SPOOL_MAX 64 /* session containers kept started (SANDBOX_SESSION_POOL, capped here) */

/* DOCK_SESSION: one container per session from the session image (session.c); never pooled. */
/* DOCK_MODULE: one container per module run from the module image, driven by the runner as a
 * project (module.c); never pooled. */
enum dock_kind { DOCK_SNIPPET = 0, DOCK_PROJECT = 1, DOCK_SESSION = 2, DOCK_MODULE = 3 };
#define DOCK_KINDS 4 /* images; the warm pool keeps the first two */
#define DOCK_MODULE_MODELS_MAX 8 /* model names Describe lists (module.c) */

/* n random bytes from getrandom(); -1 when the kernel cannot supply them. */
int dock_random(void *buf, size_t n);
void dock_hex(const uint8_t *p, size_t n, char *out);

/* ---- engine.c: the Engine API over the pinned unix socket ------------------------------------ */
struct dock_engine {
    char sock[108]; /* sun_path of the pinned endpoint */
};
struct dock_reply {
    long status;
    char *body;
    size_t len;
};
void dock_reply_done(struct dock_reply *r);
static inline void dock_reply_cleanup_fn(struct dock_reply *r)
{
    dock_reply_done(r);
}
#define cleanup_reply __attribute__((cleanup(dock_reply_cleanup_fn))) /* struct dock_reply r cleanup_reply = {0}; */
/* One request; the reply body is capped at reply_max (more is an error). PLM_E_UNAVAILABLE when
 * dockerd does not answer. */
int dock_call(const struct dock_engine *e, const char *method, const char *path, const char *json_body, long timeout_ms,
              size_t reply_max, struct dock_reply *out, struct plm_err *err);
/* The same, wanting status `want` and a JSON reply (object or array) in *out. */
int dock_call_json(const struct dock_engine *e, const char *method, const char *path, const char *json_body, long want,
                   long timeout_ms, size_t reply_max, json_t **out, struct plm_err *err);

/* A hijacked attach connection (stdin, stdout, stderr) in Docker's multiplexed framing. */
struct dock_attach {
    CURL *curl;
    int fd; /* owned by curl */
    struct dock_mux mux;
    uint8_t pend[8192]; /* stream bytes that arrived with the HTTP header */
    size_t pend_len;
    bool in_closed, eof;
};
struct dock_io {
    const uint8_t *in; /* stdin to send, then half-close when close_in */
    size_t in_len, in_off;
    bool close_in;
    dock_sink_fn sink;
    bool (*stop)(void *ctx); /* checked after each read; NULL = never */
    void *ctx;
};
int dock_attach_open(const struct dock_engine *e, const char *id, struct dock_attach *a, struct plm_err *err);
/* 1 at the end of the stream, 0 when io->stop said so or the monotonic deadline passed, -1 on a
 * transport error or a malformed stream. */
int dock_attach_pump(struct dock_attach *a, struct dock_io *io, int64_t deadline_ms, struct plm_err *err);
/* True when the connection has data or a hang-up waiting (a parked container that changed). */
bool dock_attach_stirred(const struct dock_attach *a);
void dock_attach_close(struct dock_attach *a);

int dock_container_create(const struct dock_engine *e, const char *name, json_t *spec, char id[65],
                          struct plm_err *err);
int dock_container_start(const struct dock_engine *e, const char *id, struct plm_err *err);
int dock_container_wait(const struct dock_engine *e, const char *id, long timeout_ms, int64_t *code,
                        struct plm_err *err);
/* Force removal: up to 3 attempts of 10 s, pausing 1 s and 2 s between; 404 counts as removed. */
int dock_container_remove(const struct dock_engine *e, const char *id, int attempts, struct plm_err *err);
int dock_container_inspect(const struct dock_engine *e, const char *id, json_t **out, struct plm_err *err);
bool dock_id_ok(const char *id); /* 64 lowercase hex */

/* ---- lockdown.c: the container spec, the seccomp profile, the uid and disk rules --------------- */
/* A granted run's host paths (hostsock.h): bind-mounted at DOCK_HS_SOCK_IN (read-write, so the
 * guest can connect) and DOCK_HS_PRELOAD_IN (read-only). NULL everywhere = a run without grant. */
struct dock_grant_paths {
    const char *sock, *preload; /* a granted run's two files (hostsock.c), or NULL */
    const char *session_dir;    /* a session's grant directory (session_grant.c), or NULL */
};
struct dock_lockdown {
    uint32_t memory_mb, pids, tmp_mb, shm_mb, work_mb, uid;
    double cpus;
    const char *runtime; /* "runc", "runsc", ... */
    const char *seccomp; /* profile text; NULL under runsc */
};
/* The create body: the full lockdown plus image (by ID), argv after /usr/bin/env, labels, and
 * with g the grant's two bind mounts (nothing else changes: the network stays none). */
json_t *dock_spec(const struct dock_lockdown *l, enum dock_kind k, const char *image_id, const char *const *argv,
                  size_t argc, int64_t deadline_unix_s, const char *instance, const struct dock_grant_paths *g);
/* The lockdown as evidence lines, rendered from the same struct dock_spec() reads. */
int dock_lockdown_lines(const struct dock_lockdown *l, const char *seccomp_desc, struct plm_evidence *ev);
/* A seccomp profile we are willing to send: JSON object, default action ERRNO/KILL/TRAP, a syscall
 * list; *allowed counts the names with an allow action. */
int dock_seccomp_check(const char *text, size_t len, size_t *allowed, struct plm_err *err);
extern const char dock_seccomp_shipped[];
extern const unsigned long dock_seccomp_shipped_len;
/* "" or NULL = 61000; decimal 1..65532; uid and uid+1 outside the systemd bands; neither in
 * passwd (uid or primary gid) nor group (gid). Paths are parameters for the tests. */
int dock_guest_uid(const char *text, const char *passwd, const char *group, uint32_t *uid, struct plm_err *err);
/* /work size from SANDBOX_DISK_MB (0 = default 128) next to /tmp and /dev/shm. */
int dock_disk_budget(uint32_t disk_mb, uint32_t tmp_mb, uint32_t shm_mb, uint32_t *work_mb, struct plm_err *err);

/* ---- preflight.c: configuration rules and the cached, bounded readiness check ----------------- */
int dock_parse_host(const char *docker_host, char sock[108], struct plm_err *err);
int dock_ref_check(const char *what, const char *ref, struct plm_err *err);
bool dock_ref_pinned(const char *ref);
/* An image ENV entry we hand on: NAME=value, NAME a shell identifier, not a loader variable. */
int dock_env_check(const char *entry, struct plm_err *err);

/* ---- posture.c: the host's posture (rootful / rootless / userns-remap) and LSM confinement ---- */
enum dock_mode { DOCK_MODE_UNKNOWN = 0, DOCK_MODE_ROOTFUL, DOCK_MODE_ROOTLESS, DOCK_MODE_USERNS_REMAP };
struct dock_posture {
    enum dock_mode mode;      /* UNKNOWN unless /info and the socket's peer uid agree */
    char why[128];            /* what decided the mode, or why it is unknown */
    long daemon_uid;          /* SO_PEERCRED uid of the API socket; -1 unreadable */
    char security_options[96]; /* the SecurityOptions names, comma-separated */
    char seccomp_default[48]; /* the daemon's default seccomp profile ("none" when absent) */
    bool apparmor, selinux;   /* the daemon reports the LSM enabled */
    char server_version[64], cgroup_version[8], cgroup_driver[16];
    /* from the probe container (dock_posture_container) */
    char apparmor_profile[48], selinux_label[96], lsm_observed[96];
};
const char *dock_mode_name(enum dock_mode m);
/* Reads a parsed /info answer; -1 with err when SecurityOptions is not a list of at most 32
 * strings of 1..256 bytes each naming an option. A mode that cannot be proven is not an error
 * here: p->mode stays UNKNOWN and p->why says why. */
int dock_posture_from_info(const json_t *info, long peer_uid, struct dock_posture *p, struct plm_err *err);
/* The uid of the process serving the unix socket at `sock` (SO_PEERCRED), or -1. */
long dock_peer_uid(const char *sock);
/* The container's LSM state from its inspect answer and, when visible, /proc/<pid>/attr. */
void dock_posture_container(const json_t *inspect, long pid, struct dock_posture *p);
/* True when the kernel shows the container's process under an LSM label other than unconfined. */
bool dock_posture_confined(const struct dock_posture *p);
/* The posture as card lines; seccomp_sha256 NULL or "" when no profile is sent (runsc). */
int dock_posture_lines(const struct dock_posture *p, const char *runtime, const char *runtime_version,
                       const char *seccomp_sha256, struct plm_evidence *ev);

/* ---- gvisor.c: the gVisor platform of a running runsc sandbox, seen from the host ------------ */
struct dock_gvisor {
    char observed[16]; /* "systrap", "ptrace" or "unknown": from the process tree */
    char stated[48];   /* runsc's state file (sandbox.metricMetadata.platform), or why not read */
    unsigned procs, threads, traced; /* below the sandbox process; threads a sandbox thread traces */
};
/* "ptrace" when a stub thread is traced by the Sentry, "systrap" when stubs run untraced,
 * "unknown" without stubs. */
const char *dock_gvisor_classify(unsigned procs, unsigned traced);
/* True when the observation names a platform and runsc's own statement, if any, agrees. */
bool dock_gvisor_agrees(const struct dock_gvisor *g);
/* Observes the sandbox whose host pid is sandbox_pid (docker's State.Pid under runsc). */
void dock_gvisor_observe(long sandbox_pid, const char *id, struct dock_gvisor *g);

/* ---- identity.c: the image's software identity (wire.md §4.2) -------------------------------- */
/* "linux/amd64" (or os/arch/variant) from an image inspect answer; -1 with err on anything else
 * than short lowercase tokens. */
int dock_platform(const json_t *inspect, char *out, size_t cap, struct plm_err *err);
/* "oci-config:<platform>@sha256:<hex>"; -1 (and out "") when an input is not well formed. */
int dock_software_identity(const char *platform, const char *image_id, char *out, size_t cap);

/* ---- the provider's state (docker.c owns it) ---------------------------------------------------- */
struct dock_box; /* launch.c */

struct dock_state {
    /* configuration, fixed at construction */
    struct dock_engine eng;
    char ref[DOCK_KINDS][256]; /* ref[DOCK_SESSION] "" = no sessions */
    char runtime[64];
    bool runsc, require_pinned;
    struct dock_lockdown lock;
    char *seccomp; /* profile text (NUL-terminated) */
    char seccomp_desc[120];
    size_t seccomp_allowed;
    int warm[2];
    char instance[17];

    /* set by the first successful preflight (before anything is served), then read-only */
    bool have_ids;
    char id[DOCK_KINDS][72];
    char platform[DOCK_KINDS][56];          /* identity.c: "linux/amd64" */
    char software_identity[DOCK_KINDS][160]; /* identity.c; "" when none could be stated */
    char **env[DOCK_KINDS];
    size_t n_env[DOCK_KINDS];
    char runtime_path[256], docker_version[64], runc_version[64], cgroup_version[8];
    struct dock_posture posture; /* posture.c; the LSM fields are filled by the probe (smoke.c) */
    char seccomp_sha256[65];     /* the profile sent with every container; "" under runsc */

    /* set by smoke_test, then read-only */
    struct plm_evidence card[2]; /* [0] as proven; [1] the same at tier container */
    char models[DOCK_MODULE_MODELS_MAX][65]; /* module.c: the module image's models, proven at startup */
    size_t n_models;
    bool module_proven; /* a known row came back with the expected checksum (module.c) */
    atomic_bool proven;
    char grant_dir[96];        /* dock_config.grant_dir as configured ("" = automatic) */
    char hs_base[96];          /* where granted runs make their socket directory (smoke.c) */
    atomic_bool grants_proven; /* a container reached a mounted socket at startup (smoke.c) */
    atomic_bool python_proven; /* the project image imported numpy, pandas, matplotlib (pyproof.c) */
    atomic_bool session_python_proven; /* a session container's Python cell imported them too */

    /* refreshed by preflight */
    pthread_mutex_t mu; /* guards pf_ok_ms, pf_err, the removal queue, stop */
    pthread_mutex_t pf_run;
    int64_t pf_ok_ms;
    char pf_err[256];
    atomic_bool ready, runtime_verified, repointed;

    /* background threads (sweep.c); mu guards stop, stop_reap, n_reapers, n_fillers, fill_kick,
     * the removal queue */
    pthread_t bg, reapers[DOCK_REAPERS], fillers[DOCK_FILLERS];
    int n_reapers, n_fillers;
    bool bg_started, stop, stop_reap, fill_kick;
    pthread_cond_t cv, reap_cv, fill_cv;
    char (*pending)[65];
    size_t n_pending, cap_pending;

    /* warm pool (launch.c); pool_mu guards it, pool_cv announces a box or a failed fill */
    pthread_mutex_t pool_mu;
    pthread_cond_t pool_cv;
    struct dock_box *pool[2][DOCK_POOL_MAX];
    size_t n_pool[2];
    int filling[2];                           /* cold starts in flight for the pool (<= DOCK_FILLERS) */
    int64_t fill_started_ms[2][DOCK_FILLERS]; /* when each of them began; 0 = slot free */
    int64_t start_avg_ms[2];                  /* moving average of a cold start, create to marker */

    /* session pool (session.c): started sessions nobody opened yet; spool_mu guards it */
    pthread_mutex_t spool_mu;
    pthread_cond_t spool_cv;
    struct plm_session *spool[DOCK_SPOOL_MAX];
    size_t n_spool;
    uint32_t spool_target;
    uint64_t spool_disk;
    pthread_t spool_thread;
    bool spool_started, spool_stop;
};

/* ---- state.c: the tier, the entry gate and the result's stamp (a leaf: calls only core) ------- */
enum plm_tier dock_tier(struct dock_state *s);
/* plm_provider_gate() filled from the state: the floor and readiness checks every run makes
 * before launching anything (snippet.c, project.c, module.c). */
int dock_run_gate(struct dock_state *s, const struct plm_run_ctx *ctx, const struct plm_request *req,
                  struct plm_err *err);
/* The same for a session's open and calls: the floor, a re-pointed tag, the proof. */
int dock_session_gate(struct dock_state *s, enum plm_tier floor, struct plm_err *err);

int dock_preflight(struct dock_state *s, struct plm_err *err);
int dock_smoke(struct dock_state *s, struct plm_err *err);

/* ---- launch.c: a container under the lockdown, up to its start marker; the warm pool ------------ */
struct dock_box {
    char id[65];
    char marker[DOCK_MARKER_LEN + 1];
    char end[DOCK_END_LEN + 1]; /* "" when the command is exec'd (projects, the probe) */
    enum dock_kind kind;
    struct dock_attach at;
    struct dock_bytes early_out, early_err; /* output that came with or after the marker */
    int64_t created_ms;
    bool started, marked;
};
/* argv after /usr/bin/env for `cmd` (the start script of providers.md §3.3); end NULL or "" = exec
 * the command, else report its exit as "<end>:<status>\n" on both streams; *n gets the length. */
int dock_start_argv(const char *marker, const char *end, char *const *env, size_t n_env, const char *const *cmd,
                    size_t n_cmd, const char **argv, size_t cap, size_t *n);
/* Checks the first DOCK_MARKER_LEN bytes of stderr against the marker. */
bool dock_marker_matches(const char *marker, const uint8_t *err, size_t len);
/* A box for kind k: a live warm one if the pool has it, else a cold start. cmd NULL = the kind's
 * default command (node - / the runner). With g (a granted run) it is always a cold start: a warm
 * container lacks the grant's mounts, and mounts cannot be added to a created container; the
 * command then preloads the client (node --import for a snippet, NODE_OPTIONS for every project
 * step) and the environment names the socket. A box whose container never printed its marker
 * is removed here and reported as an error: nothing of the caller's ran. */
int dock_box_acquire(struct dock_state *s, enum dock_kind k, const char *const *cmd, size_t n_cmd, bool pooled,
                     const struct dock_grant_paths *g, struct dock_box **out, struct plm_err *err);
/* Hands the container to the reapers (which remove it, retrying while dockerd is away) and
 * frees the box; NULL-safe. */
void dock_box_release(struct dock_state *s, struct dock_box *b);
/* Tops the pool up to its target, one cold start at a time; run by each of the DOCK_FILLERS
 * threads at once, so that up to that many cold starts per kind are in flight while the pool is
 * short. Starts nothing once the provider is stopping. */
void dock_pool_fill(struct dock_state *s);
/* A cold start of kind k with command cmd under lockdown l (NULL = the provider's) whose label
 * deadline is label_deadline_s: the session's container (session.c), with g->session_dir
 * mounted when g is not NULL. As dock_box_acquire. */
int dock_box_start(struct dock_state *s, enum dock_kind k, const char *const *cmd, size_t n_cmd,
                   const struct dock_grant_paths *g, const struct dock_lockdown *l, int64_t label_deadline_s,
                   struct dock_box **out, struct plm_err *err);
void dock_pool_drain(struct dock_state *s);

/* ---- snippet.c / project.c ---------------------------------------------------------------------- */
/* Result classification of providers.md §3.4, pure. */
enum dock_snip_class {
    DOCK_SNIP_EXITED,      /* exit code is the result */
    DOCK_SNIP_TIMED_OUT,   /* 124, partial output */
    DOCK_SNIP_NOT_STARTED, /* error: no marker before the run ended */
    DOCK_SNIP_NO_MARKER,   /* error: docker failed before our command */
    DOCK_SNIP_LOST,        /* error: the stream or the exit status was lost */
};
enum dock_snip_class dock_snippet_classify(bool marked, bool deadline_passed, bool have_exit);
int dock_run_snippet(struct dock_state *s, const struct plm_run_ctx *ctx, const struct plm_request *req,
                     struct plm_result *out, struct plm_err *err);
/* The run without the gate (validation, floor, readiness): smoke.c proves with it. With api (a
 * grant) it serves the run's socket (hostsock.h) from before the container exists until the
 * code has ended, on every path. */
int dock_snippet_exec(struct dock_state *s, uint32_t timeout_ms, const char *code, const struct plm_host_api *api,
                      struct plm_result *out, struct plm_err *err);

struct dock_project_end {
    bool marked, deadline_passed, have_exit;
    int64_t exit_code;
    enum dock_report_status report;
    bool decoded;       /* the authenticated body decoded */
    const char *error;  /* the runner's setup error, or NULL */
    int timed_out_step; /* 1-based, 0 = none */
};
/* The outcome mapping of providers.md §3.5, pure: sets outcome and detail (malloc'd), or returns
 * -1 with err for the rows that are returned errors. */
int dock_project_outcome(const struct dock_project_end *e, struct plm_project_result *pr, struct plm_err *err);
/* The plan (wire.h) for req; the key first. */
int dock_plan_encode(const uint8_t key[RW_KEY_LEN], uint32_t step_timeout_ms, const struct plm_request *req,
                     uint8_t **out, size_t *len, struct plm_err *err);
int dock_run_project(struct dock_state *s, const struct plm_run_ctx *ctx, const struct plm_request *req,
                     struct plm_result *out, struct plm_err *err);
int dock_project_exec(struct dock_state *s, uint32_t timeout_ms, const struct plm_request *req,
                      const struct plm_host_api *api, struct plm_result *out, struct plm_err *err);
/* The same without a grant in a container of kind k (DOCK_PROJECT or DOCK_MODULE): module.c. */
int dock_project_exec_in(struct dock_state *s, enum dock_kind k, uint32_t timeout_ms, const struct plm_request *req,
                         struct plm_result *out, struct plm_err *err);
/* ---- module.c: module runs through the project machinery (issue 21) ---------------------------- */
int dock_run_module(struct dock_state *s, const struct plm_run_ctx *ctx, const struct plm_request *req,
                    struct plm_result *out, struct plm_err *err);
/* The startup proof: lists the models and runs a known row; adds the module.* checks to ev. */
int dock_module_proof(struct dock_state *s, struct plm_evidence *ev, struct plm_err *err);
void dock_module_env(struct dock_state *s, struct plm_describe *d);

/* ---- session.c: one container per session (docs/sessions.md) ---------------------------------- */
void dock_session_env(struct plm_provider *p, struct plm_payload_env *out);
int dock_session_open(struct plm_provider *p, const struct plm_session_spec *spec, struct plm_session **out,
                      struct plm_session_opened *info, struct plm_err *err);
int dock_session_run(struct plm_provider *p, struct plm_session *h, const struct plm_run_ctx *ctx,
                     const struct plm_request *req, struct plm_result *out, enum plm_session_end *ended,
                     struct plm_err *err);
int dock_session_run_cell(struct plm_provider *p, struct plm_session *h, const struct plm_run_ctx *ctx,
                          const struct plm_request *req, struct plm_result *out, enum plm_session_end *ended,
                          struct plm_err *err);
int dock_session_suspend(struct plm_provider *p, struct plm_session *h, bool *holds_memory, struct plm_err *err);
int dock_session_close(struct plm_provider *p, struct plm_session *h, struct plm_err *err);
/* The read-back of a session's container (readback.c): the fields that make it the sandbox that
 * was proven, taken at open and compared before each call. take: a new snapshot, or NULL with err
 * (the inspect failed). compare: 0 the same, 1 a difference (the first differing field's name in
 * what). check: take and compare; -1 is a refusal marked environment (unreadable), nothing ran. */
json_t *dock_readback_take(const struct dock_engine *e, const char *id, struct plm_err *err);
json_t *dock_readback_of(const json_t *inspect); /* the snapshot of one inspect answer; NULL: no memory */
int dock_readback_compare(const json_t *proven, const json_t *now, char *what, size_t cap);
int dock_readback_check(const struct dock_engine *e, const char *id, const json_t *proven, char *what, size_t cap,
                        struct plm_err *err);
/* Removes session containers (DOCK_LABEL_SESSION) whose daemon pid no longer runs here. */
void dock_session_sweep(struct dock_state *s);
/* One cell of lang in a fresh session container, removed after: for the startup proofs only
 * (it bypasses the proven gate). 0 with the cell's result in *out (caller frees its bytes). */
int dock_session_probe_cell(struct dock_state *s, const char *lang, const char *code, uint32_t timeout_ms,
                            struct plm_step_result *out, struct plm_err *err);
/* ---- pyproof.c: Python in the project image (docs/python.md) ------------------------------------ */
/* Runs PLM_PY_PROBE_STEP as a project in the real sandbox; a pass sets python_proven and adds the
 * check project.python with the versions, an absence adds the card line "python: absent: why"
 * (not a failed check: node and shell projects still run). -1 only when the card is full. */
int dock_python_proof(struct dock_state *s, struct plm_evidence *ev, struct plm_err *err);
/* The same imports as a Python cell in a fresh session container (sessions configured only): a
 * pass sets session_python_proven (Describe's session languages list python) and adds the check
 * session.python; an absence adds "session python: absent: why" and Python cells are refused
 * unsupported. -1 only when the card is full. */
int dock_session_python_proof(struct dock_state *s, struct plm_evidence *ev, struct plm_err *err);

/* The session pool's filler thread: started once the provider is proven, stopped (and every
 * parked session container removed) by dock_session_pool_stop. */
int dock_session_pool_start(struct dock_state *s, struct plm_err *err);
void dock_session_pool_stop(struct dock_state *s);

/* ---- sweep.c: the background thread ------------------------------------------------------------- */
int dock_bg_start(struct dock_state *s, struct plm_err *err);
void dock_bg_stop(struct dock_state *s);
/* Reaps containers carrying DOCK_LABEL whose deadline passed DOCK_REAP_GRACE_S ago. */
int dock_sweep(struct dock_state *s, struct plm_err *err);

/* ---- reap.c: the removal queue and the pool's kick (a leaf below launch.c and sweep.c) ------- */
/* Wakes the pool's fillers (a box was taken). */
void dock_bg_kick(struct dock_state *s);
/* Queues a container for removal by the reapers; removes it inline when none runs yet. */
void dock_queue_removal(struct dock_state *s, const char *id);
