/* vmchan.h: the framing between the daemon and the guest agent of one microvm, carried over the
 * VM's virtio-serial port (docs/microvm.md, Channel). Shared by both sides of the wall; this file
 * allocates nothing and calls no syscall.
 * Wire format: core/frame16.h's 16-byte header with this channel's type table (vmchan.c); then
 * exactly len payload bytes. The RUN, RESULT, HOST_CALL and HOST_REPLY payloads ARE the run
 * payloads of core/runframe.h, so a snippet's request and answer are the same bytes at `process`
 * and at `vm`. It lives in src/guestio because its guest-byte decoder runs in the helper; the
 * microvm provider (host side) and its guest agent include it from below.
 *
 * Guest bytes are decoded only in the confined guestio helper (docs/privsep.md): it runs
 * mvc_decode_guest over the stream the VM writes and forwards each frame re-encoded by
 * mvc_canon_encode (from its decoded fields, so nothing of the guest's byte layout passes
 * through unexamined); the daemon takes exactly one complete frame with mvc_canon_decode. */
#pragma once
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "../core/frame16.h"
#include "../core/runframe.h"

enum mvc_type {
    /* host -> guest */
    MVC_SEED = 1,       /* u64 Math.random seed + 32 bytes for the guest kernel's pool */
    MVC_RUN = 2,        /* a quickjs RUN payload (qf_run) */
    MVC_HOST_REPLY = 3, /* a quickjs HOST_REPLY payload */
    MVC_PROBE = 4,      /* empty: run the negative probes (startup evidence only) */
    MVC_PROJECT = 5,    /* a project plan, see below */
    MVC_SESSION = 6,    /* u32 disk_mb, u32 languages (MVC_LANG_* bits): this VM is a session's */
    MVC_CELL = 7,       /* u32 timeout_ms, u32 language (MVC_LANG_*), code: answered by a RESULT */
    MVC_FILES = 8,      /* a cell's files for /work (see below): answered by a SESSION_STATUS */
    /* guest -> host */
    MVC_READY = 16,        /* text: "<kernel release>\n<cpu model>\n" (booted, engine warm) */
    MVC_RESULT = 17,       /* a quickjs RESULT payload */
    MVC_PROBE_RESULT = 18, /* text: one "name=observed" line per probe */
    MVC_HOST_CALL = 19,    /* a quickjs HOST_CALL payload */
    MVC_DIED = 20,         /* i32 wait status of the run's process that ended without a RESULT */
    MVC_SEEDED = 21,       /* empty: the seed is in (the guest is this run's own) */
    MVC_PROJECT_RESULT = 22, /* a project's report, see below */
    MVC_SESSION_READY = 23,  /* empty: /work is mounted, the hinted interpreters are starting */
    MVC_SESSION_STATUS = 24, /* u64 used bytes of /work and /tmp, u32 file, u32 errno (see below) */
};

/* Sessions (docs/sessions.md, microvm): a session VM answers many requests. Cell languages: */
#define MVC_LANG_JS 1u
#define MVC_LANG_PY 2u
#define MVC_SESSION_LEN 8u
#define MVC_CELL_FIXED 8u
/* FILES: u32 n_files (1..MVC_FILES_MAX), n x (u32 len, path, u32 len, content); at most
 * LIM_FILES_TOTAL_MAX content bytes. SESSION_STATUS follows every session request's answer
 * (after a CELL's or RUN's RESULT, as the answer to FILES): file is 0, or i when file i (1-based)
 * of a FILES could not be written, with its errno (1..4095; 0 exactly when file is 0). */
#define MVC_SESSION_STATUS_LEN 16u
#define MVC_ERRNO_MAX 4095u

/* Project limits (providers.md §1.4, §3.5). */
#define MVC_PATH_MAX 1024u
#define MVC_FILES_MAX 200u
#define MVC_STEPS_MAX 20u
#define MVC_STEP_MAX (16u * 1024)
#define MVC_ARTIFACTS_MAX 100u
#define MVC_ARTIFACTS_TOTAL_MAX (8u * 1024 * 1024)
#define MVC_STEP_OUT_MAX (1024u * 1024)         /* per stream per step */
#define MVC_STEPS_OUT_BUDGET (6u * 1024 * 1024)  /* all steps' output together */
#define MVC_ERROR_MAX 1200u
#define MVC_STEP_FIXED 20u
/* PROJECT: u32 timeout_ms; u32 n_files, n_files x (u32 len, path, u32 len, content); u32 n_steps,
 * n_steps x (u32 len, command); u32 n_artifacts, n x (u32 len, path). */
#define MVC_PROJECT_MAX (16u + MVC_FILES_MAX * (8 + MVC_PATH_MAX) + 4u * 1024 * 1024 + \
                         MVC_STEPS_MAX * (4 + MVC_STEP_MAX) + MVC_ARTIFACTS_MAX * (4 + MVC_PATH_MAX))
/* PROJECT_RESULT: u32 n_steps, n x (i32 exit, u8 flags (1 timed out, 2 stdout cut, 4 stderr cut),
 * u8[3] zero, u32 ms, u32 out_len, u32 err_len, out, err); u32 artifacts_truncated (0/1);
 * u32 n_artifacts, n x (u32 path_len, u32 len, path, content); u32 error_len, error (UTF-8 text:
 * a request-attributable setup failure, e.g. "illegal file path: x"; empty otherwise). */
#define MVC_PROJECT_RESULT_MAX (12u + MVC_STEPS_MAX * MVC_STEP_FIXED + MVC_STEPS_OUT_BUDGET + \
                                MVC_ARTIFACTS_MAX * (8 + MVC_PATH_MAX) + MVC_ARTIFACTS_TOTAL_MAX + 4 + MVC_ERROR_MAX)
#define MVC_SEED_LEN 40u
#define MVC_READY_MAX 512u
#define MVC_PROBE_RESULT_MAX 4096u

/* The cap of each type's payload (0 also for an unknown type). */
uint32_t mvc_max_len(uint16_t type);
/* Decodes a header and checks type (any direction), flags and len against the type's bounds. */
int mvc_hdr_decode(const uint8_t in[F16_HDR_LEN], struct f16_hdr *h);

/* One validated frame from the guest. Pointers point into the caller's buffer. */
struct mvc_frame {
    struct f16_hdr hdr;
    union {
        struct qf_result result;       /* MVC_RESULT */
        struct qf_host_call host_call; /* MVC_HOST_CALL */
        int32_t died_status;           /* MVC_DIED */
        struct {
            uint64_t used; /* bytes */
            uint32_t file, errnum;
        } status; /* MVC_SESSION_STATUS */
        struct {
            const uint8_t *p; /* the whole validated payload; walk it with mvc_project_next_* */
            uint32_t len, n_steps, n_artifacts;
            bool artifacts_truncated;
            const uint8_t *error; /* UTF-8 text without NUL */
            uint32_t error_len;
        } project; /* MVC_PROJECT_RESULT */
        struct {
            const uint8_t *p; /* printable ASCII and '\n' only */
            uint32_t len;
        } text; /* MVC_READY, MVC_PROBE_RESULT */
    } u;
};

enum mvc_decode_status {
    MVC_NEED_MORE = 0, /* buf holds a prefix of a frame that may still be valid */
    MVC_FRAME = 1,     /* *out is one complete valid frame of *used bytes */
    MVC_BAD = -1,      /* the guest broke the protocol: stop reading, kill the VM */
};
/* bytes -> validated frame. Accepts only guest->host types; a header that is invalid, or a
 * payload that does not decode to exactly its length, is MVC_BAD as soon as its bytes are in.
 * Never reads outside buf[0..len). */
enum mvc_decode_status mvc_decode_guest(const uint8_t *buf, size_t len, struct mvc_frame *out, size_t *used);

/* ---- the guestio split (issue 12) ---------------------------------------------------------- */
/* The largest canonical frame (a project's report). */
#define MVC_CANON_MAX (F16_HDR_LEN + MVC_PROJECT_RESULT_MAX)
/* The helper: a decoded guest frame re-encoded from its fields into out (F16_HDR_LEN +
 * f->hdr.len bytes); returns that size, or 0 when cap is too small or f is not one
 * mvc_decode_guest accepts. */
size_t mvc_canon_encode(uint8_t *out, size_t cap, const struct mvc_frame *f);
/* The daemon: exactly one complete frame of len bytes (header and payload), guest->host types
 * only, every length and field range re-checked; pointers point into p. 0 or -1. */
int mvc_canon_decode(const uint8_t *p, size_t len, struct mvc_frame *out);

/* Printable ASCII (0x20..0x7e) and '\n'. */
bool mvc_text_ok(const uint8_t *p, size_t len);

/* Walking a validated PROJECT_RESULT (mvc_decode_guest checked every length first). */
struct mvc_step {
    int32_t exit_code;
    bool timed_out, out_truncated, err_truncated;
    uint32_t ms;
    const uint8_t *out, *err;
    uint32_t out_len, err_len;
};
struct mvc_artifact {
    const uint8_t *path, *content;
    uint32_t path_len, len;
};
struct mvc_project_walk {
    struct f16_reader r;
    uint32_t steps_left, artifacts_left;
};
void mvc_project_walk_init(struct mvc_project_walk *w, const struct mvc_frame *f);
/* 1 with *s filled, 0 at the end of the steps. */
int mvc_project_next_step(struct mvc_project_walk *w, struct mvc_step *s);
/* Call after every step was walked. 1 with *a filled, 0 at the end. */
int mvc_project_next_artifact(struct mvc_project_walk *w, struct mvc_artifact *a);
