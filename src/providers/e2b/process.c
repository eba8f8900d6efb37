/* process.c: one command in a sandbox through envd's Connect server-streaming
 * process.Process/Start (providers.md §6 step 6), parsed by stream.c as bytes arrive.
 * Owns: the call's CURL handle and its stream parser.
 * Trusts: the stream only as stream.c validated it. The verdict is ours: an end event gives the
 * exit code; the deadline gives 124 (timed out); the transfer budget gives 153 (both streams
 * truncated); anything else that ends without an end event is an error, never an exit 0. */
#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../core/cleanup_curl.h"
#include "../../core/cleanup_json.h"
#include "../../core/limits.h"
#include "internal.h"

struct feed {
    struct e2b_stream st;
    int verdict; /* last e2b_stream_feed answer */
};

static size_t on_bytes(char *p, size_t sz, size_t nm, void *ud)
{
    struct feed *f = ud;
    size_t n = sz * nm;
    f->verdict = e2b_stream_feed(&f->st, (const uint8_t *)p, n);
    return f->verdict == 0 ? n : 0; /* 0 stops the transfer: trailer, budget or a protocol error */
}

char *e2b_start_body(const char *cmd, const char *const *args, size_t nargs, const char *cwd,
                     const struct e2b_env *envs, size_t nenvs, bool with_stdin, size_t *len)
{
    json_t *a = json_array();
    for (size_t i = 0; i < nargs; i++)
        json_array_append_new(a, json_string(args[i]));
    json_t *proc = json_pack("{s:s, s:o}", "cmd", cmd, "args", a);
    if (proc && cwd)
        json_object_set_new(proc, "cwd", json_string(cwd));
    if (proc && nenvs) {
        json_t *e = json_object();
        for (size_t i = 0; i < nenvs; i++)
            json_object_set_new(e, envs[i].key, json_string(envs[i].value));
        json_object_set_new(proc, "envs", e);
    }
    cleanup_json json_t *root = proc ? json_pack("{s:o, s:b}", "process", proc, "stdin", with_stdin) : NULL;
    cleanup_free char *text = root ? json_dumps(root, JSON_COMPACT) : NULL;
    if (!text)
        return NULL;
    size_t n = strlen(text);
    char *env = malloc(5 + n);
    if (env) {
        env[0] = 0;
        env[1] = (char)(n >> 24), env[2] = (char)(n >> 16), env[3] = (char)(n >> 8), env[4] = (char)n;
        memcpy(env + 5, text, n);
        *len = 5 + n;
    }
    return env;
}

struct curl_slist *e2b_connect_headers(const struct e2b_sandbox *sb, const char *content_type, long timeout_ms)
{
    char h1[300], h2[300], h3[64];
    snprintf(h1, sizeof h1, "X-Access-Token: %s", sb->envd_token);
    snprintf(h2, sizeof h2, "e2b-traffic-access-token: %s", sb->traffic_token);
    snprintf(h3, sizeof h3, "Connect-Timeout-Ms: %ld", timeout_ms);
    cleanup_slist struct curl_slist *hd = NULL;
    char h0[80];
    snprintf(h0, sizeof h0, "Content-Type: %s", content_type);
    const char *lines[] = {h0, "Connect-Protocol-Version: 1", h1, h2, h3};
    bool all = true;
    for (size_t i = 0; i < 5 && all; i++) {
        struct curl_slist *n = curl_slist_append(hd, lines[i]);
        all = n != NULL;
        hd = n ? n : hd;
    }
    explicit_bzero(h1, sizeof h1);
    explicit_bzero(h2, sizeof h2);
    return all ? take_ptr(&hd) : NULL;
}

int e2b_process(struct e2b_state *s, const struct e2b_sandbox *sb, const char *cmd, const char *const *args,
                size_t nargs, const char *cwd, const struct e2b_env *envs, size_t nenvs, int64_t deadline_ms,
                struct e2b_proc_result *r, struct plm_err *err)
{
    memset(r, 0, sizeof *r);
    int64_t t0 = e2b_mono_ms();
    long left = (long)(deadline_ms - t0);
    if (left <= 0) {
        r->timed_out = true;
        r->exit_code = E2B_EXIT_TIMEOUT;
        return 0;
    }
    size_t blen = 0;
    cleanup_free char *body = e2b_start_body(cmd, args, nargs, cwd, envs, nenvs, false, &blen);
    cleanup_curl CURL *h = e2b_curl(s, left);
    /* (spec) the remaining time, >= 1 */
    cleanup_slist struct curl_slist *hd = e2b_connect_headers(sb, "application/connect+json", left);
    if (!body || !h || !hd)
        return plm_fail(err, ENOMEM, PLM_E_INTERNAL, "e2b: out of memory starting a process");
    char url[800];
    snprintf(url, sizeof url, "%s/process.Process/Start", sb->envd_base);
    struct feed f = {.verdict = 0};
    e2b_stream_init(&f.st, LIM_OUTPUT_MAX);
    curl_easy_setopt(h, CURLOPT_URL, url);
    curl_easy_setopt(h, CURLOPT_HTTPHEADER, hd);
    curl_easy_setopt(h, CURLOPT_POSTFIELDS, body);
    curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)blen);
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_bytes);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, &f);
    CURLcode rc = curl_easy_perform(h);
    long status = 0;
    curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &status);
    r->duration_ms = e2b_mono_ms() - t0;
    bool deadline = rc == CURLE_OPERATION_TIMEDOUT || e2b_mono_ms() >= deadline_ms;
    int ret = 0;
    if (rc == CURLE_OK && e2b_stream_finish(&f.st) < 0)
        f.verdict = -1;
    if (f.st.over_budget) {
        /* (spec) the transfer budget: 32 MiB per stream; what was read is kept, flagged */
        r->exit_code = E2B_EXIT_BUDGET;
        e2b_log("warning", "e2b_stream_budget", "\"sandbox\":\"%s\",\"detail\":\"stream over the 32 MiB transfer budget\"",
                sb->id);
    } else if (f.st.ended) {
        r->exit_code = f.st.exit_code;
    } else if (deadline || !strcmp(f.st.trailer_code, "deadline_exceeded")) {
        r->timed_out = true;
        r->exit_code = E2B_EXIT_TIMEOUT;
    } else if (status != 200 && status) {
        ret = plm_fail(err, 0, PLM_E_UNAVAILABLE, "e2b: envd refused to start the process: HTTP %ld",
                          status);
    } else if (f.verdict < 0 || f.st.failed) {
        ret = plm_fail(err, EPROTO, PLM_E_UNAVAILABLE, "e2b: envd's process stream: %s", f.st.fail);
    } else if (f.st.trailer_code[0]) {
        ret = plm_fail(err, 0, PLM_E_UNAVAILABLE, "e2b: envd's process stream ended with %s: %s",
                          f.st.trailer_code, f.st.trailer_msg);
    } else if (rc != CURLE_OK && rc != CURLE_WRITE_ERROR) {
        ret = plm_fail(err, 0, PLM_E_UNAVAILABLE, "e2b: envd's process stream failed: %s",
                          curl_easy_strerror(rc));
    } else {
        ret = plm_fail(err, 0, PLM_E_UNAVAILABLE, "e2b: envd's process stream ended without an end event (no exit status)");
    }
    if (ret == 0) {
        r->out = f.st.out, r->err = f.st.err;
        f.st.out = (struct plm_bytes){0}, f.st.err = (struct plm_bytes){0};
        r->out_truncated = f.st.out_truncated;
        r->err_truncated = f.st.err_truncated;
    }
    e2b_stream_done(&f.st);
    return ret;
}
