/* guest.h: the microvm guest agent's internals (init.c, probes.c). Runs inside the VM only. */
#pragma once
#include <stdint.h>

/* Exit statuses of a run process that ends without a RESULT (reported to the host as DIED). */
#define GS_EXIT_CONFINE 120  /* dropping to the run uid failed: no guest code ran */
#define GS_EXIT_ENGINE 121   /* the engine could not be adopted: no guest code ran */
#define GS_EXIT_PROTOCOL 122 /* the host's frame was malformed */
#define GS_EXIT_IO 123       /* the port failed */
#define GS_EXIT_MEMORY 125   /* no memory for a host reply */
#define GS_EXIT_FORK 126     /* fork failed: no guest code ran */

/* Sends one frame to the host over the port. Returns 0 or -1. */
int gs_send(uint16_t type, uint64_t seq, const void *payload, uint32_t len);
/* Runs the negative probes inside the guest and sends one PROBE_RESULT (startup evidence). */
void gs_probe(uint64_t seq);
/* Runs one project (chan.h's PROJECT payload, len bytes) in the run process, sends one
 * PROJECT_RESULT and exits 0 (or a GS_EXIT_* status). /work is mounted by PID 1. */
__attribute__((noreturn)) void gs_project(uint64_t seq, const uint8_t *p, uint32_t len);
