/* Holding the GPU's clocks up while the frame graph waits for a frame (issue 20; docs/BENCHMARKS.md "One
 * client: the clocks between frames").
 *
 * The driver lowers a GPU's clocks when it is busy only a small part of the time, over seconds. One client
 * posting 4K EXR frames keeps an H200 busy 9 ms of every 28 (the frame is received and decoded on the CPU
 * in between): its SM clock settled at 660-990 MHz instead of 1980, and the PNG encode that takes 3.7 ms at
 * full clock took 8.7-9.5; with 100 ms between frames the clock sat at 345 MHz and the encode took 20.9 ms.
 * One idle gap alone costs nothing: the clocks fall over seconds, not milliseconds.
 *
 * A hold is a dispatch of one workgroup of arithmetic (shaders/clock_hold.comp) on the frame graph's queue,
 * about HP_CLOCK_HOLD_MS long at the GPU's highest clock. The GPU thread keeps one in flight while it waits
 * for a frame that is on its way (daemon/worker.c), so that the driver sees a busy GPU; the frame's own
 * work then queues behind at most one hold. A hold's length adapts: each one's timestamps give the time a
 * round took, and the shortest of the last few (the highest clock of late) sets the next one's rounds.
 *
 * One thread keeps holds (hp_clock_hold_keep); the counts may be read from any thread. */
#ifndef HP_CLOCK_HOLD_H
#define HP_CLOCK_HOLD_H

#include <stdint.h>

#include "pipeline/gpu.h"

/* A hold's length at the highest clock: the most a frame's work waits behind one, and about how often the
 * waiting thread wakes to submit the next. */
#define HP_CLOCK_HOLD_MS 0.25
/* A hold's loop runs rounds of this many steps, at most HP_CLOCK_HOLD_MAX_ROUNDS of them (lavapipe's limit
 * of a shader's loop iterations). */
#define HP_CLOCK_HOLD_ROUND 16u
#define HP_CLOCK_HOLD_MAX_ROUNDS 65535u

typedef struct hp_clock_hold hp_clock_hold;

hp_code hp_clock_hold_create(hp_gpu *gpu, hp_clock_hold **out, hp_err *err);
/* Waits for the hold in flight, then frees. */
void hp_clock_hold_destroy(hp_clock_hold **h);

/* Keeps one hold in flight: when the last one has finished (or there was none), submits the next. Never
 * waits. A failed submission (a lost device) is returned, and the caller stops holding. */
hp_code hp_clock_hold_keep(hp_clock_hold *h, hp_err *err);

typedef struct hp_clock_hold_counts {
    uint64_t holds;      /* submitted since start */
    double gpu_seconds;  /* the GPU time of those finished, from their timestamps */
    uint32_t rounds;     /* the next hold's */
} hp_clock_hold_counts;
void hp_clock_hold_counts_get(const hp_clock_hold *h, hp_clock_hold_counts *out);

/* For tests and benchmarks: records a hold of `groups` workgroups of 64 invocations, `rounds` rounds long
 * (at most HP_CLOCK_HOLD_MAX_ROUNDS), whose invocation that ends on `never` writes its index to the sink's
 * first word; invocation i starts at 2 i + 1 (shaders/clock_hold.comp gives the step). A hold of the
 * daemon's passes 0, where none ends. */
void hp_clock_hold_record(const hp_clock_hold *h, VkCommandBuffer cmd, uint32_t groups, uint32_t rounds,
                          uint32_t never);
const hp_buffer *hp_clock_hold_sink(const hp_clock_hold *h);

#endif
