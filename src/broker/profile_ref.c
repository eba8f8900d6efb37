/* profile_ref.c: the keys of the reference's grants file that profiles.c's core rules do not
 * cover (issue 14 §4): catalog, batch_of, advice, advice_retention, allow_in_sessions and
 * preamble_file. docs/grants.md "Keys kept for the reference" says what each does here.
 * Owns: the catalog and batch_of routes of a profile (freed by brk_ref_keys_done).
 * Trusts: nothing in the file beyond its being the operator's: every value is checked with the
 * same route rules as allow; preamble_file must resolve (symlinks followed) inside the grants
 * file's directory and be a regular file of at most BRK_PREAMBLE_MAX bytes of UTF-8 without NUL.
 * Invariant: on -1 field/why name the problem; nothing here reads the environment or a secret. */
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../core/cleanup.h"
#include "../core/validate.h"
#include "profiles.h"
#include "text.h"

#define PREAMBLE_PATH_MAX 1024

struct rctx {
    char *field, *why;
    size_t fcap, wcap;
};

static int bad(struct rctx *c, const char *field, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int bad(struct rctx *c, const char *field, const char *fmt, ...)
{
    snprintf(c->field, c->fcap, "%s", field);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(c->why, c->wcap, fmt, ap);
    va_end(ap);
    return -1;
}

const char *brk_advice_name(enum brk_advice a)
{
    return a == BRK_ADVICE_CALLER ? "caller" : a == BRK_ADVICE_OPERATOR ? "operator" : "off";
}

const char *brk_retention_name(enum brk_retention r)
{
    return r == BRK_RETENTION_DETAILED ? "detailed" : r == BRK_RETENTION_AGGREGATE ? "aggregate" : "none";
}

/* One "METHOD /path" string into r (wildcards allowed). */
static int route_of(struct rctx *c, const json_t *v, const char *field, struct brk_route *r)
{
    const char *s = json_string_value(v);
    if (!s || memchr(s, 0, json_string_length(v)))
        return bad(c, field, "must be a \"METHOD /path\" string");
    struct plm_err e = {0};
    if (brk_route_parse(s, json_string_length(v), true, r, &e) < 0)
        return e.kind == PLM_E_INTERNAL ? -2 : bad(c, field, "%s", e.msg);
    return 0;
}

static int parse_catalog(struct rctx *c, const json_t *arr, struct brk_profile *p)
{
    if (!arr)
        return 0;
    if (!json_is_array(arr))
        return bad(c, "catalog", "must be a list of \"METHOD /path\" strings");
    size_t n = json_array_size(arr);
    if (n > BRK_CATALOG_MAX)
        return bad(c, "catalog", "has more than %d routes", BRK_CATALOG_MAX);
    p->catalog = calloc(n ? n : 1, sizeof *p->catalog);
    if (!p->catalog)
        return -2;
    for (size_t i = 0; i < n; i++) {
        char f[32];
        snprintf(f, sizeof f, "catalog[%zu]", i);
        int r = route_of(c, json_array_get(arr, i), f, &p->catalog[i]);
        if (r < 0)
            return r;
        p->n_catalog++;
        for (size_t k = 0; k < i; k++)
            if (p->catalog[k].method == p->catalog[i].method && !strcmp(p->catalog[k].path, p->catalog[i].path))
                return bad(c, f, "duplicate route");
    }
    return 0;
}

/* batch_of: {"GET /items": ["GET /items/{id}"], ...} (a "*" segment in the real thing): the batch
 * route, then the routes it batches. */
static int parse_batch_of(struct rctx *c, const json_t *obj, struct brk_profile *p)
{
    if (!obj)
        return 0;
    if (!json_is_object(obj))
        return bad(c, "batch_of", "must be an object of \"METHOD /path\": [\"METHOD /path\", ...]");
    size_t n = json_object_size(obj);
    if (n > BRK_BATCH_MAX)
        return bad(c, "batch_of", "has more than %d entries", BRK_BATCH_MAX);
    p->batch_of = calloc(n ? n : 1, sizeof *p->batch_of);
    if (!p->batch_of)
        return -2;
    const char *key;
    json_t *v;
    json_object_foreach((json_t *)obj, key, v)
    {
        char f[64], q[40];
        snprintf(f, sizeof f, "batch_of[\"%s\"]", brk_quote(q, sizeof q, key, strlen(key)));
        struct brk_batch *b = &p->batch_of[p->n_batch_of];
        json_t *kv = json_string(key);
        if (!kv)
            return -2;
        int r = route_of(c, kv, f, &b->batch);
        json_decref(kv);
        if (r < 0)
            return r;
        p->n_batch_of++;
        if (!json_is_array(v) || json_array_size(v) == 0 || json_array_size(v) > BRK_BATCH_MAX)
            return bad(c, f, "must be a list of 1..%d \"METHOD /path\" strings", BRK_BATCH_MAX);
        b->singles = calloc(json_array_size(v), sizeof *b->singles);
        if (!b->singles)
            return -2;
        for (size_t i = 0; i < json_array_size(v); i++) {
            if ((r = route_of(c, json_array_get(v, i), f, &b->singles[i])) < 0)
                return r;
            b->n_singles++;
        }
    }
    return 0;
}

static int parse_enum(struct rctx *c, const json_t *v, const char *field, const char *const *names, int *out)
{
    *out = 0;
    if (!v)
        return 0;
    const char *s = json_string_value(v);
    if (!s)
        return bad(c, field, "must be a string");
    /* the reference trims and takes "" as the default */
    size_t len = json_string_length(v), a = 0;
    while (a < len && (s[a] == ' ' || s[a] == '\t' || s[a] == '\n' || s[a] == '\r'))
        a++;
    while (len > a && (s[len - 1] == ' ' || s[len - 1] == '\t' || s[len - 1] == '\n' || s[len - 1] == '\r'))
        len--;
    if (len == a)
        return 0;
    for (int i = 0; names[i]; i++)
        if (strlen(names[i]) == len - a && !memcmp(names[i], s + a, len - a)) {
            *out = i;
            return 0;
        }
    char q[40];
    return bad(c, field, "\"%s\" is not one of %s|%s|%s", brk_quote(q, sizeof q, s, json_string_length(v)), names[0],
               names[1], names[2]);
}

/* Reads the preamble at dir/rel, which must resolve inside dir. */
static int read_preamble_file(struct rctx *c, const char *dir, const char *rel, size_t rel_len, char **out)
{
    char q[80];
    brk_quote(q, sizeof q, rel, rel_len);
    if (!dir)
        return bad(c, "preamble_file", "\"%s\" needs a grants file to resolve it against", q);
    if (rel_len == 0 || rel_len > PREAMBLE_PATH_MAX || memchr(rel, 0, rel_len))
        return bad(c, "preamble_file", "must be a path of 1..%d bytes", PREAMBLE_PATH_MAX);
    char real_dir[PATH_MAX], joined[PATH_MAX + PREAMBLE_PATH_MAX + 2], real[PATH_MAX];
    if (!realpath(dir, real_dir))
        return bad(c, "preamble_file", "the grants directory cannot be resolved: %s", strerror(errno));
    /* joined like the reference: an absolute-looking name still lands under dir */
    snprintf(joined, sizeof joined, "%s/%.*s", real_dir, (int)rel_len, rel);
    if (!realpath(joined, real))
        return bad(c, "preamble_file", "\"%s\" cannot be read: %s", q, strerror(errno));
    size_t dl = strlen(real_dir);
    bool inside = dl == 1 ? real[0] == '/' && real[1] : !strncmp(real, real_dir, dl) && real[dl] == '/';
    if (!inside)
        return bad(c, "preamble_file", "\"%s\" resolves outside the grants file's directory", q);
    cleanup_close int fd = open(real, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
    if (fd < 0)
        return bad(c, "preamble_file", "\"%s\" cannot be read: %s", q, strerror(errno));
    struct stat st;
    int r = 0;
    cleanup_free char *buf = NULL;
    if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode))
        r = bad(c, "preamble_file", "\"%s\" is not a regular file", q);
    else if ((uint64_t)st.st_size > BRK_PREAMBLE_MAX)
        r = bad(c, "preamble_file", "\"%s\" is longer than %u bytes", q, BRK_PREAMBLE_MAX);
    else if (!(buf = malloc(BRK_PREAMBLE_MAX + 2)))
        r = -2;
    size_t got = 0;
    while (!r && got <= BRK_PREAMBLE_MAX) { /* up to the cap + 1: a file growing under us is caught */
        ssize_t n = read(fd, buf + got, BRK_PREAMBLE_MAX + 1 - got);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            r = bad(c, "preamble_file", "\"%s\": read: %s", q, strerror(errno));
        if (n <= 0)
            break;
        got += (size_t)n;
    }
    if (!r && got > BRK_PREAMBLE_MAX)
        r = bad(c, "preamble_file", "\"%s\" is longer than %u bytes", q, BRK_PREAMBLE_MAX);
    else if (!r && (memchr(buf, 0, got) || !plm_utf8_ok(buf, got)))
        r = bad(c, "preamble_file", "\"%s\" must be UTF-8 without NUL bytes", q);
    if (r)
        return r;
    buf[got] = 0;
    *out = take_ptr(&buf);
    return 0;
}

int brk_ref_keys_parse(const void *obj, const char *dir, struct brk_profile *p, char *field, size_t fcap, char *why,
                       size_t wcap)
{
    const json_t *o = obj;
    struct rctx c = {field, why, fcap, wcap};
    *field = *why = 0;
    int r;
    if ((r = parse_catalog(&c, json_object_get(o, "catalog"), p)) < 0 ||
        (r = parse_batch_of(&c, json_object_get(o, "batch_of"), p)) < 0)
        return r;
    static const char *const advice[] = {"off", "operator", "caller", NULL};
    static const char *const retention[] = {"none", "aggregate", "detailed", NULL};
    int a, t;
    if ((r = parse_enum(&c, json_object_get(o, "advice"), "advice", advice, &a)) < 0 ||
        (r = parse_enum(&c, json_object_get(o, "advice_retention"), "advice_retention", retention, &t)) < 0)
        return r;
    p->advice = (enum brk_advice)a;
    p->advice_retention = (enum brk_retention)t;
    const json_t *ais = json_object_get(o, "allow_in_sessions");
    if (ais && !json_is_boolean(ais))
        return bad(&c, "allow_in_sessions", "must be true or false");
    p->allow_in_sessions = ais && json_is_true(ais);
    const json_t *pf = json_object_get(o, "preamble_file");
    if (pf) {
        const char *s = json_string_value(pf);
        if (!s)
            return bad(&c, "preamble_file", "must be a string");
        if (!*s) /* the reference takes "" as absent */
            return 0;
        if (p->preamble && *p->preamble)
            return bad(&c, "preamble_file", "set either preamble or preamble_file, not both");
        char *text = NULL;
        if ((r = read_preamble_file(&c, dir, s, json_string_length(pf), &text)) < 0)
            return r;
        free(p->preamble);
        p->preamble = text;
    }
    return 0;
}

void brk_ref_keys_done(struct brk_profile *p)
{
    for (size_t i = 0; p->catalog && i < p->n_catalog; i++)
        brk_route_done(&p->catalog[i]);
    free(p->catalog);
    for (size_t i = 0; p->batch_of && i < p->n_batch_of; i++) {
        brk_route_done(&p->batch_of[i].batch);
        for (size_t k = 0; p->batch_of[i].singles && k < p->batch_of[i].n_singles; k++)
            brk_route_done(&p->batch_of[i].singles[k]);
        free(p->batch_of[i].singles);
    }
    free(p->batch_of);
    p->catalog = NULL, p->batch_of = NULL;
    p->n_catalog = p->n_batch_of = 0;
}

int brk_ref_keys_copy(struct brk_profile *d, const struct brk_profile *s)
{
    d->advice = s->advice;
    d->advice_retention = s->advice_retention;
    d->allow_in_sessions = s->allow_in_sessions;
    d->catalog = calloc(s->n_catalog ? s->n_catalog : 1, sizeof *d->catalog);
    d->batch_of = calloc(s->n_batch_of ? s->n_batch_of : 1, sizeof *d->batch_of);
    if (!d->catalog || !d->batch_of)
        return -1;
    for (size_t i = 0; i < s->n_catalog; i++, d->n_catalog++)
        if (brk_route_copy(&d->catalog[i], &s->catalog[i]) < 0)
            return -1;
    for (size_t i = 0; i < s->n_batch_of; i++) {
        struct brk_batch *b = &d->batch_of[i];
        if (brk_route_copy(&b->batch, &s->batch_of[i].batch) < 0)
            return -1;
        d->n_batch_of++;
        b->singles = calloc(s->batch_of[i].n_singles ? s->batch_of[i].n_singles : 1, sizeof *b->singles);
        if (!b->singles)
            return -1;
        for (size_t k = 0; k < s->batch_of[i].n_singles; k++, b->n_singles++)
            if (brk_route_copy(&b->singles[k], &s->batch_of[i].singles[k]) < 0)
                return -1;
    }
    return 0;
}
