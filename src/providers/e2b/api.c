/* api.c: E2B's control plane (POST/GET/DELETE /sandboxes, the metadata-filtered list) and envd's
 * file service, over libcurl (providers.md §6 steps 3, 4, 5, 7, 8 and the reconcile).
 * Owns: each call's CURL handle and answer buffer, for the call's duration.
 * Trusts: no answer: every body is capped before it is stored, parsed as JSON only when complete,
 * and only named fields of checked types and shapes are used.
 * Invariant: the API key, envd's tokens and the guard token travel only in request headers or
 * the create body; no error text, log line or record quotes a request or an answer body. */
#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../../core/cleanup_curl.h"
#include "../../core/cleanup_json.h"
#include "internal.h"

void e2b_answer_done(struct e2b_answer *a)
{
    free(a->body);
    memset(a, 0, sizeof *a);
}

/* A request body that carried a token: wiped, then freed. */
static void secret_free(char **p)
{
    if (*p) {
        explicit_bzero(*p, strlen(*p));
        free(*p);
    }
}
#define cleanup_answer __attribute__((cleanup(e2b_answer_done)))
DEFINE_CLEANUP(curl_mime, curl_mime_free)
#define cleanup_secret __attribute__((cleanup(secret_free)))

struct sink {
    struct e2b_answer *a;
    size_t cap;
};

static size_t on_write(char *p, size_t sz, size_t nm, void *ud)
{
    struct sink *k = ud;
    size_t n = sz * nm;
    if (k->a->len + n > k->cap) {
        k->a->over = true;
        return 0; /* stops the transfer */
    }
    char *nb = realloc(k->a->body, k->a->len + n + 1);
    if (!nb)
        return 0;
    memcpy(nb + k->a->len, p, n);
    k->a->body = nb;
    k->a->len += n;
    nb[k->a->len] = 0;
    return n;
}

CURL *e2b_curl(struct e2b_state *s, long timeout_ms)
{
    CURL *h = curl_easy_init();
    if (!h)
        return NULL;
    if (timeout_ms < 1)
        timeout_ms = 1;
    curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(h, CURLOPT_PROTOCOLS_STR, "http,https");
    curl_easy_setopt(h, CURLOPT_FOLLOWLOCATION, 0L);
    curl_easy_setopt(h, CURLOPT_PROXY, ""); /* proxy variables are ignored, on purpose */
    curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, timeout_ms);
    curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS, timeout_ms < 10000 ? timeout_ms : 10000L);
    curl_easy_setopt(h, CURLOPT_TCP_NODELAY, 1L);
    if (s->ca_file[0])
        curl_easy_setopt(h, CURLOPT_CAINFO, s->ca_file);
    if (s->share)
        curl_easy_setopt(h, CURLOPT_SHARE, s->share);
    return h;
}

int e2b_request(struct e2b_state *s, const char *method, const char *url, struct curl_slist *headers,
                const char *body, size_t blen, curl_mime *mime, CURL *h, long timeout_ms, size_t cap,
                struct e2b_answer *a)
{
    memset(a, 0, sizeof *a);
    cleanup_curl CURL *own = h ? NULL : e2b_curl(s, timeout_ms); /* a handle of the call's own */
    if (!h && !(h = own)) {
        snprintf(a->why, sizeof a->why, "cannot make a curl handle");
        return -1;
    }
    struct sink k = {a, cap};
    curl_easy_setopt(h, CURLOPT_URL, url);
    curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, method);
    curl_easy_setopt(h, CURLOPT_HTTPHEADER, headers);
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_write);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, &k);
    if (mime)
        curl_easy_setopt(h, CURLOPT_MIMEPOST, mime);
    else if (body) {
        curl_easy_setopt(h, CURLOPT_POSTFIELDS, body);
        curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)blen);
    } else if (!strcmp(method, "GET")) {
        curl_easy_setopt(h, CURLOPT_HTTPGET, 1L);
    } else if (!strcmp(method, "DELETE")) {
        curl_easy_setopt(h, CURLOPT_NOBODY, 0L);
    }
    CURLcode rc = curl_easy_perform(h);
    if (rc == CURLE_OK || (rc == CURLE_WRITE_ERROR && a->over))
        curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &a->status);
    else
        snprintf(a->why, sizeof a->why, "%s", curl_easy_strerror(rc));
    a->timed_out = rc == CURLE_OPERATION_TIMEDOUT;
    return a->status ? 0 : -1;
}

static struct curl_slist *api_headers(struct e2b_state *s, bool json)
{
    char key[300];
    snprintf(key, sizeof key, "X-API-Key: %s", s->api_key);
    struct curl_slist *l = curl_slist_append(NULL, key);
    explicit_bzero(key, sizeof key);
    if (l && json)
        l = curl_slist_append(l, "Content-Type: application/json");
    if (l)
        l = curl_slist_append(l, "Accept: application/json");
    return l;
}

static struct curl_slist *envd_headers(const struct e2b_sandbox *sb)
{
    char h1[300], h2[300];
    snprintf(h1, sizeof h1, "X-Access-Token: %s", sb->envd_token);
    snprintf(h2, sizeof h2, "e2b-traffic-access-token: %s", sb->traffic_token);
    struct curl_slist *l = curl_slist_append(NULL, h1);
    if (l)
        l = curl_slist_append(l, h2);
    explicit_bzero(h1, sizeof h1);
    explicit_bzero(h2, sizeof h2);
    return l;
}

/* E2B's sandbox IDs are short [a-z0-9] strings; anything else is refused before it reaches a URL. */
static bool id_ok(const char *id)
{
    size_t n = strlen(id);
    if (!n || n >= 64)
        return false;
    for (size_t i = 0; i < n; i++)
        if (!((id[i] >= 'a' && id[i] <= 'z') || (id[i] >= 'A' && id[i] <= 'Z') || (id[i] >= '0' && id[i] <= '9') ||
              id[i] == '-' || id[i] == '_'))
            return false;
    return true;
}

static bool token_ok(const char *t, size_t cap)
{
    size_t n = strlen(t);
    if (!n || n >= cap)
        return false;
    for (size_t i = 0; i < n; i++)
        if (t[i] < 0x21 || t[i] > 0x7e)
            return false;
    return true;
}

static void get_str(json_t *o, const char *key, char *dst, size_t cap)
{
    json_t *v = json_object_get(o, key);
    dst[0] = 0;
    if (json_is_string(v) && json_string_length(v) < cap && !memchr(json_string_value(v), 0, json_string_length(v)))
        snprintf(dst, cap, "%s", json_string_value(v));
}

/* The sandbox's egress: deny-all, and with a grant token the guard's host alone, whose one rule
 * sets the guard header to the token outside the VM. */
static json_t *network_body(struct e2b_state *s, const char *grant_token)
{
    json_t *net = json_pack("{s:[s], s:b}", "denyOut", "0.0.0.0/0", "allowPublicTraffic", 0);
    if (net && grant_token) {
        json_object_set_new(net, "allowOut", json_pack("[s]", s->guard_host));
        json_t *rule = json_pack("[{s:{s:{s:s}}}]", "transform", "headers", E2B_GUARD_HEADER, grant_token);
        json_t *rules = json_object();
        json_object_set_new(rules, s->guard_host, rule);
        json_object_set_new(net, "rules", rules);
    }
    return net;
}

static json_t *create_body(struct e2b_state *s, uint32_t budget_ms, const char *grant_token)
{
    json_t *net = network_body(s, grant_token);
    return json_pack("{s:s, s:I, s:{s:s, s:s}, s:b, s:o}", "templateID", s->template_id, "timeout",
                     (json_int_t)((budget_ms + 999) / 1000 + 10), "metadata", "sdk", "plimsoll", "instance",
                     s->instance, "secure", 1, "network", net);
}

int e2b_create(struct e2b_state *s, uint32_t budget_ms, const char *grant_token, struct e2b_sandbox *sb,
               struct plm_err *err)
{
    memset(sb, 0, sizeof *sb);
    {
        cleanup_json json_t *body = create_body(s, budget_ms, grant_token);
        cleanup_secret char *text = body ? json_dumps(body, JSON_COMPACT) : NULL; /* it carries the guard token */
        cleanup_slist struct curl_slist *hd = api_headers(s, true);
        char url[600];
        snprintf(url, sizeof url, "%s/sandboxes", s->api_base);
        cleanup_answer struct e2b_answer a = {0};
        int rc = text && hd ? e2b_request(s, "POST", url, hd, text, strlen(text), NULL, NULL, E2B_CONTROL_TIMEOUT_MS,
                                          E2B_ANSWER_MAX, &a)
                            : (snprintf(a.why, sizeof a.why, "out of memory"), -1);
        if (rc < 0)
            return plm_fail(err, 0, PLM_E_UNAVAILABLE, "e2b: creating a sandbox failed: %s", a.why);
        if (a.status != 200 && a.status != 201)
            return plm_fail(err, 0, PLM_E_UNAVAILABLE, "e2b: creating a sandbox failed: HTTP %ld", a.status);
        json_error_t je;
        cleanup_json json_t *j = a.over ? NULL : json_loadb(a.body ? a.body : "", a.len, 0, &je);
        if (json_is_object(j)) {
            get_str(j, "sandboxID", sb->id, sizeof sb->id);
            get_str(j, "envdAccessToken", sb->envd_token, sizeof sb->envd_token);
            get_str(j, "trafficAccessToken", sb->traffic_token, sizeof sb->traffic_token);
            get_str(j, "envdVersion", sb->envd_version, sizeof sb->envd_version);
        }
    }
    if (!id_ok(sb->id)) {
        /* A VM may exist that we cannot name: the reconcile finds it by our instance label. */
        e2b_reconcile_soon(s, E2B_ORPHAN_AGE_S + 5);
        memset(sb, 0, sizeof *sb);
        return plm_fail(err, 0, PLM_E_UNAVAILABLE, "e2b: the create answer carried no usable sandbox ID; a reconcile is scheduled");
    }
    e2b_track(s, sb->id);
    if (!token_ok(sb->envd_token, sizeof sb->envd_token) || !token_ok(sb->traffic_token, sizeof sb->traffic_token)) {
        const char *which = !token_ok(sb->envd_token, sizeof sb->envd_token) ? "envdAccessToken" : "trafficAccessToken";
        e2b_delete(s, sb->id);
        plm_fail(err, 0, PLM_E_UNAVAILABLE, "e2b: sandbox %s was created without %s; it was deleted, nothing ran", sb->id, which);
        explicit_bzero(sb, sizeof *sb);
        return -1;
    }
    const char *slot = strstr(s->envd_tmpl, "{sandbox}");
    snprintf(sb->envd_base, sizeof sb->envd_base, "%.*s%s%s", (int)(slot - s->envd_tmpl), s->envd_tmpl, sb->id,
             slot + 9);
    for (char *p = sb->envd_version; *p; p++)
        if (*p < 0x20 || *p > 0x7e)
            *p = '?';
    return 0;
}

int e2b_check_resources(struct e2b_state *s, const struct e2b_sandbox *sb, char *observed, size_t ocap,
                        struct plm_err *err)
{
    cleanup_slist struct curl_slist *hd = api_headers(s, false);
    char url[700];
    snprintf(url, sizeof url, "%s/sandboxes/%s", s->api_base, sb->id);
    cleanup_answer struct e2b_answer a = {0};
    int rc = e2b_request(s, "GET", url, hd, NULL, 0, NULL, NULL, E2B_CONTROL_TIMEOUT_MS, E2B_ANSWER_MAX, &a);
    if (rc < 0 || a.status != 200)
        return plm_fail(err, 0, PLM_E_UNAVAILABLE, "e2b: reading sandbox %s back failed: %s", sb->id,
                        rc < 0 ? a.why : "not HTTP 200");
    json_error_t je;
    cleanup_json json_t *j = a.over ? NULL : json_loadb(a.body ? a.body : "", a.len, 0, &je);
    if (!json_is_object(j))
        return plm_fail(err, 0, PLM_E_UNAVAILABLE, "e2b: sandbox %s read back as non-JSON", sb->id);
    json_t *mem = json_object_get(j, "memoryMB"), *cpu = json_object_get(j, "cpuCount"),
           *disk = json_object_get(j, "diskSizeMB");
    int r = 0;
    if (s->memory_mb && (!json_is_integer(mem) || json_integer_value(mem) > s->memory_mb || json_integer_value(mem) < 0))
        r = plm_fail(err, 0, PLM_E_INTERNAL, "e2b: sandbox memoryMB %s exceeds memory cap %u",
                        json_is_integer(mem) ? "read back" : "missing", s->memory_mb);
    else if (s->cpus && (!json_is_integer(cpu) || json_integer_value(cpu) > s->cpus || json_integer_value(cpu) < 0))
        r = plm_fail(err, 0, PLM_E_INTERNAL, "e2b: sandbox cpuCount %s exceeds cpu cap %u",
                        json_is_integer(cpu) ? "read back" : "missing", s->cpus);
    else if (s->disk_mb && (!json_is_integer(disk) || json_integer_value(disk) > s->disk_mb ||
                            json_integer_value(disk) < 0))
        r = plm_fail(err, 0, PLM_E_INTERNAL, "e2b: sandbox diskSizeMB %s exceeds disk cap %u",
                        json_is_integer(disk) ? "read back" : "is missing and", s->disk_mb);
    if (observed)
        snprintf(observed, ocap, "memoryMB=%lld cpuCount=%lld diskSizeMB=%lld",
                 json_is_integer(mem) ? (long long)json_integer_value(mem) : -1LL,
                 json_is_integer(cpu) ? (long long)json_integer_value(cpu) : -1LL,
                 json_is_integer(disk) ? (long long)json_integer_value(disk) : -1LL);
    return r;
}

int e2b_delete(struct e2b_state *s, const char *id)
{
    char url[700];
    snprintf(url, sizeof url, "%s/sandboxes/%s", s->api_base, id);
    static const int pause_ms[] = {1000, 2000};
    long last = 0;
    char why[160] = "";
    for (int attempt = 0; attempt < 3; attempt++) {
        if (attempt) {
            struct timespec ts = {pause_ms[attempt - 1] / 1000, 0};
            nanosleep(&ts, NULL);
        }
        cleanup_slist struct curl_slist *hd = api_headers(s, false);
        cleanup_answer struct e2b_answer a = {0};
        int rc = e2b_request(s, "DELETE", url, hd, NULL, 0, NULL, NULL, E2B_DELETE_TIMEOUT_MS, E2B_ANSWER_MAX, &a);
        last = a.status;
        snprintf(why, sizeof why, "%s", rc < 0 ? a.why : "");
        if (rc == 0 && ((last >= 200 && last < 300) || last == 404)) {
            e2b_untrack(s, id);
            return 0;
        }
    }
    /* Untracked, so the reconcile (which spares only tracked sandboxes) removes it later. */
    e2b_untrack(s, id);
    e2b_log("error", "e2b_delete_failed",
            "\"sandbox\":\"%s\",\"attempts\":3,\"last_status\":%ld,\"detail\":\"%s; the reconcile will retry\"", id,
            last, why);
    return -1;
}

/* RFC 3339 to unix seconds; -1 when it is not one. */
static int64_t parse_time(const char *t)
{
    struct tm tm = {0};
    const char *p = strptime(t, "%Y-%m-%dT%H:%M:%S", &tm);
    if (!p)
        return -1;
    if (*p == '.')
        for (p++; *p >= '0' && *p <= '9'; p++)
            ;
    int64_t off = 0;
    if (*p == 'Z' && !p[1])
        off = 0;
    else if ((*p == '+' || *p == '-') && strlen(p) == 6 && p[3] == ':')
        off = (*p == '-' ? -1 : 1) * ((p[1] - '0') * 36000 + (p[2] - '0') * 3600 + (p[4] - '0') * 600 + (p[5] - '0') * 60);
    else
        return -1;
    return (int64_t)timegm(&tm) - off;
}

int e2b_reconcile_once(struct e2b_state *s, int min_age_s, struct plm_err *err)
{
    cleanup_slist struct curl_slist *hd = api_headers(s, false);
    char url[700];
    snprintf(url, sizeof url, "%s/sandboxes?metadata=instance%%3D%s", s->api_base, s->instance);
    cleanup_answer struct e2b_answer a = {0};
    int rc = e2b_request(s, "GET", url, hd, NULL, 0, NULL, NULL, E2B_CONTROL_TIMEOUT_MS, 8u * 1024 * 1024, &a);
    if (rc < 0 || a.status != 200)
        return plm_fail(err, 0, PLM_E_UNAVAILABLE, "e2b: listing sandboxes failed: %s", rc < 0 ? a.why : "not HTTP 200");
    json_error_t je;
    cleanup_json json_t *j = a.over ? NULL : json_loadb(a.body ? a.body : "", a.len, 0, &je);
    if (!json_is_array(j))
        return plm_fail(err, 0, PLM_E_UNAVAILABLE, "e2b: the sandbox list is not a JSON array");
    int killed = 0;
    int64_t now = clock_unix_ms() / 1000;
    size_t i;
    json_t *it;
    json_array_foreach(j, i, it)
    {
        char id[64], started[64], inst[32];
        get_str(it, "sandboxID", id, sizeof id);
        get_str(it, "startedAt", started, sizeof started);
        get_str(json_object_get(it, "metadata"), "instance", inst, sizeof inst);
        /* filtered again here: the server's filter is not trusted to be exact */
        if (!id_ok(id) || strcmp(inst, s->instance) || e2b_is_tracked(s, id))
            continue;
        int64_t t = parse_time(started);
        if (t < 0 || now - t < min_age_s)
            continue;
        if (e2b_delete(s, id) == 0) {
            killed++;
            e2b_log("warning", "e2b_orphan_deleted", "\"sandbox\":\"%s\",\"age_s\":%lld", id, (long long)(now - t));
        }
    }
    return killed;
}

int e2b_write_files(struct e2b_state *s, const struct e2b_sandbox *sb, const struct e2b_upload *f, size_t n,
                    int64_t deadline_ms, struct plm_err *err)
{
    long left = (long)(deadline_ms - e2b_mono_ms());
    if (left <= 0)
        return plm_fail(err, ETIMEDOUT, PLM_E_DEADLINE, "e2b: the run's time ran out writing files");
    cleanup_curl CURL *h = e2b_curl(s, left);
    curl_mime *mime cleanup_(curl_mime_free) = h ? curl_mime_init(h) : NULL;
    cleanup_slist struct curl_slist *hd = envd_headers(sb);
    char url[1500];
    if (n == 1) {
        char *p = curl_easy_escape(h, f[0].path, 0);
        snprintf(url, sizeof url, "%s/files?path=%s&username=user", sb->envd_base, p ? p : "");
        curl_free(p);
    } else {
        snprintf(url, sizeof url, "%s/files?username=user", sb->envd_base);
    }
    bool ok = h && mime && hd;
    for (size_t i = 0; i < n && ok; i++) {
        curl_mimepart *part = curl_mime_addpart(mime);
        ok = part && curl_mime_name(part, "file") == CURLE_OK && curl_mime_filename(part, f[i].path) == CURLE_OK &&
             curl_mime_data(part, f[i].data, f[i].len) == CURLE_OK &&
             curl_mime_type(part, "application/octet-stream") == CURLE_OK;
    }
    if (!ok)
        return plm_fail(err, ENOMEM, PLM_E_INTERNAL, "e2b: out of memory writing files");
    cleanup_answer struct e2b_answer a = {0};
    if (e2b_request(s, "POST", url, hd, NULL, 0, mime, h, left, E2B_ANSWER_MAX, &a) < 0)
        return plm_fail(err, 0, a.timed_out ? PLM_E_DEADLINE : PLM_E_UNAVAILABLE,
                        "e2b: writing files to sandbox %s failed: %s", sb->id, a.why);
    if (a.status < 200 || a.status > 299)
        return plm_fail(err, 0, PLM_E_UNAVAILABLE, "e2b: writing files to sandbox %s failed: HTTP %ld", sb->id, a.status);
    return 0;
}

int e2b_read_file(struct e2b_state *s, const struct e2b_sandbox *sb, const char *path, size_t cap,
                  int64_t deadline_ms, struct plm_bytes *out, bool *over, struct plm_err *err)
{
    long left = (long)(deadline_ms - e2b_mono_ms());
    if (left <= 0)
        return plm_fail(err, ETIMEDOUT, PLM_E_DEADLINE, "e2b: the run's time ran out reading files");
    cleanup_curl CURL *h = e2b_curl(s, left);
    if (!h)
        return plm_fail(err, ENOMEM, PLM_E_INTERNAL, "out of memory");
    char *p = curl_easy_escape(h, path, 0);
    char url[1500];
    snprintf(url, sizeof url, "%s/files?path=%s&username=user", sb->envd_base, p ? p : "");
    curl_free(p);
    cleanup_slist struct curl_slist *hd = envd_headers(sb);
    cleanup_answer struct e2b_answer a = {0};
    int rc = e2b_request(s, "GET", url, hd, NULL, 0, NULL, h, left, cap, &a);
    *over = a.over;
    if (rc < 0)
        return plm_fail(err, 0, a.timed_out ? PLM_E_DEADLINE : PLM_E_UNAVAILABLE, "e2b: reading %s failed: %s", path,
                        a.why);
    if (a.status == 404)
        return 0;
    if (a.status < 200 || a.status > 299)
        return plm_fail(err, 0, PLM_E_UNAVAILABLE, "e2b: reading %s failed: HTTP %ld", path, a.status);
    out->len = a.len;
    out->data = take_ptr(&a.body);
    return 1;
}

int e2b_set_network(struct e2b_state *s, const char *id, const char *grant_token, struct plm_err *err)
{
    if (!id_ok(id))
        return plm_fail(err, 0, PLM_E_INTERNAL, "e2b: refusing to update a sandbox with a malformed ID");
    cleanup_json json_t *net = network_body(s, grant_token);
    cleanup_secret char *text = net ? json_dumps(net, JSON_COMPACT) : NULL; /* it may carry the guard token */
    cleanup_slist struct curl_slist *hd = api_headers(s, true);
    char url[700];
    snprintf(url, sizeof url, "%s/sandboxes/%s/network", s->api_base, id);
    cleanup_answer struct e2b_answer a = {0};
    int rc = text && hd ? e2b_request(s, "PUT", url, hd, text, strlen(text), NULL, NULL, E2B_CONTROL_TIMEOUT_MS,
                                      E2B_ANSWER_MAX, &a)
                        : (snprintf(a.why, sizeof a.why, "out of memory"), -1);
    if (rc < 0)
        return plm_fail(err, 0, PLM_E_UNAVAILABLE, "e2b: updating sandbox %s's network failed: %s", id, a.why);
    if (a.status != 200 && a.status != 204)
        return plm_fail(err, 0, PLM_E_UNAVAILABLE, "e2b: updating sandbox %s's network failed: HTTP %ld", id, a.status);
    return 0;
}
