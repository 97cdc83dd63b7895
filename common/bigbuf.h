/* Large buffers kept warm between requests: the decoded frame, its depth plane, the image read back.
 *
 * Why: glibc serves every allocation over its mmap threshold (at most 32 MiB, and any allocation larger
 * than a thread arena's 64 MiB heap) with a fresh mmap, so each request's 66 MB 4K frame was paged in and
 * zeroed by the kernel again: writing 66 MB of fresh pages took 38 ms on the development machine against
 * 10 ms for the same bytes already mapped. A render farm sends frames of one size over and over; keeping
 * the freed buffers for the next request of that size removes the faults. mallopt cannot do this for
 * buffers of this size (the threshold's ceiling), hence this small pool.
 *
 * hp_bigbuf_get is malloc, hp_bigbuf_put is free, for memory that only these two handle. Buffers of
 * HP_BIGBUF_MIN bytes or more are kept on put, up to a total (hp_bigbuf_set_limit, 1 GiB by default), and
 * handed out again to a get of a size that fits (not more than twice the size asked). Thread-safe. */
#ifndef HP_BIGBUF_H
#define HP_BIGBUF_H

#include <stddef.h>

#define HP_BIGBUF_MIN (4u << 20)

void *hp_bigbuf_get(size_t size);
void hp_bigbuf_put(void *p);
/* Bytes kept free at most (0: keep none). */
void hp_bigbuf_set_limit(size_t bytes);
/* Bytes kept free now, for tests and metrics. */
size_t hp_bigbuf_kept(void);

#endif
