/* The memory budget of requests in flight (max_inflight_mb): bytes are taken from it before they are
 * allocated (a body when its headers come, a decoded frame when its header is probed) and given back when
 * freed. A request that does not fit is answered 503 with Retry-After at once, so that a pod under load
 * stays within its memory limit instead of being killed by the kernel with every frame in it: the queue's
 * length alone bounds frames, not bytes, and one frame can be 4 GiB (docs/SECURITY.md).
 *
 * Lock-free (one atomic counter); any thread. */
#ifndef HP_COMMON_BUDGET_H
#define HP_COMMON_BUDGET_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

typedef struct hp_budget {
    _Atomic uint64_t used;
    uint64_t limit; /* 0: no limit */
} hp_budget;

void hp_budget_init(hp_budget *budget, uint64_t limit);
/* Takes bytes when they fit under the limit (all or nothing); false when they do not. A NULL budget takes
 * anything. */
bool hp_budget_take(hp_budget *budget, uint64_t bytes);
void hp_budget_give(hp_budget *budget, uint64_t bytes);
uint64_t hp_budget_used(const hp_budget *budget);

/* The memory this process may use: the tightest cgroup memory limit (v2 memory.max, v1
 * memory.limit_in_bytes) or, with none, the machine's physical memory. */
uint64_t hp_memory_limit(void);
/* The cgroup part alone, read under fs_root from a /proc/PID/cgroup file; 0: no limit. For tests. */
uint64_t hp_memory_limit_from_cgroup(const char *fs_root, const char *proc_cgroup);

#endif
