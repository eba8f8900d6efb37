/* sessframe.h: the frames between the host and a docker session's agent (images/session/agent.py).
 * Host -> agent: a 4-byte big-endian length and a JSON object (dock_sf_request). Agent -> host:
 * "PLSA", a 4-byte big-endian length and a JSON object (dock_sf_parse). The agent runs inside the
 * container, where the session's code may have rewritten it: every reply is hostile, decoded with
 * a cap on its length, on each output stream and on every field, and rejected whole when any
 * field is missing, of the wrong type or out of range. Pure: no I/O, no globals. The fuzzer
 * (fuzz/fuzz_docker_sessframe.c) drives dock_sf_parse. */
#pragma once
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "../../core/request.h"

#define DOCK_SF_MAGIC "PLSA"
#define DOCK_SF_HDR 8u
#define DOCK_SF_REPLY_MAX (512u * 1024) /* two base64 streams of LIM_OUTPUT_MAX and the fields */

enum dock_sf_status {
    DOCK_SF_READY = 1, /* the agent is up (id 0, once, before any request) */
    DOCK_SF_RAN,       /* the code ran: exit, flags and output are the result */
    DOCK_SF_FILES,     /* file `file` (0-based) could not be written (errno_name); no code ran */
    DOCK_SF_NOINTERP,  /* the language's interpreter could not be started; no code ran */
};

struct dock_sf_reply {
    uint64_t id;
    enum dock_sf_status status;
    int32_t exit_code;
    bool timed_out, started, ended, out_trunc, err_trunc;
    struct plm_bytes out, err; /* malloc'd (NULL when empty), owned by the reply */
    uint64_t disk;             /* used bytes of /work, /tmp and /dev/shm after the call */
    uint32_t file;             /* DOCK_SF_FILES only */
    char errno_name[16];       /* DOCK_SF_FILES only: "ENOSPC", ... ([A-Z0-9] only) */
    bool grants;               /* DOCK_SF_READY only: the agent runs a snippet with a grant */
};
void dock_sf_reply_done(struct dock_sf_reply *r);

/* 1: a whole frame decoded into r and *used bytes consumed; 0: more bytes are needed (nothing
 * filled); -1: malformed (wrong magic, length over DOCK_SF_REPLY_MAX, undecodable body). */
int dock_sf_parse(const uint8_t *buf, size_t len, size_t *used, struct dock_sf_reply *r);

/* The request frame (length prefix included), malloc'd into *out. op "cell" or "snippet";
 * language NULL for a snippet. grant_sock/grant_preload: a granted snippet's socket and node
 * preload as the container sees them (both NULL without a grant). -1 when out of memory or a
 * file is not valid UTF-8 text. */
int dock_sf_request(uint64_t id, const char *op, const char *language, const char *code, const struct plm_file *files,
                    size_t n_files, uint32_t timeout_ms, uint32_t cap, const char *grant_sock,
                    const char *grant_preload, uint8_t **out, size_t *len);
