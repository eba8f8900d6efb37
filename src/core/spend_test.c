/* spend_test.c: the paid allowance's books with a clock the test moves: reserve, charge, refuse,
 * per caller, the daemon-wide bound, the UTC day rollover (a run across midnight), and a session's
 * meter (cover, stop, a refused cover keeping the session covered). */
#include "spend.h"
#include "unit.h"

static int64_t now_ms;
static int64_t test_clock(void *ctx)
{
    (void)ctx;
    return now_ms;
}

#define S(x) ((uint64_t)(x) * 1000)
/* 2026-10-03 00:00:00 UTC */
#define DAY0 (1790985600LL * 1000)

static uint64_t caller_spent(struct spend *s, const char *who)
{
    uint64_t c, t;
    spend_spent(s, who, &c, &t);
    return c;
}
static uint64_t total_spent(struct spend *s)
{
    uint64_t c, t;
    spend_spent(s, "", &c, &t);
    return t;
}

static bool refused_capacity(int rc, const struct plm_err *err)
{
    return rc < 0 && err->kind == PLM_E_CAPACITY && err->refusal == PLM_REFUSAL_CAPACITY &&
           strncmp(err->msg, "paid budget: ", 13) == 0;
}

static void reserves_charges_and_refuses(void)
{
    struct plm_err err = {0};
    now_ms = DAY0 + 23 * 3600000LL; /* 23:00 */
    struct spend *s = spend_new(1000, test_clock, NULL);
    struct spend_hold *h = NULL, *h2 = NULL;
    CHECK(spend_reserve(s, "alice", 300, S(200), SPEND_RUN, &h, &err) == 0);
    CHECK(caller_spent(s, "alice") == S(200)); /* held in full while it runs */
    CHECK(spend_settle(s, h, S(30)) == S(30));
    CHECK(caller_spent(s, "alice") == S(30) && total_spent(s) == S(30));
    /* 30 spent of 300: 271 does not fit, 270 fits exactly */
    CHECK(refused_capacity(spend_reserve(s, "alice", 300, S(271), SPEND_RUN, &h, &err), &err));
    CHECK(strstr(err.msg, "270 of its 300") && strstr(err.msg, "this run needs 271"));
    CHECK(spend_refused(s, false) == 1 && spend_refused(s, true) == 0);
    CHECK(spend_reserve(s, "alice", 300, S(270), SPEND_RUN, &h, &err) == 0);
    CHECK(spend_settle(s, h, S(36000)) == S(270)); /* a run longer than its reservation is charged it */
    CHECK(caller_spent(s, "alice") == S(300));

    /* The daemon's allowance binds across callers; bob has none of his own (0). */
    CHECK(refused_capacity(spend_reserve(s, "bob", 0, S(701), SPEND_RUN, &h, &err), &err));
    CHECK(strstr(err.msg, "daemon's paid allowance") && !strstr(err.msg, "300"));
    CHECK(spend_refused(s, true) == 1);
    CHECK(spend_reserve(s, "bob", 0, S(700), SPEND_RUN, &h2, &err) == 0);
    CHECK(caller_spent(s, "bob") == S(700) && caller_spent(s, "alice") == S(300) && total_spent(s) == S(1000));

    /* Two hours later: a new UTC day. bob's run, still open, is counted in it in full. */
    now_ms += 2 * 3600000LL;
    CHECK(total_spent(s) == S(700) && caller_spent(s, "alice") == 0);
    /* it started at 23:00 and took 1 s: nothing of it ran after midnight */
    CHECK(spend_settle(s, h2, S(1)) == S(1));
    CHECK(caller_spent(s, "bob") == 0 && total_spent(s) == 0);
    CHECK(spend_settle(s, NULL, S(5)) == 0);
    spend_free(s);
}

static void a_run_across_midnight_counts_in_the_new_day(void)
{
    struct plm_err err = {0};
    struct spend *s = spend_new(150, test_clock, NULL);
    struct spend_hold *h = NULL, *x = NULL;
    now_ms = DAY0 + 86400000LL - 60000; /* 23:59:00 */
    CHECK(spend_reserve(s, "alice", 0, S(100), SPEND_RUN, &h, &err) == 0);
    now_ms += S(80); /* 00:00:20, still running */
    CHECK(total_spent(s) == S(100));
    CHECK(refused_capacity(spend_reserve(s, "bob", 0, S(60), SPEND_RUN, &x, &err), &err));
    CHECK(spend_settle(s, h, S(90)) == S(90));
    CHECK(total_spent(s) == S(30)); /* the 30 s it ran after midnight */

    /* the same when the settle is the first thing the books see after midnight */
    now_ms = DAY0 + 2 * 86400000LL - 60000;
    CHECK(spend_reserve(s, "alice", 0, S(100), SPEND_RUN, &h, &err) == 0);
    now_ms += S(80);
    spend_settle(s, h, S(90));
    CHECK(total_spent(s) == S(30) && caller_spent(s, "alice") == S(30));
    spend_free(s);
}

static void callers_are_counted_apart(void)
{
    struct plm_err err = {0};
    struct spend *s = spend_new(0, test_clock, NULL);
    struct spend_hold *a = NULL, *b = NULL;
    now_ms = DAY0 + 3600000LL;
    CHECK(spend_reserve(s, "alice", 100, S(100), SPEND_RUN, &a, &err) == 0);
    CHECK(refused_capacity(spend_reserve(s, "alice", 100, S(1), SPEND_RUN, &b, &err), &err));
    CHECK(spend_reserve(s, "bob", 100, S(100), SPEND_RUN, &b, &err) == 0); /* alice's spend is not bob's */
    spend_settle(s, a, S(40));
    spend_settle(s, b, S(10));
    CHECK(caller_spent(s, "alice") == S(40) && caller_spent(s, "bob") == S(10) && total_spent(s) == S(50));
    /* no daemon allowance: nothing caps a caller without one of its own */
    CHECK(spend_reserve(s, "carol", 0, S(1000000), SPEND_RUN, &a, &err) == 0);
    spend_settle(s, a, 0);
    /* the next day every caller starts from zero */
    now_ms += 86400000LL;
    CHECK(caller_spent(s, "alice") == 0 && total_spent(s) == 0);
    CHECK(spend_reserve(s, "alice", 100, S(100), SPEND_RUN, &a, &err) == 0);
    spend_settle(s, a, S(100));
    spend_free(s);
}

static void a_meter_charges_only_running_time(void)
{
    struct plm_err err = {0};
    struct spend *s = spend_new(0, test_clock, NULL);
    struct spend_meter m;
    now_ms = DAY0 + 12 * 3600000LL;
    spend_meter_init(&m, s, "alice", 1000);
    CHECK(spend_meter_cover(&m, S(100), &err) == 0 && caller_spent(s, "alice") == S(100));
    now_ms += S(10);
    CHECK(spend_meter_cover(&m, S(5), &err) == 0 && caller_spent(s, "alice") == S(100)); /* inside what is held */
    now_ms += S(80); /* 90 s since the open */
    CHECK(spend_meter_cover(&m, S(100), &err) == 0 && caller_spent(s, "alice") == S(190));
    now_ms += S(30);
    CHECK(spend_meter_stop(&m) == S(120) && caller_spent(s, "alice") == S(120) && !spend_meter_running(&m));
    now_ms += 3600000LL; /* suspended: nothing bills */
    CHECK(spend_meter_cover(&m, S(50), &err) == 0 && caller_spent(s, "alice") == S(170) && spend_meter_running(&m));
    now_ms += S(5);
    CHECK(spend_meter_stop(&m) == S(125) && caller_spent(s, "alice") == S(125));
    CHECK(spend_meter_stop(&m) == S(125)); /* stopping twice charges nothing more */
    spend_free(s);
}

static void a_refused_cover_keeps_the_session_covered(void)
{
    struct plm_err err = {0};
    struct spend *s = spend_new(0, test_clock, NULL);
    struct spend_meter m;
    now_ms = DAY0 + 12 * 3600000LL;
    spend_meter_init(&m, s, "alice", 150);
    CHECK(spend_meter_cover(&m, S(100), &err) == 0);
    now_ms += S(40);
    /* 40 charged + 120 held > 150 */
    CHECK(refused_capacity(spend_meter_cover(&m, S(120), &err), &err) && strstr(err.msg, "this session needs 120"));
    CHECK(caller_spent(s, "alice") == S(100) && spend_meter_running(&m)); /* 40 ran + the 60 still covered */
    now_ms += S(60);
    CHECK(spend_meter_stop(&m) == S(100) && caller_spent(s, "alice") == S(100));
    spend_free(s);
}

int main(void)
{
    reserves_charges_and_refuses();
    a_run_across_midnight_counts_in_the_new_day();
    callers_are_counted_apart();
    a_meter_charges_only_running_time();
    a_refused_cover_keeps_the_session_covered();
    struct spend *real = spend_new(0, NULL, NULL); /* the real clock works too */
    struct spend_hold *h = NULL;
    struct plm_err err = {0};
    CHECK(spend_reserve(real, "x", 0, 5, SPEND_RUN, &h, &err) == 0 && spend_settle(real, h, 1) == 1);
    spend_free(real);
    return unit_done();
}
