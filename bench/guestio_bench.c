/* guestio_bench.c: what the privilege separation of the docker grant socket costs (docs/
 * privsep.md). Uses only the dock_hostsock_* API, so the same file builds against the tree
 * before the split (the daemon parsing in its own threads) for a side-by-side figure:
 *   - start: dock_hostsock_start + dock_hostsock_stop of one run's socket (now: spawning,
 *     confining and reaping the helper);
 *   - call: one request from a client on the socket to a handler that answers at once and back
 *     (connect, GET, read to EOF), sequentially.
 * Prints one JSON line per figure. Usage: guestio_bench [starts] [calls] */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "../src/providers/docker/hostsock.h"

static uint64_t now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
}

static int cmp(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

static void report(const char *what, uint64_t *v, size_t n, size_t failures)
{
    qsort(v, n, sizeof *v, cmp);
    printf("{\"bench\":\"guestio\",\"what\":\"%s\",\"n\":%zu,\"failures\":%zu,\"p50_us\":%llu,\"p99_us\":%llu}\n", what,
           n, failures, (unsigned long long)v[n / 2], (unsigned long long)v[n * 99 / 100]);
}

static void answer(void *ctx, const char *method, const char *target, const uint8_t *body, size_t len,
                   struct plm_host_reply *out)
{
    (void)ctx, (void)method, (void)target, (void)body, (void)len;
    out->status = 200;
    out->body = (uint8_t *)strdup("{\"ok\":true}");
    out->len = out->body ? 11 : 0;
    out->content_type = strdup("application/json");
}

static const struct plm_host_api API = {.profile = "bench", .client_js = "", .node_preload = "", .call = answer};

static int one_call(const char *path)
{
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    snprintf(sa.sun_path, sizeof sa.sun_path, "%s", path);
    if (fd < 0 || connect(fd, (struct sockaddr *)&sa, sizeof sa) < 0) {
        if (fd >= 0)
            close(fd);
        return -1;
    }
    static const char req[] = "GET /v1/items/1 HTTP/1.1\r\nHost: x\r\n\r\n";
    if (send(fd, req, sizeof req - 1, MSG_NOSIGNAL) != (ssize_t)(sizeof req - 1)) {
        close(fd);
        return -1;
    }
    char buf[1024];
    size_t have = 0;
    for (ssize_t n; (n = recv(fd, buf + have, sizeof buf - 1 - have, 0)) > 0;)
        have += (size_t)n;
    close(fd);
    buf[have] = 0;
    return strncmp(buf, "HTTP/1.1 200 ", 13) == 0 && strstr(buf, "{\"ok\":true}") ? 0 : -1;
}

int main(int argc, char **argv)
{
    size_t starts = argc > 1 ? strtoul(argv[1], NULL, 10) : 200, calls = argc > 2 ? strtoul(argv[2], NULL, 10) : 2000;
    if (!starts || !calls)
        return 2;
    char base[] = "/tmp/plimsoll-gio-bench-XXXXXX";
    if (!mkdtemp(base))
        return 1;
    uint64_t *v = calloc(starts > calls ? starts : calls, sizeof *v);
    if (!v)
        return 1;
    size_t fail = 0;
    for (size_t i = 0; i < starts; i++) {
        struct dock_hostsock *hs = NULL;
        struct plm_err e = {0};
        uint64_t t0 = now_us();
        if (dock_hostsock_start(base, &API, NULL, &hs, &e) < 0) {
            fprintf(stderr, "start: %s\n", e.msg);
            fail++;
        }
        dock_hostsock_stop(hs);
        v[i] = now_us() - t0;
    }
    report("start_stop", v, starts, fail);
    struct dock_hostsock *hs = NULL;
    struct plm_err e = {0};
    if (dock_hostsock_start(base, &API, NULL, &hs, &e) < 0) {
        fprintf(stderr, "start: %s\n", e.msg);
        return 1;
    }
    fail = 0;
    for (size_t i = 0; i < calls; i++) {
        uint64_t t0 = now_us();
        fail += one_call(dock_hostsock_sock_path(hs)) < 0;
        v[i] = now_us() - t0;
    }
    report("call", v, calls, fail);
    dock_hostsock_stop(hs);
    dock_hostsock_quiesce(3000);
    rmdir(base);
    free(v);
    return fail ? 1 : 0;
}
