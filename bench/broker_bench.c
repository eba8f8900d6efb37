/* broker_bench.c: the latency one grant adds to an HTTP call (issue 6). Side by side in one
 * process, against the same loopback upstream (src/broker/test_upstream.c):
 *   direct  - libcurl GET on one reused handle (keep-alive), the obvious alternative
 *   broker  - brk_call through a per-run broker: route check, budget, breaker, credential
 *             headers, trace row, same libcurl underneath
 * Rounds alternate the two so drift on a shared machine hits both alike. Prints one JSON line
 * per mode (p50/p90/p99 in microseconds) and the added p50; never asserts a time.
 * Usage: broker_bench [calls-per-mode] */
#include <curl/curl.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../src/broker/broker.h"
#include "../src/broker/profiles.h"
#include "../src/broker/test_upstream.h"

static const char TOKEN[] = "bench-token-8d1f3c0a5e7b";

static const char *bench_getenv(const char *name)
{
    return strcmp(name, "BENCH_TOKEN") == 0 ? TOKEN : NULL;
}

static uint64_t now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
}

static size_t discard(char *p, size_t sz, size_t n, void *ud)
{
    (void)p;
    (void)ud;
    return sz * n;
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

static uint64_t pct(const uint64_t *v, size_t n, double p)
{
    return v[(size_t)((double)(n - 1) * p)];
}

static void report(const char *mode, uint64_t *v, size_t n, size_t failures)
{
    qsort(v, n, sizeof *v, cmp_u64);
    printf("{\"bench\":\"grant_call\",\"mode\":\"%s\",\"calls\":%zu,\"failures\":%zu,\"p50_us\":%llu,"
           "\"p90_us\":%llu,\"p99_us\":%llu}\n",
           mode, n, failures, (unsigned long long)pct(v, n, 0.5), (unsigned long long)pct(v, n, 0.9),
           (unsigned long long)pct(v, n, 0.99));
}

int main(int argc, char **argv)
{
    size_t n = argc > 1 ? strtoul(argv[1], NULL, 10) : 2000;
    if (n < 10 || n > 100000) {
        fprintf(stderr, "usage: broker_bench [calls-per-mode, 10..100000]\n");
        return 2;
    }
    static struct tu up;
    if (tu_start(&up) < 0) {
        fprintf(stderr, "broker_bench: cannot listen on 127.0.0.1\n");
        return 1;
    }
    char prof[1024];
    snprintf(prof, sizeof prof,
             "{\"profiles\": {\"bench\": {\"base_url\": \"%s\", \"allow\": [\"GET /v1/items/*\"], "
             "\"allowed_callers\": [\"bench\"], \"max_calls\": 100000, "
             "\"token\": {\"type\": \"static\", \"env\": \"BENCH_TOKEN\"}}}}",
             up.origin);
    struct plm_err err = {0};
    struct brk_profiles *ps = brk_profiles_parse(prof, strlen(prof), bench_getenv, &err);
    struct brk_run *run = ps ? brk_run_new(&ps->v[0], "bench", 300000, &err) : NULL;
    CURL *direct = curl_easy_init();
    uint64_t *t_direct = calloc(n, sizeof *t_direct), *t_broker = calloc(n, sizeof *t_broker);
    if (!run || !direct || !t_direct || !t_broker) {
        fprintf(stderr, "broker_bench: setup failed: %s\n", err.msg[0] ? err.msg : "out of memory");
        return 1;
    }
    char url[128], auth[128];
    snprintf(url, sizeof url, "%s/v1/items/1", up.origin);
    snprintf(auth, sizeof auth, "Authorization: Bearer %s", TOKEN);
    struct curl_slist *hdrs = curl_slist_append(NULL, auth);
    curl_easy_setopt(direct, CURLOPT_URL, url);
    curl_easy_setopt(direct, CURLOPT_HTTPHEADER, hdrs);
    curl_easy_setopt(direct, CURLOPT_WRITEFUNCTION, discard);
    curl_easy_setopt(direct, CURLOPT_PROXY, "");

    size_t fail_direct = 0, fail_broker = 0;
    const size_t round = 100;
    for (size_t done = 0, r = 0; done < n; done += round, r++) {
        size_t k = n - done < round ? n - done : round;
        for (int pass = 0; pass < 2; pass++) {
            bool brokered = (pass == 0) == (r % 2 == 0); /* alternate which mode goes first */
            for (size_t i = 0; i < k; i++) {
                uint64_t t0 = now_us();
                if (brokered) {
                    struct brk_reply rep;
                    brk_call(run, "GET", "/v1/items/1", NULL, 0, &rep);
                    fail_broker += rep.status != 200;
                    brk_reply_done(&rep);
                    t_broker[done + i] = now_us() - t0;
                } else {
                    long code = 0;
                    fail_direct += curl_easy_perform(direct) != CURLE_OK ||
                                   curl_easy_getinfo(direct, CURLINFO_RESPONSE_CODE, &code) != CURLE_OK || code != 200;
                    t_direct[done + i] = now_us() - t0;
                }
            }
        }
        tu_reset(&up); /* the upstream records a bounded number of requests */
    }
    report("direct", t_direct, n, fail_direct);
    report("broker", t_broker, n, fail_broker);
    printf("{\"bench\":\"grant_call\",\"added_p50_us\":%lld,\"ratio_p50\":%.2f}\n",
           (long long)pct(t_broker, n, 0.5) - (long long)pct(t_direct, n, 0.5),
           (double)pct(t_broker, n, 0.5) / (double)(pct(t_direct, n, 0.5) ? pct(t_direct, n, 0.5) : 1));

    curl_slist_free_all(hdrs);
    curl_easy_cleanup(direct);
    brk_run_free(run);
    brk_profiles_free(ps);
    free(t_direct);
    free(t_broker);
    tu_stop(&up);
    return fail_direct || fail_broker ? 1 : 0;
}
