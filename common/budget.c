#include "common/budget.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/cgroup.h"

void hp_budget_init(hp_budget *budget, uint64_t limit)
{
    atomic_init(&budget->used, 0);
    budget->limit = limit;
}

bool hp_budget_take(hp_budget *budget, uint64_t bytes)
{
    if (!budget)
        return true;
    uint64_t used = atomic_load(&budget->used);
    do {
        if (budget->limit && (bytes > budget->limit || used > budget->limit - bytes))
            return false;
    } while (!atomic_compare_exchange_weak(&budget->used, &used, used + bytes));
    return true;
}

void hp_budget_give(hp_budget *budget, uint64_t bytes)
{
    if (budget && bytes)
        atomic_fetch_sub(&budget->used, bytes);
}

uint64_t hp_budget_used(const hp_budget *budget) { return budget ? atomic_load(&budget->used) : 0; }

/* Past this a v1 limit means none: the kernel writes the largest page-aligned 63-bit number. */
#define NO_LIMIT_ABOVE ((uint64_t)1 << 60)

static uint64_t dir_memory(const char *dir, bool v2)
{
    char line[64];
    if (!hp_cgroup_read(dir, v2 ? "memory.max" : "memory.limit_in_bytes", line, sizeof(line)) ||
        strncmp(line, "max", 3) == 0)
        return 0;
    char *end;
    unsigned long long v = strtoull(line, &end, 10);
    return end != line && v > 0 && v < NO_LIMIT_ABOVE ? (uint64_t)v : 0;
}

uint64_t hp_memory_limit_from_cgroup(const char *fs_root, const char *proc_cgroup)
{
    return hp_cgroup_limit(fs_root, proc_cgroup, "memory", dir_memory);
}

uint64_t hp_memory_limit(void)
{
    long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
    uint64_t physical = pages > 0 && page > 0 ? (uint64_t)pages * (uint64_t)page : 0;
    uint64_t cgroup = hp_memory_limit_from_cgroup("/sys/fs/cgroup", "/proc/self/cgroup");
    return cgroup && (!physical || cgroup < physical) ? cgroup : physical;
}
