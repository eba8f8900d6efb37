/* backends.c: a placement pool's daemons: each one's name, URL, CA and the caller's own token for
 * it, from the API or a backends file (docs/cli.md, docs/library.md).
 * Owns: the copies of every string and the cached Describe of every backend; the tokens are wiped
 * when the pool is released.
 * Trusts: nothing in the file: every entry is checked and the first bad one is named. */
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <stdlib.h>
#include <string.h>

#include "../core/cleanup.h"
#include "../core/io.h"
#include "client.h"

#define BACKENDS_FILE_MAX (64u << 10)

void plc_pool_init(struct plc_pool *p)
{
    memset(p, 0, sizeof *p);
    p->ttl_s = PLC_DEFAULT_TTL_S;
}

static bool name_valid(const char *s)
{
    size_t n = s ? strlen(s) : 0;
    return n >= 1 && n < PLC_NAME_MAX &&
           strspn(s, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._-") == n;
}

struct plc_backend *plc_pool_find(struct plc_pool *p, const char *name)
{
    for (size_t i = 0; i < p->n; i++)
        if (strcmp(p->b[i].name, name) == 0)
            return &p->b[i];
    return NULL;
}

static void backend_done(struct plc_backend *b)
{
    cli_token_free(b->token);
    free(b->url);
    free(b->ca);
    if (b->desc)
        protobuf_c_message_free_unpacked(&b->desc->base, NULL);
    memset(b, 0, sizeof *b);
}

int plc_pool_add(struct plc_pool *p, const char *name, const char *url, const char *token, const char *ca,
                 struct plm_err *err)
{
    if (!name_valid(name))
        return plm_fail(err, 0, PLM_E_INVALID,
                        "backend name `%.80s`: 1 to %d of A-Z a-z 0-9 . _ -", name ? name : "", PLC_NAME_MAX - 1);
    if (plc_pool_find(p, name))
        return plm_fail(err, 0, PLM_E_INVALID, "backend `%s` is named twice", name);
    if (p->n == PLC_BACKENDS_MAX)
        return plm_fail(err, 0, PLM_E_INVALID, "more than %d backends", PLC_BACKENDS_MAX);
    if (!url || (strncmp(url, "http://", 7) && strncmp(url, "https://", 8)) || strlen(url) > 2048)
        return plm_fail(err, 0, PLM_E_INVALID, "backend `%s`: url must be http:// or https://",
                        name);
    struct plc_backend *b = &p->b[p->n];
    snprintf(b->name, sizeof b->name, "%s", name);
    b->url = strdup(url);
    b->token = token ? strdup(token) : NULL;
    b->ca = ca ? strdup(ca) : NULL;
    if (!b->url || (token && !b->token) || (ca && !b->ca)) {
        backend_done(b);
        return plm_fail(err, ENOMEM, PLM_E_INTERNAL, "out of memory");
    }
    b->conn = (struct cli_conn){.url = b->url, .token = b->token, .ca = b->ca, .transport = p->transport};
    p->n++;
    return 0;
}

void plc_pool_done(struct plc_pool *p)
{
    for (size_t i = 0; i < p->n; i++)
        backend_done(&p->b[i]);
    p->n = 0;
}

/* A path from the file, relative ones read against the file's own directory. */
static char *resolve(const char *dir, const char *path)
{
    char *out = NULL;
    if (path[0] == '/')
        return strdup(path);
    return asprintf(&out, "%s/%s", dir, path) < 0 ? NULL : out;
}

static const char *opt_string(json_t *e, const char *k, bool *bad)
{
    json_t *v = json_object_get(e, k);
    if (!v || json_is_null(v))
        return NULL;
    const char *s = json_string_value(v);
    if (!s || !*s)
        *bad = true;
    return s;
}

static int load_entry(struct plc_pool *p, json_t *e, size_t i, const char *dir, struct plm_err *err)
{
    if (!json_is_object(e))
        return plm_fail(err, 0, PLM_E_INVALID, "entry %zu is not an object", i + 1);
    const char *k;
    json_t *v;
    json_object_foreach(e, k, v) {
        if (strcmp(k, "name") && strcmp(k, "url") && strcmp(k, "token_file") && strcmp(k, "ca"))
            return plm_fail(err, 0, PLM_E_INVALID, "entry %zu: unknown key `%.40s`", i + 1, k);
    }
    bool bad = false;
    const char *name = opt_string(e, "name", &bad), *url = opt_string(e, "url", &bad);
    const char *token_file = opt_string(e, "token_file", &bad), *ca = opt_string(e, "ca", &bad);
    if (bad || !name || !url)
        return plm_fail(err, 0, PLM_E_INVALID,
                        "entry %zu: name and url are required strings; token_file and ca non-empty strings", i + 1);
    cleanup_free char *tf = token_file ? resolve(dir, token_file) : NULL;
    cleanup_free char *caf = ca ? resolve(dir, ca) : NULL;
    if ((token_file && !tf) || (ca && !caf))
        return plm_fail(err, ENOMEM, PLM_E_INTERNAL, "out of memory");
    char *token = NULL;
    /* No token_file: this backend gets no token (never $PLIMSOLL_TOKEN, which is one daemon's). */
    if (tf && cli_token_load(tf, &token, err) < 0) {
        char why[sizeof err->msg]; /* the message cannot be both source and destination */
        snprintf(why, sizeof why, "%s", err->msg);
        return plm_fail(err, 0, PLM_E_INVALID, "backend `%.63s`: %s", name, why);
    }
    int r = plc_pool_add(p, name, url, token, caf, err);
    cli_token_free(token);
    return r;
}

int plc_pool_load(struct plc_pool *p, const char *path, struct plm_err *err)
{
    cleanup_free char *buf = NULL;
    size_t len = 0;
    cleanup_close int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY);
    if (fd < 0)
        return plm_fail(err, errno, PLM_E_INVALID, "backends file `%s`: %s", path, strerror(errno));
    int r = plm_read_all(fd, BACKENDS_FILE_MAX, &buf, &len);
    if (r < 0)
        return plm_fail(err, -r, PLM_E_INVALID, "backends file `%s`: %s", path,
                        r == -EFBIG ? "larger than 64 KiB" : strerror(-r));
    json_error_t je;
    cli_cleanup_json json_t *j = json_loadb(buf, len, JSON_REJECT_DUPLICATES, &je);
    if (!j || !json_is_array(j) || json_array_size(j) == 0)
        return plm_fail(err, 0, PLM_E_INVALID, "backends file `%s`: %s", path,
                        j ? "must be a non-empty JSON array of backends" : je.text);
    cleanup_free char *copy = strdup(path);
    if (!copy)
        return plm_fail(err, ENOMEM, PLM_E_INTERNAL, "out of memory");
    const char *dir = dirname(copy);
    size_t i;
    json_t *e;
    json_array_foreach(j, i, e) {
        if (load_entry(p, e, i, dir, err) < 0) {
            plc_pool_done(p);
            char msg[sizeof err->msg];
            snprintf(msg, sizeof msg, "%s", err->msg);
            return plm_fail(err, 0, PLM_E_INVALID, "backends file `%.200s`: %s", path, msg);
        }
    }
    return 0;
}
