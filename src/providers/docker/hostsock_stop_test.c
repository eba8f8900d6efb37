/* hostsock_stop_test.c: the grant socket (hostsock.h) without docker, its lifetime: stop with
 * a call in flight (with and without hold/release), many runs in a row, a killed helper, the
 * sweep of what a crashed daemon left, and the session directories (session_grant.h). Split from
 * hostsock_test.c; the same fixture (hostsock_test.h) and the same leak checks at the end. */
#include "hostsock_test.h"

/* ---- tests ---------------------------------------------------------------------------------------- */

struct stopper {
    struct dock_hostsock *hs;
    volatile bool done;
};

static void *stop_thread(void *arg)
{
    struct stopper *s = arg;
    dock_hostsock_stop(s->hs);
    s->done = true;
    return NULL;
}

static void test_stop_in_flight(void)
{
    /* with hold/release: stop returns at once; the thread finishes `call` on its own */
    fake_reset();
    struct dock_hostsock *hs = start(&API, NULL);
    if (!hs) {
        CHECK(hs != NULL);
        return;
    }
    char sock[108];
    snprintf(sock, sizeof sock, "%s", dock_hostsock_sock_path(hs));
    F.block = true;
    int fd = dial(sock);
    send_all(fd, "GET /blocked HTTP/1.1\r\n\r\n", 25);
    int idle = dial(sock); /* and one connection that never sends */
    CHECK(fake_wait(&F.inside, 1, 2000));
    int64_t t0 = now_ms();
    dock_hostsock_stop(hs);
    CHECK(now_ms() - t0 < 500);
    CHECK(fake_get(&F.holds) == 1 && fake_get(&F.releases) == 0 && fake_get(&F.inside) == 1);
    CHECK(access(sock, F_OK) < 0);
    CHECK(dock_hostsock_threads() == 1); /* the one inside `call` */
    read_to_end(fd, resp, sizeof resp, 1000);
    CHECK(resp[0] == 0); /* its connection was shut down: no answer will come */
    fake_unblock();
    CHECK(fake_wait(&F.releases, 1, 2000));
    CHECK(dock_hostsock_quiesce(2000));
    close(fd);
    close(idle);

    /* without hold/release the stopper must wait for `call` to return */
    fake_reset();
    struct plm_host_api nohold = API;
    nohold.hold = nohold.release = NULL;
    hs = start(&nohold, NULL);
    if (!hs) {
        CHECK(hs != NULL);
        return;
    }
    F.block = true;
    fd = dial(dock_hostsock_sock_path(hs));
    send_all(fd, "GET /blocked HTTP/1.1\r\n\r\n", 25);
    CHECK(fake_wait(&F.inside, 1, 2000));
    struct stopper st = {.hs = hs};
    pthread_t th;
    pthread_create(&th, NULL, stop_thread, &st);
    sleep_ms(200);
    CHECK(!st.done);
    fake_unblock();
    pthread_join(th, NULL);
    CHECK(st.done && fake_get(&F.inside) == 0 && dock_hostsock_threads() == 0);
    close(fd);

    /* a request completed after stop began never reaches `call` */
    fake_reset();
    struct dock_hs_limits lim = {.head_ms = 2000, .read_ms = 2000, .write_ms = 1000};
    hs = start(&API, &lim);
    if (!hs) {
        CHECK(hs != NULL);
        return;
    }
    fd = dial(dock_hostsock_sock_path(hs));
    send_all(fd, "POST /late HTTP/1.1\r\nContent-Length: 4\r\n\r\nab", 45);
    sleep_ms(50);
    dock_hostsock_stop(hs);
    send_all(fd, "cd", 2);
    read_to_end(fd, resp, sizeof resp, 1000);
    close(fd);
    CHECK(F.calls == 0 && dock_hostsock_threads() == 0);
}

static void test_many_runs(void)
{
    /* servers come and go with calls in flight: nothing accumulates */
    fake_reset();
    for (int i = 0; i < 20; i++) {
        struct dock_hostsock *hs = start(&API, NULL);
        if (!hs) {
            CHECK(hs != NULL);
            return;
        }
        int fds[4];
        for (int k = 0; k < 4; k++) {
            fds[k] = dial(dock_hostsock_sock_path(hs));
            send_all(fds[k], "GET /m HTTP/1.1\r\n\r\n", 19);
        }
        dock_hostsock_stop(hs);
        for (int k = 0; k < 4; k++)
            close(fds[k]);
    }
    CHECK(dock_hostsock_quiesce(2000));
}

/* The guestio helper that parses the guest's HTTP dies mid-call: the guest gets 503, the run
 * and the daemon carry on, and the next connection is served by a new helper. */
static void test_helper_killed(void)
{
    fake_reset();
    struct dock_hostsock *hs = start(&API, NULL);
    if (!hs) {
        CHECK(hs != NULL);
        return;
    }
    const char *sock = dock_hostsock_sock_path(hs);
    struct gio_stats gs;
    gio_server_stats(dock_hostsock_gio(hs), &gs);
    pid_t first = gs.helper_pid;
    F.block = true;
    int fd = dial(sock);
    send_all(fd, "GET /v1/slow HTTP/1.1\r\n\r\n", 26);
    CHECK(fake_wait(&F.inside, 1, 2000));
    int64_t t0 = now_ms();
    kill(first, SIGKILL);
    read_to_end(fd, resp, sizeof resp, 3000);
    close(fd);
    CHECK(starts(resp, "HTTP/1.1 503 ") && now_ms() - t0 < 1000);
    fake_unblock();
    CHECK(fake_wait(&F.releases, 1, 2000));
    CHECK(starts(xs(sock, "GET /v1/next HTTP/1.1\r\n\r\n"), "HTTP/1.1 200 OK\r\n") && strstr(resp, "ok:/v1/next"));
    gio_server_stats(dock_hostsock_gio(hs), &gs);
    CHECK(gs.helper_pid > 0 && gs.helper_pid != first && gs.failures == 1);
    dock_hostsock_stop(hs);
}

static void test_sweep(void)
{
    fake_reset();
    struct dock_hostsock *live = start(&API, NULL);
    CHECK(live != NULL);
    /* a dead run's directory: an old socket nobody listens on, and its preload */
    char dead[96], f[128];
    snprintf(dead, sizeof dead, "%s/" DOCK_HS_DIR_PREFIX "dead01", base);
    mkdir(dead, 0700);
    snprintf(f, sizeof f, "%s/host-api.sock", dead);
    int fd = socket(AF_UNIX, SOCK_STREAM, 0);
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    CHECK(strlen(f) < sizeof sa.sun_path);
    memcpy(sa.sun_path, f, strlen(f) + 1 < sizeof sa.sun_path ? strlen(f) + 1 : sizeof sa.sun_path - 1);
    CHECK(bind(fd, (struct sockaddr *)&sa, sizeof sa) == 0);
    close(fd); /* bound, never listening again: ECONNREFUSED */
    snprintf(f, sizeof f, "%s/host-api.mjs", dead);
    close(open(f, O_WRONLY | O_CREAT, 0444));
    char young[128];
    snprintf(young, sizeof young, "%s/" DOCK_HS_DIR_PREFIX "young1", base);
    mkdir(young, 0700);
    char other[128];
    snprintf(other, sizeof other, "%s/not-ours", base);
    mkdir(other, 0700);
    CHECK(dock_hs_sweep(base, 60) == 0); /* too young, all of them */
    CHECK(dock_hs_sweep(base, 0) == 2);  /* dead and young go; the live one and not-ours stay */
    CHECK(access(dead, F_OK) < 0 && access(young, F_OK) < 0 && access(other, F_OK) == 0);
    CHECK(live && access(dock_hostsock_sock_path(live), F_OK) == 0);
    if (live)
        CHECK(starts(xs(dock_hostsock_sock_path(live), "GET /alive HTTP/1.1\r\n\r\n"), "HTTP/1.1 200 "));
    rmdir(other);
    dock_hostsock_stop(live);
}

/* A session's directory (session_grant.c): 0711, a socket per call under a fresh random name,
 * both of the call's files gone after it while the directory stays; the sweep removes the
 * directories of daemons that are gone and keeps a live one's. */
static void test_session_dir(void)
{
    fake_reset();
    char dir[108];
    struct plm_err e = {0};
    CHECK(dock_sg_dir_make(base, dir, sizeof dir, &e) == 0);
    struct stat st;
    CHECK(stat(dir, &st) == 0 && S_ISDIR(st.st_mode) && (st.st_mode & 0777) == 0711);
    struct dock_sg_call c1, c2;
    CHECK(dock_sg_begin(dir, &API, &c1, &e) == 0);
    char host1[300];
    snprintf(host1, sizeof host1, "%s/%s", dir, c1.sock_in + strlen(DOCK_SG_DIR_IN "/"));
    CHECK(!strncmp(c1.sock_in, DOCK_SG_DIR_IN "/", strlen(DOCK_SG_DIR_IN "/")) &&
          strlen(c1.sock_in) == strlen(DOCK_SG_DIR_IN "/") + 32 + strlen(".sock"));
    CHECK(stat(host1, &st) == 0 && S_ISSOCK(st.st_mode));
    CHECK(starts(xs(host1, "GET /v1/a HTTP/1.1\r\n\r\n"), "HTTP/1.1 200 "));
    dock_sg_end(&c1);
    CHECK(access(host1, F_OK) < 0 && access(dir, F_OK) == 0);
    CHECK(starts(xs(host1, "GET /v1/a HTTP/1.1\r\n\r\n"), "(connect failed)")); /* a leftover cannot call */
    CHECK(dock_sg_begin(dir, &API, &c2, &e) == 0);
    CHECK(strcmp(c1.sock_in, c2.sock_in) != 0); /* a fresh name per call */
    /* a name already taken is an error that removes nothing of the other's */
    struct dock_hostsock *dup = NULL;
    char stem[40];
    snprintf(stem, sizeof stem, "%.32s", c2.sock_in + strlen(DOCK_SG_DIR_IN "/"));
    CHECK(dock_hostsock_start_in(dir, stem, &API, NULL, &dup, &e) < 0 && dup == NULL);
    CHECK(dock_hostsock_start_in(dir, "../escape", &API, NULL, &dup, &e) < 0);
    char host2[300];
    snprintf(host2, sizeof host2, "%s/%s", dir, c2.sock_in + strlen(DOCK_SG_DIR_IN "/"));
    CHECK(starts(xs(host2, "GET /v1/b HTTP/1.1\r\n\r\n"), "HTTP/1.1 200 "));
    dock_sg_end(&c2);
    dock_sg_end(&c2); /* idempotent */
    /* the sweep: a dead daemon's directory goes, a live one's (pid 1) stays */
    char dead[128], live[128];
    snprintf(dead, sizeof dead, "%s/plimsoll-session-%d-dead01", base, 0x7ffffff0);
    snprintf(live, sizeof live, "%s/plimsoll-session-1-live01", base);
    mkdir(dead, 0711);
    mkdir(live, 0711);
    char junk[160];
    snprintf(junk, sizeof junk, "%s/0123.mjs", dead);
    close(open(junk, O_WRONLY | O_CREAT, 0444));
    int n = dock_sg_sweep(base);
    CHECK(access(dead, F_OK) < 0 && access(live, F_OK) == 0);
    CHECK(n >= 2 && access(dir, F_OK) < 0); /* ours too: at startup this daemon has no sessions */
    rmdir(live);
}

int main(void)
{
    int fds0 = hs_fixture_begin();
    test_stop_in_flight();
    test_many_runs();
    test_helper_killed();
    test_sweep();
    test_session_dir();
    return hs_fixture_end(fds0);
}
