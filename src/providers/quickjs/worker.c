/* worker.c: the QuickJS worker, fork to exit (STYLE.md §9).
 * Owns: fd 3 (its socket to the monitor), one engine, one request.
 * Trusts: monitor frames only after qf_hdr_decode()/qf_run_decode()/qf_host_reply_decode();
 *   nothing in the snippet. With a grant, the only way out is a HOST_CALL frame on the same
 *   socket: the worker holds no credential, only the client text and the broker's answers.
 * Invariant: the filter is loaded (wk_confine) before the engine runs any code in this process
 *   and before any request byte is read, with the socket the only descriptor; the engine is the
 *   zygote's, inherited copy-on-write, and has run no guest code; the worker answers exactly one
 *   request and exits (host calls are questions inside that request, one outstanding at a
 *   time), and every failure before a RESULT is a distinct exit status, never a partial answer. */
#include "../../core/exact_io.h"
#include "worker.h"

#include <errno.h>
#include <setjmp.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../../core/limits.h"
#include "frame.h"
#include "../../jsrt/hostcall.h"
#include "probe.h"
#include "seccomp_table.h"

static uint64_t request_seq;
/* Sessions (QF_RUN_SESSION): where a finished run returns to wait for the next RUN. */
static jmp_buf next_request;
static bool session_run;
static struct jsrt *session_engine;

static int send_frame(uint16_t type, uint64_t seq, const uint8_t *payload, uint32_t len)
{
    uint8_t h[F16_HDR_LEN];
    f16_hdr_encode(h, &(struct f16_hdr){.len = len, .type = type, .flags = 0, .seq = seq});
    if (plm_write_exact(WK_SOCK_FD, h, sizeof h) < 0)
        return -1;
    return len ? plm_write_exact(WK_SOCK_FD, payload, len) : 0;
}

/* The grant's transport (jsrt_host_fn): one HOST_CALL, then block until its HOST_REPLY. Nothing
 * else may arrive meanwhile; anything malformed ends the worker (the monitor reports it). */
static void host_call(uint32_t call_no, const uint8_t *method, size_t method_len, const uint8_t *path, size_t path_len,
                      const uint8_t *body, size_t body_len, struct jsrt_host_reply *out)
{
    static const struct jsrt_hostcall_chan ch = {
        .fd = WK_SOCK_FD, .call_type = QF_HOST_CALL, .reply_type = QF_HOST_REPLY, .hdr_decode = qf_hdr_decode};
    switch (jsrt_hostcall(&ch, request_seq, call_no, method, method_len, path, path_len, body, body_len, out)) {
    case JSRT_HOSTCALL_OK: return;
    case JSRT_HOSTCALL_IO: _exit(WK_EXIT_IO);
    case JSRT_HOSTCALL_MEMORY: _exit(WK_EXIT_MEMORY);
    case JSRT_HOSTCALL_PROTOCOL: break;
    }
    _exit(WK_EXIT_PROTOCOL);
}

/* The end of every run (jsrt_finish_fn): one RESULT frame, then exit. The output buffers were
 * allocated before the run, so this path allocates nothing and works out of memory. */
__attribute__((noreturn)) static void finish_run(int32_t exit_code, bool timed_out,
                                                 const struct jsrt_out *out, const struct jsrt_out *err)
{
    uint8_t fixed[QF_RESULT_FIXED];
    /* A session keeps the engine only when the run ended at the top level: a deadline or
     * process.exit ended it from inside guest code, and so ends the interpreter too. */
    bool keep = session_run && !timed_out && !jsrt_exit_called(session_engine);
    uint8_t flags = (uint8_t)((timed_out ? QF_RES_TIMED_OUT : 0) | (out->truncated ? QF_RES_OUT_TRUNC : 0) |
                              (err->truncated ? QF_RES_ERR_TRUNC : 0) | (session_run && !keep ? QF_RES_ENDED : 0));
    qf_result_encode_fixed(fixed, exit_code, flags, out->len, err->len);
    uint32_t len = QF_RESULT_FIXED + out->len + err->len; /* <= 16 + 2 * 64 KiB */
    uint8_t h[F16_HDR_LEN];
    f16_hdr_encode(h, &(struct f16_hdr){.len = len, .type = QF_RESULT, .flags = 0, .seq = request_seq});
    if (plm_write_exact(WK_SOCK_FD, h, sizeof h) < 0 || plm_write_exact(WK_SOCK_FD, fixed, sizeof fixed) < 0 ||
        plm_write_exact(WK_SOCK_FD, out->data, out->len) < 0 || plm_write_exact(WK_SOCK_FD, err->data, err->len) < 0)
        _exit(WK_EXIT_IO);
    if (keep)
        longjmp(next_request, 1);
    _exit(0);
}

struct jsrt *wk_engine_new(uint32_t memory_mb)
{
    return jsrt_new(memory_mb, WK_JS_STACK_BYTES, finish_run);
}

void wk_worker_main(int sock, const struct wk_params *p)
{
    if (wk_confine(sock, p->monitor_pid, &p->limits, &p->filter) < 0)
        _exit(WK_EXIT_CONFINE);
    /* From here on only the allow-list works. */
    struct jsrt *rt = p->engine;
    if (jsrt_adopt(rt, p->seed) < 0)
        _exit(WK_EXIT_ENGINE);
    if (send_frame(QF_READY, 0, NULL, 0) < 0)
        _exit(WK_EXIT_IO);

    static uint8_t *payload_held; /* a session's previous request, freed when the next begins */
    static char *client_held;
    if (setjmp(next_request)) {
        free(payload_held);
        free(client_held);
        payload_held = NULL;
        client_held = NULL;
        jsrt_next_run(rt);
    }
    uint8_t hb[F16_HDR_LEN];
    struct f16_hdr h;
    if (plm_read_exact(WK_SOCK_FD, hb, sizeof hb) < 0)
        _exit(WK_EXIT_IO);
    /* Only RUN or PROBE may come now; qf_hdr_decode bounds len by the type's cap. */
    if (qf_hdr_decode(hb, &h) < 0 || (h.type != QF_RUN && h.type != QF_PROBE))
        _exit(WK_EXIT_PROTOCOL);
    uint8_t *payload = malloc((size_t)h.len + 1);
    if (!payload)
        _exit(WK_EXIT_ENGINE);
    if (plm_read_exact(WK_SOCK_FD, payload, h.len) < 0)
        _exit(WK_EXIT_IO);
    payload[h.len] = 0;
    request_seq = h.seq;

    if (h.type == QF_PROBE) {
        struct f16_reader r;
        f16_reader_init(&r, payload, h.len);
        uint32_t id = f16_get_u32(&r);
        if (f16_reader_finish(&r) < 0 || id >= WK_PROBE_COUNT)
            _exit(WK_EXIT_PROTOCOL);
        int e = 0;
        int64_t ret = wk_probe_run(id, &e);
        uint8_t out[12];
        f16_put_u64(out, (uint64_t)ret);
        f16_put_u32(out + 8, (uint32_t)e);
        if (send_frame(QF_PROBE_RESULT, h.seq, out, sizeof out) < 0)
            _exit(WK_EXIT_IO);
        _exit(0);
    }

    struct qf_run run;
    if (qf_run_decode(payload, h.len, &run) < 0)
        _exit(WK_EXIT_PROTOCOL);
    /* A session never carries a grant; a request changing mode mid-session is malformed. */
    if ((run.flags & QF_RUN_SESSION) && (run.flags & QF_RUN_GRANT))
        _exit(WK_EXIT_PROTOCOL);
    if (session_run && !(run.flags & QF_RUN_SESSION))
        _exit(WK_EXIT_PROTOCOL);
    session_run = (run.flags & QF_RUN_SESSION) != 0;
    session_engine = rt;
    jsrt_set_session(rt, session_run);
    payload_held = payload;
    /* run.code points into payload, which is NUL-terminated just past the code; the engine needs
     * the client NUL-terminated too, so it gets its own copy. */
    char *client = NULL;
    if (run.flags & QF_RUN_GRANT) {
        client = malloc((size_t)run.client_len + 1);
        if (!client)
            _exit(WK_EXIT_MEMORY);
        memcpy(client, run.client, run.client_len);
        client[run.client_len] = 0;
    }
    client_held = client;
    jsrt_run(rt, (const char *)run.code, run.code_len, run.timeout_ms, client, run.client_len,
             (run.flags & QF_RUN_GRANT) ? host_call : NULL);
}
