#include "client/shot.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

bool hp_lock_parse(const char *text, hp_lock_mode *mode, unsigned *window)
{
    *window = 0;
    if (!strcmp(text, "frame"))
        return *mode = HP_LOCK_FRAME, true;
    if (!strcmp(text, "shot"))
        return *mode = HP_LOCK_SHOT, true;
    char *end;
    if (strncmp(text, "window=", 7) != 0)
        return false;
    long n = strtol(text + 7, &end, 10);
    if (end == text + 7 || *end || n < 1 || n > 100000 || n % 2 == 0)
        return false; /* odd: a window centred on its frame */
    *mode = HP_LOCK_WINDOW;
    *window = (unsigned)n;
    return true;
}

/* The automatic key (Reinhard 2002, section 4; the daemon's exposure stage, pipeline/cpu_tone.c): from the
 * log-average and the 1st and 99th percentiles, 0.18 * 2^(2 (2 log2 Lav - log2 L1 - log2 L99) / (log2 L99 -
 * log2 L1)), within [0.001, 1]. */
static double auto_key(double log_average, double log2_p01, double log2_p99)
{
    if (!(log2_p99 > log2_p01) || !(log_average > 0))
        return 0.18;
    double key = 0.18 * exp2(2.0 * (2.0 * log2(log_average) - log2_p01 - log2_p99) / (log2_p99 - log2_p01));
    return fmin(fmax(key, 0.001), 1.0);
}

bool hp_lock_compute(const hp_frame_stats *s, size_t n, const hp_lock_request *req, hp_frame_lock *locks)
{
    size_t half = req->mode == HP_LOCK_WINDOW ? req->window / 2 : n;
    bool any = false;
    for (size_t i = 0; i < n; i++) {
        /* The frames whose statistics this frame's values come from: all (shot) or a centred window. */
        size_t from = req->mode == HP_LOCK_WINDOW && i > half ? i - half : 0;
        size_t to = req->mode == HP_LOCK_WINDOW && i + half + 1 < n ? i + half + 1 : n;
        if (req->mode == HP_LOCK_FRAME)
            from = i, to = i + 1;
        /* The log-average of log-averages: the geometric mean, as the frames' own log-averages are. */
        double sum_log = 0, sum_p01 = 0, sum_p99 = 0, max = 0;
        size_t count = 0;
        for (size_t j = from; j < to; j++) {
            if (!s[j].ok || !(s[j].log_average > 0))
                continue;
            sum_log += log(s[j].log_average);
            sum_p01 += log2(fmax(s[j].p01, 1e-30));
            sum_p99 += log2(fmax(s[j].p99, 1e-30));
            max = fmax(max, s[j].max);
            count++;
        }
        if (!count) {
            locks[i] = (hp_frame_lock){0};
            continue;
        }
        any = true;
        double log_average = exp(sum_log / (double)count);
        /* The daemon computes an automatic key in every mode, a fixed one too (pipeline/cpu_tone.c). */
        double key = req->key_auto ? auto_key(log_average, sum_p01 / (double)count, sum_p99 / (double)count) : req->key;
        double adaptation = req->fixed ? req->fixed_adaptation : log_average;
        double stops = req->fixed ? req->fixed_stops : 0;
        /* The white point the daemon would take, the exposed maximum, over the same frames. */
        double scale = (adaptation > 0 ? key / adaptation : exp2(stops)) * exp2(req->compensation_ev);
        locks[i] = (hp_frame_lock){.valid = true, .adaptation = adaptation, .stops = stops, .key = key,
                                   .white = req->fix_white ? max * scale : 0,
                                   .scene_log_average = req->fix_drago ? log_average : 0,
                                   .scene_max = req->fix_drago ? max : 0};
    }
    /* A frame that could not be analysed takes the values of the nearest one that could. */
    for (size_t i = 0; any && i < n; i++) {
        for (size_t d = 1; !locks[i].valid && d < n; d++) {
            if (i >= d && locks[i - d].valid)
                locks[i] = locks[i - d];
            else if (i + d < n && locks[i + d].valid)
                locks[i] = locks[i + d];
        }
    }
    return any;
}
