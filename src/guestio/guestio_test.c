/* guestio_test.c: the guestio split end to end, with real processes: the helper is confined
 * (its uid and gid when we are root, no capability in any set, seccomp mode 2, no_new_privs,
 * an empty environment, only /dev/null on 0-2 and its channel on 3, dies with the daemon);
 * its filter kills what it must (EVIL_ESCAPE); killing the helper mid-call gives every
 * waiting guest 503 within a second, the daemon carries on, and a new helper serves the next
 * connection, up to GIO_RESTART_MAX; a helper that breaks the protocol (evil_helper_test.c)
 * is killed and its guests get 503, and the handler never sees what it sent. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "../../tests/unit.h"
#include "frame.h"
#include "guestio.h"

static int64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void sleep_ms(int ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

static int count_fds(void)
{
    DIR *d = opendir("/proc/self/fd");
    int n = 0;
    for (struct dirent *e; d && (e = readdir(d));)
        n += e->d_name[0] != '.';
    if (d)
        closedir(d);
    return n;
}

/* ---- a handler that records and can block ----------------------------------------------------- */

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv = PTHREAD_COND_INITIALIZER;
static int calls, inside, holds, releases;
static bool block, big;
static size_t body_total;
static char last_target[256];

static void fake_call(void *ctx, const char *method, const char *target, const uint8_t *body, size_t len,
                      struct plm_host_reply *out)
{
    (void)ctx;
    (void)body;
    (void)len;
    pthread_mutex_lock(&mu);
    calls++;
    inside++;
    snprintf(last_target, sizeof last_target, "%s", target);
    body_total += len;
    bool want_big = big;
    pthread_cond_broadcast(&cv);
    while (block)
        pthread_cond_wait(&cv, &mu);
    inside--;
    pthread_mutex_unlock(&mu);
    out->status = 200;
    out->content_type = strdup("text/plain");
    if (want_big) { /* the largest reply a frame can carry */
        out->body = malloc(GIO_REPLY_MAX);
        if (out->body)
            memset(out->body, 'r', GIO_REPLY_MAX);
        out->len = out->body ? GIO_REPLY_MAX : 0;
        return;
    }
    char *b = NULL;
    int n = asprintf(&b, "%s %s", method, target);
    out->body = n > 0 ? (uint8_t *)b : NULL;
    out->len = n > 0 ? (size_t)n : 0;
}

static void fake_hold(void *ctx)
{
    (void)ctx;
    pthread_mutex_lock(&mu);
    holds++;
    pthread_mutex_unlock(&mu);
}

static void fake_release(void *ctx)
{
    (void)ctx;
    pthread_mutex_lock(&mu);
    releases++;
    pthread_mutex_unlock(&mu);
}

static const struct gio_handler H = {.call = fake_call, .hold = fake_hold, .release = fake_release};

static int get(int *v)
{
    pthread_mutex_lock(&mu);
    int x = *v;
    pthread_mutex_unlock(&mu);
    return x;
}

static bool wait_for(int *v, int want, int ms)
{
    int64_t until = now_ms() + ms;
    while (get(v) < want && now_ms() < until)
        sleep_ms(5);
    return get(v) >= want;
}

static void set_block(bool b)
{
    pthread_mutex_lock(&mu);
    block = b;
    pthread_cond_broadcast(&cv);
    pthread_mutex_unlock(&mu);
}

static void reset(void)
{
    pthread_mutex_lock(&mu);
    calls = inside = holds = releases = 0;
    block = big = false;
    body_total = 0;
    last_target[0] = 0;
    pthread_mutex_unlock(&mu);
}

/* ---- servers and clients ---------------------------------------------------------------------- */

static char dir[64];
static char sock_path[108];
static const char *build_dir; /* where the evil helpers are */

static const struct gio_limits LIM = {.conn_max = 8,
                                      .head_max = 16384,
                                      .body_max = 1024 * 1024 + 1,
                                      .head_ms = 5000,
                                      .read_ms = 10000,
                                      .write_ms = 30000};

static int listener(void)
{
    unlink(sock_path);
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    snprintf(sa.sun_path, sizeof sa.sun_path, "%s", sock_path);
    if (fd < 0 || bind(fd, (struct sockaddr *)&sa, sizeof sa) < 0 || listen(fd, 16) < 0) {
        printf("# listener: %s\n", strerror(errno));
        if (fd >= 0)
            close(fd);
        return -1;
    }
    return fd;
}

static struct gio_server *start(const struct gio_limits *lim, const char *evil, struct plm_err *e)
{
    char path[512];
    if (evil)
        snprintf(path, sizeof path, "%s/gio_evil_%s", build_dir, evil);
    struct gio_server *s = NULL;
    struct plm_err local = {0};
    if (!e)
        e = &local;
    if (gio_server_start(listener(), lim ? lim : &LIM, &H, evil ? path : NULL, &s, e) < 0 && e == &local)
        printf("# start: %s\n", e->msg);
    return s;
}

static int dial(void)
{
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    snprintf(sa.sun_path, sizeof sa.sun_path, "%s", sock_path);
    if (fd >= 0 && connect(fd, (struct sockaddr *)&sa, sizeof sa) < 0) {
        close(fd);
        return -1;
    }
    return fd;
}

static void send_str(int fd, const char *s)
{
    if (send(fd, s, strlen(s), MSG_NOSIGNAL) < 0) {
        /* the test's read then shows what happened */
    }
}

static char resp[8192];

/* Reads until EOF or ms pass; returns the time it took. */
static int64_t read_all(int fd, int ms)
{
    size_t have = 0;
    int64_t t0 = now_ms(), until = t0 + ms;
    for (;;) {
        int64_t left = until - now_ms();
        struct pollfd p = {fd, POLLIN, 0};
        if (left <= 0 || poll(&p, 1, (int)left) <= 0)
            break;
        ssize_t n = recv(fd, resp + have, sizeof resp - 1 - have, 0);
        if (n <= 0)
            break;
        have += (size_t)n;
    }
    resp[have] = 0;
    return now_ms() - t0;
}

static const char *xs(const char *req)
{
    int fd = dial();
    if (fd < 0)
        return "(connect failed)";
    send_str(fd, req);
    read_all(fd, 5000);
    close(fd);
    return resp;
}

static bool starts(const char *s, const char *p)
{
    return !strncmp(s, p, strlen(p));
}

static pid_t helper_pid(struct gio_server *s)
{
    struct gio_stats st;
    gio_server_stats(s, &st);
    return st.helper_pid;
}

static bool gone(pid_t pid)
{
    return kill(pid, 0) < 0 && errno == ESRCH;
}

/* ---- /proc views of the helper ----------------------------------------------------------------- */

static bool status_line(pid_t pid, const char *key, char *out, size_t cap)
{
    char p[64], line[512];
    snprintf(p, sizeof p, "/proc/%d/status", (int)pid);
    FILE *f = fopen(p, "r");
    bool found = false;
    while (f && !found && fgets(line, sizeof line, f)) {
        size_t k = strlen(key);
        if (!strncmp(line, key, k) && line[k] == ':') {
            char *v = line + k + 1;
            while (*v == '\t' || *v == ' ')
                v++;
            v[strcspn(v, "\n")] = 0;
            snprintf(out, cap, "%s", v);
            found = true;
        }
    }
    if (f)
        fclose(f);
    return found;
}

static void test_confined(void)
{
    reset();
    struct gio_server *s = start(NULL, NULL, NULL);
    CHECK(s != NULL);
    if (!s)
        return;
    pid_t pid = helper_pid(s);
    CHECK(pid > 0);
    char v[256];
    CHECK(status_line(pid, "Seccomp", v, sizeof v) && !strcmp(v, "2"));
    CHECK(status_line(pid, "NoNewPrivs", v, sizeof v) && !strcmp(v, "1"));
    static const char *const caps[] = {"CapInh", "CapPrm", "CapEff", "CapAmb"};
    for (size_t i = 0; i < 4; i++) {
        CHECK(status_line(pid, caps[i], v, sizeof v) && !strcmp(v, "0000000000000000"));
        if (strcmp(v, "0000000000000000"))
            printf("# %s %s\n", caps[i], v);
    }
    /* a fresh image (exec, not fork): no page of the daemon's memory, so no credential in it */
    char exe[64], img[512];
    snprintf(exe, sizeof exe, "/proc/%d/exe", (int)pid);
    ssize_t il = readlink(exe, img, sizeof img - 1);
    img[il > 0 ? il : 0] = 0;
    CHECK(il > 0 && strstr(img, "/plimsoll-guestio") != NULL);
    char ppid[32];
    snprintf(ppid, sizeof ppid, "%d", (int)getpid());
    CHECK(status_line(pid, "PPid", v, sizeof v) && !strcmp(v, ppid));
    if (geteuid() == 0) {
        /* root daemon: its own ids, no groups, and the bounding set empty too */
        char want[64];
        snprintf(want, sizeof want, "%u\t%u\t%u\t%u", GIO_HELPER_UID, GIO_HELPER_UID, GIO_HELPER_UID, GIO_HELPER_UID);
        CHECK(status_line(pid, "Uid", v, sizeof v) && !strcmp(v, want));
        CHECK(status_line(pid, "Gid", v, sizeof v) && !strcmp(v, want));
        CHECK(status_line(pid, "Groups", v, sizeof v) && v[0] == 0);
        CHECK(status_line(pid, "CapBnd", v, sizeof v) && !strcmp(v, "0000000000000000"));
    } else {
        printf("# not root: the helper keeps the daemon's uid (docs/privsep.md); id checks not applicable\n");
    }
    /* descriptors: /dev/null on 0-2 and the channel on 3, nothing else */
    char p[64], link[256];
    snprintf(p, sizeof p, "/proc/%d/fd", (int)pid);
    DIR *d = opendir(p);
    int n = 0, devnull = 0, sockets = 0;
    for (struct dirent *e; d && (e = readdir(d));) {
        if (e->d_name[0] == '.')
            continue;
        n++;
        char fp[384];
        snprintf(fp, sizeof fp, "%s/%s", p, e->d_name);
        ssize_t k = readlink(fp, link, sizeof link - 1);
        link[k > 0 ? k : 0] = 0;
        int fd = atoi(e->d_name);
        devnull += fd <= 2 && !strcmp(link, "/dev/null");
        sockets += fd == 3 && starts(link, "socket:");
    }
    if (d)
        closedir(d);
    CHECK(d != NULL && n == 4 && devnull == 3 && sockets == 1);
    /* an empty environment */
    snprintf(p, sizeof p, "/proc/%d/environ", (int)pid);
    FILE *f = fopen(p, "r");
    CHECK(f != NULL && fgetc(f) == EOF);
    if (f)
        fclose(f);
    /* it serves, and a connection it holds is one more descriptor */
    CHECK(starts(xs("GET /x HTTP/1.1\r\n\r\n"), "HTTP/1.1 200 OK\r\n") && strstr(resp, "GET /x"));
    int c = dial();
    send_str(c, "GET /held HTTP/1.1\r\n");
    sleep_ms(100);
    snprintf(p, sizeof p, "/proc/%d/fd", (int)pid);
    d = opendir(p);
    n = 0;
    for (struct dirent *e; d && (e = readdir(d));)
        n += e->d_name[0] != '.';
    if (d)
        closedir(d);
    CHECK(n == 5);
    close(c);
    gio_server_stop(s);
    CHECK(gone(pid)); /* reaped by stop, not a zombie */
}

/* The helper dies with the daemon: a child process runs a server and is SIGKILLed. */
static void test_dies_with_parent(void)
{
    int pfd[2];
    if (pipe(pfd) < 0)
        return;
    pid_t child = fork();
    if (child == 0) {
        close(pfd[0]);
        struct gio_server *s = start(NULL, NULL, NULL);
        pid_t hp = s ? helper_pid(s) : 0;
        if (write(pfd[1], &hp, sizeof hp) < 0)
            _exit(1);
        for (;;)
            pause();
    }
    close(pfd[1]);
    pid_t hp = 0;
    CHECK(read(pfd[0], &hp, sizeof hp) == sizeof hp && hp > 0);
    close(pfd[0]);
    kill(child, SIGKILL);
    waitpid(child, NULL, 0);
    bool dead = false;
    for (int i = 0; i < 200 && !dead && hp > 0; i++) {
        char st[64];
        dead = gone(hp) || (status_line(hp, "State", st, sizeof st) && st[0] == 'Z');
        if (!dead)
            sleep_ms(10);
    }
    CHECK(dead);
}

static void test_kill_mid_call(void)
{
    reset();
    struct gio_server *s = start(NULL, NULL, NULL);
    CHECK(s != NULL);
    if (!s)
        return;
    pid_t first = helper_pid(s);
    set_block(true);
    int in_call = dial();
    send_str(in_call, "POST /slow HTTP/1.1\r\nContent-Length: 2\r\n\r\nhi");
    CHECK(wait_for(&inside, 1, 3000));
    int mid_head = dial(); /* another guest, halfway through its head */
    send_str(mid_head, "GET /half HTTP/1.1\r\nHost:");
    sleep_ms(100);
    int64_t t0 = now_ms();
    kill(first, SIGKILL);
    int64_t took = read_all(in_call, 3000);
    CHECK(starts(resp, "HTTP/1.1 503 ") && strstr(resp, "host api socket unavailable"));
    CHECK(now_ms() - t0 < 1000 && took < 1000);
    read_all(mid_head, 3000);
    CHECK(starts(resp, "HTTP/1.1 503 "));
    close(in_call);
    close(mid_head);
    struct gio_stats st;
    gio_server_stats(s, &st);
    CHECK(st.failures == 1 && st.violations == 0 && st.helper_pid == 0 && st.live == 0);
    CHECK(WIFSIGNALED(st.last_status) && WTERMSIG(st.last_status) == SIGKILL);
    /* the call finishes later: its answer has nowhere to go and is dropped */
    set_block(false);
    CHECK(wait_for(&releases, 1, 2000));
    /* the next connection gets a new helper */
    CHECK(starts(xs("GET /after HTTP/1.1\r\n\r\n"), "HTTP/1.1 200 OK\r\n") && strstr(resp, "GET /after"));
    pid_t second = helper_pid(s);
    CHECK(second > 0 && second != first && gone(first));
    gio_server_stats(s, &st);
    CHECK(st.helpers == 2);
    /* killed while idle: the next connection is served too */
    kill(second, SIGKILL);
    sleep_ms(100);
    CHECK(starts(xs("GET /again HTTP/1.1\r\n\r\n"), "HTTP/1.1 200 OK\r\n"));
    gio_server_stop(s);
    CHECK(gio_quiesce(3000));
}

/* After GIO_RESTART_MAX replacements every connection gets 503 at once. */
static void test_restart_cap(void)
{
    reset();
    struct gio_server *s = start(NULL, NULL, NULL);
    CHECK(s != NULL);
    if (!s)
        return;
    for (unsigned i = 0; i < GIO_RESTART_MAX; i++) {
        kill(helper_pid(s), SIGKILL);
        for (int k = 0; k < 100 && helper_pid(s); k++)
            sleep_ms(5);
        if (!starts(xs("GET /r HTTP/1.1\r\n\r\n"), "HTTP/1.1 200 "))
            printf("# restart %u: %.40s\n", i, resp);
    }
    struct gio_stats st;
    gio_server_stats(s, &st);
    CHECK(st.helpers == GIO_RESTART_MAX + 1 && st.failures == GIO_RESTART_MAX);
    kill(helper_pid(s), SIGKILL);
    for (int k = 0; k < 100 && helper_pid(s); k++)
        sleep_ms(5);
    int64_t t0 = now_ms();
    CHECK(starts(xs("GET /r HTTP/1.1\r\n\r\n"), "HTTP/1.1 503 "));
    CHECK(now_ms() - t0 < 1000);
    gio_server_stats(s, &st);
    CHECK(st.helpers == GIO_RESTART_MAX + 1);
    gio_server_stop(s);
}

/* A helper that breaks the protocol: killed, the guest gets 503, the daemon carries on. */
static void evil(const char *mode, const struct gio_limits *lim, int want_calls, int max_ms)
{
    reset();
    set_block(want_calls > 0); /* a call it made stays in flight while it misbehaves */
    struct gio_server *s = start(lim, mode, NULL);
    CHECK(s != NULL);
    if (!s)
        return;
    int fd = dial();
    send_str(fd, "GET /x HTTP/1.1\r\n\r\n");
    int64_t took = read_all(fd, max_ms + 2000);
    close(fd);
    struct gio_stats st;
    gio_server_stats(s, &st);
    set_block(false);
    gio_server_stop(s);
    CHECK(gio_quiesce(3000)); /* a valid first CALL still reaches the handler, then ends */
    bool ok = starts(resp, "HTTP/1.1 503 ") && took < max_ms && st.violations == 1 && st.failures == 1 &&
              get(&calls) == want_calls;
    CHECK(ok);
    if (!ok)
        printf("# %s: %.30s took %lld ms, violations %u, failures %u, calls %d\n", mode, resp, (long long)took,
               st.violations, st.failures, get(&calls));
}

static void test_protocol_violations(void)
{
    evil("badcall", NULL, 0, 1000);      /* a CALL whose target smuggles a line break */
    evil("wrong_id", NULL, 0, 1000);     /* a CALL for a connection it was not given */
    evil("huge", NULL, 0, 1000);         /* a length past the cap, before any allocation */
    evil("twice", NULL, 1, 1000);        /* a second CALL on one connection */
    evil("done_in_call", NULL, 1, 1000); /* DONE while the answer is owed */
    struct gio_limits quick = LIM;
    quick.head_ms = quick.read_ms = 200;
    evil("silent", &quick, 0, 200 + GIO_GRACE_MS + 1500); /* holds the connection past its deadlines */
    CHECK(wait_for(&releases, get(&holds), 2000));

    /* one that never says HELLO: the start fails, naming why */
    struct plm_err e = {0};
    struct gio_server *s = start(NULL, "nohello", &e);
    CHECK(s == NULL && strstr(e.msg, "did not start"));
}

/* The real walls, then a forbidden syscall: the filter kills the helper (SIGSYS), the guest
 * gets 503. The attempt is chosen by the conn_max the helper is given. */
static void test_filter_kills(void)
{
    static const char *const what[] = {"",       "openat", "socket",   "kill",
                                       "ptrace", "execve", "mprotect", "mmap(PROT_EXEC)"};
    for (unsigned attempt = 1; attempt <= 7; attempt++) {
        reset();
        struct gio_limits lim = LIM;
        lim.conn_max = attempt;
        struct gio_server *s = start(&lim, "escape", NULL);
        CHECK(s != NULL);
        if (!s)
            continue;
        int fd = dial();
        send_str(fd, "GET /x HTTP/1.1\r\n\r\n");
        read_all(fd, 3000);
        close(fd);
        struct gio_stats st;
        gio_server_stats(s, &st);
        bool ok = starts(resp, "HTTP/1.1 503 ") && WIFSIGNALED(st.last_status) && WTERMSIG(st.last_status) == SIGSYS;
        CHECK(ok);
        if (!ok)
            printf("# %s: status %d\n", what[attempt], st.last_status);
        gio_server_stop(s);
    }
}

/* Eight guests upload 1 MiB each while the handler answers each with the largest reply (4 MiB):
 * CALL and REPLY frames cross on the channel in both directions at once while the guests do
 * not read yet. Nothing may deadlock; every guest gets its whole answer. */
static void test_crossing_traffic(void)
{
    reset();
    pthread_mutex_lock(&mu);
    big = true;
    pthread_mutex_unlock(&mu);
    struct gio_server *s = start(NULL, NULL, NULL);
    CHECK(s != NULL);
    if (!s)
        return;
    enum { N = 8 };
    size_t up = 1024 * 1024;
    char *req = malloc(up + 128);
    int fds[N];
    int hn = snprintf(req, 128, "POST /big HTTP/1.1\r\nContent-Length: %zu\r\n\r\n", up);
    memset(req + hn, 'u', up);
    for (int i = 0; i < N; i++) {
        fds[i] = dial();
        size_t off = 0, total = (size_t)hn + up;
        while (fds[i] >= 0 && off < total) {
            ssize_t w = send(fds[i], req + off, total - off, MSG_NOSIGNAL);
            if (w <= 0)
                break;
            off += (size_t)w;
        }
    }
    free(req);
    int whole = 0;
    char *buf = malloc(GIO_REPLY_MAX + 4096);
    for (int i = 0; i < N && buf; i++) {
        size_t have = 0;
        int64_t until = now_ms() + 20000;
        while (now_ms() < until) {
            struct pollfd p = {fds[i], POLLIN, 0};
            if (poll(&p, 1, 1000) <= 0)
                continue;
            ssize_t n = recv(fds[i], buf + have, GIO_REPLY_MAX + 4096 - have, 0);
            if (n <= 0)
                break;
            have += (size_t)n;
        }
        char *body = memmem(buf, have, "\r\n\r\n", 4);
        whole += body && !strncmp(buf, "HTTP/1.1 200 ", 13) &&
                 memmem(buf, (size_t)(body - buf), "Content-Length: 4194304\r\n", 25) &&
                 (size_t)(buf + have - (body + 4)) == GIO_REPLY_MAX;
        close(fds[i]);
    }
    free(buf);
    CHECK(whole == N);
    CHECK(get(&calls) == N);
    pthread_mutex_lock(&mu);
    CHECK(body_total == (size_t)N * up);
    pthread_mutex_unlock(&mu);
    struct gio_stats st;
    gio_server_stats(s, &st);
    CHECK(st.failures == 0 && st.helpers == 1);
    gio_server_stop(s);
}

/* Correct frames written one byte at a time (gio_evil_trickle): reassembled, no violation. */
static void test_trickled_frames(void)
{
    reset();
    struct gio_server *s = start(NULL, "trickle", NULL);
    CHECK(s != NULL);
    if (!s)
        return;
    CHECK(starts(xs("GET /ignored HTTP/1.1\r\n\r\n"), "HTTP/1.1 200 OK\r\n") && strstr(resp, "POST /trickle"));
    CHECK(!strcmp(last_target, "/trickle") && get(&calls) == 1);
    pthread_mutex_lock(&mu);
    CHECK(body_total == 3);
    pthread_mutex_unlock(&mu);
    struct gio_stats st;
    gio_server_stats(s, &st);
    CHECK(st.failures == 0 && st.violations == 0 && st.live == 0);
    gio_server_stop(s);
}

static void test_limits_refused(void)
{
    struct gio_limits bad = LIM;
    bad.conn_max = GIO_CONN_CAP + 1;
    struct plm_err e = {0};
    struct gio_server *s = NULL;
    CHECK(gio_server_start(listener(), &bad, &H, NULL, &s, &e) < 0 && s == NULL);
    CHECK(gio_server_start(listener(), &LIM, &H, "/nonexistent/helper", &s, &e) < 0 && strstr(e.msg, "not found"));
}

int main(int argc, char **argv)
{
    build_dir = argc > 1 ? argv[1] : getenv("GIO_EVIL_DIR");
    if (!build_dir) {
        printf("not ok - the directory of the evil helpers (argv[1]) is required\n");
        return 1;
    }
    snprintf(dir, sizeof dir, "/tmp/plimsoll-gio-test-XXXXXX");
    if (!mkdtemp(dir)) {
        printf("not ok - mkdtemp: %s\n", strerror(errno));
        return 1;
    }
    snprintf(sock_path, sizeof sock_path, "%s/s.sock", dir);
    signal(SIGPIPE, SIG_IGN);
    test_dies_with_parent(); /* first: it forks */
    int fds0 = count_fds();
    test_confined();
    test_kill_mid_call();
    test_restart_cap();
    test_protocol_violations();
    test_filter_kills();
    test_crossing_traffic();
    test_trickled_frames();
    test_limits_refused();
    CHECK(gio_quiesce(3000));
    CHECK(count_fds() == fds0);
    unlink(sock_path);
    rmdir(dir);
    return unit_done();
}
