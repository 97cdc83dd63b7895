/* The share of busy EXR ZIP frames inflated whole on the GPU (daemon/zip_share.h): a fixed share spread
 * evenly, and the adaptive one moving toward the GPU thread's target wait for decoding frames, bounded,
 * falling where the cores are not the bound, left alone under a light load, and moved at most once a
 * period. The daemon is simulated: a model whose wait for decoding frames and use of its cores fall as the
 * share grows, as measured on the H200 (docs/BENCHMARKS.md). */
#include <math.h>

#include "daemon/zip_share.h"
#include "tests/tap.h"

#define CORES 16.0

/* Frames of one period at a time, the times advanced by a period: the GPU thread busy `busy_part` of it, of
 * that waiting for decoding frames `wait_part`; the process using `cores_part` of its cores. Returns the
 * frames that went to the GPU. */
static unsigned run_period(hp_zip_share *s, double *now, hp_zip_share_sample *t, double wait_part, double busy_part,
                           double cores_part, unsigned frames)
{
    unsigned gpu = 0;
    double period = s->cfg.period_s;
    for (unsigned i = 0; i < frames; i++) {
        double step = period / frames;
        *now += step;
        t->busy += busy_part * step;
        t->decode_wait += wait_part * busy_part * step;
        t->cpu += cores_part * CORES * step;
        gpu += hp_zip_share_take(s, *now, *t);
    }
    return gpu;
}

/* The H200 host's measured wait for decoding frames against the share (docs/BENCHMARKS.md: 0.49 at none,
 * about 0.27 at a fifth, 0.12 at a third, 0.02 at a half), as a line through them. */
static double measured_wait(double share)
{
    double w = 0.49 - 1.1 * share;
    return w < 0.02 ? 0.02 : w;
}

/* The cores the daemon used there: 0.88 of them at none, 0.72 at a third (docs/BENCHMARKS.md). */
static double measured_cores(double share) { return 0.88 - 0.5 * share; }

static hp_zip_share_config adaptive(void)
{
    hp_zip_share_config cfg = HP_ZIP_SHARE_DEFAULTS;
    cfg.cores = CORES;
    return cfg;
}

static void fixed_shares(void)
{
    static const double shares[] = {0, 0.2, 1.0 / 3, 0.5, 1};
    for (int k = 0; k < 5; k++) {
        hp_zip_share_config cfg = adaptive();
        cfg.fixed = shares[k];
        hp_zip_share s;
        hp_zip_share_init(&s, &cfg);
        double now = 0;
        hp_zip_share_sample t = {0};
        unsigned gpu = 0, longest_gap = 0, gap = 0;
        for (int p = 0; p < 60; p++) {
            for (int f = 0; f < 10; f++) {
                now += cfg.period_s / 10;
                t.busy += cfg.period_s / 10;
                t.decode_wait += 0.9 * cfg.period_s / 10; /* a fixed share does not follow the thread */
                bool g = hp_zip_share_take(&s, now, t);
                gpu += g;
                gap = g ? 0 : gap + 1;
                longest_gap = gap > longest_gap ? gap : longest_gap;
            }
        }
        unsigned want = (unsigned)floor(600 * shares[k] + 1e-9);
        tap_ok(gpu == want && s.share == shares[k] && s.frames == 600,
               "a fixed share of %.3f sends %u of 600 busy frames to the GPU (got %u), whatever the thread waits "
               "for", shares[k], want, gpu);
        if (shares[k] > 0)
            tap_ok(longest_gap <= (unsigned)ceil(1 / shares[k]),
                   "spread evenly: at most %u frames in a row split at a share of %.3f (got %u)",
                   (unsigned)ceil(1 / shares[k]), shares[k], longest_gap);
    }
}

static void adapts(void)
{
    hp_zip_share_config cfg = adaptive();
    hp_zip_share s;
    hp_zip_share_init(&s, &cfg);
    double now = 0;
    hp_zip_share_sample t = {0};
    tap_ok(s.share == 0, "the adaptive share starts at none");
    /* The thread busy, waiting for decoding frames as the H200 host did at each share. */
    double shares[40];
    for (int p = 0; p < 40; p++) {
        run_period(&s, &now, &t, measured_wait(s.share), 1.0, measured_cores(s.share), 50);
        shares[p] = s.share;
    }
    double settled = shares[39], spread = 0;
    for (int p = 30; p < 40; p++)
        spread = fmax(spread, fabs(shares[p] - settled));
    /* The model's wait reaches the target 0.15 at a share of (0.49 - 0.15) / 1.1 = 0.309. */
    tap_ok(fabs(settled - 0.309) < 0.02 && spread < 0.01,
           "with the thread waiting on decoding frames as the H200 host did, the share settles where the wait "
           "is the target's: %.3f (0.309 wanted), moving at most %.4f over the last 10 periods", settled, spread);
    tap_ok(shares[3] > 0.1 && shares[3] < settled + 0.02,
           "and gets there within a few periods, without overshooting: %.3f after 4", shares[3]);
    unsigned gpu = run_period(&s, &now, &t, measured_wait(s.share), 1.0, measured_cores(s.share), 100);
    tap_ok(gpu >= 29 && gpu <= 32, "at that share, 29-32 of 100 frames go to the GPU (got %u)", gpu);

    /* The GPU becomes the bound (no wait for decoding frames at all): the share falls to none. */
    for (int p = 0; p < 20; p++)
        run_period(&s, &now, &t, 0.0, 1.0, 0.9, 50);
    tap_ok(s.share == 0, "with the thread never waiting for decoding frames, the share falls to none (%.3f)",
           s.share);
    /* The cores the bound whatever the share: it rises to its most and stays there. */
    for (int p = 0; p < 40; p++)
        run_period(&s, &now, &t, 0.9, 1.0, 0.9, 50);
    tap_ok(s.share == cfg.max, "with the thread always waiting for decoding frames, the share rises to its most, "
           "%.2f, and no further (%.3f)", cfg.max, s.share);
    /* The thread waiting for frames still arriving (slow clients), the cores mostly idle: not their bound.
     * From its most the share holds (it is not forced down); from none it does not grow. */
    for (int p = 0; p < 40; p++)
        run_period(&s, &now, &t, 0.9, 1.0, 0.3, 50);
    double held = s.share;
    hp_zip_share idle;
    hp_zip_share_init(&idle, &cfg);
    double idle_now = 0;
    hp_zip_share_sample idle_t = {0};
    for (int p = 0; p < 40; p++)
        run_period(&idle, &idle_now, &idle_t, 0.9, 1.0, 0.3, 50);
    tap_ok(held == cfg.max && idle.share == 0,
           "with the thread waiting for decoding frames but the cores a third busy (bodies slow to arrive), the "
           "share does not grow: from its most it holds (%.3f), from none it stays none (%.3f)", held, idle.share);
    /* The cores under the mark and the thread seldom waiting for them: it falls as the wait says. */
    hp_zip_share falls = s;
    double falls_now = now;
    hp_zip_share_sample falls_t = t;
    for (int p = 0; p < 40; p++)
        run_period(&falls, &falls_now, &falls_t, 0.02, 1.0, 0.3, 50);
    tap_ok(falls.share == 0, "with the cores under the mark and the thread waiting for them 2%% of the time, the "
           "share falls to none (%.3f)", falls.share);
    /* A light load: the thread mostly idle, whatever it waited for the rest. The share stays. */
    double before = s.share;
    for (int p = 0; p < 20; p++)
        run_period(&s, &now, &t, 0.0, 0.1, 0.1, 5);
    tap_ok(s.share == before, "under a light load (the thread busy a tenth of the time) the share is left as it "
           "was: %.3f (%.3f before)", s.share, before);
    /* Frames closer together than a period: one adjustment a period, not one a frame. The first frame only
     * starts the clock; 2500 more over two and a half periods move the share twice (at one period and at
     * two), each by a whole period's step. */
    hp_zip_share_init(&s, &cfg);
    now = 0;
    t = (hp_zip_share_sample){0};
    for (int i = 0; i <= 2500; i++) {
        double step = cfg.period_s / 1000;
        hp_zip_share_take(&s, now, t);
        now += step;
        t.busy += step;
        t.decode_wait += 0.9 * step;
        t.cpu += 0.9 * CORES * step;
    }
    double step = cfg.gain * (0.9 - cfg.target);
    tap_ok(fabs(s.share - 2 * step) < 1e-9, "2500 frames over two and a half periods move the share twice, by "
           "%.4f each: %.4f (%.4f wanted)", step, s.share, 2 * step);
}

int main(void)
{
    fixed_shares();
    adapts();
    return tap_done();
}
