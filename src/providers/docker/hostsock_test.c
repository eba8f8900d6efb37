/* hostsock_test.c: the grant socket (hostsock.h) without docker: a real server on a real unix
 * socket in a temporary directory (served by the guestio helper, src/guestio), driven through
 * the fixture of hostsock_test.h.
 * Covers the verbatim target, framing refusals (malformed lines, folded headers, chunked
 * uploads, oversized heads and bodies), the 33rd connection and slow clients; the stop and
 * lifetime cases are hostsock_stop_test.c. Both check that nothing leaks: fds, threads, files. */
#include "hostsock_test.h"

static void test_base_dir(void)
{
    char out[128];
    struct plm_err e = {0};
    CHECK(dock_hs_base_dir(base, out, sizeof out, &e) == 0 && !strcmp(out, base));
    CHECK(dock_hs_base_dir("relative/dir", out, sizeof out, &e) < 0);
    CHECK(dock_hs_base_dir("/nonexistent/plimsoll", out, sizeof out, &e) < 0);
    char open_dir[80];
    snprintf(open_dir, sizeof open_dir, "%s/open", base);
    mkdir(open_dir, 0777);
    chmod(open_dir, 0777);
    CHECK(dock_hs_base_dir(open_dir, out, sizeof out, &e) < 0 && strstr(e.msg, "writable by no one else"));
    rmdir(open_dir);
    char longdir[200];
    memset(longdir, 'a', sizeof longdir);
    longdir[0] = '/';
    longdir[100] = 0;
    CHECK(dock_hs_base_dir(longdir, out, sizeof out, &e) < 0 && strstr(e.msg, "too long"));
}

static void test_files_and_verbatim(void)
{
    fake_reset();
    struct dock_hostsock *hs = start(&API, NULL);
    CHECK(hs != NULL);
    if (!hs)
        return;
    char sock[108], dir[108]; /* copies: the paths go with the server */
    snprintf(sock, sizeof sock, "%s", dock_hostsock_sock_path(hs));
    snprintf(dir, sizeof dir, "%s", sock);
    *strrchr(dir, '/') = 0;
    struct stat st;
    CHECK(stat(dir, &st) == 0 && (st.st_mode & 0777) == 0700);
    CHECK(stat(sock, &st) == 0 && S_ISSOCK(st.st_mode) && (st.st_mode & 0777) == 0666);
    CHECK(stat(dock_hostsock_preload_path(hs), &st) == 0 && (st.st_mode & 0777) == 0444);
    char text[64] = "";
    FILE *f = fopen(dock_hostsock_preload_path(hs), "r");
    if (f) {
        size_t n = fread(text, 1, sizeof text - 1, f);
        text[n] = 0;
        fclose(f);
    }
    CHECK_STR(text, "globalThis.x = 1;\n");

    /* the target reaches `call` exactly as sent: no decoding, no dot removal, query kept */
    static const char *const targets[] = {"/v1/items/%2e%2e",
                                          "/v1/items/../x",
                                          "/v1/items/1?q=2#frag",
                                          "//a/./b/",
                                          "*",
                                          "http://evil.example/v1/items/1"};
    for (size_t i = 0; i < sizeof targets / sizeof *targets; i++) {
        char req[256], want[256];
        snprintf(req, sizeof req, "GET %s HTTP/1.1\r\nHost: x\r\n\r\n", targets[i]);
        snprintf(want, sizeof want, "\r\n\r\nok:%s", targets[i]);
        const char *r = xs(sock, req);
        CHECK(starts(r, "HTTP/1.1 200 OK\r\n") && strstr(r, want) && strstr(r, "Connection: close\r\n"));
        CHECK_STR(F.target, targets[i]);
    }
    CHECK(F.calls == 6);

    /* the answer's Content-Type goes back as given; one that could break the head does not */
    CHECK(strstr(xs(sock, "GET /a HTTP/1.1\r\n\r\n"), "Content-Type: application/octet-stream\r\n"));
    F.ctype = "application/json; charset=utf-8";
    CHECK(strstr(xs(sock, "GET /a HTTP/1.1\r\n\r\n"), "Content-Type: application/json; charset=utf-8\r\n"));
    F.ctype = "text/x\r\nX-Injected: 1";
    const char *inj = xs(sock, "GET /a HTTP/1.1\r\n\r\n");
    CHECK(strstr(inj, "Content-Type: application/octet-stream\r\n") && !strstr(inj, "X-Injected"));
    F.ctype = NULL;

    /* a body in pieces; the method as sent */
    int fd = dial(sock);
    send_all(fd, "post /v1/items/7 HTTP/1.1\r\nContent-Length: 11\r\n\r\nhello", 54);
    sleep_ms(50);
    send_all(fd, " world", 6);
    read_to_end(fd, resp, sizeof resp, 5000);
    close(fd);
    CHECK(starts(resp, "HTTP/1.1 200 OK\r\n") && strstr(resp, "Content-Length: 14\r\n"));
    CHECK_STR(F.method, "post");
    CHECK(F.len == 11 && !memcmp(F.first, "hello wo", 8));

    /* HTTP/1.0 and bare LF line ends are accepted */
    CHECK(starts(xs(sock, "GET /a HTTP/1.0\n\n"), "HTTP/1.1 200 OK\r\n"));
    /* HEAD: the head without the body */
    const char *r = xs(sock, "HEAD /h HTTP/1.1\r\n\r\n");
    CHECK(starts(r, "HTTP/1.1 200 OK\r\n") && strstr(r, "Content-Length: 5\r\n") && !strstr(r, "ok:/h"));
    /* Expect: 100-continue gets its interim answer, then the final one */
    fd = dial(sock);
    send_all(fd, "PUT /e HTTP/1.1\r\nContent-Length: 3\r\nExpect: 100-continue\r\n\r\n", 61);
    char interim[64] = "";
    struct pollfd p = {fd, POLLIN, 0};
    if (poll(&p, 1, 2000) == 1) {
        ssize_t n = recv(fd, interim, 25, 0);
        interim[n > 0 ? n : 0] = 0;
    }
    CHECK_STR(interim, "HTTP/1.1 100 Continue\r\n\r\n");
    send_all(fd, "abc", 3);
    read_to_end(fd, resp, sizeof resp, 5000);
    close(fd);
    CHECK(starts(resp, "HTTP/1.1 200 OK\r\n") && F.len == 3);

    /* statuses: a 1xx or out-of-range answer becomes 502; 204 carries no length */
    F.status = 101;
    CHECK(starts(xs(sock, "GET /s HTTP/1.1\r\n\r\n"), "HTTP/1.1 502 Bad Gateway\r\n"));
    F.status = 204;
    r = xs(sock, "GET /s HTTP/1.1\r\n\r\n");
    CHECK(starts(r, "HTTP/1.1 204 No Content\r\n") && !strstr(r, "Content-Length") && !strstr(r, "ok:"));
    F.status = 0;
    CHECK(F.holds == F.calls && F.releases == F.calls && F.inside == 0);
    dock_hostsock_stop(hs);
    CHECK(access(sock, F_OK) < 0 && access(dir, F_OK) < 0); /* nothing left on the disk */
    CHECK(dial(sock) < 0);
}

static void test_refusals(void)
{
    fake_reset();
    struct dock_hostsock *hs = start(&API, NULL);
    if (!hs) {
        CHECK(hs != NULL);
        return;
    }
    const char *sock = dock_hostsock_sock_path(hs);
    static const struct {
        const char *req, *status;
    } bad[] = {
        {"GET\r\n\r\n", "400"},
        {"GET /x\r\n\r\n", "400"},
        {"GET  /x HTTP/1.1\r\n\r\n", "400"},
        {"GET /x  HTTP/1.1\r\n\r\n", "400"},
        {"GET /x HTTP/1.1 extra\r\n\r\n", "400"},
        {"G(T /x HTTP/1.1\r\n\r\n", "400"},
        {"GET /a\x01"
         "b HTTP/1.1\r\n\r\n",
         "400"},
        {"GET /a\tb HTTP/1.1\r\n\r\n", "400"},
        {"GET /x http/1.1\r\n\r\n", "400"},
        {"GET /x HTTP/2.0\r\n\r\n", "505"},
        {"GET /x HTTP/1.1\r\nX: a\r\n folded\r\n\r\n", "400"},
        {"GET /x HTTP/1.1\r\nNoColon\r\n\r\n", "400"},
        {"GET /x HTTP/1.1\r\nBad Name: 1\r\n\r\n", "400"},
        {"GET /x HTTP/1.1\r\nX: a\x01\r\n\r\n", "400"},
        {"POST /x HTTP/1.1\r\nContent-Length: 1, 1\r\n\r\nx", "400"},
        {"POST /x HTTP/1.1\r\nContent-Length: -1\r\n\r\n", "400"},
        {"POST /x HTTP/1.1\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\nxx", "400"},
        {"POST /x HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n", "411"},
        {"POST /x HTTP/1.1\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\nabc", "411"},
        {"AVERYLONGMETHODNAMETHATGOESONANDONFOREVER /x HTTP/1.1\r\n\r\n", "400"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        char want[32];
        snprintf(want, sizeof want, "HTTP/1.1 %s ", bad[i].status);
        const char *r = xs(sock, bad[i].req);
        CHECK(starts(r, want) && strstr(r, "Content-Type: text/plain; charset=utf-8\r\n"));
        if (!starts(r, want))
            printf("# case %zu: %.60s\n", i, r);
    }
    CHECK(F.calls == 0); /* none of them reached the broker */

    /* a NUL byte in the request line */
    static const char nul[] = "GET /a\0b HTTP/1.1\r\n\r\n";
    CHECK(starts(xchg(sock, nul, sizeof nul - 1), "HTTP/1.1 400 "));

    /* a head over 16 KiB: 431, whether or not it ever ends */
    size_t big = DOCK_HS_HEAD_MAX + 100;
    char *h = malloc(big + 8);
    memcpy(h, "GET /x HTTP/1.1\r\nX: ", 20);
    memset(h + 20, 'a', big - 20);
    memcpy(h + big, "\r\n\r\n", 4);
    CHECK(starts(xchg(sock, h, big + 4), "HTTP/1.1 431 "));
    CHECK(starts(xchg(sock, h, DOCK_HS_HEAD_MAX), "HTTP/1.1 431 ")); /* exactly at the cap, no end */
    free(h);
    CHECK(F.calls == 0);

    /* a body over the cap: the broker gets 1 MiB + 1 bytes and decides; the guest sees its answer */
    size_t over = DOCK_HS_BODY_MAX + 4096;
    char head[128];
    int hn = snprintf(head, sizeof head, "POST /big HTTP/1.1\r\nContent-Length: %zu\r\n\r\n", over);
    char *req = malloc((size_t)hn + over);
    memcpy(req, head, (size_t)hn);
    memset(req + hn, 'b', over);
    int fd = dial(sock);
    send_all(fd, req, (size_t)hn + over); /* blocks until the server drained it all */
    read_to_end(fd, resp, sizeof resp, 5000);
    close(fd);
    CHECK(starts(resp, "HTTP/1.1 200 OK\r\n"));
    CHECK(F.calls == 1 && F.len == DOCK_HS_BODY_MAX + 1);
    /* exactly at the cap: passed whole */
    hn = snprintf(head, sizeof head, "POST /big HTTP/1.1\r\nContent-Length: %u\r\n\r\n", DOCK_HS_BODY_MAX);
    memcpy(req, head, (size_t)hn);
    memset(req + hn, 'b', DOCK_HS_BODY_MAX);
    CHECK(starts(xchg(sock, req, (size_t)hn + DOCK_HS_BODY_MAX), "HTTP/1.1 200 OK\r\n"));
    CHECK(F.calls == 2 && F.len == DOCK_HS_BODY_MAX);
    free(req);
    dock_hostsock_stop(hs);
}

static void test_connection_limit(void)
{
    fake_reset();
    struct dock_hostsock *hs = start(&API, NULL);
    if (!hs) {
        CHECK(hs != NULL);
        return;
    }
    const char *sock = dock_hostsock_sock_path(hs);
    int fds[DOCK_HS_CONN_MAX];
    int opened = 0;
    for (int i = 0; i < DOCK_HS_CONN_MAX; i++) {
        fds[i] = dial(sock);
        opened += fds[i] >= 0;
        send_all(fds[i], "GET /x HTTP/1.1\r\n", 17); /* an unfinished head holds the slot */
    }
    CHECK(opened == DOCK_HS_CONN_MAX);
    sleep_ms(100);
    /* 32 connections held (by the guestio helper), one daemon thread: the monitor */
    struct gio_stats gs;
    gio_server_stats(dock_hostsock_gio(hs), &gs);
    CHECK(gs.live == DOCK_HS_CONN_MAX && dock_hostsock_threads() == 1);
    /* the 33rd waits unaccepted: no thread, no answer, nothing called */
    int waiting = dial(sock);
    CHECK(waiting >= 0);
    send_all(waiting, "GET /33 HTTP/1.1\r\n\r\n", 20);
    struct pollfd p = {waiting, POLLIN, 0};
    CHECK(poll(&p, 1, 300) == 0);
    gio_server_stats(dock_hostsock_gio(hs), &gs);
    CHECK(gs.live == DOCK_HS_CONN_MAX && dock_hostsock_threads() == 1 && F.calls == 0);
    /* finishing one of the 32 serves it, and its slot goes to the one waiting */
    send_all(fds[0], "\r\n", 2);
    read_to_end(fds[0], resp, sizeof resp, 5000);
    CHECK(starts(resp, "HTTP/1.1 200 OK\r\n") && strstr(resp, "ok:/x"));
    read_to_end(waiting, resp, sizeof resp, 5000);
    CHECK(starts(resp, "HTTP/1.1 200 OK\r\n") && strstr(resp, "ok:/33"));
    close(waiting);
    /* past the backlog the kernel refuses: the guest's connect fails, we spend nothing */
    int extra[DOCK_HS_BACKLOG + 8], n_extra = 0;
    bool refused = false;
    for (; n_extra < DOCK_HS_BACKLOG + 8 && !refused; n_extra++) {
        extra[n_extra] = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
        struct sockaddr_un sa = {.sun_family = AF_UNIX};
        snprintf(sa.sun_path, sizeof sa.sun_path, "%s", sock);
        refused = connect(extra[n_extra], (struct sockaddr *)&sa, sizeof sa) < 0 && errno == EAGAIN;
    }
    CHECK(refused);
    gio_server_stats(dock_hostsock_gio(hs), &gs);
    CHECK(gs.live <= DOCK_HS_CONN_MAX && dock_hostsock_threads() == 1);
    for (int i = 0; i < n_extra; i++)
        close(extra[i]);
    for (int i = 0; i < DOCK_HS_CONN_MAX; i++)
        close(fds[i]);
    /* once they are gone, a new connection is served again */
    bool served = false;
    for (int i = 0; i < 100 && !served; i++) {
        served = starts(xs(sock, "GET /again HTTP/1.1\r\n\r\n"), "HTTP/1.1 200 ");
        if (!served)
            sleep_ms(20);
    }
    CHECK(served);
    dock_hostsock_stop(hs);
}

static void test_slow_clients(void)
{
    fake_reset();
    struct dock_hs_limits lim = {.head_ms = 300, .read_ms = 600, .write_ms = 1000};
    struct dock_hostsock *hs = start(&API, &lim);
    if (!hs) {
        CHECK(hs != NULL);
        return;
    }
    const char *sock = dock_hostsock_sock_path(hs);
    /* a head that never ends: closed without an answer at the head deadline */
    int fd = dial(sock);
    send_all(fd, "GET /slow HTTP/1.1\r\n", 20);
    int64_t t0 = now_ms();
    size_t n = read_to_end(fd, resp, sizeof resp, 3000);
    int64_t took = now_ms() - t0;
    close(fd);
    CHECK(n == 0 && took >= 250 && took < 1500);
    /* a trickle does not extend the head deadline */
    fd = dial(sock);
    t0 = now_ms();
    bool cut = false;
    for (int i = 0; i < 60 && !cut; i++) {
        cut = send(fd, "X", 1, MSG_NOSIGNAL) < 0;
        struct pollfd p = {fd, POLLIN, 0};
        cut = cut || poll(&p, 1, 20) == 1;
    }
    took = now_ms() - t0;
    close(fd);
    CHECK(cut && took < 1500);
    /* a body that stops short: closed at the read deadline, nothing called */
    fd = dial(sock);
    t0 = now_ms();
    send_all(fd, "POST /b HTTP/1.1\r\nContent-Length: 10\r\n\r\nabc", 44);
    n = read_to_end(fd, resp, sizeof resp, 3000);
    took = now_ms() - t0;
    close(fd);
    CHECK(n == 0 && took >= 500 && took < 2000);
    /* a guest that closes mid-head, or connects and says nothing */
    fd = dial(sock);
    send_all(fd, "GET /x HT", 9);
    close(fd);
    fd = dial(sock);
    close(fd);
    CHECK(F.calls == 0);
    /* meanwhile others are served */
    int idle = dial(sock);
    CHECK(starts(xs(sock, "GET /fast HTTP/1.1\r\n\r\n"), "HTTP/1.1 200 "));
    /* stop does not wait for a connected guest that stays silent */
    int64_t t1 = now_ms();
    dock_hostsock_stop(hs); /* with `idle` still connected and silent */
    CHECK(now_ms() - t1 < 500);
    close(idle);
}

int main(void)
{
    int fds0 = hs_fixture_begin();
    test_base_dir();
    test_files_and_verbatim();
    test_refusals();
    test_connection_limit();
    test_slow_clients();
    return hs_fixture_end(fds0);
}
