/* The exposure lock of a shot (docs/CLIENT.md): with exposure.mode=auto every frame is exposed by its own
 * log-average, so a light entering the shot pumps the brightness of the whole sequence. The client measures
 * every frame first (/v1/analyze) and renders each with exposure.mode=fixed and an adaptation luminance
 * common to the shot (or to a window of frames around it), and fixes likewise every other value the look
 * would take from the frame's own statistics: reinhard_extended's white point (by default the exposed
 * frame's maximum), drago's world adaptation and maximum, and an automatic key. The formulas are the daemon's (pipeline/cpu_tone.c). */
#ifndef HP_CLIENT_SHOT_H
#define HP_CLIENT_SHOT_H

#include <stdbool.h>
#include <stddef.h>

typedef enum hp_lock_mode {
    HP_LOCK_FRAME = 0, /* each frame its own exposure (the daemon's default) */
    HP_LOCK_SHOT,      /* one adaptation for the whole shot */
    HP_LOCK_WINDOW,    /* each frame's adaptation from a centred window of frames */
} hp_lock_mode;

/* What /v1/analyze says of one frame. */
typedef struct hp_frame_stats {
    bool ok;            /* analysed (a frame that failed is left out of the others' values) */
    double log_average; /* stats.log_average */
    double max;         /* stats.max */
    double p01, p99;    /* percentiles.p01, .p99 */
} hp_frame_stats;

/* The values one frame is rendered with. */
typedef struct hp_frame_lock {
    bool valid;        /* computed (from this frame's statistics or its neighbours') */
    double adaptation; /* exposure.adaptation (0 with a fixed exposure in stops) */
    double stops;      /* exposure.stops */
    double key;        /* exposure.key: the request's, or the automatic key from the lock's statistics */
    double white;      /* tonemap.white_point, or 0 to leave the request's */
    double scene_log_average, scene_max; /* tonemap.drago.scene_*, or 0 to leave the request's */
} hp_frame_lock;

typedef struct hp_lock_request {
    hp_lock_mode mode;
    unsigned window;        /* HP_LOCK_WINDOW: frames in the window, odd (centred on the frame) */
    bool fixed;             /* the request fixes the exposure itself (exposure.mode=fixed): its adaptation or
                             * stops are kept, an automatic key is still the shot's */
    double fixed_adaptation, fixed_stops; /* its exposure.adaptation (0: stops) and exposure.stops */
    double key;             /* the request's exposure.key */
    bool key_auto;          /* exposure.key=auto */
    double compensation_ev; /* exposure.compensation_ev */
    bool fix_white;         /* reinhard_extended with white_point 0 (the exposed frame's maximum) */
    bool fix_drago;         /* drago with no scene values (the frame's own log-average and maximum) */
} hp_lock_request;

/* Fills locks[i] for every frame (those not ok get the values of the frames around them). False when no
 * frame has a positive log-average (nothing to expose by). */
bool hp_lock_compute(const hp_frame_stats *stats, size_t n, const hp_lock_request *req, hp_frame_lock *locks);

/* "frame", "shot" or "window=N" (N odd) into mode and window; false for anything else. */
bool hp_lock_parse(const char *text, hp_lock_mode *mode, unsigned *window);

#endif
