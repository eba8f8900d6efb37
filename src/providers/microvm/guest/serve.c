/* serve.c: the run process of one request (uid 65534): a snippet on the warmed engine, with a
 * grant's host calls over the port, or a project (project.c); PID 1 waits for it and reports
 * DIED when it ends without its answer.
 * Owns: the run process (forked and reaped here) and the request's seq while it runs.
 * Trusts: the host's RUN payload only after qf_run_decode, its HOST_REPLYs only after
 *   mvc_hdr_decode/qf_host_reply_decode; nothing of the snippet, which runs with no_new_privs.
 * Invariant: the run process never returns to PID 1's loop: it exits, with its answer sent or
 *   a GS_EXIT_* status. */
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../../../core/exact_io.h"
#include "../../../jsrt/hostcall.h"
#include "../../../guestio/vmchan.h"
#include "guest.h"

/* The run process's real stack (RLIMIT_STACK): twice the engine's limit, as the quickjs worker
 * has (confine.h). With the kernel's default of 8 MiB, equal to the engine's limit, a deep
 * recursion or a deeply nested JSON.parse reached the guard page before the engine's check and
 * the run died of SIGSEGV (exit 139) where the process tier throws a catchable RangeError. */
#define GUEST_C_STACK (16u * 1024 * 1024)

static uint64_t request_seq;
jsrt_finish_fn *gs_session_finish;

/* jsrt_finish_fn: one RESULT frame, then exit 0. Buffers were allocated before the run. */
__attribute__((noreturn)) void gs_finish_run(int32_t exit_code, bool timed_out, const struct jsrt_out *out,
                                                 const struct jsrt_out *err)
{
    if (gs_session_finish) /* a session's JavaScript kernel (session.c) */
        gs_session_finish(exit_code, timed_out, out, err);
    uint8_t fixed[QF_RESULT_FIXED];
    uint8_t flags = (uint8_t)((timed_out ? QF_RES_TIMED_OUT : 0) | (out->truncated ? QF_RES_OUT_TRUNC : 0) |
                              (err->truncated ? QF_RES_ERR_TRUNC : 0));
    qf_result_encode_fixed(fixed, exit_code, flags, out->len, err->len);
    uint32_t len = QF_RESULT_FIXED + out->len + err->len;
    uint8_t h[F16_HDR_LEN];
    f16_hdr_encode(h, &(struct f16_hdr){.len = len, .type = MVC_RESULT, .flags = 0, .seq = request_seq});
    if (plm_write_exact(gs_port(), h, sizeof h) < 0 || plm_write_exact(gs_port(), fixed, sizeof fixed) < 0 || plm_write_exact(gs_port(), out->data, out->len) < 0 ||
        plm_write_exact(gs_port(), err->data, err->len) < 0)
        _exit(GS_EXIT_IO);
    _exit(0);
}

/* jsrt_host_fn: a grant's call goes out as HOST_CALL; only its HOST_REPLY may come back. */
static void host_call(uint32_t call_no, const uint8_t *method, size_t method_len, const uint8_t *path, size_t path_len,
                      const uint8_t *body, size_t body_len, struct jsrt_host_reply *out)
{
    const struct jsrt_hostcall_chan ch = {
        .fd = gs_port(), .call_type = MVC_HOST_CALL, .reply_type = MVC_HOST_REPLY, .hdr_decode = mvc_hdr_decode};
    switch (jsrt_hostcall(&ch, request_seq, call_no, method, method_len, path, path_len, body, body_len, out)) {
    case JSRT_HOSTCALL_OK: return;
    case JSRT_HOSTCALL_IO: _exit(GS_EXIT_IO);
    case JSRT_HOSTCALL_MEMORY: _exit(GS_EXIT_MEMORY);
    case JSRT_HOSTCALL_PROTOCOL: break;
    }
    _exit(GS_EXIT_PROTOCOL);
}

/* Drops to the run uid: no way back to PID 1's root (no_new_privs, no capabilities). */
int gs_drop_privileges(void)
{
    struct rlimit core = {0, 0}, stack = {GUEST_C_STACK, GUEST_C_STACK};
    if (setrlimit(RLIMIT_CORE, &core) < 0 || setrlimit(RLIMIT_STACK, &stack) < 0 || setgroups(0, NULL) < 0 || setresgid(GS_RUN_UID, GS_RUN_UID, GS_RUN_UID) < 0 ||
        setresuid(GS_RUN_UID, GS_RUN_UID, GS_RUN_UID) < 0 || prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0)
        return -1;
    return 0;
}

void gs_serve_run(struct jsrt *engine, uint64_t seed, uint64_t seq, uint16_t type, const uint8_t *payload, uint32_t len)
{
    request_seq = seq;
    struct qf_run run;
    if (type == MVC_RUN && qf_run_decode(payload, len, &run) < 0)
        _exit(GS_EXIT_PROTOCOL);
    if (type == MVC_PROJECT) {
        char opt[64];
        snprintf(opt, sizeof opt, "size=%um,mode=1777", gs_cmdline_u32("plm.disk=", 16));
        mount("tmpfs", "/work", "tmpfs", MS_NOSUID | MS_NODEV, opt);
    }
    pid_t child = fork();
    if (child == 0) {
        if (gs_drop_privileges() < 0)
            _exit(GS_EXIT_CONFINE);
        if (type == MVC_PROJECT)
            gs_project(request_seq, payload, len);
        if (jsrt_adopt(engine, seed) < 0)
            _exit(GS_EXIT_ENGINE);
        char *client = NULL;
        if (run.flags & QF_RUN_GRANT) {
            client = malloc((size_t)run.client_len + 1);
            if (!client)
                _exit(GS_EXIT_MEMORY);
            memcpy(client, run.client, run.client_len);
            client[run.client_len] = 0;
        }
        jsrt_run(engine, (const char *)run.code, run.code_len, run.timeout_ms, client, run.client_len,
                 (run.flags & QF_RUN_GRANT) ? host_call : NULL);
    }
    int status = 0;
    if (child < 0) {
        status = GS_EXIT_FORK << 8;
    } else {
        while (waitpid(child, &status, 0) < 0 && errno == EINTR)
            ;
    }
    if (!(WIFEXITED(status) && WEXITSTATUS(status) == 0)) {
        uint8_t b[4];
        f16_put_u32(b, (uint32_t)status);
        gs_send(MVC_DIED, request_seq, b, sizeof b);
    }
}

