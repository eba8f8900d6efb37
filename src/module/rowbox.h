/* rowbox.h: one model process per row, under the row's walls (docs/modules.md, "Isolation"):
 * a fresh fork of the worker that closes every descriptor but its two pipes and the model's,
 * sets its limits (RLIMIT_AS = the row's memory cap, RLIMIT_CPU, RLIMIT_FSIZE 0, RLIMIT_NOFILE,
 * RLIMIT_NPROC 0 where it applies), sets no_new_privs, installs a seccomp filter (an allowlist:
 * read, write, memory management, exit, and one execveat of the model's own descriptor), then
 * executes the model from that descriptor. A crash, an allocation over the cap, a busy loop or a
 * forbidden system call ends that row alone with a negative status (row_proto.h). */
#pragma once
#include <stddef.h>
#include <stdint.h>

#define ROWBOX_MEMORY_CAP (16u * 1024 * 1024) /* bytes of address space per row */
#define ROWBOX_CPU_S 20u                       /* seconds of CPU per row */

struct rowbox_out {
    unsigned char *data; /* malloc'd */
    size_t len;
    int status; /* ROW_EXIT_* mapped: 0 exited ok, else a ROW_ST_* code */
};

/* Runs the model at model_fd (kept open by the caller) with `in` on its stdin; reads at most
 * out_max bytes of its stdout (more: the model is killed and out->status is ROW_ST_BADOUT). */
int rowbox_run(int model_fd, const void *in, size_t in_len, size_t out_max, struct rowbox_out *out);
