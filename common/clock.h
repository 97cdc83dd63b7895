/* Monotonic time arithmetic shared by the daemon and the HTTP layer. */
#ifndef HP_CLOCK_H
#define HP_CLOCK_H

#include <time.h>

/* Milliseconds from a to b (CLOCK_MONOTONIC timespecs). */
static inline double hp_ms_between(const struct timespec *a, const struct timespec *b)
{
    return (double)(b->tv_sec - a->tv_sec) * 1e3 + (double)(b->tv_nsec - a->tv_nsec) / 1e6;
}

#endif
