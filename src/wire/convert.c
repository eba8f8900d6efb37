/* convert.c: protobuf-c messages <-> core types.
 * Owns: views own only their arrays; built messages own deep copies, released by
 * protobuf_c_message_free_unpacked(m, NULL) (strings left at protobuf_c_empty_string are the
 * descriptor default and are never freed). Trusts: decoded messages are structurally valid
 * protobuf-c objects; provider strings may be invalid UTF-8 and are repaired (wire.md §8.2). */
#include "convert.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "../core/validate.h"

static const char *s_or_empty(const char *s) { return s ? s : ""; }

static struct plm_file *files_view(Plimsoll__V1__ProjectFile **f, size_t n)
{
    struct plm_file *out = calloc(n ? n : 1, sizeof *out);
    if (!out)
        return NULL;
    for (size_t i = 0; i < n; i++) {
        out[i].path = s_or_empty(f[i]->path);
        out[i].content = s_or_empty(f[i]->content);
    }
    return out;
}

static void rule_view(const Plimsoll__V1__SoftwareRule *rule, struct plm_request *r)
{
    r->software_mode = rule ? s_or_empty(rule->mode) : "";
    r->software_identities = rule ? (const char *const *)rule->identities : NULL;
    r->n_software_identities = rule ? rule->n_identities : 0;
}

static int js_view(const Plimsoll__V1__JavaScriptRun *js, struct plm_request *r)
{
    r->kind = PLM_KIND_JAVASCRIPT;
    r->js.code = s_or_empty(js->code);
    r->js.grant_profile = s_or_empty(js->grant_profile);
    return 0;
}

static int project_view(const Plimsoll__V1__ProjectRun *p, struct wire_request_view *v)
{
    struct plm_request *r = &v->req;
    r->kind = PLM_KIND_PROJECT;
    v->files = files_view(p->files, p->n_files);
    if (!v->files)
        return -1;
    r->project.files = v->files;
    r->project.n_files = p->n_files;
    r->project.steps = (const char *const *)p->steps;
    r->project.n_steps = p->n_steps;
    r->project.artifacts = (const char *const *)p->artifacts;
    r->project.n_artifacts = p->n_artifacts;
    r->project.grant_profile = s_or_empty(p->grant_profile);
    return 0;
}

static int cell_view(const Plimsoll__V1__CellRun *c, struct wire_request_view *v)
{
    struct plm_request *r = &v->req;
    r->kind = PLM_KIND_CELL;
    v->files = files_view(c->files, c->n_files);
    if (!v->files)
        return -1;
    r->cell.language = s_or_empty(c->language);
    r->cell.code = s_or_empty(c->code);
    r->cell.files = v->files;
    r->cell.n_files = c->n_files;
    return 0;
}

static int module_view(const Plimsoll__V1__ModuleRun *m, struct wire_request_view *v)
{
    struct plm_request *r = &v->req;
    r->kind = PLM_KIND_MODULE;
    v->rows = calloc(m->n_rows ? m->n_rows : 1, sizeof *v->rows);
    if (!v->rows)
        return -1;
    for (size_t i = 0; i < m->n_rows; i++) {
        v->rows[i].values = m->rows[i]->values;
        v->rows[i].n_values = m->rows[i]->n_values;
    }
    r->module.model = s_or_empty(m->model);
    r->module.end_time = m->end_time;
    r->module.step = m->step;
    r->module.rows = v->rows;
    r->module.n_rows = m->n_rows;
    return 0;
}

static int oom(struct wire_request_view *v, struct plm_err *err)
{
    wire_request_view_done(v);
    return plm_fail(err, ENOMEM, PLM_E_INTERNAL, "out of memory building a request view");
}

int wire_request_view(const Plimsoll__V1__RunRequest *m, struct wire_request_view *v, struct plm_err *err)
{
    memset(v, 0, sizeof *v);
    struct plm_request *r = &v->req;
    r->protocol = m->protocol;
    r->minimum_isolation = s_or_empty(m->minimum_isolation);
    r->trace_id = s_or_empty(m->trace_id);
    r->timeout_ms = m->timeout_ms;
    rule_view(m->software_rule, r);
    int rc = 0;
    switch (m->payload_case) {
    case PLIMSOLL__V1__RUN_REQUEST__PAYLOAD_JAVASCRIPT: rc = js_view(m->javascript, r); break;
    case PLIMSOLL__V1__RUN_REQUEST__PAYLOAD_PROJECT: rc = project_view(m->project, v); break;
    case PLIMSOLL__V1__RUN_REQUEST__PAYLOAD_MODULE: rc = module_view(m->module, v); break;
    case PLIMSOLL__V1__RUN_REQUEST__PAYLOAD_CELL: rc = cell_view(m->cell, v); break;
    default: r->kind = PLM_KIND_NONE; break;
    }
    return rc < 0 ? oom(v, err) : 0;
}

int wire_session_request_view(const Plimsoll__V1__SessionRunRequest *m, struct wire_request_view *v,
                              struct plm_err *err)
{
    memset(v, 0, sizeof *v);
    struct plm_request *r = &v->req;
    r->protocol = m->protocol;
    r->minimum_isolation = s_or_empty(m->minimum_isolation);
    r->trace_id = s_or_empty(m->trace_id);
    r->timeout_ms = m->timeout_ms;
    rule_view(m->software_rule, r);
    int rc = 0;
    switch (m->payload_case) {
    case PLIMSOLL__V1__SESSION_RUN_REQUEST__PAYLOAD_JAVASCRIPT: rc = js_view(m->javascript, r); break;
    case PLIMSOLL__V1__SESSION_RUN_REQUEST__PAYLOAD_PROJECT: rc = project_view(m->project, v); break;
    case PLIMSOLL__V1__SESSION_RUN_REQUEST__PAYLOAD_CELL: rc = cell_view(m->cell, v); break;
    default: r->kind = PLM_KIND_NONE; break;
    }
    return rc < 0 ? oom(v, err) : 0;
}

void wire_request_view_done(struct wire_request_view *v)
{
    free(v->files);
    free(v->rows);
    memset(v, 0, sizeof *v);
}

static struct plm_bytes bytes_view(ProtobufCBinaryData b)
{
    return (struct plm_bytes){.data = b.data, .len = b.len};
}

int wire_result_view(const Plimsoll__V1__RunResponse *m, struct wire_result_view *v, struct plm_err *err)
{
    memset(v, 0, sizeof *v);
    struct plm_result *r = &v->res;
    r->sandbox = (char *)s_or_empty(m->sandbox);
    r->isolation = (char *)s_or_empty(m->isolation);
    r->tier = tier_parse(r->isolation); /* the answer's own statement, read back the same way */
    r->environment = (char *)s_or_empty(m->environment);
    r->software_identity = (char *)s_or_empty(m->software_identity);
    r->duration_ms = m->duration_ms;
    switch (m->result_case) {
    case PLIMSOLL__V1__RUN_RESPONSE__RESULT_JAVASCRIPT: {
        const Plimsoll__V1__JavaScriptResult *j = m->javascript;
        r->kind = PLM_KIND_JAVASCRIPT;
        r->js = (struct plm_js_result){bytes_view(j->stdout), bytes_view(j->stderr), j->exit_code,
                                       j->timed_out, j->stdout_truncated, j->stderr_truncated};
        break;
    }
    case PLIMSOLL__V1__RUN_RESPONSE__RESULT_PROJECT: {
        const Plimsoll__V1__ProjectResult *p = m->project;
        r->kind = PLM_KIND_PROJECT;
        r->project.outcome = (enum plm_outcome)p->outcome;
        r->project.detail = (char *)s_or_empty(p->outcome_detail);
        r->project.artifacts_truncated = p->artifacts_truncated;
        r->project.steps = calloc(p->n_steps ? p->n_steps : 1, sizeof *r->project.steps);
        r->project.artifacts = calloc(p->n_artifacts ? p->n_artifacts : 1, sizeof *r->project.artifacts);
        if (!r->project.steps || !r->project.artifacts)
            goto oom;
        r->project.n_steps = p->n_steps;
        for (size_t i = 0; i < p->n_steps; i++) {
            const Plimsoll__V1__StepResult *s = p->steps[i];
            r->project.steps[i] = (struct plm_step_result){
                (char *)s_or_empty(s->command), bytes_view(s->stdout), bytes_view(s->stderr), s->exit_code,
                s->timed_out, s->stdout_truncated, s->stderr_truncated, s->duration_ms};
        }
        r->project.n_artifacts = p->n_artifacts;
        for (size_t i = 0; i < p->n_artifacts; i++)
            r->project.artifacts[i] = (struct plm_artifact){(char *)s_or_empty(p->artifacts[i]->path),
                                                            bytes_view(p->artifacts[i]->content)};
        break;
    }
    case PLIMSOLL__V1__RUN_RESPONSE__RESULT_MODULE: {
        const Plimsoll__V1__ModuleResult *mr = m->module;
        r->kind = PLM_KIND_MODULE;
        r->module.width = mr->width;
        r->module.outcome = (enum plm_outcome)mr->outcome;
        r->module.detail = (char *)s_or_empty(mr->outcome_detail);
        r->module.out = bytes_view(mr->stdout);
        r->module.err = bytes_view(mr->stderr);
        r->module.runs = calloc(mr->n_runs ? mr->n_runs : 1, sizeof *r->module.runs);
        if (!r->module.runs)
            goto oom;
        r->module.n_runs = mr->n_runs;
        for (size_t i = 0; i < mr->n_runs; i++)
            r->module.runs[i] = (struct plm_module_run){mr->runs[i]->status, mr->runs[i]->outputs,
                                                        mr->runs[i]->n_outputs};
        break;
    }
    case PLIMSOLL__V1__RUN_RESPONSE__RESULT_CELL: {
        const Plimsoll__V1__CellResult *c = m->cell;
        r->kind = PLM_KIND_CELL;
        r->cell = (struct plm_cell_result){bytes_view(c->stdout), bytes_view(c->stderr), c->exit_code,
                                           c->timed_out, c->stdout_truncated, c->stderr_truncated,
                                           c->interpreter_started, c->interpreter_ended};
        break;
    }
    default: r->kind = PLM_KIND_NONE; break;
    }
    return 0;
oom: /* the one exit for an allocation failure: it releases whatever arrays the view holds so far */
    wire_result_view_done(v);
    return plm_fail(err, ENOMEM, PLM_E_INTERNAL, "out of memory building a result view");
}

void wire_result_view_done(struct wire_result_view *v)
{
    free(v->res.project.steps);
    free(v->res.project.artifacts);
    free(v->res.module.runs);
    memset(v, 0, sizeof *v);
}

/* A digest field from the wire that is not exactly 64 characters can never match one we compute;
 * it is replaced by a value that cannot either, instead of being silently truncated. */
static void copy_hex(char dst[PLM_HEX_SHA256], const char *src)
{
    src = s_or_empty(src);
    if (strlen(src) < PLM_HEX_SHA256)
        memcpy(dst, src, strlen(src) + 1);
    else
        memcpy(dst, "(overlong)", sizeof "(overlong)");
}

void wire_record_view(const Plimsoll__V1__RunRecord *m, struct plm_record *out)
{
    memset(out, 0, sizeof *out);
    out->version = m->version;
    copy_hex(out->request_sha256, m->request_sha256);
    copy_hex(out->result_sha256, m->result_sha256);
    out->provider = s_or_empty(m->provider);
    out->isolation = s_or_empty(m->isolation);
    out->environment = s_or_empty(m->environment);
    out->policy = s_or_empty(m->policy);
    out->started_unix_ms = m->started_unix_ms;
    out->ended_unix_ms = m->ended_unix_ms;
    out->session = s_or_empty(m->session);
    out->sequence = m->sequence;
    out->previous_sha256 = s_or_empty(m->previous_sha256);
    out->software_identity = s_or_empty(m->software_identity);
    out->software_rule_id = s_or_empty(m->software_rule_id);
    out->unanswered = s_or_empty(m->unanswered);
    copy_hex(out->record_sha256, m->record_sha256);
}

char *wire_utf8_repair(const char *s)
{
    s = s_or_empty(s);
    size_t len = strlen(s);
    /* worst case: every byte becomes U+FFFD (3 bytes) */
    char *out = malloc(len * 3 + 1);
    if (!out)
        return NULL;
    size_t o = 0, i = 0;
    while (i < len) {
        size_t n = 1;
        unsigned char c = (unsigned char)s[i];
        if (c >= 0x80)
            n = (c & 0xe0) == 0xc0 ? 2 : (c & 0xf0) == 0xe0 ? 3 : (c & 0xf8) == 0xf0 ? 4 : 1;
        if (c < 0x80 || (i + n <= len && n > 1 && plm_utf8_ok(s + i, n))) {
            memcpy(out + o, s + i, n);
            o += n;
            i += n;
        } else {
            memcpy(out + o, "\xef\xbf\xbd", 3);
            o += 3;
            i++;
        }
    }
    out[o] = 0;
    return out;
}

/* Deep copies that leave "" at the descriptor default, which free_unpacked never frees. */
static char *dup_text(const char *s, bool *ok)
{
    if (!s || !*s)
        return (char *)protobuf_c_empty_string;
    char *d = wire_utf8_repair(s);
    if (!d) {
        *ok = false;
        return (char *)protobuf_c_empty_string;
    }
    return d;
}

static ProtobufCBinaryData dup_bytes(const struct plm_bytes *b, bool *ok)
{
    ProtobufCBinaryData d = {0, NULL};
    if (!b->len)
        return d;
    d.data = malloc(b->len);
    if (!d.data) {
        *ok = false;
        return d;
    }
    memcpy(d.data, b->data, b->len);
    d.len = b->len;
    return d;
}

static void *new_msg(const ProtobufCMessageDescriptor *desc, bool *ok)
{
    ProtobufCMessage *m = calloc(1, desc->sizeof_message);
    if (!m) {
        *ok = false;
        return NULL;
    }
    protobuf_c_message_init(desc, m);
    return m;
}

static Plimsoll__V1__JavaScriptResult *js_to_pb(const struct plm_js_result *j, bool *ok)
{
    Plimsoll__V1__JavaScriptResult *m = new_msg(&plimsoll__v1__java_script_result__descriptor, ok);
    if (!m)
        return NULL;
    m->stdout = dup_bytes(&j->out, ok);
    m->stderr = dup_bytes(&j->err, ok);
    m->exit_code = j->exit_code;
    m->timed_out = j->timed_out;
    m->stdout_truncated = j->out_truncated;
    m->stderr_truncated = j->err_truncated;
    return m;
}

static Plimsoll__V1__CellResult *cell_to_pb(const struct plm_cell_result *c, bool *ok)
{
    Plimsoll__V1__CellResult *m = new_msg(&plimsoll__v1__cell_result__descriptor, ok);
    if (!m)
        return NULL;
    m->stdout = dup_bytes(&c->out, ok);
    m->stderr = dup_bytes(&c->err, ok);
    m->exit_code = c->exit_code;
    m->timed_out = c->timed_out;
    m->stdout_truncated = c->out_truncated;
    m->stderr_truncated = c->err_truncated;
    m->interpreter_started = c->interpreter_started;
    m->interpreter_ended = c->interpreter_ended;
    return m;
}

static Plimsoll__V1__ProjectResult *project_to_pb(const struct plm_project_result *p, bool *ok)
{
    Plimsoll__V1__ProjectResult *m = new_msg(&plimsoll__v1__project_result__descriptor, ok);
    if (!m)
        return NULL;
    m->outcome = (Plimsoll__V1__ProjectOutcome)p->outcome;
    m->outcome_detail = dup_text(p->detail, ok);
    m->artifacts_truncated = p->artifacts_truncated;
    if (p->n_steps) {
        m->steps = calloc(p->n_steps, sizeof *m->steps);
        if (!m->steps)
            return *ok = false, m;
        for (size_t i = 0; i < p->n_steps; i++) {
            const struct plm_step_result *s = &p->steps[i];
            Plimsoll__V1__StepResult *sm = new_msg(&plimsoll__v1__step_result__descriptor, ok);
            if (!sm)
                return m;
            m->steps[m->n_steps++] = sm;
            sm->command = dup_text(s->command, ok);
            sm->stdout = dup_bytes(&s->out, ok);
            sm->stderr = dup_bytes(&s->err, ok);
            sm->exit_code = s->exit_code;
            sm->timed_out = s->timed_out;
            sm->duration_ms = s->duration_ms;
            sm->stdout_truncated = s->out_truncated;
            sm->stderr_truncated = s->err_truncated;
        }
    }
    if (p->n_artifacts) {
        m->artifacts = calloc(p->n_artifacts, sizeof *m->artifacts);
        if (!m->artifacts)
            return *ok = false, m;
        for (size_t i = 0; i < p->n_artifacts; i++) {
            Plimsoll__V1__Artifact *am = new_msg(&plimsoll__v1__artifact__descriptor, ok);
            if (!am)
                return m;
            m->artifacts[m->n_artifacts++] = am;
            am->path = dup_text(p->artifacts[i].path, ok);
            am->content = dup_bytes(&p->artifacts[i].content, ok);
        }
    }
    return m;
}

static Plimsoll__V1__ModuleResult *module_to_pb(const struct plm_module_result *r, bool *ok)
{
    Plimsoll__V1__ModuleResult *m = new_msg(&plimsoll__v1__module_result__descriptor, ok);
    if (!m)
        return NULL;
    m->width = r->width;
    m->outcome = (Plimsoll__V1__ProjectOutcome)r->outcome;
    m->outcome_detail = dup_text(r->detail, ok);
    m->stdout = dup_bytes(&r->out, ok);
    m->stderr = dup_bytes(&r->err, ok);
    if (!r->n_runs)
        return m;
    m->runs = calloc(r->n_runs, sizeof *m->runs);
    if (!m->runs)
        return *ok = false, m;
    for (size_t i = 0; i < r->n_runs; i++) {
        Plimsoll__V1__ModuleRowResult *rm = new_msg(&plimsoll__v1__module_row_result__descriptor, ok);
        if (!rm)
            return m;
        m->runs[m->n_runs++] = rm;
        rm->status = r->runs[i].status;
        if (!r->runs[i].n_outputs)
            continue;
        rm->outputs = malloc(r->runs[i].n_outputs * sizeof *rm->outputs);
        if (!rm->outputs)
            return *ok = false, m;
        memcpy(rm->outputs, r->runs[i].outputs, r->runs[i].n_outputs * sizeof *rm->outputs);
        rm->n_outputs = r->runs[i].n_outputs;
    }
    return m;
}

static Plimsoll__V1__RunRecord *record_to_pb(const struct plm_record *rec, bool *ok)
{
    Plimsoll__V1__RunRecord *m = new_msg(&plimsoll__v1__run_record__descriptor, ok);
    if (!m)
        return NULL;
    m->version = rec->version;
    m->request_sha256 = dup_text(rec->request_sha256, ok);
    m->result_sha256 = dup_text(rec->result_sha256, ok);
    m->provider = dup_text(rec->provider, ok);
    m->isolation = dup_text(rec->isolation, ok);
    m->environment = dup_text(rec->environment, ok);
    m->policy = dup_text(rec->policy, ok);
    m->started_unix_ms = rec->started_unix_ms;
    m->ended_unix_ms = rec->ended_unix_ms;
    m->session = dup_text(rec->session, ok);
    m->sequence = rec->sequence;
    m->previous_sha256 = dup_text(rec->previous_sha256, ok);
    m->record_sha256 = dup_text(rec->record_sha256, ok);
    m->software_identity = dup_text(rec->software_identity, ok);
    m->software_rule_id = dup_text(rec->software_rule_id, ok);
    m->unanswered = dup_text(rec->unanswered, ok);
    return m;
}

Plimsoll__V1__RunResponse *wire_response_to_pb(const struct plm_result *r, const struct plm_record *rec)
{
    bool ok = true;
    Plimsoll__V1__RunResponse *m = new_msg(&plimsoll__v1__run_response__descriptor, &ok);
    if (!m)
        return NULL;
    m->sandbox = dup_text(r->sandbox, &ok);
    m->isolation = dup_text(r->isolation, &ok);
    m->environment = dup_text(r->environment, &ok);
    m->software_identity = dup_text(r->software_identity, &ok);
    m->duration_ms = r->duration_ms;
    switch (r->kind) {
    case PLM_KIND_JAVASCRIPT:
        m->javascript = js_to_pb(&r->js, &ok);
        if (m->javascript)
            m->result_case = PLIMSOLL__V1__RUN_RESPONSE__RESULT_JAVASCRIPT;
        break;
    case PLM_KIND_PROJECT:
        m->project = project_to_pb(&r->project, &ok);
        if (m->project)
            m->result_case = PLIMSOLL__V1__RUN_RESPONSE__RESULT_PROJECT;
        break;
    case PLM_KIND_CELL: /* sessions only */
        m->cell = cell_to_pb(&r->cell, &ok);
        if (m->cell)
            m->result_case = PLIMSOLL__V1__RUN_RESPONSE__RESULT_CELL;
        break;
    case PLM_KIND_MODULE:
        m->module = module_to_pb(&r->module, &ok);
        if (m->module)
            m->result_case = PLIMSOLL__V1__RUN_RESPONSE__RESULT_MODULE;
        break;
    default:
        break;
    }
    if (rec)
        m->record = record_to_pb(rec, &ok);
    if (!ok) {
        protobuf_c_message_free_unpacked(&m->base, NULL);
        return NULL;
    }
    return m;
}

static Plimsoll__V1__PayloadEnvironment *env_to_pb(const struct plm_payload_env *e, bool *ok)
{
    if (!e->identity[0] && !e->max_timeout_ms)
        return NULL; /* unsupported payload: absent, as the reference leaves it */
    Plimsoll__V1__PayloadEnvironment *m = new_msg(&plimsoll__v1__payload_environment__descriptor, ok);
    if (!m)
        return NULL;
    m->identity = dup_text(e->identity, ok);
    m->max_timeout_ms = e->max_timeout_ms > 300000 ? 300000 : e->max_timeout_ms;
    m->software_identity = dup_text(e->software_identity, ok);
    size_t n = 0;
    while (n < sizeof e->languages / sizeof *e->languages && e->languages[n])
        n++;
    if (n) {
        m->languages = calloc(n, sizeof *m->languages);
        if (!m->languages)
            return *ok = false, m;
        for (size_t i = 0; i < n; i++) {
            m->languages[i] = strdup(e->languages[i]);
            if (!m->languages[i])
                return *ok = false, m;
            m->n_languages++;
        }
    }
    return m;
}

static Plimsoll__V1__EvidenceCard *evidence_to_pb(const struct plm_evidence *ev, bool *ok)
{
    Plimsoll__V1__EvidenceCard *m = new_msg(&plimsoll__v1__evidence_card__descriptor, ok);
    if (!m)
        return NULL;
    m->provider = dup_text(ev->provider, ok);
    m->isolation = dup_text(tier_name(ev->tier), ok);
    m->runtime = dup_text(ev->runtime, ok);
    m->runtime_version = dup_text(ev->runtime_version, ok);
    m->kernel_release = dup_text(ev->kernel_release, ok);
    m->checked_unix_ms = ev->checked_unix_ms;
    m->digest = dup_text(ev->digest, ok);
    if (ev->n_checks) {
        m->checks = calloc(ev->n_checks, sizeof *m->checks);
        if (!m->checks)
            return *ok = false, m;
        for (size_t i = 0; i < ev->n_checks; i++) {
            Plimsoll__V1__EvidenceCheck *c = new_msg(&plimsoll__v1__evidence_check__descriptor, ok);
            if (!c)
                return m;
            m->checks[m->n_checks++] = c;
            c->name = dup_text(ev->checks[i].name, ok);
            c->expected = dup_text(ev->checks[i].expected, ok);
            c->observed = dup_text(ev->checks[i].observed, ok);
            c->passed = ev->checks[i].passed;
        }
    }
    if (ev->n_confinement) {
        m->confinement = calloc(ev->n_confinement, sizeof *m->confinement);
        if (!m->confinement)
            return *ok = false, m;
        for (size_t i = 0; i < ev->n_confinement; i++) {
            m->confinement[i] = wire_utf8_repair(ev->confinement[i]);
            if (!m->confinement[i])
                return *ok = false, m;
            m->n_confinement++;
        }
    }
    return m;
}

Plimsoll__V1__DescribeResponse *wire_describe_to_pb(const struct plm_describe *d, uint32_t protocol)
{
    bool ok = true;
    Plimsoll__V1__DescribeResponse *m = new_msg(&plimsoll__v1__describe_response__descriptor, &ok);
    if (!m)
        return NULL;
    m->sandbox = dup_text(d->sandbox, &ok);
    m->isolation = dup_text(tier_name(d->tier), &ok);
    m->supports_project = d->supports_project;
    m->supports_javascript_grants = d->supports_javascript_grants;
    m->supports_project_grants = d->supports_project_grants;
    m->supports_module = d->supports_module;
    m->protocol = protocol;
    m->javascript_environment = env_to_pb(&d->javascript, &ok);
    m->project_environment = env_to_pb(&d->project, &ok);
    m->module_environment = env_to_pb(&d->module, &ok);
    if (d->memory_mb || d->pids || d->disk_mb || d->cpus > 0) {
        m->resources = new_msg(&plimsoll__v1__run_resources__descriptor, &ok);
        if (m->resources) {
            m->resources->memory_mb = d->memory_mb;
            m->resources->cpus = isfinite(d->cpus) && d->cpus > 0 ? d->cpus : 0;
            m->resources->pids = d->pids;
            m->resources->disk_mb = d->disk_mb;
        }
    }
    m->policy = dup_text(d->policy, &ok);
    if (d->evidence)
        m->evidence = evidence_to_pb(d->evidence, &ok);
    if (!ok) {
        protobuf_c_message_free_unpacked(&m->base, NULL);
        return NULL;
    }
    return m;
}
