/* common/arrival.h */
#include "common/arrival.h"

void hp_arrival_init(hp_arrival *a)
{
    pthread_mutex_init(&a->lock, NULL);
    pthread_cond_init(&a->more, NULL);
    a->arrived = 0;
    a->ended = false;
}

void hp_arrival_destroy(hp_arrival *a)
{
    pthread_cond_destroy(&a->more);
    pthread_mutex_destroy(&a->lock);
}

void hp_arrival_add(hp_arrival *a, size_t arrived)
{
    pthread_mutex_lock(&a->lock);
    a->arrived = arrived;
    pthread_cond_broadcast(&a->more);
    pthread_mutex_unlock(&a->lock);
}

void hp_arrival_end(hp_arrival *a)
{
    pthread_mutex_lock(&a->lock);
    a->ended = true;
    pthread_cond_broadcast(&a->more);
    pthread_mutex_unlock(&a->lock);
}

bool hp_arrival_wait(hp_arrival *a, size_t end)
{
    pthread_mutex_lock(&a->lock);
    while (a->arrived < end && !a->ended)
        pthread_cond_wait(&a->more, &a->lock);
    bool in = a->arrived >= end;
    pthread_mutex_unlock(&a->lock);
    return in;
}
