#include "common/ratelimit.h"

#include "common/clock.h"

bool hp_ratelimit_allow(hp_ratelimit *rl, uint64_t *ended_suppressed)
{
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    pthread_mutex_lock(&rl->lock);
    *ended_suppressed = 0;
    bool fresh = rl->window_start.tv_sec == 0 && rl->window_start.tv_nsec == 0;
    if (fresh || hp_ms_between(&rl->window_start, &now) >= rl->window_s * 1e3) {
        *ended_suppressed = rl->suppressed;
        rl->suppressed = 0;
        rl->in_window = 0;
        rl->window_start = now;
    }
    bool allow = rl->in_window < rl->burst;
    if (allow)
        rl->in_window++;
    else
        rl->suppressed++;
    pthread_mutex_unlock(&rl->lock);
    return allow;
}
