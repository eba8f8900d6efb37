/* record.c: run-record digests (wire.md §13).
 * Owns: the SHA-256 stream of one digest at a time. Trusts: nothing; every string may be NULL
 * (read as "") and bytes are hashed raw. Invariant: field names, order and encodings are exactly
 * those of §13.2-13.4, so the golden vectors reproduce bit for bit. */
#include "record.h"

#include <inttypes.h>
#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct rec_stream {
    EVP_MD_CTX *md;
};

static void put_value(struct rec_stream *s, const void *data, size_t len)
{
    uint8_t hdr[8];
    uint64_t n = len;
    for (int i = 7; i >= 0; i--) {
        hdr[i] = (uint8_t)(n & 0xff);
        n >>= 8;
    }
    EVP_DigestUpdate(s->md, hdr, sizeof hdr);
    if (len)
        EVP_DigestUpdate(s->md, data, len);
}

struct rec_stream *rec_stream_new(const char *domain)
{
    struct rec_stream *s = calloc(1, sizeof *s);
    if (!s)
        abort(); /* a digest we cannot compute must never become an empty one */
    s->md = EVP_MD_CTX_new();
    if (!s->md || EVP_DigestInit_ex(s->md, EVP_sha256(), NULL) != 1)
        abort();
    put_value(s, domain, strlen(domain));
    return s;
}

void rec_stream_bytes(struct rec_stream *s, const char *name, const void *data, size_t len)
{
    put_value(s, name, strlen(name));
    put_value(s, data, len);
}

void rec_stream_str(struct rec_stream *s, const char *name, const char *value)
{
    rec_stream_bytes(s, name, value ? value : "", value ? strlen(value) : 0);
}

void rec_stream_int(struct rec_stream *s, const char *name, int64_t v)
{
    char buf[24];
    int n = snprintf(buf, sizeof buf, "%" PRId64, v);
    rec_stream_bytes(s, name, buf, (size_t)n);
}

void rec_stream_uint(struct rec_stream *s, const char *name, uint64_t v)
{
    char buf[24];
    int n = snprintf(buf, sizeof buf, "%" PRIu64, v);
    rec_stream_bytes(s, name, buf, (size_t)n);
}

void rec_stream_bool(struct rec_stream *s, const char *name, int v)
{
    rec_stream_str(s, name, v ? "true" : "false");
}

static void to_hex(const uint8_t *d, size_t n, char *out)
{
    static const char hx[] = "0123456789abcdef";
    for (size_t i = 0; i < n; i++) {
        out[2 * i] = hx[d[i] >> 4];
        out[2 * i + 1] = hx[d[i] & 15];
    }
    out[2 * n] = 0;
}

void rec_stream_finish(struct rec_stream *s, char out[PLM_HEX_SHA256])
{
    uint8_t d[32];
    unsigned n = 0;
    EVP_DigestFinal_ex(s->md, d, &n);
    EVP_MD_CTX_free(s->md);
    free(s);
    to_hex(d, 32, out);
}

void rec_sha256_hex(const void *data, size_t len, char out[PLM_HEX_SHA256])
{
    uint8_t d[32];
    unsigned n = 0;
    EVP_Digest(data, len, d, &n, EVP_sha256(), NULL);
    to_hex(d, 32, out);
}

/* Doubles enter digests as their IEEE-754 bits, big-endian: -0 and NaN payloads stay distinct,
 * which is why results canonicalise NaN before they are digested. */
static void put_double_bits(uint8_t *p, double v)
{
    uint64_t bits;
    memcpy(&bits, &v, sizeof bits);
    for (int i = 7; i >= 0; i--) {
        p[i] = (uint8_t)(bits & 0xff);
        bits >>= 8;
    }
}

static void stream_double(struct rec_stream *s, const char *name, double v)
{
    uint8_t b[8];
    put_double_bits(b, v);
    rec_stream_bytes(s, name, b, sizeof b);
}

static void stream_doubles(struct rec_stream *s, const char *name, const double *v, size_t n)
{
    /* Bounded by the decoded-message cap (8 MiB), so n * 8 cannot overflow. */
    uint8_t *buf = malloc(n ? n * 8 : 1);
    if (!buf)
        abort();
    for (size_t i = 0; i < n; i++)
        put_double_bits(buf + 8 * i, v[i]);
    rec_stream_bytes(s, name, buf, n * 8);
    free(buf);
}

static void stream_files(struct rec_stream *s, const struct plm_file *f, size_t n)
{
    rec_stream_uint(s, "files", n);
    for (size_t i = 0; i < n; i++) {
        rec_stream_str(s, "file_path", f[i].path);
        rec_stream_str(s, "file_content", f[i].content);
    }
}

void rec_request_digest(const struct plm_request *r, char out[PLM_HEX_SHA256])
{
    bool v2 = r->protocol >= 2;
    struct rec_stream *s = rec_stream_new(v2 ? "plimsoll.run-request.v2" : "plimsoll.run-request.v1");
    rec_stream_uint(s, "protocol", r->protocol);
    rec_stream_str(s, "minimum_isolation", r->minimum_isolation);
    rec_stream_int(s, "timeout_ms", r->timeout_ms);
    if (v2) {
        rec_stream_str(s, "software_mode", r->software_mode);
        rec_stream_uint(s, "software_identities", r->n_software_identities);
        for (size_t i = 0; i < r->n_software_identities; i++)
            rec_stream_str(s, "software_identity", r->software_identities[i]);
    }
    rec_stream_str(s, "kind", plm_kind_name(r->kind));
    switch (r->kind) {
    case PLM_KIND_JAVASCRIPT:
        rec_stream_str(s, "code", r->js.code);
        rec_stream_str(s, "grant_profile", r->js.grant_profile);
        break;
    case PLM_KIND_PROJECT:
        rec_stream_str(s, "grant_profile", r->project.grant_profile);
        stream_files(s, r->project.files, r->project.n_files);
        rec_stream_uint(s, "steps", r->project.n_steps);
        for (size_t i = 0; i < r->project.n_steps; i++)
            rec_stream_str(s, "step_command", r->project.steps[i]);
        rec_stream_uint(s, "artifacts", r->project.n_artifacts);
        for (size_t i = 0; i < r->project.n_artifacts; i++)
            rec_stream_str(s, "artifact_path", r->project.artifacts[i]);
        break;
    case PLM_KIND_MODULE:
        rec_stream_str(s, "model", r->module.model);
        stream_double(s, "end_time", r->module.end_time);
        stream_double(s, "step", r->module.step);
        rec_stream_uint(s, "rows", r->module.n_rows);
        for (size_t i = 0; i < r->module.n_rows; i++)
            stream_doubles(s, "row_values", r->module.rows[i].values, r->module.rows[i].n_values);
        break;
    case PLM_KIND_CELL:
        rec_stream_str(s, "language", r->cell.language);
        rec_stream_str(s, "code", r->cell.code);
        stream_files(s, r->cell.files, r->cell.n_files);
        break;
    case PLM_KIND_NONE:
        break;
    }
    rec_stream_finish(s, out);
}

static void stream_out(struct rec_stream *s, const char *name, const struct plm_bytes *b)
{
    rec_stream_bytes(s, name, b->data, b->len);
}

void rec_result_digest(const struct plm_result *r, char out[PLM_HEX_SHA256])
{
    struct rec_stream *s = rec_stream_new("plimsoll.run-result.v1");
    rec_stream_str(s, "kind", plm_kind_name(r->kind));
    switch (r->kind) {
    case PLM_KIND_JAVASCRIPT: {
        const struct plm_js_result *j = &r->js;
        rec_stream_int(s, "exit_code", j->exit_code);
        rec_stream_bool(s, "timed_out", j->timed_out);
        stream_out(s, "stdout", &j->out);
        stream_out(s, "stderr", &j->err);
        rec_stream_bool(s, "stdout_truncated", j->out_truncated);
        rec_stream_bool(s, "stderr_truncated", j->err_truncated);
        break;
    }
    case PLM_KIND_PROJECT: {
        const struct plm_project_result *p = &r->project;
        rec_stream_int(s, "outcome", p->outcome);
        rec_stream_str(s, "outcome_detail", p->detail);
        rec_stream_bool(s, "artifacts_truncated", p->artifacts_truncated);
        rec_stream_uint(s, "steps", p->n_steps);
        for (size_t i = 0; i < p->n_steps; i++) {
            const struct plm_step_result *st = &p->steps[i];
            rec_stream_str(s, "step_command", st->command);
            rec_stream_int(s, "step_exit_code", st->exit_code);
            rec_stream_bool(s, "step_timed_out", st->timed_out);
            stream_out(s, "step_stdout", &st->out);
            stream_out(s, "step_stderr", &st->err);
            rec_stream_bool(s, "step_stdout_truncated", st->out_truncated);
            rec_stream_bool(s, "step_stderr_truncated", st->err_truncated);
        }
        rec_stream_uint(s, "artifacts", p->n_artifacts);
        for (size_t i = 0; i < p->n_artifacts; i++) {
            rec_stream_str(s, "artifact_path", p->artifacts[i].path);
            stream_out(s, "artifact_content", &p->artifacts[i].content);
        }
        break;
    }
    case PLM_KIND_MODULE: {
        const struct plm_module_result *m = &r->module;
        rec_stream_int(s, "outcome", m->outcome);
        rec_stream_str(s, "outcome_detail", m->detail);
        rec_stream_int(s, "width", m->width);
        stream_out(s, "stdout", &m->out);
        stream_out(s, "stderr", &m->err);
        rec_stream_uint(s, "runs", m->n_runs);
        for (size_t i = 0; i < m->n_runs; i++) {
            rec_stream_int(s, "run_status", m->runs[i].status);
            stream_doubles(s, "run_outputs", m->runs[i].outputs, m->runs[i].n_outputs);
        }
        break;
    }
    case PLM_KIND_CELL: {
        const struct plm_cell_result *c = &r->cell;
        rec_stream_int(s, "exit_code", c->exit_code);
        rec_stream_bool(s, "timed_out", c->timed_out);
        stream_out(s, "stdout", &c->out);
        stream_out(s, "stderr", &c->err);
        rec_stream_bool(s, "stdout_truncated", c->out_truncated);
        rec_stream_bool(s, "stderr_truncated", c->err_truncated);
        rec_stream_bool(s, "interpreter_started", c->interpreter_started);
        rec_stream_bool(s, "interpreter_ended", c->interpreter_ended);
        break;
    }
    case PLM_KIND_NONE:
        break;
    }
    rec_stream_finish(s, out);
}

void rec_record_digest(const struct plm_record *rec, char out[PLM_HEX_SHA256])
{
    char domain[48];
    snprintf(domain, sizeof domain, "plimsoll.run-record.v%u", rec->version);
    struct rec_stream *s = rec_stream_new(domain);
    rec_stream_str(s, "request_sha256", rec->request_sha256);
    rec_stream_str(s, "result_sha256", rec->result_sha256);
    if (rec->version >= 3)
        rec_stream_str(s, "unanswered", rec->unanswered);
    rec_stream_str(s, "provider", rec->provider);
    rec_stream_str(s, "isolation", rec->isolation);
    rec_stream_str(s, "environment", rec->environment);
    rec_stream_str(s, "policy", rec->policy);
    if (rec->version >= 2) {
        rec_stream_str(s, "software_identity", rec->software_identity);
        rec_stream_str(s, "software_rule_id", rec->software_rule_id);
    }
    rec_stream_int(s, "started_unix_ms", rec->started_unix_ms);
    rec_stream_int(s, "ended_unix_ms", rec->ended_unix_ms);
    rec_stream_str(s, "session", rec->session);
    rec_stream_uint(s, "sequence", rec->sequence);
    rec_stream_str(s, "previous_sha256", rec->previous_sha256);
    rec_stream_finish(s, out);
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

char *rec_rule_id(const char *mode, const char *const *ids, size_t n_ids)
{
    if (!mode || !*mode)
        return strdup("");
    if (strcmp(mode, "exact") == 0) {
        const char *id = n_ids ? ids[0] : "";
        size_t len = strlen(id) + sizeof "exact:";
        char *s = malloc(len);
        if (s)
            snprintf(s, len, "exact:%s", id);
        return s;
    }
    /* approved: sorted bytewise (strcmp compares unsigned bytes), unique, joined by 0x00. */
    const char **sorted = calloc(n_ids ? n_ids : 1, sizeof *sorted);
    if (!sorted)
        return NULL;
    memcpy(sorted, ids, n_ids * sizeof *sorted);
    qsort(sorted, n_ids, sizeof *sorted, cmp_str);
    EVP_MD_CTX *md = EVP_MD_CTX_new();
    if (!md || EVP_DigestInit_ex(md, EVP_sha256(), NULL) != 1)
        abort();
    size_t written = 0;
    for (size_t i = 0; i < n_ids; i++) {
        if (i > 0 && strcmp(sorted[i], sorted[i - 1]) == 0)
            continue;
        if (written++)
            EVP_DigestUpdate(md, "", 1);
        EVP_DigestUpdate(md, sorted[i], strlen(sorted[i]));
    }
    uint8_t d[32];
    unsigned n = 0;
    EVP_DigestFinal_ex(md, d, &n);
    EVP_MD_CTX_free(md);
    free(sorted);
    char hex[PLM_HEX_SHA256];
    to_hex(d, 32, hex);
    size_t len = sizeof "approved:sha256:" + 64;
    char *s = malloc(len);
    if (s)
        snprintf(s, len, "approved:sha256:%s", hex);
    return s;
}

void rec_session_fingerprint(const char *session_id, char out[PLM_HEX_SHA256])
{
    rec_sha256_hex(session_id, strlen(session_id), out);
}
