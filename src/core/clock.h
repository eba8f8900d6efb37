/* clock.h: the daemon's clock readings, in one place. Monotonic for every interval and deadline
 * (never moves backwards); the wall clock only for timestamps shown to callers. */
#pragma once
#include <pthread.h>
#include <stdint.h>
#include <time.h>

static inline uint64_t clock_mono_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

static inline uint64_t clock_mono_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000 + (uint64_t)ts.tv_nsec / 1000;
}

static inline int64_t clock_unix_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static inline int64_t clock_mono_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* A condition variable whose timed waits count on the monotonic clock, so that a step of the
 * wall clock neither cuts a wait short nor stretches it. Its deadlines come from
 * clock_mono_after(). */
static inline void clock_cond_init(pthread_cond_t *cv)
{
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(cv, &ca);
    pthread_condattr_destroy(&ca);
}

/* A clock_mono_ms() instant as the absolute time a clock_cond_init variable waits until. */
static inline struct timespec clock_mono_at(uint64_t mono_ms)
{
    return (struct timespec){.tv_sec = (time_t)(mono_ms / 1000), .tv_nsec = (long)(mono_ms % 1000) * 1000000};
}

/* The monotonic instant ms from now, for pthread_cond_timedwait on a clock_cond_init variable. */
static inline struct timespec clock_mono_after(uint64_t ms)
{
    return clock_mono_at(clock_mono_ms() + ms);
}
