/* Room for one more item in a malloc'd array that doubles as it fills (the client's lists: frames, file
 * names, parameter pairs). */
#ifndef HP_CLIENT_GROW_H
#define HP_CLIENT_GROW_H

#include <stdbool.h>
#include <stdlib.h>

/* *items holds count of cap items of size bytes; grown to 2 cap (first at least) when full. False when out
 * of memory (nothing changed). */
static inline bool hp_grow(void *items, size_t *cap, size_t count, size_t size, size_t first)
{
    void **p = items;
    if (count < *cap)
        return true;
    size_t want = *cap ? 2 * *cap : first;
    void *grown = realloc(*p, want * size);
    if (!grown)
        return false;
    *p = grown;
    *cap = want;
    return true;
}

#endif
