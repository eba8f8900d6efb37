/* guest.h: the microvm guest agent's internals. Runs inside the VM only. The files call down,
 * never in a ring: init.c (PID 1) calls session.c, serve.c and probes.c; session.c calls
 * serve.c; serve.c calls project.c; every one of them calls port.c, which calls none. */
#pragma once
#include <stdbool.h>
#include <stdint.h>

#include "../../../jsrt/jsrt.h"

#define GS_RUN_UID 65534 /* every process of the guest's code runs as this uid */

/* Exit statuses of a run process that ends without a RESULT (reported to the host as DIED). */
#define GS_EXIT_CONFINE 120  /* dropping to the run uid failed: no guest code ran */
#define GS_EXIT_ENGINE 121   /* the engine could not be adopted: no guest code ran */
#define GS_EXIT_PROTOCOL 122 /* the host's frame was malformed */
#define GS_EXIT_IO 123       /* the port failed */
#define GS_EXIT_MEMORY 125   /* no memory for a host reply */
#define GS_EXIT_FORK 126     /* fork failed: no guest code ran */

/* ---- port.c ---- */
/* PID 1 records the port it opened (-1: none). */
void gs_port_set(int fd);
/* A number from the kernel command line ("plm.disk="), or def when absent or out of range. */
uint32_t gs_cmdline_u32(const char *key, uint32_t def);
/* Sends one frame to the host over the port. Returns 0 or -1. */
int gs_send(uint16_t type, uint64_t seq, const void *payload, uint32_t len);
/* Runs the negative probes inside the guest and sends one PROBE_RESULT (startup evidence). */
void gs_probe(uint64_t seq);
/* Runs one project (vmchan.h's PROJECT payload, len bytes) in the run process, sends one
 * PROJECT_RESULT and exits 0 (or a GS_EXIT_* status). /work is mounted by PID 1. */
__attribute__((noreturn)) void gs_project(uint64_t seq, const uint8_t *p, uint32_t len);
/* A file path a request names: relative, no NUL, no `.` or `..` segment (project.c). */
bool gs_path_ok(const uint8_t *p, uint32_t n);
/* The virtio-serial port (PID 1's). */
int gs_port(void);
/* PID 1 waits for the host to kill the VM (it must never exit). */
__attribute__((noreturn)) void gs_idle_forever(void);
/* ---- serve.c ---- */
/* The engine's finish (jsrt_finish_fn): one RESULT frame (or the session kernel's), then exit. */
__attribute__((noreturn)) void gs_finish_run(int32_t exit_code, bool timed_out, const struct jsrt_out *out,
                                             const struct jsrt_out *err);
/* In a child: the run uid, no groups, no_new_privs, the run's rlimits. 0 or -1. */
int gs_drop_privileges(void);
/* One RUN (or PROJECT) with its seq in a fresh run process; PID 1 waits for it (DIED when it ends
 * without its answer). */
void gs_serve_run(struct jsrt *engine, uint64_t seed, uint64_t seq, uint16_t type, const uint8_t *payload,
                  uint32_t len);
/* Set in a session's JavaScript kernel: where the engine's finish goes instead of the port. */
extern jsrt_finish_fn *gs_session_finish;
/* SESSION (vmchan.h): this VM serves a session's requests until it is killed. Never returns. */
__attribute__((noreturn)) void gs_session(struct jsrt *engine, uint64_t seed, uint64_t seq, const uint8_t *p,
                                          uint32_t len);
