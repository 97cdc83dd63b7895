/* common/budget.h: the memory budget of requests in flight. Taking is all or nothing and never passes the
 * limit, also from many threads at once; the default limit comes from fixture cgroup trees (v2 memory.max,
 * a parent's limit, v1 memory.limit_in_bytes and its "no limit" value) or physical memory. */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/budget.h"
#include "cgroup_fixture.h"
#include "tap.h"


static uint64_t limit_of(const char *tree, const char *proc)
{
    char fs[512], proc_path[512];
    return fixture_tree(tree, proc, fs, sizeof(fs), proc_path, sizeof(proc_path)) ? hp_memory_limit_from_cgroup(fs, proc_path) : 1;
}

#define THREADS 8
#define ROUNDS 20000

static hp_budget shared;
static _Atomic int over; /* a thread saw the counter past the limit */

static void *taker(void *arg)
{
    (void)arg;
    for (int i = 0; i < ROUNDS; i++) {
        uint64_t bytes = 1 + (uint64_t)(i % 7) * 100;
        if (hp_budget_take(&shared, bytes)) {
            if (hp_budget_used(&shared) > shared.limit)
                atomic_store(&over, 1);
            hp_budget_give(&shared, bytes);
        }
    }
    return NULL;
}

static void semantics(void)
{
    hp_budget b;
    hp_budget_init(&b, 1000);
    tap_ok(hp_budget_take(&b, 600) && hp_budget_used(&b) == 600, "600 of 1000 taken");
    tap_ok(!hp_budget_take(&b, 401) && hp_budget_used(&b) == 600, "401 more refused, nothing taken (all or nothing)");
    tap_ok(hp_budget_take(&b, 400) && hp_budget_used(&b) == 1000, "the last 400 fit exactly");
    tap_ok(!hp_budget_take(&b, 1), "a full budget refuses a byte");
    hp_budget_give(&b, 1000);
    tap_ok(hp_budget_used(&b) == 0 && !hp_budget_take(&b, 1001), "given back; more than the whole limit never fits");
    tap_ok(!hp_budget_take(&b, UINT64_MAX) && hp_budget_used(&b) == 0, "UINT64_MAX bytes: refused, no overflow");
    hp_budget none;
    hp_budget_init(&none, 0);
    tap_ok(hp_budget_take(&none, (uint64_t)1 << 50) && hp_budget_take(NULL, 5), "limit 0 and a NULL budget take anything");

    hp_budget_init(&shared, 2000);
    pthread_t t[THREADS];
    for (int i = 0; i < THREADS; i++)
        pthread_create(&t[i], NULL, taker, NULL);
    for (int i = 0; i < THREADS; i++)
        pthread_join(t[i], NULL);
    tap_ok(!atomic_load(&over) && hp_budget_used(&shared) == 0,
           "%d threads taking and giving %d times each: never past the limit, all given back", THREADS, ROUNDS);
}

static void limits(void)
{
    fixture_begin("budget");
    static const struct {
        const char *tree;
        struct { const char *path, *content; } files[2];
        const char *proc;
        uint64_t want;
        const char *what;
    } trees[] = {
        {"a", {{"pod/c/memory.max", "25769803776\n"}, {"pod/memory.max", "max\n"}}, "0::/pod/c\n", 25769803776ull,
         "cgroup v2: the container's memory.max, 24 GiB"},
        {"b", {{"pod/memory.max", "8589934592\n"}, {"pod/c/memory.max", "max\n"}}, "0::/pod/c\n", 8589934592ull,
         "cgroup v2: the pod's limit binds a container without one"},
        {"c", {{"s/memory.max", "max\n"}}, "0::/s\n", 0, "cgroup v2: max everywhere is no limit"},
        {"d", {{"memory/kubepods/p/memory.limit_in_bytes", "4294967296\n"}}, "9:memory:/kubepods/p\n", 4294967296ull,
         "cgroup v1: memory.limit_in_bytes"},
        {"e", {{"memory/x/memory.limit_in_bytes", "9223372036854771712\n"}}, "9:memory:/x\n", 0,
         "cgroup v1: the kernel's largest value is no limit"},
    };
    for (size_t t = 0; t < sizeof(trees) / sizeof(trees[0]); t++) {
        for (size_t i = 0; i < 2 && trees[t].files[i].path; i++) {
            char rel[300];
            snprintf(rel, sizeof(rel), "%s/%s", trees[t].tree, trees[t].files[i].path);
            fixture_put(rel, trees[t].files[i].content);
        }
        uint64_t got = limit_of(trees[t].tree, trees[t].proc);
        tap_ok(got == trees[t].want, "%s (%llu)", trees[t].what, (unsigned long long)got);
    }
    fixture_end();
    long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
    uint64_t physical = (uint64_t)pages * (uint64_t)page, got = hp_memory_limit();
    tap_ok(got > 0 && got <= physical, "this process's memory limit: %llu MiB, at most the machine's %llu MiB",
           (unsigned long long)(got >> 20), (unsigned long long)(physical >> 20));
}

int main(void)
{
    semantics();
    limits();
    return tap_done();
}
