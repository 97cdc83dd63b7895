/* Bytes that are still arriving: a body being received while a decoder already reads it.
 *
 * Why: a 4K EXR takes about 10 ms to arrive over the network and as long again to decode; the decoder can
 * read the header, the chunk offsets and each chunk as soon as its bytes are in, so the two overlap and
 * the frame is decoded a chunk or two after its last byte (api/frames/render.c, "early decoding"). The receiver
 * writes into a buffer sized from Content-Length and calls hp_arrival_add after each piece; a reader that
 * needs bytes [0, end) calls hp_arrival_wait first. */
#ifndef HP_ARRIVAL_H
#define HP_ARRIVAL_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>

typedef struct hp_arrival {
    pthread_mutex_t lock;
    struct hp_arrival_waiter *waiters; /* readers waiting, each woken only when its bytes are in */
    size_t arrived; /* bytes [0, arrived) are in */
    bool ended;     /* no more will come: the whole body, or the request was cut off */
} hp_arrival;

void hp_arrival_init(hp_arrival *a);
void hp_arrival_destroy(hp_arrival *a);
/* The receiver: bytes [0, arrived) are in now. */
void hp_arrival_add(hp_arrival *a, size_t arrived);
/* The receiver: nothing more will arrive (complete, or the connection is gone). Wakes every reader. */
void hp_arrival_end(hp_arrival *a);
/* A reader: waits until bytes [0, end) are in; false when the arrival ended before them. */
bool hp_arrival_wait(hp_arrival *a, size_t end);
/* Without waiting: the arrival has ended before bytes [0, end) were in (the request was cut off). */
bool hp_arrival_cut_short(hp_arrival *a, size_t end);

#endif
