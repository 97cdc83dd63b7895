/* common/cpus.h: the CPUs "one per core" pools are sized by. The cgroup quota lines parse as the kernel
 * writes them; the affinity mask bounds the count (a pod pinned to some CPUs of a larger node). */
#include <sched.h>
#include <string.h>
#include <unistd.h>

#include "common/cpus.h"
#include "tap.h"

int main(void)
{
    static const struct { const char *line; unsigned want; } lines[] = {
        {"max 100000\n", 0},     /* no limit */
        {"400000 100000\n", 4},  /* 4 CPUs */
        {"150000 100000\n", 2},  /* 1.5 CPUs: two threads can use the time */
        {"50000 100000\n", 1},   /* half a CPU: still one */
        {"100000 100000", 1},
        {"200000 50000\n", 4},
        {"", 0}, {"garbage\n", 0}, {"12x 100000\n", 0}, {"100000 0\n", 0}, {"-1 100000\n", 0},
    };
    for (size_t i = 0; i < sizeof(lines) / sizeof(lines[0]); i++) {
        unsigned got = hp_cpus_from_cpu_max(lines[i].line);
        tap_ok(got == lines[i].want, "cpu.max \"%.*s\": %u CPUs (want %u)", (int)strcspn(lines[i].line, "\n"),
               lines[i].line, got, lines[i].want);
    }
    tap_ok(hp_cpus_from_cfs(-1, 100000) == 0 && hp_cpus_from_cfs(200000, 100000) == 2 &&
               hp_cpus_from_cfs(250000, 100000) == 3 && hp_cpus_from_cfs(100000, 0) == 0,
           "cgroup v1 quota and period: -1 is no limit, 2.5 CPUs round up to 3");

    long online = sysconf(_SC_NPROCESSORS_ONLN);
    unsigned all = hp_usable_cpus();
    tap_ok(all >= 1 && (online < 1 || all <= (unsigned)online), "usable CPUs %u, between 1 and the %ld online",
           all, online);

    /* Pinned to one CPU of the current mask, then to two (where there are two), then back. */
    cpu_set_t saved, one;
    tap_ok(sched_getaffinity(0, sizeof(saved), &saved) == 0, "the affinity mask is readable");
    int first = -1, second = -1;
    for (int c = 0; c < CPU_SETSIZE && second < 0; c++)
        if (CPU_ISSET(c, &saved)) {
            if (first < 0)
                first = c;
            else
                second = c;
        }
    CPU_ZERO(&one);
    CPU_SET(first, &one);
    tap_ok(sched_setaffinity(0, sizeof(one), &one) == 0 && hp_usable_cpus() == 1,
           "pinned to CPU %d alone: 1 usable CPU", first);
    if (second >= 0) {
        CPU_SET(second, &one);
        unsigned two = sched_setaffinity(0, sizeof(one), &one) == 0 ? hp_usable_cpus() : 0;
        tap_ok(two >= 1 && two <= 2, "pinned to CPUs %d and %d: %u usable (2, or 1 under a quota of 1)", first,
               second, two);
    } else {
        tap_ok(hp_usable_cpus() == 1, "one CPU in the mask: 1 usable CPU");
    }
    tap_ok(sched_setaffinity(0, sizeof(saved), &saved) == 0 && hp_usable_cpus() == all,
           "the mask restored: %u usable CPUs again", all);
    return tap_done();
}
