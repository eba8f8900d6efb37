/* posture_test.c: the docker host posture (posture.c) on canned /info answers, honest and hostile,
 * the peer uid of a real unix socket, the LSM reading of a canned inspect answer, and the card
 * lines. No dockerd needed. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "../../../tests/unit.h"
#include "internal.h"

/* Parses `text` as /info with peer uid `uid`: the return code, the posture in *p. */
static int from(const char *text, long uid, struct dock_posture *p, struct plm_err *err)
{
    json_error_t je;
    json_t *j = json_loads(text, JSON_DECODE_ANY, &je);
    memset(err, 0, sizeof *err);
    int r = dock_posture_from_info(j, uid, p, err);
    json_decref(j);
    return r;
}

static void test_modes(void)
{
    struct dock_posture p;
    struct plm_err err;
    /* Docker 20.10 on Debian, rootful, as this machine's daemon answers */
    const char *rootful = "{\"ServerVersion\":\"20.10.24+dfsg1\",\"CgroupVersion\":\"2\",\"CgroupDriver\":\"systemd\","
                          "\"SecurityOptions\":[\"name=apparmor\",\"name=seccomp,profile=default\",\"name=cgroupns\"]}";
    CHECK(from(rootful, 0, &p, &err) == 0);
    CHECK(p.mode == DOCK_MODE_ROOTFUL);
    CHECK_STR(dock_mode_name(p.mode), "rootful");
    CHECK(p.apparmor && !p.selinux);
    CHECK_STR(p.seccomp_default, "default");
    CHECK_STR(p.cgroup_version, "2");
    CHECK_STR(p.cgroup_driver, "systemd");
    CHECK_STR(p.server_version, "20.10.24+dfsg1");
    CHECK_STR(p.security_options, "apparmor,seccomp,cgroupns");
    CHECK(p.daemon_uid == 0);
    /* the same answer served by a non-root uid: a proxy or a lie, never "rootful" */
    CHECK(from(rootful, 1000, &p, &err) == 0);
    CHECK(p.mode == DOCK_MODE_UNKNOWN);
    CHECK(strstr(p.why, "uid 1000") != NULL);
    /* unreadable peer */
    CHECK(from(rootful, -1, &p, &err) == 0);
    CHECK(p.mode == DOCK_MODE_UNKNOWN);

    const char *rootless = "{\"ServerVersion\":\"24.0.5\",\"CgroupVersion\":\"2\",\"CgroupDriver\":\"cgroupfs\","
                           "\"SecurityOptions\":[\"name=seccomp,profile=builtin\",\"name=rootless\",\"name=cgroupns\"]}";
    CHECK(from(rootless, 1000, &p, &err) == 0);
    CHECK(p.mode == DOCK_MODE_ROOTLESS);
    CHECK_STR(p.seccomp_default, "builtin");
    CHECK(!p.apparmor);
    CHECK(from(rootless, 0, &p, &err) == 0); /* rootless claimed, root serves: contradiction */
    CHECK(p.mode == DOCK_MODE_UNKNOWN);
    CHECK(strstr(p.why, "rootless") != NULL);

    const char *remap = "{\"ServerVersion\":\"20.10.24\",\"CgroupVersion\":\"1\",\"CgroupDriver\":\"cgroupfs\","
                        "\"SecurityOptions\":[\"name=apparmor\",\"name=seccomp,profile=default\",\"name=userns\","
                        "\"name=selinux\"]}";
    CHECK(from(remap, 0, &p, &err) == 0);
    CHECK(p.mode == DOCK_MODE_USERNS_REMAP);
    CHECK_STR(dock_mode_name(p.mode), "userns-remap");
    CHECK(p.selinux && p.apparmor);
    CHECK_STR(p.cgroup_version, "1");

    /* no seccomp option at all: rootful, and the card says "none" for the daemon's default */
    CHECK(from("{\"SecurityOptions\":[]}", 0, &p, &err) == 0);
    CHECK(p.mode == DOCK_MODE_ROOTFUL);
    CHECK_STR(p.seccomp_default, "none");
    CHECK_STR(p.server_version, "?");
    CHECK_STR(p.cgroup_version, "?");
}

static void test_hostile(void)
{
    struct dock_posture p;
    struct plm_err err;
    static const char *const bad[] = {
        "[]",
        "\"rootful\"",
        "null",
        "{}",                                          /* no SecurityOptions */
        "{\"SecurityOptions\":null}",
        "{\"SecurityOptions\":\"name=rootless\"}",     /* a string, not a list */
        "{\"SecurityOptions\":{\"name\":\"rootless\"}}",
        "{\"SecurityOptions\":[1,2]}",
        "{\"SecurityOptions\":[\"\"]}",
        "{\"SecurityOptions\":[\"rootless\"]}",        /* no name= key */
        "{\"SecurityOptions\":[\"profile=x\"]}",
        "{\"SecurityOptions\":[\"name=\"]}",
        "{\"SecurityOptions\":[\"name=a\\u0000b\"]}", /* embedded NUL */
        "{\"SecurityOptions\":[null]}",
        "{\"SecurityOptions\":[[\"name=rootless\"]]}",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        int r = from(bad[i], 0, &p, &err);
        CHECK(r == -1);
        CHECK(p.mode == DOCK_MODE_UNKNOWN);
        CHECK(err.msg[0] != 0);
    }
    /* too many entries */
    json_t *info = json_object(), *arr = json_array();
    for (int i = 0; i < 33; i++)
        json_array_append_new(arr, json_string("name=apparmor"));
    json_object_set_new(info, "SecurityOptions", arr);
    memset(&err, 0, sizeof err);
    CHECK(dock_posture_from_info(info, 0, &p, &err) == -1);
    CHECK(strstr(err.msg, "at most 32") != NULL);
    json_decref(info);
    /* an entry too long */
    char *big = malloc(400);
    memset(big, 'a', 399);
    memcpy(big, "name=", 5);
    big[399] = 0;
    info = json_pack("{s:[s]}", "SecurityOptions", big);
    memset(&err, 0, sizeof err);
    CHECK(dock_posture_from_info(info, 0, &p, &err) == -1);
    json_decref(info);
    free(big);
    /* control characters and wrong types in the reported strings are neutralised, not trusted */
    CHECK(from("{\"ServerVersion\":\"20\\n\\u001b[31mred\",\"CgroupVersion\":2,\"CgroupDriver\":[],"
               "\"SecurityOptions\":[\"name=seccomp,profile=\\u001bx\"]}",
               0, &p, &err) == 0);
    CHECK_STR(p.server_version, "20??[31mred");
    CHECK_STR(p.cgroup_version, "?");
    CHECK_STR(p.cgroup_driver, "?");
    CHECK_STR(p.seccomp_default, "?x");
    /* unknown option names are listed, not acted on; a long list is cut, never overflowed */
    json_t *many = json_array();
    for (int i = 0; i < 32; i++)
        json_array_append_new(many, json_string("name=somefutureoptionwithalongname"));
    info = json_pack("{s:o}", "SecurityOptions", many);
    memset(&err, 0, sizeof err);
    CHECK(dock_posture_from_info(info, 0, &p, &err) == 0);
    CHECK(p.mode == DOCK_MODE_ROOTFUL);
    CHECK(strlen(p.security_options) < sizeof p.security_options);
    json_decref(info);
}

static void test_peer_uid(void)
{
    char dir[] = "/tmp/plimsoll-posture-XXXXXX";
    CHECK(mkdtemp(dir) != NULL);
    char path[108];
    snprintf(path, sizeof path, "%s/s", dir);
    int l = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_un a = {.sun_family = AF_UNIX};
    snprintf(a.sun_path, sizeof a.sun_path, "%s", path);
    CHECK(bind(l, (struct sockaddr *)&a, sizeof a) == 0);
    CHECK(listen(l, 4) == 0);
    CHECK(dock_peer_uid(path) == (long)getuid());
    close(l);
    unlink(path);
    CHECK(dock_peer_uid(path) == -1); /* nobody serves it */
    rmdir(dir);
}

static void test_container_and_lines(void)
{
    struct dock_posture p;
    struct plm_err err;
    CHECK(from("{\"ServerVersion\":\"20.10.24\",\"CgroupVersion\":\"2\",\"CgroupDriver\":\"systemd\","
               "\"SecurityOptions\":[\"name=apparmor\",\"name=seccomp,profile=default\"]}",
               0, &p, &err) == 0);
    json_t *ins = json_pack("{s:s,s:s}", "AppArmorProfile", "docker-default", "ProcessLabel", "");
    dock_posture_container(ins, 0, &p); /* no pid: the kernel's view is unreadable, and says so */
    json_decref(ins);
    CHECK_STR(p.apparmor_profile, "docker-default");
    CHECK_STR(p.selinux_label, "?");
    CHECK_STR(p.lsm_observed, "unreadable");
    CHECK(!dock_posture_confined(&p));
    /* our own process: whatever the kernel says, it is read and kept printable */
    ins = json_pack("{s:i}", "AppArmorProfile", 5);
    dock_posture_container(ins, (long)getpid(), &p);
    json_decref(ins);
    CHECK_STR(p.apparmor_profile, "?");
    CHECK(p.lsm_observed[0] != 0);
    snprintf(p.lsm_observed, sizeof p.lsm_observed, "docker-default (enforce)");
    CHECK(dock_posture_confined(&p));
    snprintf(p.lsm_observed, sizeof p.lsm_observed, "unconfined");
    CHECK(!dock_posture_confined(&p));

    static struct plm_evidence ev;
    memset(&ev, 0, sizeof ev);
    const char *sha = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";
    CHECK(dock_posture_lines(&p, "runc", "1.1.5+ds1", sha, &ev) == 0);
    CHECK(ev.n_confinement == 7);
    CHECK_STR(ev.confinement[0], "docker host: rootful, dockerd 20.10.24 uid 0");
    CHECK_STR(ev.confinement[1], "docker runtime: runc 1.1.5+ds1");
    CHECK_STR(ev.confinement[2], "seccomp profile sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef");
    CHECK(strstr(ev.confinement[3], "apparmor: on") != NULL);
    CHECK(strstr(ev.confinement[4], "selinux: off") != NULL);
    CHECK_STR(ev.confinement[6], "cgroup v2, driver systemd");
    memset(&ev, 0, sizeof ev);
    CHECK(dock_posture_lines(&p, "runsc", "runsc version release-20230101.0", "", &ev) == 0);
    CHECK(strstr(ev.confinement[2], "none sent") != NULL);
    for (size_t i = 0; i < ev.n_confinement; i++) /* the runsc black-box test: no "seccomp " line */
        CHECK(strncmp(ev.confinement[i], "seccomp ", 8) != 0);
    /* a full card refuses, it does not overflow */
    ev.n_confinement = EV_CONFINEMENT_MAX - 2;
    CHECK(dock_posture_lines(&p, "runc", "x", sha, &ev) == -1);
}

int main(void)
{
    test_modes();
    test_hostile();
    test_peer_uid();
    test_container_and_lines();
    return unit_done();
}
