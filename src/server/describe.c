/* describe.c: Describe (rpc.h), with its encoded answer kept between calls (issue 22: gateways
 * poll Describe, and encoding the evidence card as JSON was most of its cost).
 * The answer is a function of what the provider states (plm_describe, its evidence card), the
 * session environment and the format; the configuration parts are fixed for the daemon's life.
 * So every call still asks the provider and the session service, flattens what they said into a
 * key (every field wire_describe_to_pb and sess_svc_describe read, the evidence card byte for
 * byte) and compares it with the key of the kept answer: the same key, the kept bytes; any
 * difference (a tier proved or lost, a new card, a new identity), a fresh encoding that replaces
 * them. No invalidation call exists to be forgotten: a stale answer needs an unchanged key.
 * The request is still decoded strictly on every call (an unknown key is refused as before).
 * Owns: the kept key and body per format, under one mutex (the loop threads share it). */
#include "../core/cleanup.h"
#include "describe.h"
#include "rpc_int.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "../wire/convert.h"
#include "session_rpc.h"

/* A new field of plm_describe must join walk_describe below, or a change of it alone would leave
 * the kept answer stale: this fails to compile until it has been looked at. */
_Static_assert(sizeof(struct plm_describe) == 1264, "plm_describe changed: add the new field to walk_describe");
_Static_assert(sizeof(struct plm_payload_env) == 400, "plm_payload_env changed: add the new field to walk_env");

struct kept {
    unsigned char *key;
    size_t key_len;
    char *body;
    size_t len;
};

struct describe_cache {
    pthread_mutex_t mu;
    struct kept fmt[2]; /* RPC_JSON, RPC_PROTO */
};

/* Either compares the key bytes with `old` (build == false) or appends them to buf. */
struct walk {
    const unsigned char *old;
    size_t old_len;
    bool build, same, oom;
    unsigned char *buf;
    size_t len, cap;
};

static void put(struct walk *w, const void *p, size_t n)
{
    if (!w->build) {
        w->same = w->same && w->len + n <= w->old_len && memcmp(w->old + w->len, p, n) == 0;
        w->len += n;
        return;
    }
    if (w->oom)
        return;
    if (w->cap - w->len < n) {
        size_t cap = w->cap ? w->cap : 1024;
        while (cap - w->len < n)
            cap *= 2;
        unsigned char *q = realloc(w->buf, cap);
        if (!q) {
            w->oom = true;
            return;
        }
        w->buf = q;
        w->cap = cap;
    }
    memcpy(w->buf + w->len, p, n);
    w->len += n;
}

static void put_str(struct walk *w, const char *s)
{
    unsigned char tag = s ? 1 : 0; /* NULL and "" differ */
    put(w, &tag, 1);
    if (s)
        put(w, s, strlen(s) + 1);
}

static void put_u32(struct walk *w, uint32_t v) { put(w, &v, sizeof v); }

static void walk_env(struct walk *w, const struct plm_payload_env *e)
{
    put_str(w, e->identity);
    put_u32(w, e->max_timeout_ms);
    put_u32(w, e->default_timeout_ms);
    put_str(w, e->software_identity);
    size_t n = 0;
    while (n < sizeof e->languages / sizeof e->languages[0] && e->languages[n])
        put_str(w, e->languages[n++]);
    put_str(w, NULL); /* the list's end */
}

static void walk_describe(struct walk *w, const struct plm_describe *d, const struct plm_payload_env *sess,
                          bool has_sess)
{
    put_str(w, d->sandbox);
    put_u32(w, (uint32_t)d->tier);
    bool flags[7] = {d->supports_project, d->supports_javascript_grants, d->supports_project_grants,
                     d->supports_module, d->supports_session_grants, d->evidence != NULL, has_sess};
    put(w, flags, sizeof flags);
    walk_env(w, &d->javascript);
    walk_env(w, &d->project);
    walk_env(w, &d->module);
    put_u32(w, d->memory_mb);
    put_u32(w, d->pids);
    put_u32(w, d->disk_mb);
    put(w, &d->cpus, sizeof d->cpus);
    put_str(w, d->policy);
    put_u32(w, d->billing_teardown_ms);
    if (d->evidence) /* the whole card, whatever changed in it */
        put(w, d->evidence, sizeof *d->evidence);
    if (has_sess)
        walk_env(w, sess);
}

struct describe_cache *describe_cache_new(void)
{
    struct describe_cache *dc = calloc(1, sizeof *dc);
    if (dc && pthread_mutex_init(&dc->mu, NULL) != 0) {
        free(dc);
        return NULL;
    }
    return dc;
}

void describe_cache_free(struct describe_cache *dc)
{
    if (!dc)
        return;
    for (int i = 0; i < 2; i++) {
        free(dc->fmt[i].key);
        free(dc->fmt[i].body);
    }
    pthread_mutex_destroy(&dc->mu);
    free(dc);
}

/* A copy of the kept answer when its key is the current one; false otherwise (or out of memory). */
static bool kept_answer(struct describe_cache *dc, enum rpc_fmt fmt, const struct plm_describe *d,
                        const struct plm_payload_env *sess, bool has_sess, struct rpc_answer *ans)
{
    bool hit = false;
    pthread_mutex_lock(&dc->mu);
    struct kept *k = &dc->fmt[fmt == RPC_PROTO];
    if (k->body) {
        struct walk w = {.old = k->key, .old_len = k->key_len, .same = true};
        walk_describe(&w, d, sess, has_sess);
        if (w.same && w.len == k->key_len && (ans->body = malloc(k->len ? k->len : 1))) {
            memcpy(ans->body, k->body, k->len);
            ans->len = k->len;
            ans->status = 200;
            ans->fmt = fmt;
            hit = true;
        }
    }
    pthread_mutex_unlock(&dc->mu);
    return hit;
}

/* Keeps a fresh answer for the key it was built from (a failure to keep it only costs speed). */
static void keep(struct describe_cache *dc, enum rpc_fmt fmt, const struct plm_describe *d,
                 const struct plm_payload_env *sess, bool has_sess, const struct rpc_answer *ans)
{
    struct walk w = {.build = true};
    walk_describe(&w, d, sess, has_sess);
    cleanup_free unsigned char *key = w.buf;
    cleanup_free char *body = w.oom ? NULL : malloc(ans->len ? ans->len : 1);
    if (!body)
        return;
    memcpy(body, ans->body, ans->len);
    pthread_mutex_lock(&dc->mu);
    struct kept *k = &dc->fmt[fmt == RPC_PROTO];
    free(k->key); /* the answer kept before, replaced */
    free(k->body);
    *k = (struct kept){.key = take_ptr(&key), .key_len = w.len, .body = take_ptr(&body), .len = ans->len};
    pthread_mutex_unlock(&dc->mu);
}

void rpc_describe(const struct rpc_env *env, const struct rpc_call *call, struct rpc_answer *ans)
{
    /* Describe waits on nothing, so the caller's deadline and presence do not change its answer */
    enum rpc_fmt fmt = call->fmt;
    const char *request_id = call->request_id;
    struct plm_err err = {0};
    ProtobufCMessage *req =
        rpc_decode(&plimsoll__v1__describe_request__descriptor, fmt, call->body, call->len, NULL, &err);
    if (!req) {
        rpc_decode_failed(ans, &err, request_id);
        return;
    }
    protobuf_c_message_free_unpacked(req, NULL);
    struct plm_describe d = {0};
    env->provider->ops->describe(env->provider, &d);
    struct plm_payload_env sess;
    bool has_sess = sess_svc_env(env->sessions, &sess);
    if (env->describe_cache && kept_answer(env->describe_cache, fmt, &d, &sess, has_sess, ans))
        return;
    Plimsoll__V1__DescribeResponse *m = wire_describe_to_pb(&d, PLM_PROTOCOL);
    if (!m) {
        plm_fail(&err, ENOMEM, PLM_E_INTERNAL, "out of memory building Describe");
        rpc_error(ans, &err, request_id);
        return;
    }
    sess_svc_describe(env->sessions, m); /* fields 15-20 */
    rpc_encode(ans, &m->base, fmt, request_id);
    protobuf_c_message_free_unpacked(&m->base, NULL);
    if (env->describe_cache && ans->status == 200)
        keep(env->describe_cache, fmt, &d, &sess, has_sess, ans);
}
