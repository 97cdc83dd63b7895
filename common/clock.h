/* Monotonic time arithmetic shared by the daemon and the HTTP layer. */
#ifndef HP_CLOCK_H
#define HP_CLOCK_H

#include <stdint.h>
#include <time.h>

/* Milliseconds from a to b (CLOCK_MONOTONIC timespecs). */
static inline double hp_ms_between(const struct timespec *a, const struct timespec *b)
{
    return (double)(b->tv_sec - a->tv_sec) * 1e3 + (double)(b->tv_nsec - a->tv_nsec) / 1e6;
}

/* CLOCK_MONOTONIC now, in nanoseconds. */
static inline uint64_t hp_now_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;
}

#endif
