/* interp.c: a session's long-lived cell interpreter (interp.h).
 * Owns: the interpreter's stream (a thread running process.Process/Start until the process ends,
 * the stream breaks, or it is told to stop) and the scanners of the cell in progress.
 * Trusts: nothing the stream carries beyond what stream.c and cellscan.c validated; the pid comes
 * from envd's start event and is used only to address SendInput and SendSignal.
 * Invariant: output is consumed only while a cell is active and only up to its markers (what the
 * interpreter writes between cells is dropped); one cell's output is bounded by E2B_STREAM_MAX
 * bytes seen and LIM_OUTPUT_MAX kept per stream; every wait ends at its deadline; the thread is
 * joined exactly once, in e2b_interp_free. */
#include "interp.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../core/cleanup_curl.h"
#include "../../core/limits.h"
#include "cellscan.h"

struct e2b_interp {
    struct e2b_state *s;
    struct e2b_sandbox sb;
    pthread_t th;
    bool th_started;
    atomic_bool stop;
    char *body;
    size_t blen;
    long stream_ms;

    pthread_mutex_t mu; /* everything below */
    pthread_cond_t cv;
    int64_t pid; /* -1 until the start event */
    bool over;   /* the stream ended */
    bool end_event;
    int32_t exit_code;
    char why[160];
    bool active; /* a cell (or the ready marker) is being read */
    struct e2b_cellscan so, se;
    uint64_t bytes;
    bool budget;
};

static void on_start(void *ctx, int64_t pid)
{
    struct e2b_interp *it = ctx;
    pthread_mutex_lock(&it->mu);
    it->pid = pid;
    pthread_cond_broadcast(&it->cv);
    pthread_mutex_unlock(&it->mu);
}

static void on_output(void *ctx, int which, const uint8_t *p, size_t n)
{
    struct e2b_interp *it = ctx;
    pthread_mutex_lock(&it->mu);
    if (it->active && !it->budget) {
        it->bytes += n;
        if (it->bytes > E2B_STREAM_MAX) {
            it->budget = true; /* (spec) the transfer budget, per cell here */
        } else {
            size_t used;
            struct e2b_cellscan *c = which ? &it->se : &it->so;
            e2b_cellscan_feed(c, p, n, &used); /* the state says done or bad; the rest is dropped */
        }
        pthread_cond_broadcast(&it->cv);
    }
    pthread_mutex_unlock(&it->mu);
}

static size_t on_bytes(char *p, size_t sz, size_t nm, void *ud)
{
    struct e2b_stream *st = ud;
    return e2b_stream_feed(st, (const uint8_t *)p, sz * nm) == 0 ? sz * nm : 0;
}

static int on_progress(void *ud, curl_off_t a, curl_off_t b, curl_off_t c, curl_off_t d)
{
    (void)a, (void)b, (void)c, (void)d;
    struct e2b_interp *it = ud;
    return atomic_load(&it->stop) ? 1 : 0;
}

static void *reader(void *arg)
{
    struct e2b_interp *it = arg;
    struct e2b_stream st;
    e2b_stream_init(&st, 0);
    st.sink = on_output;
    st.on_start = on_start;
    st.sink_ctx = it;
    cleanup_curl CURL *h = e2b_curl(it->s, it->stream_ms);
    cleanup_slist struct curl_slist *hd = e2b_connect_headers(&it->sb, "application/connect+json", it->stream_ms);
    char url[800];
    snprintf(url, sizeof url, "%s/process.Process/Start", it->sb.envd_base);
    CURLcode rc = CURLE_OUT_OF_MEMORY;
    if (h && hd) {
        curl_easy_setopt(h, CURLOPT_URL, url);
        curl_easy_setopt(h, CURLOPT_HTTPHEADER, hd);
        curl_easy_setopt(h, CURLOPT_POSTFIELDS, it->body);
        curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)it->blen);
        curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_bytes);
        curl_easy_setopt(h, CURLOPT_WRITEDATA, &st);
        curl_easy_setopt(h, CURLOPT_NOPROGRESS, 0L);
        curl_easy_setopt(h, CURLOPT_XFERINFOFUNCTION, on_progress);
        curl_easy_setopt(h, CURLOPT_XFERINFODATA, it);
        rc = curl_easy_perform(h);
    }
    long status = 0;
    if (h)
        curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &status);
    if (rc == CURLE_OK)
        e2b_stream_finish(&st);
    pthread_mutex_lock(&it->mu);
    it->over = true;
    it->end_event = st.ended;
    it->exit_code = st.exit_code;
    if (!st.ended)
        snprintf(it->why, sizeof it->why, "%s",
                 st.failed               ? st.fail
                 : st.trailer_code[0]    ? st.trailer_code
                 : status && status != 200 ? "envd refused to start the process"
                 : rc != CURLE_OK        ? curl_easy_strerror(rc)
                                         : "the stream ended without an end event");
    pthread_cond_broadcast(&it->cv);
    pthread_mutex_unlock(&it->mu);
    e2b_stream_done(&st);
    return NULL;
}

/* Under mu: waits until both markers, the stream's end, a bad marker or the budget. */
static bool settled(struct e2b_interp *it)
{
    return it->over || it->budget || it->so.state == CELLSCAN_BAD || it->se.state == CELLSCAN_BAD ||
           (it->so.state == CELLSCAN_DONE && it->se.state == CELLSCAN_DONE);
}

static void wait_settled(struct e2b_interp *it, int64_t deadline_ms)
{
    struct timespec ts = clock_mono_at(deadline_ms > 0 ? (uint64_t)deadline_ms : 0);
    while (!settled(it) && e2b_mono_ms() < deadline_ms)
        if (pthread_cond_timedwait(&it->cv, &it->mu, &ts) == ETIMEDOUT)
            break;
}

static int arm(struct e2b_interp *it, char nonce[E2B_CELL_NONCE_HEX + 1])
{
    if (e2b_random_hex(nonce, E2B_CELL_NONCE_HEX / 2) < 0)
        return -1;
    e2b_cellscan_done(&it->so);
    e2b_cellscan_done(&it->se);
    if (e2b_cellscan_init(&it->so, nonce, true, LIM_OUTPUT_MAX) < 0 ||
        e2b_cellscan_init(&it->se, nonce, false, LIM_OUTPUT_MAX) < 0)
        return -1;
    it->bytes = 0;
    it->budget = false;
    it->active = true;
    return 0;
}

/* SIGKILL through envd, then a bounded wait for the stream's end (envd's end event). */
static void kill_and_wait(struct e2b_interp *it)
{
    pthread_mutex_lock(&it->mu);
    int64_t pid = it->pid;
    bool over = it->over;
    pthread_mutex_unlock(&it->mu);
    if (over)
        return;
    struct plm_err err = {0};
    if (pid > 0 && e2b_send_signal(it->s, &it->sb, pid, true, 5000L, &err) < 0)
        e2b_log("warning", "e2b_interp_kill_failed", "\"sandbox\":\"%s\",\"pid\":%lld", it->sb.id, (long long)pid);
    pthread_mutex_lock(&it->mu);
    struct timespec ts = clock_mono_after(3000);
    while (!it->over)
        if (pthread_cond_timedwait(&it->cv, &it->mu, &ts) == ETIMEDOUT)
            break;
    pthread_mutex_unlock(&it->mu);
    atomic_store(&it->stop, true); /* a stream still open is abandoned */
}

int e2b_interp_start(struct e2b_state *s, const struct e2b_sandbox *sb, const char *lang, const char *cwd,
                     long stream_ms, int64_t deadline_ms, struct e2b_interp **out, bool *transport,
                     struct plm_err *err)
{
    *out = NULL;
    *transport = false;
    bool py = !strcmp(lang, "python");
    struct e2b_interp *it = calloc(1, sizeof *it);
    if (!it)
        return plm_fail(err, ENOMEM, PLM_E_INTERNAL, "out of memory");
    it->s = s;
    it->sb = *sb;
    it->pid = -1;
    it->stream_ms = stream_ms;
    pthread_mutex_init(&it->mu, NULL);
    clock_cond_init(&it->cv);
    char nonce[E2B_CELL_NONCE_HEX + 1];
    if (arm(it, nonce) < 0) {
        e2b_interp_free(it, false);
        return plm_fail(err, EIO, PLM_E_INTERNAL, "e2b: no randomness for a cell nonce");
    }
    const char *args[] = {py ? "-I" : "-e", py ? "-u" : e2b_kernel_js, py ? "-c" : nonce, e2b_kernel_py, nonce};
    it->body = py ? e2b_start_body("python3", args, 5, cwd, NULL, 0, true, &it->blen)
                  : e2b_start_body("node", args, 3, cwd, NULL, 0, true, &it->blen);
    if (!it->body || pthread_create(&it->th, NULL, reader, it) != 0) {
        e2b_interp_free(it, false);
        return plm_fail(err, ENOMEM, PLM_E_INTERNAL, "e2b: cannot start an interpreter's stream");
    }
    it->th_started = true;
    pthread_mutex_lock(&it->mu);
    wait_settled(it, deadline_ms);
    bool ready = it->so.state == CELLSCAN_DONE && it->se.state == CELLSCAN_DONE;
    bool over = it->over, ended = it->end_event, late = !settled(it);
    int32_t code = it->exit_code;
    char why[160];
    snprintf(why, sizeof why, "%s", it->why);
    it->active = false;
    pthread_mutex_unlock(&it->mu);
    if (ready) {
        *out = it;
        return 0;
    }
    e2b_interp_free(it, true);
    if (late)
        return plm_refuse(err, PLM_E_DEADLINE, PLM_REFUSAL_CAPACITY,
                          "e2b: the %s interpreter was not ready before the cell's deadline; its code was not run", lang);
    if (over && ended)
        return plm_refuse(err, PLM_E_UNSUPPORTED, PLM_REFUSAL_ENVIRONMENT,
                          "e2b: the %s interpreter did not start (exit %d); the template may lack %s", lang, code,
                          py ? "python3" : "node");
    *transport = over;
    return plm_refuse(err, PLM_E_UNSUPPORTED, PLM_REFUSAL_ENVIRONMENT, "e2b: the %s interpreter did not start: %s",
                      lang, over ? why : "its ready marker was malformed");
}

bool e2b_interp_alive(struct e2b_interp *it)
{
    pthread_mutex_lock(&it->mu);
    bool alive = !it->over;
    pthread_mutex_unlock(&it->mu);
    return alive;
}

int64_t e2b_interp_pid(struct e2b_interp *it)
{
    pthread_mutex_lock(&it->mu);
    int64_t pid = it->over ? -1 : it->pid;
    pthread_mutex_unlock(&it->mu);
    return pid;
}

int e2b_interp_cell(struct e2b_interp *it, const char *code, size_t len, int64_t deadline_ms,
                    struct e2b_cell_out *r, struct plm_err *err)
{
    memset(r, 0, sizeof *r);
    int64_t t0 = e2b_mono_ms();
    char nonce[E2B_CELL_NONCE_HEX + 1], head[64];
    pthread_mutex_lock(&it->mu);
    int64_t pid = it->pid;
    int armed = it->over ? -1 : arm(it, nonce);
    pthread_mutex_unlock(&it->mu);
    if (armed < 0)
        return plm_refuse(err, PLM_E_UNAVAILABLE, PLM_REFUSAL_ENVIRONMENT, "e2b: the interpreter is gone; nothing ran");
    int hn = snprintf(head, sizeof head, "%s %zu\n", nonce, len);
    uint8_t *msg = malloc((size_t)hn + len);
    if (!msg)
        return plm_fail(err, ENOMEM, PLM_E_INTERNAL, "out of memory");
    memcpy(msg, head, (size_t)hn);
    memcpy(msg + hn, code, len);
    int sent = e2b_send_input(it->s, &it->sb, pid, msg, (size_t)hn + len, deadline_ms, err);
    free(msg);
    if (sent < 0) { /* the input may have arrived: the code may run; this interpreter is dropped */
        kill_and_wait(it);
        r->ended = true;
        pthread_mutex_lock(&it->mu);
        it->active = false;
        pthread_mutex_unlock(&it->mu);
        return plm_err_wrap(err, "sending the cell");
    }
    pthread_mutex_lock(&it->mu);
    wait_settled(it, deadline_ms);
    bool done = it->so.state == CELLSCAN_DONE && it->se.state == CELLSCAN_DONE;
    bool bad = it->so.state == CELLSCAN_BAD || it->se.state == CELLSCAN_BAD;
    bool budget = it->budget, over = it->over, end_event = it->end_event;
    int32_t exit_code = it->exit_code;
    char why[160];
    snprintf(why, sizeof why, "%s", it->why);
    it->active = false;
    e2b_cellscan_take(&it->so, &r->out);
    e2b_cellscan_take(&it->se, &r->err);
    r->out_truncated = it->so.truncated;
    r->err_truncated = it->se.truncated;
    int32_t status = it->so.status;
    pthread_mutex_unlock(&it->mu);
    int rc = 0;
    if (done) {
        r->exit_code = status;
    } else if (budget) {
        kill_and_wait(it);
        r->exit_code = E2B_EXIT_BUDGET;
        r->out_truncated = r->err_truncated = r->ended = true;
        e2b_log("warning", "e2b_stream_budget", "\"sandbox\":\"%s\",\"detail\":\"a cell's output passed 32 MiB\"", it->sb.id);
    } else if (bad) {
        kill_and_wait(it);
        r->ended = true;
        rc = plm_fail(err, EPROTO, PLM_E_UNAVAILABLE, "e2b: the interpreter's output carried a malformed end-of-cell marker; it was ended");
    } else if (over && end_event) { /* the code ended its interpreter (exit, a fatal signal) */
        r->exit_code = exit_code;
        r->ended = true;
    } else if (over) {
        r->ended = true;
        rc = plm_fail(err, 0, PLM_E_UNAVAILABLE, "e2b: the interpreter's stream broke: %s", why);
    } else { /* the deadline: the interpreter is interrupted (killed), the session goes on */
        kill_and_wait(it);
        r->exit_code = E2B_EXIT_TIMEOUT;
        r->timed_out = r->ended = true;
    }
    r->duration_ms = e2b_mono_ms() - t0;
    if (rc < 0) {
        plm_bytes_done(&r->out);
        plm_bytes_done(&r->err);
    }
    return rc;
}

void e2b_interp_stop(struct e2b_interp *it)
{
    if (it)
        atomic_store(&it->stop, true);
}

void e2b_interp_free(struct e2b_interp *it, bool kill9)
{
    if (!it)
        return;
    if (kill9 && it->th_started)
        kill_and_wait(it);
    atomic_store(&it->stop, true);
    if (it->th_started)
        pthread_join(it->th, NULL);
    e2b_cellscan_done(&it->so);
    e2b_cellscan_done(&it->se);
    if (it->body) {
        explicit_bzero(it->body, it->blen);
        free(it->body);
    }
    pthread_mutex_destroy(&it->mu);
    pthread_cond_destroy(&it->cv);
    explicit_bzero(&it->sb, sizeof it->sb);
    free(it);
}
