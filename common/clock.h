/* Monotonic time arithmetic shared by the daemon and the HTTP layer, and a thread's CPU time. */
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

/* CLOCK_MONOTONIC now plus ns nanoseconds: a deadline for pthread_cond_clockwait and the like. */
static inline struct timespec hp_monotonic_after_ns(uint64_t ns)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    uint64_t nsec = (uint64_t)t.tv_nsec + ns;
    t.tv_sec += (time_t)(nsec / 1000000000u);
    t.tv_nsec = (long)(nsec % 1000000000u);
    return t;
}

/* The calling thread's CPU time, in milliseconds. */
static inline double hp_thread_cpu_ms(void)
{
    struct timespec t;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return (double)t.tv_sec * 1e3 + (double)t.tv_nsec * 1e-6;
}

#endif
