/* exr_zip_gpu_share: a share of the frames auto would split, inflated whole on the GPU (zip_share.h). */
#include "daemon/zip_share.h"

void hp_zip_share_init(hp_zip_share *s, const hp_zip_share_config *cfg)
{
    *s = (hp_zip_share){.cfg = *cfg, .share = cfg->fixed >= 0 ? cfg->fixed : 0, .last_at = -1};
}

/* The share moved by how far the GPU thread's wait for decoding frames, a part of its busy time over the
 * last period, is from the target: a proportional step, bounded to [0, max]. Where the process used less
 * than cores_busy of its cores the wait is not theirs (bodies slow to arrive): the share does not grow then,
 * and falls only as the wait says (not forced down: a share that took the cores under the mark would then
 * swing about it). A period in which the thread was mostly idle (a light load: frames then come alone and
 * go to the cores anyway) leaves it as it is. */
static void adjust(hp_zip_share *s, double now_s, hp_zip_share_sample t)
{
    if (s->last_at < 0) {
        s->last_at = now_s;
        s->last = t;
        return;
    }
    double elapsed = now_s - s->last_at;
    if (elapsed < s->cfg.period_s)
        return;
    double busy = t.busy - s->last.busy, waited = t.decode_wait - s->last.decode_wait;
    bool cores_bound = t.cpu - s->last.cpu >= s->cfg.cores_busy * s->cfg.cores * elapsed;
    if (busy > 0.25 * elapsed) {
        double part = waited / busy;
        if (!cores_bound && part > s->cfg.target)
            part = s->cfg.target;
        double share = s->share + s->cfg.gain * (part - s->cfg.target);
        s->share = share < 0 ? 0 : share > s->cfg.max ? s->cfg.max : share;
    }
    s->last_at = now_s;
    s->last = t;
}

bool hp_zip_share_take(hp_zip_share *s, double now_s, hp_zip_share_sample sample)
{
    if (s->cfg.fixed < 0)
        adjust(s, now_s, sample);
    s->frames++;
    /* Spread evenly (a running credit, as Bresenham's line): a share of 1/3 sends every third frame. */
    s->credit += s->share;
    if (s->credit < 1)
        return false;
    s->credit -= 1;
    s->gpu_frames++;
    return true;
}
