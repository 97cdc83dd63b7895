/* Group commit (group_commit.h). */
#include "common/group_commit.h"

void hp_group_commit_init(hp_group_commit *g)
{
    pthread_mutex_init(&g->lock, NULL);
    pthread_cond_init(&g->batch_done, NULL);
    g->waiting = NULL;
    g->waiting_tail = &g->waiting;
    g->running = 0;
    g->lanes = 1;
    g->alone = 0;
    g->batches = g->items = 0;
}

void hp_group_commit_lanes(hp_group_commit *g, unsigned lanes)
{
    pthread_mutex_lock(&g->lock);
    g->lanes = lanes ? lanes : 1;
    pthread_cond_broadcast(&g->batch_done); /* more lanes: waiting callers may lead now */
    pthread_mutex_unlock(&g->lock);
}

void hp_group_commit_destroy(hp_group_commit *g)
{
    pthread_mutex_destroy(&g->lock);
    pthread_cond_destroy(&g->batch_done);
}

/* The batch from first run with the lock released; the caller holds it, and has counted it in g->running. */
static void run_unlocked(hp_group_commit *g, hp_group_item *first, hp_group_run run, void *ctx)
{
    pthread_mutex_unlock(&g->lock);
    run(ctx, first);
    pthread_mutex_lock(&g->lock);
    for (hp_group_item *i = first, *next; i; i = next) {
        next = i->next; /* read first: an item marked done may be gone from its caller's stack at once */
        i->done = true;
        g->items++;
    }
    g->batches++;
    g->running--;
    pthread_cond_broadcast(&g->batch_done);
}

void hp_group_commit_join(hp_group_commit *g, hp_group_item *item, hp_group_run run, void *ctx)
{
    item->next = NULL;
    item->taken = item->done = false;
    pthread_mutex_lock(&g->lock);
    *g->waiting_tail = item;
    g->waiting_tail = &item->next;
    while (!item->done) {
        /* taken: another caller's batch holds it; wait for that batch, or for a lane to lead one with it */
        if (item->taken || g->alone || g->running >= g->lanes) {
            pthread_cond_wait(&g->batch_done, &g->lock);
            continue;
        }
        hp_group_item *batch = g->waiting; /* item's among them: not taken, so still waiting */
        for (hp_group_item *i = batch; i; i = i->next)
            i->taken = true;
        g->waiting = NULL;
        g->waiting_tail = &g->waiting;
        g->running++;
        run_unlocked(g, batch, run, ctx);
    }
    pthread_mutex_unlock(&g->lock);
}

void hp_group_commit_alone(hp_group_commit *g, hp_group_item *first, hp_group_run run, void *ctx)
{
    pthread_mutex_lock(&g->lock);
    /* No new batch leads while this one waits or runs (with two lanes or more one would nearly always be
     * running): the running ones end, then this one runs with none beside it. */
    g->alone++;
    while (g->running)
        pthread_cond_wait(&g->batch_done, &g->lock);
    g->running++;
    run_unlocked(g, first, run, ctx);
    g->alone--;
    pthread_cond_broadcast(&g->batch_done);
    pthread_mutex_unlock(&g->lock);
}

unsigned hp_group_commit_running(hp_group_commit *g)
{
    pthread_mutex_lock(&g->lock);
    unsigned running = g->running;
    pthread_mutex_unlock(&g->lock);
    return running;
}

void hp_group_commit_counts(hp_group_commit *g, unsigned long *batches, unsigned long *items)
{
    pthread_mutex_lock(&g->lock);
    *batches = g->batches;
    *items = g->items;
    pthread_mutex_unlock(&g->lock);
}
