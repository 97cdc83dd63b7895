/* A rate limit for log lines a client can cause (every dropped connection, every malformed request): at
 * most `burst` lines per window, the rest counted and reported once when the window ends, so that a flood
 * of bad connections costs the log a line every few seconds instead of one per connection.
 *
 * Thread-safe. Windows start with the first line after the previous one ended (no timer). */
#ifndef HP_RATELIMIT_H
#define HP_RATELIMIT_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <time.h>

typedef struct hp_ratelimit {
    pthread_mutex_t lock;
    double window_s;
    unsigned burst;
    struct timespec window_start;
    unsigned in_window;  /* lines allowed in this window */
    uint64_t suppressed; /* lines left out in this window */
} hp_ratelimit;

#define HP_RATELIMIT_INIT(window_seconds, burst_lines) \
    {.lock = PTHREAD_MUTEX_INITIALIZER, .window_s = (window_seconds), .burst = (burst_lines)}

/* Whether this line may be written. *ended_suppressed: the lines left out in a window that has just ended,
 * to be reported once (0 otherwise). */
bool hp_ratelimit_allow(hp_ratelimit *rl, uint64_t *ended_suppressed);

#endif
