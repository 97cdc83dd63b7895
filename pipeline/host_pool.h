/* Mapped GPU host memory that a request's frame is decoded into and its image read back into, taken and
 * given back by any thread.
 *
 * Why: the frame graph's own staging belongs to the GPU thread, so a frame decoded on an HTTP thread had
 * to be decoded into ordinary memory and copied again into the staging on the GPU thread (66 MB for a 4K
 * half frame), and the image copied out of the read-back memory before the encoders could have it: about
 * 20 ms of a 4K request went to those two copies (docs/BENCHMARKS.md, issue 4). With a block from this
 * pool the decoder writes where the GPU copies from (hp_frame_graph_begin_with), and the encoder reads
 * where the GPU wrote.
 *
 * Blocks are Vulkan buffers with their memory mapped for good: HP_MEM_UPLOAD (write-combined where the
 * device has it: write them in order, never read them) and HP_MEM_READBACK (cached). Like
 * common/bigbuf.h, a given-back block is kept, up to a total (and the recent peak beyond it:
 * hp_host_pool_keep_recent_peak), for the next request of a size it fits (no more than twice the size asked): a render farm sends one size over and over, and pinned memory is slow
 * to allocate. A block must go back before the pool is destroyed. Thread-safe. */
#ifndef HP_HOST_POOL_H
#define HP_HOST_POOL_H

#include <stdbool.h>
#include <stddef.h>

#include "pipeline/gpu.h"

typedef struct hp_host_pool hp_host_pool;

typedef struct hp_host_block {
    hp_buffer buf;          /* buf.mapped: buf.size bytes */
    hp_mem_kind kind;
    hp_host_pool *pool;     /* where it goes back */
    /* For making ahead (hp_host_pool_make_ahead): the entry of the load that counted it out (-1: none), so that
     * it comes off that load's count and no other's; whether it is a spare made ahead, kept and not yet handed
     * out. */
    int load;
    bool spare;
    struct hp_host_block *next; /* while kept */
} hp_host_block;

/* keep_bytes: blocks kept for reuse at most (0: none); as much again of device blocks, unless
 * hp_host_pool_keep_device says otherwise. */
hp_code hp_host_pool_create(hp_gpu *gpu, size_t keep_bytes, hp_host_pool **out, hp_err *err);
/* Device blocks kept for reuse at most (HP_MEM_DEVICE), apart from host blocks: they take the device's memory,
 * not the host's. Before any block is given back. */
void hp_host_pool_keep_device(hp_host_pool *pool, size_t keep_bytes);
/* Beyond the keep limits, the recent peak: out and kept together may reach the most that was out in the last
 * 30 to 60 s, within these ceilings (host and device blocks, each its own), so that a load that held that much
 * finds its blocks kept rather than making them again (64 clients of 4K frames hold more than a quarter of
 * max_inflight_mb: the pool made and freed blocks under a steady load, docs/BENCHMARKS.md). Once the load has
 * passed, the blocks past the keep limits are freed (hp_host_pool_put, hp_host_pool_trim). 0, 0: the keep
 * limits alone (the default). */
void hp_host_pool_keep_recent_peak(hp_host_pool *pool, size_t host_ceiling, size_t device_ceiling);
/* Blocks made ahead of the requests (issue 36: 64 clients made 0 to 52 blocks after the warm-up, up to 190 ms
 * each, on the threads that asked, the GPU thread's among them, because more blocks were out at once than ever
 * before; docs/BENCHMARKS.md). With it on, the pool's own thread keeps, for each load it sees (a kind of block
 * and sizes in one bucket, within an eighth of each other; eight loads at once), spares beside the blocks out: half as many,
 * rounded up, made at the load's largest size. So a load that grows finds its blocks made, and a request makes
 * one itself only when the load outruns that thread. Spares are made only while out and kept together stay
 * within the keep limit, and count as out in the recent peak: a block given back is never freed for a spare's
 * sake. Off by default; the daemon turns it on. Thread-safe; before or while blocks are out. */
void hp_host_pool_make_ahead(hp_host_pool *pool, bool on);
/* For tests: waits until the pool's own thread has made the blocks it was asked for (none pending, none being
 * made), or is held. */
void hp_host_pool_ahead_settle(hp_host_pool *pool);
/* For tests: while held, the pool's own thread makes nothing (spares are still asked for); released, it goes on. */
void hp_host_pool_test_hold_ahead(hp_host_pool *pool, bool held);
/* Frees the kept blocks past what the recent peak still allows, the oldest first, at most max_blocks of them
 * (0: every one): for an idle daemon, whose pool sees no hp_host_pool_put to do it. Whether some are still
 * past it (max_blocks reached). Thread-safe. */
bool hp_host_pool_trim(hp_host_pool *pool, unsigned max_blocks);
/* For tests only: the pool's clock reads *now_s (seconds) from now on. */
void hp_host_pool_test_clock(hp_host_pool *pool, const double *now_s);
/* Frees the kept blocks; every block handed out must be back. */
void hp_host_pool_destroy(hp_host_pool **pool);

/* A block of at least bytes (kind HP_MEM_UPLOAD, HP_MEM_READBACK or HP_MEM_READBACK_SHADER), kept or new.
 * NULL and *err when the device cannot give that much host memory. HP_MEM_DEVICE gives device memory
 * (buf.mapped NULL), kept the same way: a frame's EXR chunks decoded on the GPU (pipeline/exr_zip_gpu.h)
 * stay on the device until the frame graph copies them in. */
hp_host_block *hp_host_pool_get(hp_host_pool *pool, hp_mem_kind kind, size_t bytes, hp_err *err);
void hp_host_pool_put(hp_host_block *block);

/* For tests only (hdrpostd's test_fail_host_memory): from now on, level 1 fails every hp_host_pool_get
 * (out of memory), level 2 every hp_host_mem_get with this pool as well; 0 is off. */
void hp_host_pool_test_fail(hp_host_pool *pool, int level);
/* For tests only: the pool's own thread fails to make every spare (as when pinned memory is gone), requests'
 * blocks made as usual. */
void hp_host_pool_test_fail_ahead(hp_host_pool *pool, bool fail);

/* The device is lost (or a submission timed out) while blocks may still be in its use: from now on a block
 * given back is set aside, never reused, and freed only when the pool is destroyed (after the device is
 * idle); none is handed out. Thread-safe, idempotent. */
void hp_host_pool_abandon(hp_host_pool *pool);

/* Blocks out now and bytes kept, for tests and /metrics. */
void hp_host_pool_usage(hp_host_pool *pool, unsigned *out_blocks, size_t *kept_bytes);

/* For /metrics. Since creation: blocks made because none kept fitted, and the seconds making them took
 * (pinning tens of megabytes takes milliseconds, on whichever thread asked: the GPU thread's among them); a pool
 * that keeps up makes none after warm-up (the blocks made ahead, and their time, apart). Blocks freed: the kept
 * ones past the limit (or the recent peak that kept them has passed), and spares made ahead that found no room
 * once made (the load grew while they were pinned). Now: the device blocks' bytes kept (HP_MEM_DEVICE, apart
 * from hp_host_pool_usage's kept_bytes). */
typedef struct hp_host_pool_counts {
    unsigned long made, freed;
    double make_seconds;
    /* Blocks the pool's own thread made ahead (hp_host_pool_make_ahead), and its time: no request waited on
     * them. Not in made and make_seconds above, which count what requests waited for. */
    unsigned long made_ahead;
    double make_ahead_seconds;
    size_t kept_device_bytes;
} hp_host_pool_counts;
void hp_host_pool_counts_get(hp_host_pool *pool, hp_host_pool_counts *out);

/* Memory for a job's frame, depth or image: a block of the pool when there is a pool and it can give
 * one, else a warm buffer of common/bigbuf.h (the GPU thread then copies it through the frame graph's own
 * staging). ptr is the memory either way. */
typedef struct hp_host_mem {
    void *ptr;
    hp_host_block *block; /* NULL: ptr is from hp_bigbuf_get */
} hp_host_mem;

/* Whether it holds memory: a device block (HP_MEM_DEVICE, a frame decoded on the GPU) has no ptr. */
static inline bool hp_host_mem_held(const hp_host_mem *m) { return m->ptr || m->block; }

/* false when neither can be had (out of memory). pool may be NULL. */
bool hp_host_mem_get(hp_host_pool *pool, hp_mem_kind kind, size_t bytes, hp_host_mem *out);
/* Gives it back to wherever it came from; *mem is emptied. An empty one is ignored. */
void hp_host_mem_put(hp_host_mem *mem);

#endif
