/* mv_int.h: the microvm provider's internals, shared by its host-side files only. */
#pragma once
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "../../core/clock.h"
#include "../../core/evidence.h"
#include "../../core/provider.h"
#include "../../guestio/vmchan.h"
#include "jail.h"
#include "microvm.h"

#define MV_BOOT_TIMEOUT_MS 90000u    /* cold boot to READY under a loaded TCG host */
#define MV_KVM_PROBE_TIMEOUT_MS 8000u /* a KVM guest that has not said READY by then never will */
#define MV_SEED_TIMEOUT_MS 20000u    /* restore (or boot) to SEEDED */
#define MV_GRACE_MS 3000u            /* after a run's deadline before the VM is killed */
#define MV_SAVE_TIMEOUT_MS 60000u
#define MV_MODELS_MAX 8u /* model names Describe lists (module.c) */

enum mv_boot {
    MV_BOOT_COLD,     /* boot the kernel; wait for READY */
    MV_BOOT_TEMPLATE, /* as cold, with a QMP monitor to save it */
    MV_BOOT_RESTORE,  /* -incoming from the template's state */
};

/* Reads guest frames from one VM through its guestio stream helper (vm.c, docs/privsep.md). */
struct gio_stream;
struct mv_reader {
    struct gio_stream *gs; /* started at the first read; closed by mv_vm_kill */
    bool failed;           /* the channel broke: every later read fails */
};

/* One VM: a jailed QEMU and our ends of its sockets. Single use. */
struct mv_vm {
    pid_t pid;  /* QEMU (owned: mv_vm_kill kills and reaps it) */
    int chan;   /* virtio-serial socket (ours) */
    int qmp;    /* QMP socket (ours), template only; else -1 */
    int errp;   /* read end of QEMU's stdout/stderr pipe */
    struct mv_reader rd;
    uint64_t seq;
    int64_t spawned_ns;
    int64_t boot_ms; /* spawn to READY (cold) or to SEEDED (restore) */
    char ready[MVC_READY_MAX + 1];
};

struct mv_state {
    struct mv_config cfg; /* resolved: no zeros */
    char kernel_path[4096], initrd_path[4096];
    char disk_path[4096]; /* project VMs: node's read-only image ("" for snippet VMs: no disk) */
    char identity[160]; /* microvm:sha256:<hex over kernel + initramfs (+ the disk image)> */
    char qemu_version[96];
    uint32_t tsc_khz;
    bool kvm;           /* the accelerator in use */
    char accel_note[160];
    struct mv_jail jail;
    int template_fd;    /* sealed memfd with the saved template state; -1: cold boots only */
    int64_t save_ms, boot_ms, restore_ms;
    char guest_ready[MVC_READY_MAX + 1]; /* the READY text of the template (or first cold) boot */
    struct mv_pool *pool;
    /* Projects' VMs: the same kernel and initramfs plus node's read-only disk, with their own
     * jail, template and pool; NULL inside that state itself. Its checks go on this state's card. */
    struct mv_state *proj;
    struct plm_evidence ev;
    int proven; /* atomic */
    int python_proven; /* atomic; project VMs imported numpy, pandas, matplotlib at startup (smoke.c) */
    /* Project state only (module.c): the models the startup proof listed on the disk, and whether
     * its Lorenz row gave the pinned checksum. Written before anything is served. */
    char models[MV_MODELS_MAX][65];
    size_t n_models;
    int module_proven; /* atomic */
};

/* microvm.c: (re)builds s->jail for the accelerator (gid: /dev/kvm's group under KVM). */
int mv_state_jail(struct mv_state *s, bool kvm, gid_t gid, struct plm_err *err);

/* vm.c */
int mv_vm_start(struct mv_state *s, enum mv_boot how, bool kvm, uint32_t boot_timeout_ms, struct mv_vm *vm,
                struct plm_err *err);
/* Sends SEED (fresh getrandom bytes) and waits for SEEDED. */
int mv_vm_seed(struct mv_vm *vm, uint32_t timeout_ms, struct plm_err *err);
void mv_vm_kill(struct mv_vm *vm);
/* seq 0: a new request (the next seq); else the seq of the request this frame answers. */
int mv_vm_send(struct mv_vm *vm, uint16_t type, uint64_t seq, const void *a, size_t alen, const void *b, size_t blen,
               const void *c, size_t clen, struct plm_err *err);
/* Next valid guest frame before deadline_ns (CLOCK_MONOTONIC); -1 with err on a protocol
 * violation, EOF (QEMU gone) or the deadline (err->errnum == ETIMEDOUT). The frame's pointers
 * stay valid until the next call. */
int mv_vm_read(struct mv_vm *vm, int64_t deadline_ns, struct mvc_frame *f, struct plm_err *err);

/* qmp.c: one QMP monitor connection (fd ours); events are skipped. */
#define MV_QMP_LINE_MAX 4096
struct mv_qmp {
    int fd;
    char buf[MV_QMP_LINE_MAX];
    size_t len;
    int64_t deadline_ns; /* CLOCK_MONOTONIC bound of every read */
};
/* One command (with an fd in SCM_RIGHTS when fd >= 0); its answer line in out, which must not be
 * an error. The greeting, the first line, is skipped as a non-answer. */
int mv_qmp_cmd(struct mv_qmp *q, const char *cmd, int fd, char *out, size_t out_len, struct plm_err *err);

/* snapshot.c */
int mv_snapshot_save(struct mv_state *s, struct plm_err *err);

/* pool.c */
struct mv_pool *mv_pool_new(struct mv_state *s, uint32_t size, struct plm_err *err);
/* A seeded VM for one run: from the pool, else started now. */
int mv_pool_take(struct mv_pool *p, struct mv_vm *vm, struct plm_err *err);
/* A VM started by the pool's own thread (which lives until free): a session's VM outlives the
 * thread that opened it, and a VM dies with the thread that started it (jail.c). Waits up to
 * timeout_ms for one. */
int mv_pool_take_parked(struct mv_pool *p, uint32_t timeout_ms, struct mv_vm *vm, struct plm_err *err);
void mv_pool_free(struct mv_pool *p);

/* run.c */
int mv_run_snippet(struct mv_state *s, struct mv_vm *vm, const char *code, size_t len, const struct plm_host_api *api,
                   uint32_t timeout_ms, struct plm_js_result *out, int64_t *ms, struct plm_err *err);

int mv_run_project(struct mv_state *s, struct mv_vm *vm, const struct plm_request *req, uint32_t timeout_ms,
                   struct plm_project_result *pr, int64_t *ms, struct plm_err *err);

/* session.c: the session ops (provider.h) */
void mv_session_env(struct plm_provider *p, struct plm_payload_env *e);
int mv_session_open(struct plm_provider *p, const struct plm_session_spec *spec, struct plm_session **out,
                    struct plm_session_opened *info, struct plm_err *err);
int mv_session_run(struct plm_provider *p, struct plm_session *h, const struct plm_run_ctx *ctx,
                   const struct plm_request *req, struct plm_result *out, enum plm_session_end *ended,
                   struct plm_err *err);
int mv_session_run_cell(struct plm_provider *p, struct plm_session *h, const struct plm_run_ctx *ctx,
                        const struct plm_request *req, struct plm_result *out, enum plm_session_end *ended,
                        struct plm_err *err);
int mv_session_suspend(struct plm_provider *p, struct plm_session *h, bool *holds_memory, struct plm_err *err);
int mv_session_close(struct plm_provider *p, struct plm_session *h, struct plm_err *err);

/* smoke.c */
/* A seeded VM of s for a startup proof (restored from s's template, or booted cold; no pool). */
int mv_proof_vm(struct mv_state *s, struct mv_vm *vm, struct plm_err *err);
/* Proves s (snippets, probes) and s->proj (its template, a node project step). */
int mv_prove(struct mv_state *s, struct plm_err *err);

/* module.c */
/* One module run (req validated, floor checked) in a project VM; fills out->module. */
int mv_run_module(struct mv_state *s, const struct plm_run_ctx *ctx, const struct plm_request *req,
                  struct plm_result *out, struct plm_err *err);
/* The module proof in a project VM (on s's card): the model list and the pinned Lorenz row. */
int mv_module_proof(struct mv_state *s, struct plm_err *err);
/* Describe's module environment, once proven. */
void mv_module_env(struct mv_state *s, struct plm_describe *d);
