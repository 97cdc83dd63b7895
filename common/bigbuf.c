/* The pool of common/bigbuf.h. */
#include "common/bigbuf.h"

#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>

/* A header before each buffer: its capacity, and the link while it is kept. 64 bytes keep the data as
 * aligned as malloc's. */
typedef struct header {
    size_t capacity;
    struct header *next;
    unsigned char pad[48];
} header;
_Static_assert(sizeof(header) == 64, "the header keeps the data 64-byte aligned from malloc's");

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static header *kept;              /* free buffers, most recently put first */
static size_t kept_bytes;
static size_t limit = (size_t)1 << 30;

void hp_bigbuf_set_limit(size_t bytes)
{
    pthread_mutex_lock(&lock);
    limit = bytes;
    header *drop = NULL;
    while (kept && kept_bytes > limit) { /* the oldest go first: walk to the end */
        header **at = &kept;
        while ((*at)->next)
            at = &(*at)->next;
        drop = *at;
        *at = NULL;
        kept_bytes -= drop->capacity;
        free(drop);
    }
    pthread_mutex_unlock(&lock);
}

size_t hp_bigbuf_kept(void)
{
    pthread_mutex_lock(&lock);
    size_t n = kept_bytes;
    pthread_mutex_unlock(&lock);
    return n;
}

void *hp_bigbuf_get(size_t size)
{
    if (size >= HP_BIGBUF_MIN) {
        pthread_mutex_lock(&lock);
        header **best = NULL;
        for (header **at = &kept; *at; at = &(*at)->next)
            if ((*at)->capacity >= size && (*at)->capacity / 2 <= size &&
                (!best || (*at)->capacity < (*best)->capacity))
                best = at;
        header *h = NULL;
        if (best) {
            h = *best;
            *best = h->next;
            kept_bytes -= h->capacity;
        }
        pthread_mutex_unlock(&lock);
        if (h)
            return h + 1;
    }
    if (size > SIZE_MAX - sizeof(header))
        return NULL;
    header *h = malloc(sizeof(header) + size);
    if (!h)
        return NULL;
    h->capacity = size;
    h->next = NULL;
    return h + 1;
}

void hp_bigbuf_put(void *p)
{
    if (!p)
        return;
    header *h = (header *)p - 1;
    if (h->capacity >= HP_BIGBUF_MIN) {
        pthread_mutex_lock(&lock);
        if (kept_bytes + h->capacity <= limit) {
            h->next = kept;
            kept = h;
            kept_bytes += h->capacity;
            h = NULL;
        }
        pthread_mutex_unlock(&lock);
    }
    free(h);
}
