/* docker_test.c: the docker provider's configuration side, without dockerd: the lockdown spec,
 * the shipped seccomp profile, the configuration rules (DOCKER_HOST, image references, pinning,
 * guest uid, disk budget, image ENV), the constructor and its entry gate, the gVisor classifier.
 * The stream side (attach frames, plan, report, markers, outcomes) is docker_frames_test.c. */
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../../../tests/unit.h"
#include "internal.h"
#include "runner/sha256.h"

/* ---- lockdown -------------------------------------------------------------------------------- */

static json_t *spec_for(const char *runtime, const char *seccomp, enum dock_kind k)
{
    struct dock_lockdown l = {.memory_mb = 256,
                              .pids = 256,
                              .tmp_mb = 16,
                              .shm_mb = 16,
                              .work_mb = 128,
                              .uid = 61000,
                              .cpus = 1.5,
                              .runtime = runtime,
                              .seccomp = seccomp};
    const char *argv[] = {"-i", "PATH=/usr/bin:/bin", "/bin/sh", "-c", "script", "sh", "m", "-", "node", "-"};
    return dock_spec(&l, k,
                     "sha256:"
                     "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef",
                     argv, 10, 1234567890, "feedfacefeedface", NULL);
}

static bool has_string(json_t *arr, const char *s)
{
    size_t i;
    json_t *v;
    json_array_foreach(arr, i, v) if (json_is_string(v) && !strcmp(json_string_value(v), s)) return true;
    return false;
}

static void test_lockdown(void)
{
    json_t *j = spec_for("runc", "{\"defaultAction\":\"SCMP_ACT_ERRNO\"}", DOCK_SNIPPET);
    CHECK(j != NULL);
    json_t *h = json_object_get(j, "HostConfig");
    CHECK_STR(json_string_value(json_object_get(h, "NetworkMode")), "none");
    CHECK(json_is_true(json_object_get(h, "ReadonlyRootfs")));
    CHECK(json_array_size(json_object_get(h, "CapDrop")) == 1 && has_string(json_object_get(h, "CapDrop"), "ALL"));
    CHECK(json_object_get(h, "CapAdd") == NULL);
    json_t *sec = json_object_get(h, "SecurityOpt");
    CHECK(has_string(sec, "no-new-privileges"));
    CHECK(has_string(sec, "seccomp={\"defaultAction\":\"SCMP_ACT_ERRNO\"}")); /* the text, not a path */
    CHECK(json_integer_value(json_object_get(h, "Memory")) == 256LL * 1024 * 1024);
    CHECK(json_integer_value(json_object_get(h, "MemorySwap")) == json_integer_value(json_object_get(h, "Memory")));
    CHECK(json_integer_value(json_object_get(h, "PidsLimit")) == 256);
    CHECK(json_integer_value(json_object_get(h, "NanoCpus")) == 1500000000);
    json_t *t = json_object_get(h, "Tmpfs");
    CHECK_STR(json_string_value(json_object_get(t, "/tmp")), "rw,noexec,nosuid,nodev,size=16m");
    CHECK_STR(json_string_value(json_object_get(t, "/dev/shm")), "rw,noexec,nosuid,nodev,size=16m");
    CHECK_STR(json_string_value(json_object_get(t, "/dev/mqueue")), "ro,noexec,nosuid,nodev,size=4k");
    CHECK(json_object_get(t, "/work") == NULL); /* snippets get no /work */
    json_t *ul = json_object_get(h, "Ulimits");
    CHECK(json_array_size(ul) == 2);
    CHECK_STR(json_string_value(json_object_get(json_array_get(ul, 0), "Name")), "core");
    CHECK(json_integer_value(json_object_get(json_array_get(ul, 0), "Hard")) == 0);
    CHECK_STR(json_string_value(json_object_get(json_array_get(ul, 1), "Name")), "nofile");
    CHECK(json_integer_value(json_object_get(json_array_get(ul, 1), "Soft")) == 4096);
    CHECK(json_integer_value(json_object_get(json_array_get(ul, 1), "Hard")) == 4096);
    CHECK_STR(json_string_value(json_object_get(h, "IpcMode")), "private");
    CHECK_STR(json_string_value(json_object_get(json_object_get(h, "LogConfig"), "Type")), "none");
    CHECK_STR(json_string_value(json_object_get(h, "Runtime")), "runc");
    CHECK(json_is_false(json_object_get(h, "Privileged")));
    CHECK_STR(json_string_value(json_object_get(json_object_get(h, "RestartPolicy"), "Name")), "no");
    CHECK(json_object_get(h, "Binds") == NULL && json_object_get(h, "Mounts") == NULL);
    CHECK_STR(json_string_value(json_object_get(j, "Image")),
              "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef");
    CHECK(json_array_size(json_object_get(j, "Entrypoint")) == 1);
    CHECK_STR(json_string_value(json_array_get(json_object_get(j, "Entrypoint"), 0)), "/usr/bin/env");
    CHECK_STR(json_string_value(json_array_get(json_object_get(j, "Cmd"), 0)), "-i");
    CHECK(json_array_size(json_object_get(j, "Env")) == 0);
    CHECK_STR(json_string_value(json_object_get(j, "User")), "61000:61000");
    CHECK_STR(json_string_value(json_object_get(j, "WorkingDir")), "/");
    CHECK(json_is_true(json_object_get(j, "NetworkDisabled")));
    CHECK(json_is_true(json_object_get(j, "OpenStdin")) && json_is_true(json_object_get(j, "StdinOnce")));
    CHECK(json_is_false(json_object_get(j, "Tty")));
    CHECK(has_string(json_object_get(json_object_get(j, "Healthcheck"), "Test"), "NONE"));
    json_t *lab = json_object_get(j, "Labels");
    CHECK_STR(json_string_value(json_object_get(lab, DOCK_LABEL_DEADLINE)), "1234567890");
    CHECK_STR(json_string_value(json_object_get(lab, DOCK_LABEL)), "feedfacefeedface");
    json_decref(j);

    /* runsc: no seccomp profile is sent; projects get /work */
    j = spec_for("runsc", NULL, DOCK_PROJECT);
    h = json_object_get(j, "HostConfig");
    sec = json_object_get(h, "SecurityOpt");
    CHECK(json_array_size(sec) == 1 && has_string(sec, "no-new-privileges"));
    CHECK_STR(json_string_value(json_object_get(h, "Runtime")), "runsc");
    CHECK_STR(json_string_value(json_object_get(json_object_get(h, "Tmpfs"), "/work")),
              "rw,noexec,nosuid,nodev,size=128m,mode=1777");
    json_decref(j);

    struct dock_lockdown l = {.memory_mb = 256,
                              .pids = 256,
                              .tmp_mb = 16,
                              .shm_mb = 16,
                              .work_mb = 128,
                              .uid = 61000,
                              .cpus = 1,
                              .runtime = "runc",
                              .seccomp = "{}"};
    static struct plm_evidence ev;
    CHECK(dock_lockdown_lines(&l, "shipped", &ev) == 0);
    bool seen_mem = false, seen_sec = false;
    for (size_t i = 0; i < ev.n_confinement; i++) {
        seen_mem |= strstr(ev.confinement[i], "Memory 256 MiB = MemorySwap") != NULL;
        seen_sec |= strstr(ev.confinement[i], "seccomp shipped") != NULL;
    }
    CHECK(seen_mem && seen_sec);

    /* a granted run: the same walls plus exactly the two bind mounts */
    const char *argv[] = {"-i", "PATH=/usr/bin:/bin", "/bin/sh", "-c", "script", "sh", "m", "-", "node", "-"};
    struct dock_grant_paths g = {.sock = "/run/plimsoll/plimsoll-broker-abc/host-api.sock",
                                 .preload = "/run/plimsoll/plimsoll-broker-abc/host-api.mjs"};
    j = dock_spec(&l, DOCK_SNIPPET, "sha256:00", argv, 10, 1, "feedfacefeedface", &g);
    h = json_object_get(j, "HostConfig");
    json_t *m = json_object_get(h, "Mounts");
    CHECK(json_array_size(m) == 2 && json_object_get(h, "Binds") == NULL);
    json_t *m0 = json_array_get(m, 0), *m1 = json_array_get(m, 1);
    CHECK_STR(json_string_value(json_object_get(m0, "Type")), "bind");
    CHECK_STR(json_string_value(json_object_get(m0, "Source")), g.sock);
    CHECK_STR(json_string_value(json_object_get(m0, "Target")), "/run/host-api.sock");
    CHECK(json_is_false(json_object_get(m0, "ReadOnly"))); /* connect(2) needs write access */
    CHECK_STR(json_string_value(json_object_get(m1, "Source")), g.preload);
    CHECK_STR(json_string_value(json_object_get(m1, "Target")), "/run/plimsoll-host.mjs");
    CHECK(json_is_true(json_object_get(m1, "ReadOnly")));
    CHECK_STR(json_string_value(json_object_get(json_object_get(m1, "BindOptions"), "Propagation")), "rprivate");
    CHECK_STR(json_string_value(json_object_get(h, "NetworkMode")), "none"); /* (spec) even with a grant */
    CHECK(json_is_true(json_object_get(j, "NetworkDisabled")) && json_is_true(json_object_get(h, "ReadonlyRootfs")));
    json_decref(j);

    /* a session's container: its grant directory, one bind mount, and no socket named at start */
    struct dock_grant_paths sg = {.session_dir = "/run/plimsoll/plimsoll-session-1-abcdef"};
    j = dock_spec(&l, DOCK_SESSION, "sha256:00", argv, 10, 1, "feedfacefeedface", &sg);
    h = json_object_get(j, "HostConfig");
    m = json_object_get(h, "Mounts");
    CHECK(json_array_size(m) == 1);
    m0 = json_array_get(m, 0);
    CHECK_STR(json_string_value(json_object_get(m0, "Source")), sg.session_dir);
    CHECK_STR(json_string_value(json_object_get(m0, "Target")), "/run/plimsoll-session");
    CHECK_STR(json_string_value(json_object_get(json_object_get(m0, "BindOptions"), "Propagation")), "rprivate");
    CHECK_STR(json_string_value(json_object_get(h, "NetworkMode")), "none");
    json_decref(j);
}

/* ---- the shipped seccomp profile (providers.md §3.2, §8 item 30) ------------------------------- */

static json_t *rule_for(json_t *prof, const char *name, const char *action)
{
    size_t i;
    json_t *r;
    json_array_foreach(json_object_get(prof, "syscalls"), i, r)
    {
        if (action && strcmp(json_string_value(json_object_get(r, "action")), action))
            continue;
        if (has_string(json_object_get(r, "names"), name))
            return r;
    }
    return NULL;
}

static void test_seccomp(void)
{
    json_t *p = json_loadb(dock_seccomp_shipped, dock_seccomp_shipped_len, JSON_REJECT_DUPLICATES, NULL);
    CHECK(p != NULL);
    CHECK_STR(json_string_value(json_object_get(p, "defaultAction")), "SCMP_ACT_ERRNO");
    CHECK(json_integer_value(json_object_get(p, "defaultErrnoRet")) == 1);
    CHECK(!has_string(json_object_get(p, "architectures"), "SCMP_ARCH_X86")); /* no 32-bit side door */
    static const char *const denied[] = {"ptrace",
                                         "process_vm_readv",
                                         "process_vm_writev",
                                         "io_uring_setup",
                                         "io_uring_enter",
                                         "io_uring_register",
                                         "userfaultfd",
                                         "perf_event_open",
                                         "bpf",
                                         "keyctl",
                                         "add_key",
                                         "request_key",
                                         "unshare",
                                         "setns",
                                         "mount",
                                         "umount2",
                                         "pivot_root",
                                         "chroot",
                                         "kexec_load",
                                         "init_module",
                                         "finit_module",
                                         "reboot",
                                         "swapon",
                                         "modify_ldt",
                                         "name_to_handle_at",
                                         "open_by_handle_at"};
    int n_denied = 0, n_leak = 0;
    for (size_t i = 0; i < sizeof denied / sizeof *denied; i++) {
        n_denied += rule_for(p, denied[i], "SCMP_ACT_ERRNO") != NULL;
        n_leak += rule_for(p, denied[i], "SCMP_ACT_ALLOW") != NULL;
    }
    CHECK(n_denied == (int)(sizeof denied / sizeof *denied));
    CHECK(n_leak == 0);
    json_t *c3 = rule_for(p, "clone3", NULL);
    CHECK(c3 && !strcmp(json_string_value(json_object_get(c3, "action")), "SCMP_ACT_ERRNO") &&
          json_integer_value(json_object_get(c3, "errnoRet")) == 38); /* ENOSYS: libc falls back */
    for (int k = 0; k < 2; k++) {
        json_t *r = rule_for(p, k ? "socketpair" : "socket", "SCMP_ACT_ALLOW");
        json_t *a = json_array_get(json_object_get(r, "args"), 0);
        CHECK(r && json_array_size(json_object_get(r, "args")) == 1);
        CHECK(json_integer_value(json_object_get(a, "index")) == 0 &&
              json_integer_value(json_object_get(a, "value")) == 1 &&
              !strcmp(json_string_value(json_object_get(a, "op")), "SCMP_CMP_EQ")); /* AF_UNIX only */
    }
    json_t *cl = rule_for(p, "clone", "SCMP_ACT_ALLOW");
    json_t *ca = json_array_get(json_object_get(cl, "args"), 0);
    CHECK(cl && json_integer_value(json_object_get(ca, "value")) == 0x7e020000 &&
          json_integer_value(json_object_get(ca, "valueTwo")) == 0);
    static const char *const essential[] = {"read",       "write",        "openat",     "close",         "mmap",
                                            "mprotect",   "munmap",       "brk",        "futex",         "execve",
                                            "exit_group", "rt_sigaction", "epoll_wait", "clock_gettime", "getrandom",
                                            "wait4",      "pipe2",        "fstat",      "statx",         "madvise"};
    int n_ess = 0;
    for (size_t i = 0; i < sizeof essential / sizeof *essential; i++)
        n_ess += rule_for(p, essential[i], "SCMP_ACT_ALLOW") != NULL;
    CHECK(n_ess == (int)(sizeof essential / sizeof *essential));
    json_decref(p);
    size_t allowed = 0;
    struct plm_err e = {0};
    CHECK(dock_seccomp_check(dock_seccomp_shipped, dock_seccomp_shipped_len, &allowed, &e) == 0);
    CHECK(allowed > 200);
    const char *allow_all =
        "{\"defaultAction\":\"SCMP_ACT_ALLOW\",\"syscalls\":[{\"names\":[\"x\"],\"action\":\"SCMP_ACT_ERRNO\"}]}";
    CHECK(dock_seccomp_check(allow_all, strlen(allow_all), &allowed, &e) < 0);
    CHECK(dock_seccomp_check("[]", 2, &allowed, &e) < 0);
    CHECK(dock_seccomp_check("{\"defaultAction\":\"SCMP_ACT_ERRNO\"}", 34, &allowed, &e) < 0);
}

/* ---- configuration rules --------------------------------------------------------------------- */

static void test_host(void)
{
    char sock[108];
    struct plm_err e = {0};
    static const char *const remote[] = {"tcp://10.0.0.1:2375",
                                         "ssh://user@host",
                                         "https://docker.example:2376",
                                         "docker",
                                         "npipe:////./pipe/docker_engine",
                                         "unix://",
                                         "unix://relative"};
    for (size_t i = 0; i < sizeof remote / sizeof *remote; i++) {
        CHECK(dock_parse_host(remote[i], sock, &e) < 0);
        CHECK(strstr(e.msg, "remote daemon") != NULL);
    }
    CHECK(dock_parse_host("unix:///run/user/docker.sock", sock, &e) == 0);
    CHECK_STR(sock, "/run/user/docker.sock");
    CHECK(dock_parse_host("/var/run/docker.sock", sock, &e) == 0);
    CHECK_STR(sock, "/var/run/docker.sock");
    CHECK(dock_parse_host(NULL, sock, &e) == 0);
    CHECK_STR(sock, "/var/run/docker.sock");
    CHECK(dock_parse_host("", sock, &e) == 0);
}

static void test_refs(void)
{
    struct plm_err e = {0};
    CHECK(dock_ref_check("IMG", "--runtime=runc", &e) < 0);
    CHECK(dock_ref_check("IMG", "-network=host", &e) < 0);
    CHECK(dock_ref_check("IMG", "", &e) < 0);
    CHECK(dock_ref_check("IMG", NULL, &e) < 0);
    CHECK(dock_ref_check("IMG", " node", &e) < 0);
    CHECK(dock_ref_check("IMG", "node ", &e) < 0);
    CHECK(dock_ref_check("IMG", "node\n", &e) < 0);
    CHECK(dock_ref_check("IMG", "node:22-alpine", &e) == 0);
    CHECK(dock_ref_check("IMG", "plimsoll/snippet:latest", &e) == 0);
    CHECK(dock_ref_check("IMG", "registry.example:5000/team/node@sha256:abcd", &e) == 0);

    const char *hex = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";
    char buf[256];
    snprintf(buf, sizeof buf, "node@sha256:%s", hex);
    CHECK(dock_ref_pinned(buf));
    snprintf(buf, sizeof buf, "registry.example/team/node:22@sha256:%s", hex);
    CHECK(dock_ref_pinned(buf));
    CHECK(!dock_ref_pinned("node:22-alpine"));
    CHECK(!dock_ref_pinned("node@sha256:0123abcd")); /* short */
    snprintf(buf, sizeof buf, "node@sha256:%.63sg", hex);
    CHECK(!dock_ref_pinned(buf)); /* non-hex */
    snprintf(buf, sizeof buf, "node@sha256:%.63sA", hex);
    CHECK(!dock_ref_pinned(buf)); /* upper case */
    snprintf(buf, sizeof buf, "@sha256:%s", hex);
    CHECK(!dock_ref_pinned(buf)); /* no repository */
    snprintf(buf, sizeof buf, "node@sha256:%s:latest", hex);
    CHECK(!dock_ref_pinned(buf)); /* trailing suffix */
    snprintf(buf, sizeof buf, "node@sha512:%s", hex);
    CHECK(!dock_ref_pinned(buf));

    CHECK(dock_env_check("PATH=/usr/bin", &e) == 0);
    CHECK(dock_env_check("NODE_VERSION=22.1.0", &e) == 0);
    CHECK(dock_env_check("EMPTY=", &e) == 0);
    CHECK(dock_env_check("LD_PRELOAD=/x.so", &e) < 0);
    CHECK(dock_env_check("LD_LIBRARY_PATH=/x", &e) < 0);
    CHECK(dock_env_check("GLIBC_TUNABLES=x", &e) < 0);
    CHECK(dock_env_check("LOCPATH=/x", &e) < 0);
    CHECK(dock_env_check("NLSPATH=/x", &e) < 0);
    CHECK(dock_env_check("GCONV_PATH=/x", &e) < 0);
    CHECK(dock_env_check("NOEQUALS", &e) < 0);
    CHECK(dock_env_check("=x", &e) < 0);
    CHECK(dock_env_check("-u=x", &e) < 0); /* would read as a flag to env */
    CHECK(dock_env_check("1A=x", &e) < 0);
    CHECK(dock_env_check("A=x\ny", &e) < 0);
}

static void write_file(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    fputs(text, f);
    fclose(f);
}

static void test_uid(void)
{
    char dir[] = "/tmp/plm-docker-test-XXXXXX";
    CHECK(mkdtemp(dir) != NULL);
    char pw[64], gr[64];
    snprintf(pw, sizeof pw, "%s/passwd", dir);
    snprintf(gr, sizeof gr, "%s/group", dir);
    write_file(pw, "root:x:0:0:root:/root:/bin/sh\nalice:x:1000:61002:a:/home/a:/bin/sh\nbob:x:50000:100::/:/bin/sh\n");
    write_file(gr, "root:x:0:\nstaff:x:50010:alice\n");
    struct plm_err e = {0};
    uint32_t uid = 0;
    CHECK(dock_guest_uid(NULL, pw, gr, &uid, &e) == 0 && uid == 61000);
    CHECK(dock_guest_uid("", pw, gr, &uid, &e) == 0 && uid == 61000);
    CHECK(dock_guest_uid("40000", pw, gr, &uid, &e) == 0 && uid == 40000);
    CHECK(dock_guest_uid("0", pw, gr, &uid, &e) < 0);
    CHECK(dock_guest_uid("65533", pw, gr, &uid, &e) < 0);
    CHECK(dock_guest_uid("-1", pw, gr, &uid, &e) < 0);
    CHECK(dock_guest_uid("61000x", pw, gr, &uid, &e) < 0);
    CHECK(dock_guest_uid("many", pw, gr, &uid, &e) < 0);
    CHECK(dock_guest_uid("60001", pw, gr, &uid, &e) < 0); /* systemd band */
    CHECK(dock_guest_uid("60000", pw, gr, &uid, &e) < 0); /* uid+1 in the band */
    CHECK(dock_guest_uid("61183", pw, gr, &uid, &e) < 0); /* uid+1 = 61184 */
    CHECK(dock_guest_uid("60577", pw, gr, &uid, &e) < 0); /* 60578 starts a band: uid+1 is in it */
    CHECK(dock_guest_uid("60576", pw, gr, &uid, &e) == 0 && uid == 60576);
    CHECK(dock_guest_uid("50000", pw, gr, &uid, &e) < 0); /* a passwd uid */
    CHECK(strstr(e.msg, "exists on this host") != NULL);
    CHECK(dock_guest_uid("49999", pw, gr, &uid, &e) < 0); /* uid+1 is a passwd uid */
    CHECK(dock_guest_uid("61001", pw, gr, &uid, &e) < 0); /* uid+1 = alice's primary gid */
    CHECK(dock_guest_uid("50010", pw, gr, &uid, &e) < 0); /* a group gid */
    CHECK(dock_guest_uid("61000", "/nonexistent/passwd", "/nonexistent/group", &uid, &e) == 0);
    unlink(pw);
    unlink(gr);
    rmdir(dir);

    uint32_t work = 0;
    CHECK(dock_disk_budget(0, 16, 16, &work, &e) == 0 && work == 128);
    CHECK(dock_disk_budget(200, 16, 16, &work, &e) == 0 && work == 168);
    CHECK(dock_disk_budget(33, 16, 16, &work, &e) == 0 && work == 1);
    CHECK(dock_disk_budget(32, 16, 16, &work, &e) < 0);
}

/* ---- the constructor talks to no daemon ------------------------------------------------------ */

/* A grant's call that is never reached: the gate refuses before anything runs. */
static void never_call(void *cb, const char *method, const char *target, const uint8_t *body, size_t len,
                       struct plm_host_reply *out)
{
    (void)cb, (void)method, (void)target, (void)body, (void)len;
    out->status = 500;
}

static void test_constructor(void)
{
    struct dock_config c = {.image = "plimsoll/snippet:latest",
                            .project_image = "plimsoll/project:latest",
                            .docker_host = "unix:///nonexistent/plimsoll-test.sock",
                            .guest_uid = "61000"};
    struct plm_err e = {0};
    struct plm_provider *p = dock_provider_new(&c, &e);
    CHECK(p != NULL);
    if (p) {
        CHECK(p->ops->tier(p) == PLM_TIER_CONTAINER);
        struct plm_describe d;
        p->ops->describe(p, &d);
        CHECK_STR(d.sandbox, "docker");
        CHECK(d.evidence == NULL && !strcmp(d.policy, "") && d.supports_project);
        CHECK(!d.supports_javascript_grants && !d.supports_project_grants); /* nothing proved yet */
        CHECK(d.javascript.default_timeout_ms == 5000 && d.javascript.max_timeout_ms == 30000);
        CHECK(d.project.default_timeout_ms == 30000 && d.project.max_timeout_ms == 120000);
        CHECK(d.memory_mb == 256 && d.pids == 256 && d.cpus == 1.0 && d.disk_mb == 160);
        CHECK(p->ops->preflight(p, &e) < 0 && e.kind == PLM_E_UNAVAILABLE); /* dockerd absent */
        /* a run before the proof: refused by the floor first, otherwise not dispatched at all */
        struct plm_request req = {.protocol = 3, .kind = PLM_KIND_JAVASCRIPT, .js = {.code = "1"}};
        struct plm_run_ctx ctx = {.floor = PLM_TIER_KERNEL, .timeout_ms = 1000};
        struct plm_result res = {0};
        CHECK(p->ops->run_javascript(p, &ctx, &req, &res, &e) < 0 && e.kind == PLM_E_ISOLATION &&
              e.refusal == PLM_REFUSAL_ISOLATION);
        ctx.floor = PLM_TIER_UNKNOWN;
        CHECK(p->ops->run_javascript(p, &ctx, &req, &res, &e) < 0 && e.kind == PLM_E_UNAVAILABLE);
        /* a grant before the socket was proven: refused unsupported, nothing ran */
        struct plm_host_api grant = {.profile = "x", .client_js = "", .node_preload = "", .call = never_call};
        ctx.host_api = &grant;
        CHECK(p->ops->run_javascript(p, &ctx, &req, &res, &e) < 0 && e.kind == PLM_E_UNSUPPORTED &&
              e.refusal == PLM_REFUSAL_UNSUPPORTED);
        /* a grant handed over without its call is a daemon bug: fails closed (core's gate) */
        grant.call = NULL;
        CHECK(p->ops->run_javascript(p, &ctx, &req, &res, &e) < 0 && e.kind == PLM_E_INTERNAL &&
              e.refusal == PLM_REFUSAL_NONE);
        ctx.host_api = NULL;
        req.js.code = "";
        CHECK(p->ops->run_javascript(p, &ctx, &req, &res, &e) < 0 && e.kind == PLM_E_INVALID); /* validated first */
        plm_provider_free(p);
    }
    struct dock_config bad = c;
    bad.docker_host = "tcp://127.0.0.1:2375";
    CHECK(dock_provider_new(&bad, &e) == NULL && strstr(e.msg, "remote daemon"));
    bad = c;
    bad.seccomp_path = "unconfined";
    CHECK(dock_provider_new(&bad, &e) == NULL && strstr(e.msg, "unconfined"));
    bad = c;
    bad.seccomp_path = "/nonexistent/profile.json";
    CHECK(dock_provider_new(&bad, &e) == NULL);
    bad = c;
    bad.grant_dir = "relative/dir";
    CHECK(dock_provider_new(&bad, &e) == NULL && strstr(e.msg, "grant socket directory"));
    bad = c;
    bad.runtime = "run sc";
    CHECK(dock_provider_new(&bad, &e) == NULL);
    bad = c;
    bad.image = "--runtime=runc";
    CHECK(dock_provider_new(&bad, &e) == NULL);
    bad = c;
    bad.require_pinned = true;
    CHECK(dock_provider_new(&bad, &e) == NULL && strstr(e.msg, "not pinned"));
    bad = c;
    bad.disk_mb = 20;
    CHECK(dock_provider_new(&bad, &e) == NULL);
    bad = c;
    bad.guest_uid = "0";
    CHECK(dock_provider_new(&bad, &e) == NULL);
    bad = c;
    bad.runtime = "runsc";
    bad.memory_mb = 512;
    bad.pids = 64;
    bad.cpus = 0.5;
    bad.disk_mb = 100;
    p = dock_provider_new(&bad, &e);
    CHECK(p != NULL);
    if (p) {
        struct plm_describe d;
        p->ops->describe(p, &d);
        CHECK(d.tier == PLM_TIER_CONTAINER); /* runsc, but nothing proved yet */
        CHECK(d.memory_mb == 512 && d.pids == 64 && d.cpus == 0.5 && d.disk_mb == 100);
        plm_provider_free(p);
    }
}

/* The platform verdict (gvisor.c): the tree decides, runsc's own statement may only agree. */
static void test_gvisor(void)
{
    CHECK_STR(dock_gvisor_classify(4, 0), "systrap");
    CHECK_STR(dock_gvisor_classify(2, 3), "ptrace");
    CHECK_STR(dock_gvisor_classify(0, 0), "unknown");
    struct dock_gvisor g = {.observed = "systrap", .stated = "systrap"};
    CHECK(dock_gvisor_agrees(&g));
    snprintf(g.stated, sizeof g.stated, "ptrace"); /* runsc says ptrace, the stubs run untraced */
    CHECK(!dock_gvisor_agrees(&g));
    snprintf(g.stated, sizeof g.stated, "state file unreadable (not root)");
    CHECK(dock_gvisor_agrees(&g));
    snprintf(g.observed, sizeof g.observed, "unknown"); /* no stubs seen: never passes */
    CHECK(!dock_gvisor_agrees(&g));
    /* A process that is not a sandbox: no children of our own, so nothing to name. */
    dock_gvisor_observe((long)getpid(), "0000", &g);
    CHECK_STR(g.observed, "unknown");
    CHECK(!dock_gvisor_agrees(&g));
}

int main(void)
{
    test_gvisor();
    test_lockdown();
    test_seccomp();
    test_host();
    test_refs();
    test_uid();
    test_constructor();
    return unit_done();
}
