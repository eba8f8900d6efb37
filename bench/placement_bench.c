/* placement_bench.c: what placement adds to a call once every Describe is cached (issue 24: goal
 * <= 20 us). Four backends (process, container, kernel, vm) behind the library's fake transport;
 * a `kernel` floor, so two are filtered out and one is chosen. Two pairs are timed:
 *   1. the decision alone: plc_run with a send that returns at once, against calling that send
 *      directly (the difference is filtering, ranking and the choice record);
 *   2. a whole checked call over the fake daemon (encode, record stamp, decode, record check)
 *      placed against direct, for scale.
 * Prints one JSON line per measurement; never asserts a time. Usage: placement_bench [ITERATIONS] */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../src/lib/placement_fake.h"

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static int send_noop(const struct cli_conn *conn, const char *floor, void *ctx, struct cli_run_call *call)
{
    (void)conn;
    (void)ctx;
    call->floor = floor;
    call->o.verdict = CLI_V_RAN;
    return 0;
}

static int send_js(const struct cli_conn *conn, const char *floor, void *ctx, struct cli_run_call *call)
{
    (void)ctx;
    return cli_run_javascript(conn, "console.log(1)", NULL, floor, 0, call);
}

static double per_call_us(struct plc_pool *p, const struct cli_conn *direct, plc_send_fn send, bool placed, long n)
{
    static struct plc_choice choice;
    struct plc_requirement req = {.min_isolation = "kernel"};
    double t0 = now_s();
    for (long i = 0; i < n; i++) {
        struct cli_run_call call;
        if (placed) {
            plc_run(p, PLC_JAVASCRIPT, "", &req, send, NULL, &call, &choice);
        } else {
            memset(&call, 0, sizeof call);
            send(direct, "kernel", NULL, &call);
        }
        if (call.o.verdict != CLI_V_RAN) {
            fprintf(stderr, "placement_bench: a call did not run (%s)\n", call.o.message);
            exit(1);
        }
        cli_run_call_done(&call);
    }
    return (now_s() - t0) / (double)n * 1e6;
}

int main(int argc, char **argv)
{
    long n = argc > 1 ? strtol(argv[1], NULL, 10) : 200000;
    if (n <= 0)
        n = 200000;
    struct fake f[] = {{.url = "http://process", .provider = "quickjs", .isolation = "process"},
                       {.url = "http://container", .provider = "docker", .isolation = "container"},
                       {.url = "http://kernel", .provider = "docker", .isolation = "kernel"},
                       {.url = "http://vm", .provider = "microvm", .isolation = "vm"}};
    struct fake_net net;
    fake_net_init(&net, f, 4);
    struct plc_pool p;
    plc_pool_init(&p);
    p.transport = &net.t;
    p.ttl_s = 1e9; /* cached for the whole run: the figure is placement's, not Describe's */
    struct plm_err err = {0};
    for (size_t i = 0; i < 4; i++)
        if (plc_pool_add(&p, f[i].url + 7, f[i].url, "t", NULL, &err) < 0)
            return fprintf(stderr, "placement_bench: %s\n", err.msg), 1;
    plc_refresh(&p);
    const struct cli_conn *direct = &p.b[2].conn;
    (void)per_call_us(&p, direct, send_noop, true, n / 10); /* warm up */
    double d0 = per_call_us(&p, direct, send_noop, false, n), d1 = per_call_us(&p, direct, send_noop, true, n);
    printf("{\"bench\":\"placement_decision\",\"backends\":4,\"iterations\":%ld,\"direct_us\":%.3f,"
           "\"placed_us\":%.3f,\"added_us\":%.3f,\"goal_us\":20}\n", n, d0, d1, d1 - d0);
    long m = n / 20 > 0 ? n / 20 : 1;
    double c0 = per_call_us(&p, direct, send_js, false, m), c1 = per_call_us(&p, direct, send_js, true, m);
    printf("{\"bench\":\"placement_checked_call_fake_daemon\",\"backends\":4,\"iterations\":%ld,\"direct_us\":%.3f,"
           "\"placed_us\":%.3f,\"added_us\":%.3f,\"describes\":%d}\n", m, c0, c1, c1 - c0,
           f[0].describes + f[1].describes + f[2].describes + f[3].describes);
    plc_pool_done(&p);
    return 0;
}
