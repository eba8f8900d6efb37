/* snippet.c: one JavaScript snippet in one container (providers.md §3.3-3.4).
 * Owns: the run's box from acquire to release, and the result it fills.
 * Trusts: nothing the container prints; the exit status only as dockerd reports it.
 * Invariant: the code goes to `node -` on stdin of a container that already printed its own
 * marker (so a result always means "the guest ran"); the guest's time budget starts when the
 * code is handed over; the run ends at the start script's end line on both streams (or at the
 * end of the stream, or at the deadline); output is capped per stream with flags, never marked
 * in-band, and the end line never reaches it; the container is removed before the result is
 * returned, whatever happened; a granted run's socket is served from before its container
 * exists until the code has ended, and stopped on every path before we return. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "../../core/limits.h"
#include "internal.h"

enum dock_snip_class dock_snippet_classify(bool marked, bool deadline_passed, bool have_exit)
{
    if (deadline_passed && !marked)
        return DOCK_SNIP_NOT_STARTED;
    if (deadline_passed)
        return DOCK_SNIP_TIMED_OUT;
    if (!marked)
        return DOCK_SNIP_NO_MARKER;
    if (!have_exit)
        return DOCK_SNIP_LOST;
    return DOCK_SNIP_EXITED;
}

struct snip_io {
    const char *end;          /* the box's end marker */
    struct dock_endline s[2]; /* [0] stdout, [1] stderr */
};

static void snip_sink(void *ctx, int stream, const uint8_t *p, size_t n)
{
    struct snip_io *c = ctx;
    dock_endline_feed(&c->s[stream == DOCK_STDERR], c->end, p, n);
}

static void snip_io_done(struct snip_io *c)
{
    dock_bytes_done(&c->s[0].keep);
    dock_bytes_done(&c->s[1].keep);
}
#define cleanup_snip_io __attribute__((cleanup(snip_io_done)))

static bool snip_done(void *ctx)
{
    struct snip_io *c = ctx;
    return c->s[0].ended && c->s[1].ended;
}

int dock_run_snippet(struct dock_state *s, const struct plm_run_ctx *ctx, const struct plm_request *req,
                     struct plm_result *out, struct plm_err *err)
{
    if (dock_run_gate(s, ctx, req, err) < 0)
        return -1;
    uint32_t timeout = plm_clamp_timeout((int32_t)ctx->timeout_ms, DOCK_SNIPPET_DEFAULT_MS, DOCK_SNIPPET_MAX_MS);
    return dock_snippet_exec(s, timeout, req->js.code, ctx->host_api, out, err);
}

static int snippet_run(struct dock_state *s, uint32_t timeout, const char *code, const struct dock_grant_paths *g,
                       struct plm_result *out, struct plm_err *err);

int dock_snippet_exec(struct dock_state *s, uint32_t timeout, const char *code, const struct plm_host_api *api,
                      struct plm_result *out, struct plm_err *err)
{
    if (!api)
        return snippet_run(s, timeout, code, NULL, out, err);
    /* The socket exists before the container (its mount needs it) and is gone before we return:
     * the grant ends with the run's code, and a process the guest left behind finds no one
     * listening. */
    struct dock_hostsock *hs = NULL;
    if (dock_hostsock_start(s->hs_base, api, NULL, &hs, err) < 0)
        return plm_err_wrap(err, "snippet");
    struct dock_grant_paths g = {.sock = dock_hostsock_sock_path(hs), .preload = dock_hostsock_preload_path(hs)};
    int r = snippet_run(s, timeout, code, &g, out, err);
    dock_hostsock_stop(hs);
    return r;
}

static int snippet_run(struct dock_state *s, uint32_t timeout, const char *code, const struct dock_grant_paths *g,
                       struct plm_result *out, struct plm_err *err)
{
    struct dock_box *b = NULL;
    if (dock_box_acquire(s, DOCK_SNIPPET, NULL, 0, true, g, &b, err) < 0)
        return plm_err_wrap(err, "snippet");
    struct snip_io c cleanup_snip_io = {.end = b->end};
    c.s[0].keep.max = c.s[1].keep.max = LIM_OUTPUT_MAX;
    /* Output that came after the marker while the container started belongs to the run. */
    snip_sink(&c, DOCK_STDOUT, b->early_out.data, b->early_out.len);
    snip_sink(&c, DOCK_STDERR, b->early_err.data, b->early_err.len);
    struct dock_io io = {.in = (const uint8_t *)code,
                         .in_len = strlen(code),
                         .close_in = true,
                         .sink = snip_sink,
                         .stop = snip_done,
                         .ctx = &c};
    int64_t t0 = (int64_t)clock_mono_ms();
    int r = dock_attach_pump(&b->at, &io, t0 + timeout, err);
    int64_t status = 0, dur = (int64_t)clock_mono_ms() - t0;
    bool ended = snip_done(&c), have_exit = false;
    if (ended && c.s[0].status_ok) {
        have_exit = true; /* the start script reported the command's status after its output */
        status = c.s[0].status;
    } else if (r == 1) {
        /* The stream ended without the end line (the script was killed, e.g. out of memory):
         * dockerd's exit status is the answer. */
        have_exit = dock_container_wait(&s->eng, b->id, 10000, &status, err) == 0;
    }
    /* (spec) the deadline is read before teardown; removal also kills a guest still running */
    bool deadline_passed = r == 0 && !ended;
    dock_box_release(s, b);
    dock_endline_flush(&c.s[0]);
    dock_endline_flush(&c.s[1]);
    if (r < 0)
        return plm_err_wrap(err, "snippet: the container's stream failed");
    switch (dock_snippet_classify(true, deadline_passed, have_exit)) {
    case DOCK_SNIP_TIMED_OUT:
        out->js.timed_out = true;
        out->js.exit_code = 124;
        break;
    case DOCK_SNIP_EXITED: out->js.exit_code = (int32_t)status; break;
    case DOCK_SNIP_NOT_STARTED:
    case DOCK_SNIP_NO_MARKER:
    case DOCK_SNIP_LOST:
        if (ended)
            return plm_fail(err, 0, PLM_E_UNAVAILABLE,
                            "snippet: the end line carried no exit status (forged by the guest?)");
        return plm_err_wrap(err, "snippet: the container ended without an exit status");
    }
    out->kind = PLM_KIND_JAVASCRIPT;
    out->js.out_truncated = c.s[0].keep.truncated;
    out->js.err_truncated = c.s[1].keep.truncated;
    dock_bytes_take(&c.s[0].keep, &out->js.out);
    dock_bytes_take(&c.s[1].keep, &out->js.err);
    out->duration_ms = dur;
    out->tier = dock_tier(s); /* the daemon stamps the image and identity Describe states */
    return 0;
}
