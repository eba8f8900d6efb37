/* envdctl.c: what a session needs beyond a run's calls (session.c, interp.c): envd's unary
 * Connect calls process.Process/SendInput and process.Process/SendSignal (JSON codec), the
 * control plane's liveness read-back of one sandbox.
 * Owns: each call's request and answer, for the call's duration.
 * Trusts: no answer body: only the HTTP status is used (a unary Connect error is a non-200
 * status with a JSON body we do not quote).
 * Invariant: envd's tokens travel only in headers; input bytes never reach a log line. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../core/base64.h"
#include "../../core/cleanup_curl.h"
#include "internal.h"

/* One unary call; 0 when envd answered 200. */
static int unary(struct e2b_state *s, const struct e2b_sandbox *sb, const char *method, const char *body,
                 size_t blen, long timeout_ms, struct plm_err *err)
{
    if (timeout_ms < 1)
        return plm_fail(err, ETIMEDOUT, PLM_E_DEADLINE, "e2b: no time left for %s", method);
    char url[800];
    snprintf(url, sizeof url, "%s/process.Process/%s", sb->envd_base, method);
    cleanup_slist struct curl_slist *hd = e2b_connect_headers(sb, "application/json", timeout_ms);
    if (!hd)
        return plm_fail(err, ENOMEM, PLM_E_INTERNAL, "out of memory");
    struct e2b_answer a __attribute__((cleanup(e2b_answer_done))) = {0};
    if (e2b_request(s, "POST", url, hd, body, blen, NULL, NULL, timeout_ms, 64 * 1024, &a) < 0)
        return plm_fail(err, 0, a.timed_out ? PLM_E_DEADLINE : PLM_E_UNAVAILABLE, "e2b: envd %s failed: %s", method,
                        a.why);
    if (a.status != 200)
        return plm_fail(err, 0, PLM_E_UNAVAILABLE, "e2b: envd %s answered HTTP %ld", method, a.status);
    return 0;
}

int e2b_send_input(struct e2b_state *s, const struct e2b_sandbox *sb, int64_t pid, const uint8_t *data, size_t len,
                   int64_t deadline_ms, struct plm_err *err)
{
    size_t elen = b64_encoded_len(len, true);
    char *body = malloc(elen + 96);
    if (!body)
        return plm_fail(err, ENOMEM, PLM_E_INTERNAL, "out of memory");
    int n = snprintf(body, 96, "{\"process\":{\"pid\":%lld},\"input\":{\"stdin\":\"", (long long)pid);
    size_t off = (size_t)n + b64_encode(data, len, body + n, B64_STD, true);
    memcpy(body + off, "\"}}", 4);
    int rc = unary(s, sb, "SendInput", body, off + 3, (long)(deadline_ms - e2b_mono_ms()), err);
    explicit_bzero(body, off); /* a cell's code */
    free(body);
    return rc;
}

int e2b_send_signal(struct e2b_state *s, const struct e2b_sandbox *sb, int64_t pid, bool kill9, long timeout_ms,
                    struct plm_err *err)
{
    char body[128];
    int n = snprintf(body, sizeof body, "{\"process\":{\"pid\":%lld},\"signal\":\"%s\"}", (long long)pid,
                     kill9 ? "SIGNAL_SIGKILL" : "SIGNAL_SIGTERM");
    return unary(s, sb, "SendSignal", body, (size_t)n, timeout_ms, err);
}

int e2b_sandbox_alive(struct e2b_state *s, const struct e2b_sandbox *sb)
{
    char key[300], url[700];
    snprintf(key, sizeof key, "X-API-Key: %s", s->api_key);
    cleanup_slist struct curl_slist *hd = curl_slist_append(NULL, key);
    explicit_bzero(key, sizeof key);
    if (!hd)
        return -1;
    snprintf(url, sizeof url, "%s/sandboxes/%s", s->api_base, sb->id);
    struct e2b_answer a __attribute__((cleanup(e2b_answer_done))) = {0};
    int rc = e2b_request(s, "GET", url, hd, NULL, 0, NULL, NULL, 10000L, E2B_ANSWER_MAX, &a);
    long st = a.status;
    if (rc < 0)
        return -1;
    return st == 200 ? 1 : st == 404 ? 0 : -1;
}
