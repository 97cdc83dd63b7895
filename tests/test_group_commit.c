/* common/group_commit.h: THREADS threads each join ITEMS items, one after another, with one lane and with two.
 * Every item is run exactly once, in a batch that holds it, before its join returns; no more batches run at
 * once than the lanes, and with two lanes two do; under load batches hold more than one item; a caller alone
 * is run at once; hp_group_commit_alone runs its batch between the others, whole, none beside it, and soon
 * (no new batch leads while it waits).
 * ThreadSanitizer runs it too (deploy/debian.sh). */
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <time.h>

#include "common/group_commit.h"
#include "tap.h"

#define THREADS 8
#define ITEMS 400

typedef struct job {
    hp_group_item item; /* first */
    int thread, seq;
    int runs;     /* times a batch ran it */
    bool was_run; /* set by the batch, read by its caller after the join */
} job;

static hp_group_commit g_group;
static atomic_int g_running, g_most_running, g_max_batch, g_batches_seen, g_alone_beside;
static atomic_bool g_alone_running;
/* Set as hp_group_commit_alone is called, cleared as its batch starts: the batches that started in between
 * (overtook it) are counted. */
static atomic_bool g_alone_asked;
static atomic_int g_overtook;

static void most(atomic_int *m, int n)
{
    int seen = atomic_load(m);
    while (n > seen && !atomic_compare_exchange_weak(m, &seen, n))
        ;
}

static void run(void *ctx, hp_group_item *first)
{
    (void)ctx;
    most(&g_most_running, atomic_fetch_add(&g_running, 1) + 1);
    if (atomic_load(&g_alone_asked))
        atomic_fetch_add(&g_overtook, 1);
    if (atomic_load(&g_alone_running))
        atomic_fetch_add(&g_alone_beside, 1);
    int n = 0;
    for (hp_group_item *i = first; i; i = i->next) {
        job *j = (job *)i;
        j->runs++;
        j->was_run = true;
        n++;
    }
    struct timespec d = {0, 50000}; /* a batch takes a while: others gather behind it */
    nanosleep(&d, NULL);
    most(&g_max_batch, n);
    atomic_fetch_add(&g_batches_seen, 1);
    atomic_fetch_sub(&g_running, 1);
}

static job g_jobs[THREADS][ITEMS];
static atomic_int g_unfinished; /* joins that returned before their item ran */

static void *worker(void *arg)
{
    int t = (int)(intptr_t)arg;
    for (int k = 0; k < ITEMS; k++) {
        job *j = &g_jobs[t][k];
        *j = (job){.thread = t, .seq = k};
        hp_group_commit_join(&g_group, &j->item, run, NULL);
        if (!j->was_run || !j->item.done)
            atomic_fetch_add(&g_unfinished, 1);
    }
    return NULL;
}

/* hp_group_commit_alone's batch, run with g_alone_running set for the runs beside it to see. */
static void run_alone(void *ctx, hp_group_item *first)
{
    atomic_store(&g_alone_asked, false);
    run(ctx, first);
    atomic_store(&g_alone_running, true);
    struct timespec d = {0, 200000}; /* long enough for a batch beside it to start, were one let */
    nanosleep(&d, NULL);
    atomic_store(&g_alone_running, false);
}

static void scenario(unsigned lanes)
{
    atomic_store(&g_running, 0);
    atomic_store(&g_most_running, 0);
    atomic_store(&g_max_batch, 0);
    atomic_store(&g_batches_seen, 0);
    atomic_store(&g_alone_beside, 0);
    atomic_store(&g_unfinished, 0);
    atomic_store(&g_overtook, 0);
    hp_group_commit_init(&g_group);
    hp_group_commit_lanes(&g_group, lanes);
    job alone = {.thread = 0, .seq = 0};
    hp_group_commit_join(&g_group, &alone.item, run, NULL);
    unsigned long batches, items;
    hp_group_commit_counts(&g_group, &batches, &items);
    tap_ok(alone.runs == 1 && batches == 1 && items == 1, "%u lane(s): a caller alone is run at once, in a batch of "
           "its own", lanes);

    pthread_t th[THREADS];
    for (int t = 0; t < THREADS; t++)
        pthread_create(&th[t], NULL, worker, (void *)(intptr_t)t);
    /* batches of a given size between the others, as hp_exr_zip_gpu_run_together runs them */
    job together[3] = {{.thread = 0, .seq = 0}, {.thread = 0, .seq = 1}, {.thread = 0, .seq = 2}};
    int together_whole = 0;
    for (int r = 0; r < 50; r++) {
        for (int i = 0; i < 3; i++) {
            together[i].item.next = i < 2 ? &together[i + 1].item : NULL;
            together[i].runs = 0;
        }
        atomic_store(&g_alone_asked, true);
        hp_group_commit_alone(&g_group, &together[0].item, run_alone, NULL);
        together_whole += together[0].runs == 1 && together[1].runs == 1 && together[2].runs == 1;
    }
    for (int t = 0; t < THREADS; t++)
        pthread_join(th[t], NULL);
    /* Only batches that were starting as it was called may overtake it: a few in all, where a caller that
     * waited for every lane to be free at once waited out hundreds of batches a call with two lanes. */
    tap_ok(atomic_load(&g_overtook) <= 250, "%u lane(s): hp_group_commit_alone is not starved by the batches that "
           "keep coming: %d batches started while its 50 calls waited", lanes, atomic_load(&g_overtook));
    tap_ok(together_whole == 50 && atomic_load(&g_alone_beside) == 0, "%u lane(s): hp_group_commit_alone runs its "
           "batch whole, between the others: %d of 50, %d batches beside it", lanes, together_whole,
           atomic_load(&g_alone_beside));

    int once = 0;
    for (int t = 0; t < THREADS; t++)
        for (int k = 0; k < ITEMS; k++)
            once += g_jobs[t][k].runs == 1;
    tap_ok(once == THREADS * ITEMS, "%u lane(s): every item is run exactly once: %d of %d", lanes, once,
           THREADS * ITEMS);
    tap_ok(atomic_load(&g_unfinished) == 0, "%u lane(s): no join returns before its item has run: %d did", lanes,
           atomic_load(&g_unfinished));
    tap_ok(atomic_load(&g_most_running) == (int)lanes, "%u lane(s): at most that many batches run at once, and under "
           "load that many do: %d at most", lanes, atomic_load(&g_most_running));
    hp_group_commit_counts(&g_group, &batches, &items);
    unsigned long expect = 1ul + THREADS * ITEMS + 50ul * 3;
    tap_ok(items == expect && batches == (unsigned long)atomic_load(&g_batches_seen),
           "%u lane(s): the counts: %lu items in %lu batches (%lu items expected; the runs saw %d batches)", lanes,
           items, batches, expect, atomic_load(&g_batches_seen));
    tap_ok(atomic_load(&g_max_batch) > 1 && batches < items,
           "%u lane(s): under load the batches gather: the largest held %d items, %lu batches for %lu items", lanes,
           atomic_load(&g_max_batch), batches, items);
    hp_group_commit_destroy(&g_group);
}

int main(void)
{
    scenario(1);
    scenario(2);
    return tap_done();
}
