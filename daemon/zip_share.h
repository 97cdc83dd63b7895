/* Which of the EXR ZIP frames that exr_zip_decoder auto would split go whole to the GPU instead
 * (exr_zip_gpu_share): the wide inflate, or the serial loop for frames batched past exr_zip_wide_chunks.
 *
 * Split, a frame's inflating is libdeflate on the cores (some 126 ms of one core a 4K frame), and with 16
 * clients the cores are the bound. Inflated whole on the GPU, a frame costs the cores a tenth of that and
 * the GPU some 10 ms of all its SMs, which the frame graph's passes then share: too many such frames and
 * the GPU thread waits on the GPU instead. Where the balance lies depends on the host's cores against its
 * GPU (docs/BENCHMARKS.md: one frame in three on the slowest H200 host, 84 -> 103 frames/s; one frame always
 * in flight on the faster ones lost 8%). So the share adapts to what the GPU thread waits for: while it
 * waits for frames still decoding on the cores more than the target part of its time, and the cores are
 * busy, the share grows; while it waits less, the share shrinks. Where the cores are not the bound (a frame
 * whose body is slow to arrive is waited for too, and the GPU's route inflates only once the whole body is in)
 * it does not grow. */
#ifndef HP_DAEMON_ZIP_SHARE_H
#define HP_DAEMON_ZIP_SHARE_H

#include <stdbool.h>

typedef struct hp_zip_share_config {
    double fixed;       /* 0 to 1: that share always (the daemon's default is 1); negative: adapt, up to max */
    double max;         /* the most the share adapts to */
    double target;      /* the part of the GPU thread's busy time it should wait for decoding frames */
    double gain;        /* share added per unit of that part over the target, a period */
    double period_s;    /* how often the share is adjusted at most */
    double cores;       /* the process's usable CPUs (common/cpus.h: a quota rounded up) */
    double cores_busy;  /* the part of them it must use for the share to grow: below it, the cores are not
                         * the bound (under a quota of less than 0.6 CPU, never) */
} hp_zip_share_config;

/* The target from the H200 sweep of every Nth frame (docs/BENCHMARKS.md, "A share of the busy frames on
 * the GPU"): the best, a third, had the GPU thread waiting for decoding frames 12% of its time, a fifth
 * 26%, a half 2%. The gain and the period are not swept: from none the share passes a fifth in some 2 s
 * and settles in some 5 (tests/test_zip_share.c's model), the thread's times over half a second at 100
 * frames/s are some 50 frames'. Cores: the daemon used 72-88% of them at shares of 0-1/3 with 16 clients,
 * 63% at a half. */
/* The daemon's exr_zip_gpu_share sets .fixed: 1 by default (every busy frame whole on the GPU, since the GPU's
 * inflate and PNG encoder got faster: docs/PIPELINE.md), -1 for the adaptive share below. */
#define HP_ZIP_SHARE_DEFAULTS                                                                                    \
    {.fixed = -1, .max = 0.5, .target = 0.15, .gain = 0.25, .period_s = 0.5, .cores = 1, .cores_busy = 0.6}

/* Cumulative seconds: the GPU thread's (hp_gpu_thread_time's) waiting for a frame still decoding, and in
 * every state but idle (a thread with no frame says nothing about the balance); the process's CPU time. */
typedef struct hp_zip_share_sample {
    double decode_wait;
    double busy;
    double cpu;
} hp_zip_share_sample;

typedef struct hp_zip_share {
    hp_zip_share_config cfg;
    double share;           /* the share now */
    double credit;          /* frames owed to the GPU: the share added a frame, one taken off each sent */
    double last_at;         /* the last adjustment's time, seconds; negative before the first sample */
    hp_zip_share_sample last;
    unsigned long gpu_frames, frames; /* for the log and tests */
} hp_zip_share;

void hp_zip_share_init(hp_zip_share *s, const hp_zip_share_config *cfg);

/* One frame that would be split, at time now_s with the GPU thread's times so far: true if it goes whole
 * to the GPU. Not thread-safe: the caller holds a lock. */
bool hp_zip_share_take(hp_zip_share *s, double now_s, hp_zip_share_sample sample);

#endif
