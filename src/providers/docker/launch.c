/* launch.c: one container under the lockdown, from create to its start marker, and back to
 * nothing; and the warm pool of such containers.
 * Owns: every container this provider creates, from the create call until dock_box_release()
 * removes it (or queues it for the background thread when dockerd does not answer).
 * Trusts: the image ID and ENV that preflight verified; nothing the container prints.
 * Invariant: a box handed to a caller has printed its own per-call marker as the first bytes of
 * stderr and has received nothing on stdin, so the guest code has not run; a warm box is used
 * for exactly one run and never returns to the pool, and never serves a granted run (its mounts
 * and command are fixed at create time: a granted run is a cold start with the grant's mounts,
 * its preload and HOST_API_SOCKET, and nothing else different). The start script (providers.md §3.3) prints
 * the marker before any guest-influenced process exists, then execs `env -i` with a fixed PATH,
 * HOME from passwd for its uid ("/" when none), HOSTNAME, and the image's verified ENV. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../../core/cleanup.h"
#include "../../core/cleanup_json.h"
#include "../../core/limits.h"
#include "internal.h"

/* $1 = marker, $2 = end marker or "-"; then the image's ENV entries and the command. No external
 * program runs before the command: printf, read and [ are dash builtins. With an end marker (the
 * snippet's case) the script waits for the command and writes "<end>:<status>" last on stdout and
 * on stderr: each stream is one pipe, so everything the guest wrote precedes it there, and the
 * host can stop reading without waiting for dockerd to notice the exit (~160 ms under runc). The
 * guest can read the end marker from /proc/1/cmdline; forging it only cuts its own run short, and
 * its exit status is its own to choose anyway. Without one (the runner), the command is exec'd
 * and stays PID 1. */
static const char start_script[] =
    "printf '%s\\n' \"$1\" >&2 || exit 125\n"
    "e=$2\n"
    "shift 2\n"
    "u=; h=; hn=\n"
    "while read -r k v r; do [ \"$k\" = Uid: ] && { u=$v; break; }; done 2>/dev/null </proc/self/status\n"
    "while IFS=: read -r n p i g c d s; do [ \"$i\" = \"$u\" ] && { h=$d; break; }; done 2>/dev/null </etc/passwd\n"
    "[ -n \"$h\" ] || h=/\n"
    "read -r hn 2>/dev/null </etc/hostname\n"
    "[ \"$e\" = - ] && exec /usr/bin/env -i PATH=" DOCK_GUEST_PATH " \"HOME=$h\" \"HOSTNAME=$hn\" \"$@\"\n"
    "/usr/bin/env -i PATH=" DOCK_GUEST_PATH " \"HOME=$h\" \"HOSTNAME=$hn\" \"$@\"\n"
    "c=$?\n"
    "printf '%s:%d\\n' \"$e\" \"$c\"\n"
    "printf '%s:%d\\n' \"$e\" \"$c\" >&2\n"
    "exit \"$c\"\n";

int dock_start_argv(const char *marker, const char *end, char *const *env, size_t n_env, const char *const *cmd,
                    size_t n_cmd, const char **argv, size_t cap, size_t *n)
{
    /* The script reads its uid from /proc/self/status: what runs, not what we asked for. */
    size_t k = 0;
    if (cap < 8 + n_env + n_cmd)
        return -1;
    argv[k++] = "-i";
    argv[k++] = "PATH=" DOCK_GUEST_PATH;
    argv[k++] = "/bin/sh";
    argv[k++] = "-c";
    argv[k++] = start_script;
    argv[k++] = "sh";
    argv[k++] = marker;
    argv[k++] = end && *end ? end : "-";
    for (size_t i = 0; i < n_env; i++)
        argv[k++] = env[i];
    for (size_t i = 0; i < n_cmd; i++)
        argv[k++] = cmd[i];
    *n = k;
    return 0;
}

bool dock_marker_matches(const char *marker, const uint8_t *err, size_t len)
{
    size_t m = strlen(marker);
    return m + 1 == DOCK_MARKER_LEN && len >= DOCK_MARKER_LEN && memcmp(err, marker, m) == 0 && err[m] == '\n';
}

/* The start phase's sink: the first DOCK_MARKER_LEN bytes of stderr are the marker's place. */
struct start_ctx {
    struct dock_box *b;
    uint8_t mk[DOCK_MARKER_LEN];
    size_t mk_have;
};

static void start_sink(void *ctx, int stream, const uint8_t *p, size_t n)
{
    struct start_ctx *c = ctx;
    if (stream == DOCK_STDERR && c->mk_have < DOCK_MARKER_LEN) {
        size_t take = DOCK_MARKER_LEN - c->mk_have < n ? DOCK_MARKER_LEN - c->mk_have : n;
        memcpy(c->mk + c->mk_have, p, take);
        c->mk_have += take;
        p += take, n -= take;
    }
    if (n)
        dock_bytes_add(stream == DOCK_STDERR ? &c->b->early_err : &c->b->early_out, p, n);
}

static bool start_done(void *ctx)
{
    struct start_ctx *c = ctx;
    return c->mk_have == DOCK_MARKER_LEN;
}

static void box_free(struct dock_box *b)
{
    if (!b)
        return;
    dock_attach_close(&b->at);
    dock_bytes_done(&b->early_out);
    dock_bytes_done(&b->early_err);
    free(b);
}

void dock_box_release(struct dock_state *s, struct dock_box *b)
{
    if (!b)
        return;
    dock_attach_close(&b->at); /* first: a guest blocked on its output must not hold removal up */
    if (b->id[0])
        dock_queue_removal(s, b->id);
    box_free(b);
}

#define PRELOAD_FLAG "--import=file://" DOCK_HS_PRELOAD_IN

/* The environment a container of kind k starts its command with: the image's verified ENV, and
 * for a granted run the socket's name, plus for a project the client preload in NODE_OPTIONS so
 * that every node a step starts loads it (appended to an image's own NODE_OPTIONS, which an
 * operator may rely on). Fills env (at most cap entries); *owned is the one string allocated
 * here (free()). -1 when it does not fit or out of memory. */
static int run_env(struct dock_state *s, enum dock_kind k, const struct dock_grant_paths *g, char **env, size_t cap,
                   size_t *n, char **owned)
{
    if (g && !g->sock)
        g = NULL; /* a session's directory: each call names its own socket (session_grant.c) */
    static const char sock_env[] = DOCK_HS_ENV "=" DOCK_HS_SOCK_IN;
    const char *image_opts = NULL;
    size_t m = 0;
    *owned = NULL;
    for (size_t i = 0; i < s->n_env[k]; i++) {
        const char *e = s->env[k][i];
        if (g && !strncmp(e, DOCK_HS_ENV "=", sizeof DOCK_HS_ENV))
            continue; /* ours names the socket */
        if (g && k == DOCK_PROJECT && !strncmp(e, "NODE_OPTIONS=", 13)) {
            image_opts = e + 13;
            continue;
        }
        if (m == cap)
            return -1;
        env[m++] = s->env[k][i];
    }
    if (g) {
        if (m + 2 > cap)
            return -1;
        env[m++] = (char *)sock_env;
        if (k == DOCK_PROJECT) {
            if (asprintf(owned, "NODE_OPTIONS=%s%s" PRELOAD_FLAG, image_opts ? image_opts : "",
                         image_opts && *image_opts ? " " : "") < 0) {
                *owned = NULL;
                return -1;
            }
            env[m++] = *owned;
        }
    }
    *n = m;
    return 0;
}

/* The one owner of a box under construction: at scope exit whatever it still holds is released
 * (the container, once created, goes to the reapers); on success the caller take_ptr()s it. */
struct box_hold {
    struct dock_state *s;
    struct dock_box *b;
};
static void box_hold_release(struct box_hold *h)
{
    dock_box_release(h->s, h->b);
}
#define cleanup_box_hold __attribute__((cleanup(box_hold_release)))

/* A fresh box of kind k: its per-call marker, its end marker when the script wraps the command
 * (wrapped), and the container's random name in name. */
static int box_new(enum dock_kind k, bool wrapped, struct dock_box **out, char name[48], struct plm_err *err)
{
    struct dock_box *b cleanup_free = calloc(1, sizeof *b);
    if (!b)
        return plm_fail(err, ENOMEM, PLM_E_INTERNAL, "out of memory");
    b->kind = k;
    b->at.fd = -1;
    b->early_out.max = b->early_err.max = LIM_OUTPUT_MAX;
    uint8_t rnd[16], e[16];
    char hex[33];
    if (dock_random(rnd, sizeof rnd) < 0 || (wrapped && dock_random(e, sizeof e) < 0))
        return plm_fail(err, errno, PLM_E_INTERNAL, "getrandom failed");
    dock_hex(rnd, 8, hex);
    snprintf(b->marker, sizeof b->marker, DOCK_MARKER_PREFIX "%.16s", hex);
    dock_hex(rnd + 8, 8, hex);
    snprintf(name, 48, "plimsoll-%.16s", hex);
    if (wrapped) {
        dock_hex(e, sizeof e, hex);
        snprintf(b->end, sizeof b->end, DOCK_END_PREFIX "%.32s", hex);
    }
    *out = take_ptr(&b);
    return 0;
}

/* Creates b's container: the start script with the kind's environment and cmd, under lockdown l. */
static int box_create(struct dock_state *s, struct dock_box *b, const char *name, const char *const *cmd, size_t n_cmd,
                      const struct dock_grant_paths *g, const struct dock_lockdown *l, int64_t label_deadline_s,
                      struct plm_err *err)
{
    const char *argv[8 + 66 + 8];
    char *env[66], *env_owned cleanup_free = NULL;
    size_t argc = 0, n_env = 0;
    if (run_env(s, b->kind, g, env, sizeof env / sizeof *env, &n_env, &env_owned) < 0 || n_cmd > 8 ||
        dock_start_argv(b->marker, b->end, env, n_env, cmd, n_cmd, argv, sizeof argv / sizeof *argv, &argc) < 0)
        return plm_fail(err, E2BIG, PLM_E_INTERNAL, "start command too long");
    /* the spec holds its own copies of argv's strings */
    json_t *spec cleanup_json = dock_spec(l, b->kind, s->id[b->kind], argv, argc, label_deadline_s, s->instance, g);
    if (!spec)
        return plm_fail(err, ENOMEM, PLM_E_INTERNAL, "out of memory building the spec");
    return dock_container_create(&s->eng, name, spec, b->id, err);
}

/* Attaches (before start, so that no byte of output is missed), starts, and reads up to the
 * start marker, which must be the first bytes of stderr. */
static int box_start_marked(struct dock_state *s, struct dock_box *b, struct plm_err *err)
{
    if (dock_attach_open(&s->eng, b->id, &b->at, err) < 0 || dock_container_start(&s->eng, b->id, err) < 0)
        return -1;
    b->started = true;
    struct start_ctx c = {.b = b};
    struct dock_io io = {.sink = start_sink, .stop = start_done, .ctx = &c};
    int r = dock_attach_pump(&b->at, &io, (int64_t)clock_mono_ms() + DOCK_START_MS, err);
    if (r < 0)
        return plm_err_wrap(err, "before its start marker");
    if (dock_marker_matches(b->marker, c.mk, c.mk_have)) {
        b->marked = true;
        return 0;
    }
    /* (spec §3.4 rows 1 and 4) docker or the image failed before our command: never a result */
    if (c.mk_have == DOCK_MARKER_LEN)
        return plm_fail(err, 0, PLM_E_INTERNAL,
                        "the container wrote something else before its start marker (the image cannot run "
                        "the start script)");
    if (r == 0)
        return plm_fail(err, ETIMEDOUT, PLM_E_INTERNAL, "the container did not print its start marker within %d s",
                        DOCK_START_MS / 1000);
    return plm_fail(err, 0, PLM_E_INTERNAL,
                    "the container ended before its start marker (bad image or rejected command)");
}

static int cold_start(struct dock_state *s, enum dock_kind k, const char *const *cmd, size_t n_cmd,
                      const struct dock_grant_paths *g, const struct dock_lockdown *l, int64_t label_deadline_s,
                      struct dock_box **out, struct plm_err *err)
{
    static const char *const node_cmd[] = {"node", "-"};
    /* the snippet stays `node -` reading stdin; the client is an ES module loaded before it */
    static const char *const node_grant_cmd[] = {"node", PRELOAD_FLAG, "-"};
    static const char *const runner_cmd[] = {DOCK_RUNNER_PATH};
    bool wrapped = k == DOCK_SNIPPET && !cmd; /* node - runs under the script's end line */
    if (!cmd) {
        bool runner = k == DOCK_PROJECT || k == DOCK_MODULE;
        bool granted = g && g->sock;
        cmd = runner ? runner_cmd : granted ? node_grant_cmd : node_cmd;
        n_cmd = runner ? 1 : granted ? 3 : 2;
    }
    char name[48];
    struct box_hold h cleanup_box_hold = {.s = s};
    if (box_new(k, wrapped, &h.b, name, err) < 0 ||
        box_create(s, h.b, name, cmd, n_cmd, g, l ? l : &s->lock, label_deadline_s, err) < 0)
        return -1;
    h.b->created_ms = (int64_t)clock_mono_ms();
    /* From here on the container exists: the hold removes it on every failure path. */
    if (box_start_marked(s, h.b, err) < 0)
        return -1;
    if (k == DOCK_SNIPPET || k == DOCK_PROJECT) { /* the pool's estimate (only these are pooled) */
        pthread_mutex_lock(&s->pool_mu);
        int64_t took = (int64_t)clock_mono_ms() - h.b->created_ms, *avg = &s->start_avg_ms[k];
        *avg = *avg ? (*avg * 7 + took) / 8 : took;
        pthread_mutex_unlock(&s->pool_mu);
    }
    *out = take_ptr(&h.b);
    return 0;
}

int dock_box_acquire(struct dock_state *s, enum dock_kind k, const char *const *cmd, size_t n_cmd, bool pooled,
                     const struct dock_grant_paths *g, struct dock_box **out, struct plm_err *err)
{
    *out = NULL;
    while (pooled && !cmd && !g) {
        pthread_mutex_lock(&s->pool_mu);
        struct dock_box *b = NULL;
        /* A refill in flight that should be ready in less than half a cold start is worth waiting
         * for; otherwise a cold start of our own, in parallel, is sooner. The oldest one in
         * flight is the first expected. */
        int64_t avg = s->start_avg_ms[k] ? s->start_avg_ms[k] : 500, oldest = 0;
        for (int i = 0; i < DOCK_FILLERS; i++)
            if (s->fill_started_ms[k][i] && (!oldest || s->fill_started_ms[k][i] < oldest))
                oldest = s->fill_started_ms[k][i];
        int64_t wait_until = oldest + avg + avg / 2;
        if (s->filling[k] && wait_until - (int64_t)clock_mono_ms() > avg / 2 + avg / 2)
            wait_until = 0;
        while (!s->n_pool[k] && s->filling[k] && (int64_t)clock_mono_ms() < wait_until) {
            struct timespec ts;
            clock_gettime(CLOCK_MONOTONIC, &ts);
            int64_t ns = ts.tv_nsec + 50 * 1000000L;
            ts.tv_sec += ns / 1000000000L;
            ts.tv_nsec = ns % 1000000000L;
            pthread_cond_timedwait(&s->pool_cv, &s->pool_mu, &ts);
        }
        if (s->n_pool[k]) {
            b = s->pool[k][0];
            memmove(&s->pool[k][0], &s->pool[k][1], (s->n_pool[k] - 1) * sizeof b);
            s->n_pool[k]--;
        }
        pthread_mutex_unlock(&s->pool_mu);
        if (!b)
            break;
        dock_bg_kick(s);
        /* A parked container that printed anything or hung up is not the one we proved: drop it. */
        if (dock_attach_stirred(&b->at) || b->early_out.len || b->early_err.len ||
            (int64_t)clock_mono_ms() - b->created_ms > DOCK_POOL_MAX_AGE_S * 1000) {
            dock_box_release(s, b);
            continue;
        }
        *out = b;
        return 0;
    }
    int64_t label = clock_unix_ms() / 1000 + DOCK_START_MS / 1000 +
                    (k == DOCK_PROJECT || k == DOCK_MODULE ? (DOCK_PROJECT_MAX_MS + DOCK_PROJECT_GRACE_MS) / 1000
                                                           : DOCK_SNIPPET_MAX_MS / 1000);
    return cold_start(s, k, cmd, n_cmd, g, NULL, label, out, err);
}

int dock_box_start(struct dock_state *s, enum dock_kind k, const char *const *cmd, size_t n_cmd,
                   const struct dock_grant_paths *g, const struct dock_lockdown *l, int64_t label_deadline_s,
                   struct dock_box **out, struct plm_err *err)
{
    *out = NULL;
    return cold_start(s, k, cmd, n_cmd, g, l, label_deadline_s, out, err);
}

static bool stopping(struct dock_state *s)
{
    pthread_mutex_lock(&s->mu);
    bool stop = s->stop;
    pthread_mutex_unlock(&s->mu);
    return stop;
}

void dock_pool_fill(struct dock_state *s)
{
    for (int k = 0; k < 2; k++) {
        while (!stopping(s)) {
            pthread_mutex_lock(&s->pool_mu);
            /* recycle the oldest when it aged out or changed while parked */
            struct dock_box *old = NULL;
            if (s->n_pool[k] && ((int64_t)clock_mono_ms() - s->pool[k][0]->created_ms > DOCK_POOL_MAX_AGE_S * 1000 ||
                                 dock_attach_stirred(&s->pool[k][0]->at))) {
                old = s->pool[k][0];
                memmove(&s->pool[k][0], &s->pool[k][1], (s->n_pool[k] - 1) * sizeof old);
                s->n_pool[k]--;
            }
            /* boxes parked plus boxes on their way never exceed the target */
            bool want = !old && (int)s->n_pool[k] + s->filling[k] < s->warm[k] && s->filling[k] < DOCK_FILLERS &&
                        atomic_load(&s->ready) && !atomic_load(&s->repointed);
            int slot = -1;
            if (want) {
                for (slot = 0; s->fill_started_ms[k][slot]; slot++)
                    ; /* filling[k] < DOCK_FILLERS: a free slot exists */
                int64_t now = (int64_t)clock_mono_ms();
                s->fill_started_ms[k][slot] = now ? now : 1;
                s->filling[k]++;
            }
            pthread_mutex_unlock(&s->pool_mu);
            if (old) {
                dock_box_release(s, old);
                continue;
            }
            if (!want)
                break;
            struct dock_box *b = NULL;
            struct plm_err e = {0};
            int64_t label = clock_unix_ms() / 1000 + DOCK_POOL_MAX_AGE_S + DOCK_START_MS / 1000 +
                            (DOCK_PROJECT_MAX_MS + DOCK_PROJECT_GRACE_MS) / 1000;
            int r = cold_start(s, (enum dock_kind)k, NULL, 0, NULL, NULL, label, &b, &e);
            pthread_mutex_lock(&s->pool_mu);
            s->filling[k]--;
            s->fill_started_ms[k][slot] = 0;
            if (r == 0 && (int)s->n_pool[k] < s->warm[k] && s->n_pool[k] < DOCK_POOL_MAX) {
                s->pool[k][s->n_pool[k]++] = b;
                b = NULL;
            }
            pthread_cond_broadcast(&s->pool_cv);
            pthread_mutex_unlock(&s->pool_mu);
            dock_box_release(s, b);
            if (r < 0)
                break; /* dockerd trouble: the next tick tries again */
        }
    }
}

void dock_pool_drain(struct dock_state *s)
{
    for (int k = 0; k < 2; k++) {
        for (;;) {
            pthread_mutex_lock(&s->pool_mu);
            struct dock_box *b = s->n_pool[k] ? s->pool[k][--s->n_pool[k]] : NULL;
            pthread_mutex_unlock(&s->pool_mu);
            if (!b)
                break;
            dock_box_release(s, b);
        }
    }
}
