/* common/arrival.h */
#include "common/arrival.h"

/* A reader waiting for bytes [0, end): each on its own condition variable, so that a piece arriving wakes
 * only the readers it completes, not every waiting decoder thread for every 512 KiB piece (two threads
 * that only waited, woken each time, had slowed a 4K frame's receive from 8.6 to 13.6 ms on the GPU
 * host). Side by side against one broadcast (docs/bench-raw/...-ab-arrival-wakeups.txt): receive 9.1-9.9
 * -> 8.8-9.2 ms p50, total - encode 16.2 -> 16.0 ms and p99 19.5 -> 17.1: a little. */
struct hp_arrival_waiter {
    size_t end;
    pthread_cond_t wake;
    struct hp_arrival_waiter *next;
};

void hp_arrival_init(hp_arrival *a)
{
    pthread_mutex_init(&a->lock, NULL);
    a->waiters = NULL;
    a->arrived = 0;
    a->ended = false;
}

void hp_arrival_destroy(hp_arrival *a) { pthread_mutex_destroy(&a->lock); }

void hp_arrival_add(hp_arrival *a, size_t arrived)
{
    pthread_mutex_lock(&a->lock);
    a->arrived = arrived;
    for (struct hp_arrival_waiter *w = a->waiters; w; w = w->next)
        if (w->end <= arrived)
            pthread_cond_signal(&w->wake);
    pthread_mutex_unlock(&a->lock);
}

void hp_arrival_end(hp_arrival *a)
{
    pthread_mutex_lock(&a->lock);
    a->ended = true;
    for (struct hp_arrival_waiter *w = a->waiters; w; w = w->next)
        pthread_cond_signal(&w->wake);
    pthread_mutex_unlock(&a->lock);
}

bool hp_arrival_wait(hp_arrival *a, size_t end)
{
    pthread_mutex_lock(&a->lock);
    if (a->arrived < end && !a->ended) {
        struct hp_arrival_waiter me = {.end = end, .next = a->waiters};
        pthread_cond_init(&me.wake, NULL);
        a->waiters = &me;
        while (a->arrived < end && !a->ended)
            pthread_cond_wait(&me.wake, &a->lock);
        struct hp_arrival_waiter **at = &a->waiters;
        while (*at != &me)
            at = &(*at)->next;
        *at = me.next;
        pthread_cond_destroy(&me.wake);
    }
    bool in = a->arrived >= end;
    pthread_mutex_unlock(&a->lock);
    return in;
}

bool hp_arrival_cut_short(hp_arrival *a, size_t end)
{
    pthread_mutex_lock(&a->lock);
    bool cut = a->ended && a->arrived < end;
    pthread_mutex_unlock(&a->lock);
    return cut;
}
