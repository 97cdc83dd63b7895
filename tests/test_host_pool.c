/* The host pool (pipeline/host_pool.h) and frames run from the caller's host memory
 * (hp_frame_graph_begin_with): blocks reused by size and kind, given back from many threads at once, the
 * fallback to ordinary memory, and frames uploaded from and read back into pool blocks byte-identical to
 * frames through the graph's own staging, depth of field and two frames in flight included. */
#include <math.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "common/bigbuf.h"
#include "gpu_test.h"
#include "pipeline/dof.h"
#include "pipeline/host_pool.h"

static hp_gpu *gpu;
static hp_frame_graph *graph;
static hp_err err;

static uint32_t created(void) { return hp_gpu_buffers_created(gpu); }

static void test_reuse(void)
{
    hp_host_pool *pool = NULL;
    tap_ok(hp_host_pool_create(gpu, 64u << 20, &pool, &err) == HP_OK, "pool created");
    hp_host_block *a = hp_host_pool_get(pool, HP_MEM_UPLOAD, 1u << 20, &err);
    tap_ok(a && a->buf.mapped && a->buf.size >= (1u << 20) && a->kind == HP_MEM_UPLOAD, "an upload block is mapped");
    memset(a->buf.mapped, 0x5a, 1u << 20);
    hp_host_pool_put(a);
    uint32_t before = created();
    hp_host_block *b = hp_host_pool_get(pool, HP_MEM_UPLOAD, 700u << 10, &err);
    tap_ok(b == a && created() == before, "a block given back is handed out again for a size it fits, nothing created");
    hp_host_block *c = hp_host_pool_get(pool, HP_MEM_READBACK, 1u << 20, &err);
    tap_ok(c && c != a && created() == before + 1, "a read-back block is never an upload block");
    hp_host_pool_put(b);
    hp_host_block *d = hp_host_pool_get(pool, HP_MEM_UPLOAD, 300u << 10, &err);
    tap_ok(d && d != a, "a kept block over twice the size asked is left for a larger request");
    unsigned out;
    size_t kept;
    hp_host_pool_usage(pool, &out, &kept);
    tap_ok(out == 2 && kept == a->buf.size, "usage: %u out (2), %zu bytes kept", out, kept);
    hp_host_pool_counts churn;
    hp_host_pool_counts_get(pool, &churn);
    tap_ok(churn.made == 3 && churn.freed == 0 && churn.make_seconds > 0,
           "churn: 3 blocks made (the reused one not counted), none freed, %.6f s making them (more than none)",
           churn.make_seconds);
    hp_host_pool_put(c);
    hp_host_pool_put(d);
    hp_host_pool_counts_get(pool, &churn);
    tap_ok(churn.made == 3 && churn.freed == 0, "both given back within the limit: kept, none freed");
    hp_host_pool_destroy(&pool);
    tap_ok(pool == NULL, "pool destroyed with its kept blocks");

    tap_ok(hp_host_pool_create(gpu, 0, &pool, &err) == HP_OK, "pool that keeps nothing");
    a = hp_host_pool_get(pool, HP_MEM_UPLOAD, 4096, &err);
    hp_host_pool_put(a);
    hp_host_pool_usage(pool, &out, &kept);
    hp_host_pool_counts_get(pool, &churn);
    tap_ok(out == 0 && kept == 0 && churn.made == 1 && churn.freed == 1,
           "with a limit of 0 a block given back is freed (churn: %lu made, %lu freed)", churn.made, churn.freed);
    hp_host_pool_destroy(&pool);

    hp_host_mem m;
    tap_ok(hp_host_mem_get(NULL, HP_MEM_UPLOAD, 5u << 20, &m) && m.ptr && !m.block,
           "without a pool, memory comes from the warm buffers");
    memset(m.ptr, 1, 5u << 20);
    hp_host_mem_put(&m);
    tap_ok(!m.ptr && !m.block && hp_bigbuf_kept() >= (5u << 20), "and goes back to them");
}

typedef struct worker_arg {
    hp_host_pool *pool;
    unsigned seed;
    bool ok;
} worker_arg;

static void *churn(void *p)
{
    worker_arg *a = p;
    a->ok = true;
    for (int i = 0; i < 40; i++) {
        size_t size = (size_t)(1 + (a->seed + (unsigned)i * 7) % 3) << 18;
        hp_mem_kind kind = (i & 1) ? HP_MEM_UPLOAD : HP_MEM_READBACK;
        hp_host_mem m;
        hp_host_pool *pool = a->pool;
        if (!hp_host_mem_get(pool, kind, size, &m) || !m.block) {
            a->ok = false;
            break;
        }
        /* Every byte this thread's own: another thread holding the same block at once would show. */
        uint8_t tag = (uint8_t)(a->seed * 41 + (unsigned)i);
        memset(m.ptr, tag, size);
        for (size_t k = 0; k < size; k += 4093)
            a->ok = a->ok && ((uint8_t *)m.ptr)[k] == tag;
        hp_host_mem_put(&m);
    }
    return NULL;
}

static void test_threads(bool ahead)
{
    hp_host_pool *pool = NULL;
    if (hp_host_pool_create(gpu, 8u << 20, &pool, &err) != HP_OK) {
        tap_ok(false, "pool: %s", err.message);
        return;
    }
    hp_host_pool_make_ahead(pool, ahead);
    enum { N = 8 };
    pthread_t t[N];
    worker_arg args[N];
    for (unsigned i = 0; i < N; i++) {
        args[i] = (worker_arg){.pool = pool, .seed = i};
        pthread_create(&t[i], NULL, churn, &args[i]);
    }
    bool ok = true;
    for (unsigned i = 0; i < N; i++) {
        pthread_join(t[i], NULL);
        ok = ok && args[i].ok;
    }
    unsigned out;
    size_t kept;
    hp_host_pool_usage(pool, &out, &kept);
    hp_host_pool_counts c;
    hp_host_pool_counts_get(pool, &c);
    tap_ok(ok && out == 0 && kept <= (8u << 20) && (ahead || c.made_ahead == 0),
           "8 threads taking and giving back 320 blocks%s: none shared, all back (%u out), %zu bytes kept, %lu made "
           "ahead", ahead ? ", the pool's thread making blocks ahead beside them" : "", out, kept, c.made_ahead);
    hp_host_pool_destroy(&pool);
}

/* --- Frames from the caller's memory -------------------------------------------------------------------- */

enum { W = 67, H = 41 };

static uint64_t rng = 12345;
static double uniform(void)
{
    uint64_t z = (rng += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return (double)((z ^ (z >> 31)) >> 11) * 0x1p-53;
}

static float frame[W * H * 4], depth[W * H];

/* Depth of field and bokeh on, with a fixed focus: the same lens for every frame here. */
static hp_frame_params params_for(const float *z)
{
    hp_frame_params fp;
    hp_frame_params_defaults(&fp);
    fp.params.dof.enabled = true;
    fp.params.bokeh.enabled = true;
    fp.params.dof.focus_auto = false;
    fp.params.dof.focus_distance_m = 3;
    fp.dof = true;
    hp_dof_settings_from_params(&fp.params, z, W, H, &fp.dof_settings);
    return fp;
}

static hp_frame_params params(void) { return params_for(depth); }

/* One frame through the graph's own staging. */
static bool run_staged_frame(const float *rgba, const float *z, uint8_t *image, hp_lum_stats *stats)
{
    hp_frame_desc desc = {.width = W, .height = H, .format = HP_PIXEL_RGBA32F};
    hp_frame_params fp = params_for(z);
    void *staging;
    float *dst;
    hp_frame_result r;
    if (hp_frame_graph_begin(graph, &desc, &staging, &err) != HP_OK)
        return false;
    memcpy(staging, rgba, sizeof(frame));
    if (hp_frame_graph_depth(graph, &dst, &err) != HP_OK)
        return false;
    memcpy(dst, z, sizeof(depth));
    if (hp_frame_graph_run(graph, &fp, &r, &err) != HP_OK || !r.pixels)
        return false;
    memcpy(image, r.pixels, (size_t)W * H * 4);
    *stats = r.stats;
    return true;
}

/* The reference: the test's frame through the staging. */
static bool run_staged(uint8_t *image, hp_lum_stats *stats) { return run_staged_frame(frame, depth, image, stats); }

/* Another frame through every context's staging, so that what they hold is not the frame a run from the
 * caller's memory must produce (a graph that read its own staging instead would fail). */
static void poison(void)
{
    static float other[W * H * 4], other_depth[W * H];
    static uint8_t image[W * H * 4];
    for (size_t i = 0; i < (size_t)W * H * 4; i++)
        other[i] = 0.01f * (float)(i % 13);
    for (size_t i = 0; i < (size_t)W * H; i++)
        other_depth[i] = 1.5f;
    hp_lum_stats s;
    for (int i = 0; i < HP_FRAMES_IN_FLIGHT; i++)
        run_staged_frame(other, other_depth, image, &s);
}

/* Begins a frame with the caller's memory for what `use` says (bit 0 pixels, 1 depth, 2 image). */
static bool begin_own(hp_host_pool *pool, unsigned use, hp_host_mem mem[3])
{
    hp_frame_desc desc = {.width = W, .height = H, .format = HP_PIXEL_RGBA32F};
    memset(mem, 0, 3 * sizeof(*mem));
    const hp_buffer *bufs[3] = {NULL, NULL, NULL};
    static const hp_mem_kind kinds[3] = {HP_MEM_UPLOAD, HP_MEM_UPLOAD, HP_MEM_READBACK};
    static const size_t sizes[3] = {sizeof(frame), sizeof(depth), (size_t)W * H * 8};
    for (int i = 0; i < 3; i++) {
        if (!(use & (1u << i)))
            continue;
        if (!hp_host_mem_get(pool, kinds[i], sizes[i], &mem[i]) || !mem[i].block)
            return false;
        bufs[i] = &mem[i].block->buf;
    }
    if (mem[0].ptr)
        memcpy(mem[0].ptr, frame, sizeof(frame));
    if (mem[1].ptr)
        memcpy(mem[1].ptr, depth, sizeof(depth));
    hp_frame_host own = {.pixels = bufs[0], .depth = bufs[1], .image = bufs[2]};
    void *staging;
    if (hp_frame_graph_begin_with(graph, &desc, &own, &staging, &err) != HP_OK)
        return false;
    if (!(use & 1)) {
        if (!staging)
            return false;
        memcpy(staging, frame, sizeof(frame));
    } else if (staging) {
        return false; /* the graph's staging is not for a frame that brings its own */
    }
    if (!(use & 2)) {
        float *dst;
        if (hp_frame_graph_depth(graph, &dst, &err) != HP_OK)
            return false;
        memcpy(dst, depth, sizeof(depth));
    }
    return true;
}

static void put_all(hp_host_mem mem[3])
{
    for (int i = 0; i < 3; i++)
        hp_host_mem_put(&mem[i]);
}

static void test_frames(void)
{
    for (size_t i = 0; i < (size_t)W * H; i++) {
        for (int c = 0; c < 3; c++)
            frame[4 * i + c] = (float)exp(uniform() * 8 - 4);
        frame[4 * i + 3] = 1;
        if (i % 97 == 0) /* a few lights for the bokeh */
            frame[4 * i] = frame[4 * i + 1] = frame[4 * i + 2] = 400;
        depth[i] = (float)(0.5 + 20 * uniform());
    }
    static uint8_t want[W * H * 4];
    hp_lum_stats want_stats;
    bool ok = run_staged(want, &want_stats);
    tap_ok(ok, "reference frame through the graph's staging%s%s", ok ? "" : ": ", ok ? "" : err.message);

    hp_host_pool *pool = NULL;
    hp_host_pool_create(gpu, 64u << 20, &pool, &err);
    for (unsigned use = 1; use < 8; use++) {
        hp_host_mem mem[3];
        hp_frame_params fp = params();
        hp_frame_result r;
        poison();
        ok = begin_own(pool, use, mem) && hp_frame_graph_run(graph, &fp, &r, &err) == HP_OK && r.pixels;
        bool same = ok && memcmp(r.pixels, want, sizeof(want)) == 0 &&
                    memcmp(&r.stats, &want_stats, sizeof(want_stats)) == 0;
        bool where = ok && (!(use & 4) || r.pixels == mem[2].ptr);
        tap_ok(same && where, "DOF frame with the caller's %s%s%s: image and statistics identical to the staged "
               "frame%s", use & 1 ? "pixels " : "", use & 2 ? "depth " : "", use & 4 ? "image (read in place)" : "",
               ok ? "" : err.message);
        put_all(mem);
    }

    /* Two frames in flight, each from its own blocks, waited in order. */
    poison();
    hp_host_mem a[3], b[3];
    hp_frame_params fp = params();
    uint32_t ta, tb;
    hp_frame_result ra, rb;
    ok = begin_own(pool, 7, a) && hp_frame_graph_submit(graph, &fp, &ta, &err) == HP_OK && begin_own(pool, 7, b) &&
         hp_frame_graph_submit(graph, &fp, &tb, &err) == HP_OK && hp_frame_graph_wait(graph, ta, &ra, &err) == HP_OK &&
         hp_frame_graph_wait(graph, tb, &rb, &err) == HP_OK;
    tap_ok(ok && a[2].block != b[2].block && memcmp(ra.pixels, want, sizeof(want)) == 0 &&
               memcmp(rb.pixels, want, sizeof(want)) == 0,
           "two frames in flight from separate blocks: both identical to the staged frame");
    put_all(a);
    put_all(b);

    /* The upload in parts (hp_frame_graph_upload_part), as the daemon does while a frame's last rows
     * decode: the rows written in stages, each stage's bytes uploaded before the next is written, then
     * the frame. Parts of odd sizes (not whole rows), 3 and then more than HP_FRAME_UPLOAD_PARTS (the
     * rest then goes with the frame); and a frame whose submit fails after its parts, before a good one.
     * Each must give the staged frame's image and statistics. */
    static const unsigned part_counts[] = {1, 3, HP_FRAME_UPLOAD_PARTS + 4};
    for (size_t k = 0; k < sizeof(part_counts) / sizeof(part_counts[0]); k++) {
        unsigned n = part_counts[k];
        poison();
        hp_host_mem m[3];
        hp_frame_result r;
        fp = params();
        ok = begin_own(pool, 7, m);
        size_t total = sizeof(frame);
        memset(m[0].ptr, 0xff, total); /* NaN until written: a part copied too early or missed shows */
        size_t done = 0;
        for (unsigned i = 1; ok && i <= n; i++) {
            size_t upto = total * i / (n + 1) + 3; /* not a row or pixel boundary */
            memcpy((uint8_t *)m[0].ptr + done, (const uint8_t *)frame + done, upto - done);
            ok = hp_frame_graph_upload_part(graph, upto, &err) == HP_OK;
            done = upto;
        }
        if (ok)
            memcpy((uint8_t *)m[0].ptr + done, (const uint8_t *)frame + done, total - done);
        ok = ok && hp_frame_graph_run(graph, &fp, &r, &err) == HP_OK && r.pixels;
        tap_ok(ok && memcmp(r.pixels, want, sizeof(want)) == 0 && memcmp(&r.stats, &want_stats, sizeof(want_stats)) == 0,
               "frame uploaded in %u part%s before the rest: image and statistics identical to the staged frame%s%s",
               n, n == 1 ? "" : "s", ok ? "" : ": ", ok ? "" : err.message);
        put_all(m);
    }
    {
        hp_host_mem m[3];
        hp_frame_params bad = params();
        bad.params.analysis.histogram_min_log2 = 40; /* over the maximum: the submit refuses it */
        uint32_t ticket;
        hp_err e3 = {0};
        bool parted = begin_own(pool, 7, m) && hp_frame_graph_upload_part(graph, sizeof(frame) / 2, &e3) == HP_OK;
        bool refused = parted && hp_frame_graph_submit(graph, &bad, &ticket, &e3) != HP_OK;
        hp_frame_graph_abandon(graph); /* the part may still read the block given back below */
        put_all(m);
        hp_frame_result r;
        fp = params();
        ok = begin_own(pool, 7, m) && hp_frame_graph_upload_part(graph, sizeof(frame) / 3, &err) == HP_OK &&
             hp_frame_graph_run(graph, &fp, &r, &err) == HP_OK && r.pixels && memcmp(r.pixels, want, sizeof(want)) == 0;
        tap_ok(parted && refused && ok, "a frame refused at submit after a part of its upload (\"%s\"); the next, "
               "begun on the same context, is the staged frame", e3.message);
        put_all(m);
    }

    /* A block too small is refused, and the graph goes on. */
    hp_host_block *small = hp_host_pool_get(pool, HP_MEM_UPLOAD, 1024, &err);
    hp_frame_desc desc = {.width = W, .height = H, .format = HP_PIXEL_RGBA32F};
    hp_frame_host own = {.pixels = &small->buf};
    hp_err e2 = {0};
    bool refused = hp_frame_graph_begin_with(graph, &desc, &own, NULL, &e2) == HP_ERR_INVALID_ARGUMENT;
    hp_host_pool_put(small);
    static uint8_t again[W * H * 4];
    hp_lum_stats again_stats;
    tap_ok(refused && strstr(e2.message, "too small") && run_staged(again, &again_stats) &&
               memcmp(again, want, sizeof(want)) == 0,
           "a block too small for the frame is refused (\"%s\"), and the next frame runs", e2.message);
    hp_host_pool_destroy(&pool);
}

/* The device blocks' own limit (hp_host_pool_keep_device): a device block over it is freed when given back
 * while a host block of the same size is kept. */
static void test_device_limit(void)
{
    hp_host_pool *pool = NULL;
    if (hp_host_pool_create(gpu, 4 << 20, &pool, &err) != HP_OK) {
        tap_ok(false, "pool: %s", err.message);
        return;
    }
    hp_host_pool_keep_device(pool, 1 << 20);
    hp_host_block *small = hp_host_pool_get(pool, HP_MEM_DEVICE, 1 << 19, &err);
    hp_host_block *big = hp_host_pool_get(pool, HP_MEM_DEVICE, 2 << 20, &err);
    hp_host_block *host = hp_host_pool_get(pool, HP_MEM_UPLOAD, 2 << 20, &err);
    size_t host_size = host ? (size_t)host->buf.size : 0, small_size = small ? (size_t)small->buf.size : 0;
    hp_host_pool_put(small);
    hp_host_pool_put(big);
    hp_host_pool_put(host);
    hp_host_pool_counts churn;
    hp_host_pool_counts_get(pool, &churn);
    size_t kept = 0, kept_device = churn.kept_device_bytes;
    hp_host_pool_usage(pool, NULL, &kept);
    hp_host_block *again = hp_host_pool_get(pool, HP_MEM_DEVICE, 1 << 19, &err);
    tap_ok(small && big && host && churn.made == 3 && churn.freed == 1 && kept == host_size &&
               kept_device == small_size && again == small,
           "with 1 MiB of device blocks kept and 4 MiB of host blocks: a 2 MiB device block is freed when given "
           "back (%lu freed), the 2 MiB host block and the 512 KiB device block kept (device bytes kept %zu)",
           churn.freed, kept_device);
    hp_host_pool_put(again);
    hp_host_pool_destroy(&pool);
}

/* Device blocks are kept apart from host ones; after hp_host_pool_abandon (a decoding run lost the device) a
 * block given back is dropped, neither kept nor freed, and none is handed out. */
static void test_device_and_abandon(void)
{
    hp_host_pool *pool = NULL;
    if (hp_host_pool_create(gpu, 1 << 20, &pool, &err) != HP_OK) {
        tap_ok(false, "pool: %s", err.message);
        return;
    }
    hp_host_block *d = hp_host_pool_get(pool, HP_MEM_DEVICE, 1 << 19, &err);
    hp_host_block *h = hp_host_pool_get(pool, HP_MEM_UPLOAD, 1 << 19, &err);
    bool made = d && h && !d->buf.mapped && d->buf.address && h->buf.mapped;
    hp_host_pool_put(d);
    hp_host_pool_put(h);
    size_t kept = 0;
    unsigned out = 1;
    hp_host_pool_usage(pool, &out, &kept);
    hp_host_block *again = hp_host_pool_get(pool, HP_MEM_DEVICE, 1 << 19, &err);
    bool reused = again == d;
    tap_ok(made && out == 0 && kept == (size_t)h->buf.size && reused,
           "a device block (no mapping, an address) is kept apart from host ones (host bytes kept %zu) and reused", kept);
    hp_host_pool_abandon(pool);
    hp_host_pool_put(again); /* set aside: the GPU may still write it; freed when the pool is destroyed */
    hp_err e = {0};
    hp_host_block *none = hp_host_pool_get(pool, HP_MEM_UPLOAD, 1 << 10, &e);
    hp_host_pool_usage(pool, &out, &kept);
    hp_host_pool_usage(pool, &out, &kept);
    tap_ok(!none && e.code == HP_ERR_DEVICE_LOST && out == 0 && kept == (size_t)h->buf.size,
           "after hp_host_pool_abandon a block given back is set aside, not kept for reuse, and none is handed out "
           "(\"%s\"); the pool's destruction frees it (the validation layer's leak check below)", e.message);
    hp_host_pool_destroy(&pool);
}

/* The recent peak (hp_host_pool_keep_recent_peak): a load that held 8 blocks gets them back from the pool
 * (none made again) though the keep limit is one; 60 s after it passed, the idle trim frees all but the
 * limit; a ceiling bounds what is kept; without the peak the keep limit alone holds, as before. The pool's
 * clock is the test's (hp_host_pool_test_clock). */
enum { PEAK_BLOCKS = 8 };

static void peak_load(hp_host_pool *pool, hp_host_block *b[PEAK_BLOCKS])
{
    for (int i = 0; i < PEAK_BLOCKS; i++)
        b[i] = hp_host_pool_get(pool, HP_MEM_UPLOAD, 1 << 20, &err);
    for (int i = 0; i < PEAK_BLOCKS; i++)
        hp_host_pool_put(b[i]);
}

static void test_recent_peak(void)
{
    double now = 1000;
    hp_host_pool *pool = NULL;
    if (hp_host_pool_create(gpu, 1 << 20, &pool, &err) != HP_OK) {
        tap_ok(false, "pool: %s", err.message);
        return;
    }
    hp_host_pool_test_clock(pool, &now);
    hp_host_pool_keep_recent_peak(pool, 64 << 20, 64 << 20);
    hp_host_block *b[PEAK_BLOCKS];
    peak_load(pool, b);
    size_t block = b[0] ? (size_t)b[0]->buf.size : 0, kept = 0;
    hp_host_pool_counts first;
    hp_host_pool_counts_get(pool, &first);
    hp_host_pool_usage(pool, NULL, &kept);
    now += 5;
    peak_load(pool, b);
    hp_host_pool_counts again;
    hp_host_pool_counts_get(pool, &again);
    tap_ok(block && first.made == PEAK_BLOCKS && first.freed == 0 && kept == PEAK_BLOCKS * block &&
               again.made == PEAK_BLOCKS && again.freed == 0,
           "a load of %d blocks of 1 MiB with a keep limit of 1 MiB: all %d kept when given back (%zu bytes), the "
           "same load again makes none (%lu made, %lu freed in all)", PEAK_BLOCKS, PEAK_BLOCKS, kept, again.made,
           again.freed);
    now += 30;
    hp_host_pool_trim(pool, 0);
    size_t kept_soon = 0;
    hp_host_pool_usage(pool, NULL, &kept_soon);
    now += 31;
    hp_host_pool_trim(pool, 0);
    hp_host_pool_counts later;
    hp_host_pool_counts_get(pool, &later);
    hp_host_pool_usage(pool, NULL, &kept);
    tap_ok(kept_soon == PEAK_BLOCKS * block && kept == block && later.freed == PEAK_BLOCKS - 1,
           "30 s after the load the blocks are still kept (%zu bytes); 61 s after, the idle trim frees all but the "
           "keep limit's (%zu bytes kept, %lu freed)", kept_soon, kept, later.freed);
    hp_host_pool_destroy(&pool);

    /* Device blocks: the same, under their own ceiling. */
    if (hp_host_pool_create(gpu, 1 << 20, &pool, &err) != HP_OK)
        return;
    hp_host_pool_test_clock(pool, &now);
    hp_host_pool_keep_recent_peak(pool, 64 << 20, 64 << 20);
    for (int i = 0; i < PEAK_BLOCKS; i++)
        b[i] = hp_host_pool_get(pool, HP_MEM_DEVICE, 1 << 20, &err);
    for (int i = 0; i < PEAK_BLOCKS; i++)
        hp_host_pool_put(b[i]);
    hp_host_pool_counts_get(pool, &later);
    tap_ok(later.kept_device_bytes >= PEAK_BLOCKS * (size_t)(1 << 20) && later.freed == 0,
           "device blocks: all %d of the load kept under their own ceiling (%zu bytes)", PEAK_BLOCKS,
           later.kept_device_bytes);
    hp_host_pool_destroy(&pool);

    /* A load of another size after one that has passed: the passed load's blocks, which none of the new one's
     * requests fit, are freed when the new load asks (not kept beside its own). */
    if (hp_host_pool_create(gpu, 1 << 20, &pool, &err) != HP_OK)
        return;
    hp_host_pool_test_clock(pool, &now);
    hp_host_pool_keep_recent_peak(pool, 64 << 20, 64 << 20);
    peak_load(pool, b);
    now += 61;
    hp_host_block *other = hp_host_pool_get(pool, HP_MEM_UPLOAD, 3 << 20, &err);
    hp_host_pool_counts_get(pool, &later);
    hp_host_pool_usage(pool, NULL, &kept);
    tap_ok(other && later.freed == PEAK_BLOCKS - 1 && kept == block,
           "a 3 MiB request 61 s after a load of 1 MiB blocks: the old load's blocks past the keep limit freed as it "
           "asks (%lu freed, %zu bytes kept)", later.freed, kept);
    hp_host_pool_put(other);
    hp_host_pool_destroy(&pool);

    /* A ceiling of 4 MiB: out and kept together stay within it. */
    if (hp_host_pool_create(gpu, 1 << 20, &pool, &err) != HP_OK)
        return;
    hp_host_pool_test_clock(pool, &now);
    hp_host_pool_keep_recent_peak(pool, 4 * block, 4 * block);
    peak_load(pool, b);
    hp_host_pool_usage(pool, NULL, &kept);
    tap_ok(kept == 4 * block, "with a ceiling of 4 blocks, 4 of the 8 are kept (%zu bytes)", kept);
    hp_host_pool_destroy(&pool);

    /* No peak set: the keep limit alone, as before. */
    if (hp_host_pool_create(gpu, 1 << 20, &pool, &err) != HP_OK)
        return;
    hp_host_pool_test_clock(pool, &now);
    peak_load(pool, b);
    hp_host_pool_counts_get(pool, &later);
    hp_host_pool_usage(pool, NULL, &kept);
    tap_ok(kept == block && later.freed == PEAK_BLOCKS - 1,
           "without the recent peak, the keep limit alone: 1 block kept, %lu freed", later.freed);
    hp_host_pool_destroy(&pool);
}

/* Making ahead (hp_host_pool_make_ahead): the pool's own thread keeps spares, half a load's blocks out rounded
 * up, so that a load that grows takes made blocks rather than making them on a request's path. Most requests
 * below wait for the pool's thread to settle first (hp_host_pool_ahead_settle): what a load growing slower than
 * that thread pins sees. */
static const size_t mib = 1 << 20;

static void ahead_counts(hp_host_pool *pool, hp_host_pool_counts *c, size_t *kept)
{
    hp_host_pool_ahead_settle(pool);
    hp_host_pool_counts_get(pool, c);
    hp_host_pool_usage(pool, NULL, kept);
}

static hp_host_block *settled_get(hp_host_pool *pool, hp_mem_kind kind, size_t bytes)
{
    hp_host_pool_ahead_settle(pool);
    return hp_host_pool_get(pool, kind, bytes, &err);
}

static hp_host_pool *ahead_pool(size_t keep_bytes)
{
    hp_host_pool *pool = NULL;
    if (hp_host_pool_create(gpu, keep_bytes, &pool, &err) != HP_OK) {
        tap_ok(false, "pool: %s", err.message);
        return NULL;
    }
    hp_host_pool_make_ahead(pool, true);
    return pool;
}

static void test_ahead_growth(void)
{
    enum { LOAD = 8 };
    hp_host_pool *pool = ahead_pool(64 * mib);
    if (!pool)
        return;
    hp_host_block *b[LOAD + 2];
    for (int i = 0; i < LOAD; i++)
        b[i] = settled_get(pool, HP_MEM_UPLOAD, mib);
    hp_host_pool_counts c;
    size_t kept;
    ahead_counts(pool, &c, &kept);
    /* Out 1..8 wants 1, 1, 2, 2, 3, 3, 4, 4 spares: the first request makes its block, each later one takes a
     * spare that is made again, and at 8 out four are kept: 7 taken and 4 kept, 11 made ahead. */
    tap_ok(c.made == 1 && c.made_ahead == 11 && kept == 4 * mib && c.make_ahead_seconds > 0,
           "a load growing to %d blocks of 1 MiB: the first made on the request's path, the rest taken from the "
           "spares, which are made again (made %lu, 1; made ahead %lu, 11; kept %zu bytes, 4 MiB; %.6f s ahead)",
           LOAD, c.made, c.made_ahead, kept, c.make_ahead_seconds);
    for (int i = 0; i < LOAD; i++)
        hp_host_pool_put(b[i]);
    for (int i = 0; i < LOAD + 2; i++)
        b[i] = hp_host_pool_get(pool, HP_MEM_UPLOAD, mib, &err);
    ahead_counts(pool, &c, &kept);
    /* 12 kept; at 9 out 3 are left and 5 wanted; at 10 out 2 left: 3 made in all, whatever the thread's pace. */
    tap_ok(c.made == 1 && c.freed == 0 && c.made_ahead == 11 + 3 && kept == 5 * mib,
           "given back and asked again at once, 2 more than before: all 10 from the kept blocks, none made on a "
           "request's path (made %lu, 1), 5 spares for 10 out (made ahead %lu, 14; kept %zu bytes)",
           c.made, c.made_ahead, kept);
    for (int i = 0; i < LOAD + 2; i++)
        hp_host_pool_put(b[i]);
    hp_host_pool_destroy(&pool);
}

/* A load of sizes in one bucket (within an eighth): its spares are made at the largest asked, not the latest. */
static void test_ahead_sizes(void)
{
    hp_host_pool *pool = ahead_pool(64 * mib);
    if (!pool)
        return;
    hp_host_block *larger = settled_get(pool, HP_MEM_READBACK, mib + (64 << 10));
    hp_host_block *one = settled_get(pool, HP_MEM_READBACK, mib); /* takes the spare; its own is made */
    hp_host_pool_counts before, c;
    size_t kept;
    ahead_counts(pool, &before, &kept);
    hp_host_block *between = hp_host_pool_get(pool, HP_MEM_READBACK, mib + (32 << 10), &err);
    ahead_counts(pool, &c, &kept);
    tap_ok(larger && one && between && between->buf.size >= mib + (64 << 10) && c.made == before.made &&
               before.made == 1,
           "read-back blocks of 1 MiB + 64 KiB, then 1 MiB, then 1 MiB + 32 KiB: the spare made after the 1 MiB "
           "request is of the largest, %zu bytes, and fits the last (made on requests' paths %lu, 1)",
           between ? (size_t)between->buf.size : 0, c.made);
    hp_host_pool_put(larger);
    hp_host_pool_put(one);
    hp_host_pool_put(between);
    hp_host_pool_destroy(&pool);
}

/* Within the keep limit only: out and kept together never pass it for a spare. */
static void test_ahead_limit(void)
{
    enum { LOAD = 8 };
    hp_host_pool *pool = ahead_pool(2 * mib);
    if (!pool)
        return;
    hp_host_block *b[LOAD];
    for (int i = 0; i < LOAD; i++)
        b[i] = settled_get(pool, HP_MEM_UPLOAD, mib);
    hp_host_pool_counts c;
    size_t kept;
    ahead_counts(pool, &c, &kept);
    tap_ok(c.made_ahead == 1 && c.made == LOAD - 1 && kept == 0,
           "a keep limit of 2 MiB: one spare (1 MiB out, 1 spare), then none past it; the load's other blocks made "
           "as asked (made ahead %lu, made %lu, kept %zu)", c.made_ahead, c.made, kept);
    for (int i = 0; i < LOAD; i++)
        hp_host_pool_put(b[i]);
    hp_host_pool_usage(pool, NULL, &kept);
    tap_ok(kept == 2 * mib, "given back: the keep limit kept, the rest freed (%zu bytes kept)", kept);
    hp_host_pool_destroy(&pool);
}

/* Spares count as out in the recent peak: a load that grows past the keep limit beside another load's spare
 * keeps all its blocks when they come back, as it would without the spare. A keep limit of 4 MiB: load C (one
 * read-back block, its spare) then load A (4 upload blocks: the first made as asked, its spare taken by the
 * second, the last two made as asked, no room for more spares): out and spares peak at 6 MiB; A's last block back finds 4 MiB kept, and fits the peak only if the spare counts. */
static void test_ahead_peak(void)
{
    hp_host_pool *pool = ahead_pool(4 * mib);
    if (!pool)
        return;
    hp_host_pool_keep_recent_peak(pool, 64 * mib, 64 * mib);
    hp_host_block *c_block = settled_get(pool, HP_MEM_READBACK, mib), *a[4];
    for (int i = 0; i < 4; i++)
        a[i] = settled_get(pool, HP_MEM_UPLOAD, mib);
    hp_host_pool_counts c;
    size_t kept;
    ahead_counts(pool, &c, &kept);
    bool shape = c.made_ahead == 2 && c.made == 4; /* C's first; A's first, third and fourth */
    for (int i = 0; i < 4; i++)
        hp_host_pool_put(a[i]);
    ahead_counts(pool, &c, &kept);
    tap_ok(shape && c.freed == 0 && kept == 5 * mib,
           "beside another load's spare, a load of 4 blocks past a 4 MiB keep limit keeps all 4 when given back "
           "(freed %lu, kept %zu bytes: 5 MiB)", c.freed, kept);
    hp_host_pool_put(c_block);
    hp_host_pool_destroy(&pool);
}

/* Eight loads tracked: a ninth gets no spares until one is free; a block no load counted, given back, comes off
 * no load's count (were it taken off the ninth's, that entry would look free while its block is out, and a
 * tenth load would take it). Four kinds of 64 KiB and 256 KiB: no load's blocks fit another's requests. */
static void test_ahead_loads(void)
{
    static const hp_mem_kind kinds[4] = {HP_MEM_UPLOAD, HP_MEM_READBACK, HP_MEM_READBACK_SHADER, HP_MEM_DEVICE};
    hp_host_pool *pool = ahead_pool(64 * mib);
    if (!pool)
        return;
    hp_host_block *b[8];
    for (int i = 0; i < 8; i++)
        b[i] = settled_get(pool, kinds[i / 2], (size_t)(64 << 10) << (2 * (i % 2)));
    hp_host_pool_counts eight, c;
    size_t kept;
    ahead_counts(pool, &eight, &kept);
    hp_host_block *ninth = settled_get(pool, HP_MEM_UPLOAD, mib);
    ahead_counts(pool, &c, &kept);
    bool none_for_ninth = c.made_ahead == eight.made_ahead;
    hp_host_pool_put(b[0]);
    hp_host_block *ninth_again = settled_get(pool, HP_MEM_UPLOAD, mib);
    ahead_counts(pool, &c, &kept);
    bool ninth_served = c.made_ahead == eight.made_ahead + 1;
    hp_host_pool_put(ninth); /* counted by no load */
    hp_host_block *tenth = settled_get(pool, HP_MEM_UPLOAD, 4 * mib);
    hp_host_pool_counts last;
    ahead_counts(pool, &last, &kept);
    tap_ok(eight.made_ahead == 8 && none_for_ninth && ninth_served && last.made_ahead == c.made_ahead,
           "eight loads, a spare each (%lu made ahead); a ninth with every entry busy: none (%s); one load's block "
           "back, the ninth takes its entry and a spare (%s); the ninth's first block back, counted by no load: "
           "the tenth finds no entry free (made ahead %lu, %lu before)", eight.made_ahead,
           none_for_ninth ? "none" : "some", ninth_served ? "taken" : "not", last.made_ahead, c.made_ahead);
    for (int i = 1; i < 8; i++)
        hp_host_pool_put(b[i]);
    hp_host_pool_put(ninth_again);
    hp_host_pool_put(tenth);
    hp_host_pool_destroy(&pool);
}

/* Off (the default), failing on purpose, after the device is lost: none made ahead. The spare is asked for
 * while the pool's thread is held (hp_host_pool_test_hold_ahead), then the failure set, then the thread let go. */
static void test_ahead_off(void)
{
    hp_host_pool *pool = NULL;
    if (hp_host_pool_create(gpu, 64 * mib, &pool, &err) != HP_OK)
        return;
    hp_host_block *b = hp_host_pool_get(pool, HP_MEM_UPLOAD, mib, &err);
    hp_host_pool_counts c;
    size_t kept;
    ahead_counts(pool, &c, &kept);
    tap_ok(c.made_ahead == 0 && kept == 0, "without hp_host_pool_make_ahead: no spare (made ahead %lu)", c.made_ahead);
    hp_host_pool_put(b);
    hp_host_pool_make_ahead(pool, true);
    hp_host_pool_test_hold_ahead(pool, true);
    b = hp_host_pool_get(pool, HP_MEM_UPLOAD, mib, &err); /* the kept one; a spare asked */
    hp_host_pool_test_fail(pool, 1);
    hp_host_pool_test_hold_ahead(pool, false);
    ahead_counts(pool, &c, &kept);
    bool none_failing = c.made_ahead == 0;
    hp_host_pool_test_fail(pool, 0);
    hp_host_pool_put(b);
    hp_host_pool_test_hold_ahead(pool, true);
    b = hp_host_pool_get(pool, HP_MEM_UPLOAD, mib, &err);
    hp_host_pool_abandon(pool);
    hp_host_pool_test_hold_ahead(pool, false);
    ahead_counts(pool, &c, &kept);
    tap_ok(b && none_failing && c.made_ahead == 0,
           "a spare asked, then the pool failing on purpose (%s), or the device lost (made ahead %lu): none made",
           none_failing ? "none" : "some", c.made_ahead);
    hp_host_pool_put(b);
    hp_host_pool_destroy(&pool);

    /* Destroyed while spares are being made: the pool's thread stops and every block is freed; the validation
     * layer's leak check (the last point) fails otherwise. */
    pool = ahead_pool(256 * mib);
    if (!pool)
        return;
    hp_host_block *many[32];
    for (int i = 0; i < 32; i++)
        many[i] = hp_host_pool_get(pool, HP_MEM_DEVICE, mib, &err);
    for (int i = 0; i < 32; i++)
        hp_host_pool_put(many[i]);
    hp_host_pool_destroy(&pool);
}

/* A spare that cannot be made (hp_host_pool_test_fail_ahead): its load asks for none for a second (the pool's
 * clock is the test's), then asks again. */
static void test_ahead_retry(void)
{
    double now = 1000;
    hp_host_pool *pool = ahead_pool(64 * mib);
    if (!pool)
        return;
    hp_host_pool_test_clock(pool, &now);
    hp_host_pool_test_fail_ahead(pool, true);
    hp_host_block *b = settled_get(pool, HP_MEM_UPLOAD, mib);
    hp_host_pool_ahead_settle(pool); /* its spare fails */
    hp_host_pool_test_fail_ahead(pool, false);
    hp_host_pool_put(b);
    now += 0.5;
    b = settled_get(pool, HP_MEM_UPLOAD, mib); /* the kept one; within the second: no spare asked */
    hp_host_pool_counts early, later;
    size_t kept;
    ahead_counts(pool, &early, &kept);
    hp_host_pool_put(b);
    now += 0.6;
    b = settled_get(pool, HP_MEM_UPLOAD, mib);
    ahead_counts(pool, &later, &kept);
    tap_ok(b && early.made_ahead == 0 && later.made_ahead == 1,
           "a spare that could not be made: its load asks for none 0.5 s later (made ahead %lu), one 1.1 s later "
           "(%lu)", early.made_ahead, later.made_ahead);
    hp_host_pool_put(b);
    hp_host_pool_destroy(&pool);
}

static void test_make_ahead(void)
{
    test_ahead_retry();
    test_ahead_growth();
    test_ahead_sizes();
    test_ahead_limit();
    test_ahead_peak();
    test_ahead_loads();
    test_ahead_off();
}

int main(void)
{
    int bail = gpu_test_open(&gpu, &graph, &err);
    if (bail)
        return bail;
    test_reuse();
    test_threads(false);
    test_threads(true);
    test_make_ahead();
    test_frames();
    test_device_limit();
    test_device_and_abandon();
    test_recent_peak();
    hp_frame_graph_destroy(&graph);
    hp_gpu_destroy(&gpu);
    gpu_test_validation_clean();
    return tap_done();
}
