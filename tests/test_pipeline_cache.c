/* The pipeline cache file: saved after a start, handed to the driver on the next start, and ignored with
 * a warning, never a crash, when it belongs to another device or driver or is damaged. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include "common/log.h"
#include "pipeline/frame_graph.h"
#include "gpu_test.h"
#include "tap.h"

static char cache_path[256];

/* One daemon start in miniature: device, every pipeline, a frame, optionally a save. */
static bool start(bool save, hp_gpu_info *info, hp_err *err)
{
    hp_gpu_config cfg = HP_GPU_CONFIG_DEFAULTS;
    cfg.validation = true;
    cfg.device = getenv("HDRPOST_TEST_DEVICE");
    cfg.pipeline_cache_path = cache_path;
    hp_gpu *gpu = NULL;
    hp_frame_graph *graph = NULL;
    bool ok = hp_gpu_create(&cfg, &gpu, err) == HP_OK && hp_frame_graph_create(gpu, &graph, err) == HP_OK;
    if (ok) {
        /* The pipelines must work, whatever the cache said. */
        hp_frame_desc desc = {.width = 16, .height = 16, .format = HP_PIXEL_RGBA32F};
        void *pixels;
        ok = hp_frame_graph_begin(graph, &desc, &pixels, err) == HP_OK;
        if (ok) {
            for (int i = 0; i < 16 * 16; i++) {
                float p[4] = {1, 1, 1, 1};
                memcpy((char *)pixels + 16 * i, p, 16);
            }
            hp_frame_params params;
            hp_frame_params_defaults(&params);
            hp_frame_result res;
            ok = hp_frame_graph_run(graph, &params, &res, err) == HP_OK && res.stats.finite_pixels == 256;
        }
    }
    if (gpu)
        hp_gpu_info_copy(gpu, info);
    if (ok && save)
        ok = hp_gpu_save_pipeline_cache(gpu, err) == HP_OK;
    hp_frame_graph_destroy(&graph);
    hp_gpu_destroy(&gpu);
    return ok;
}

static long file_size(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 ? (long)st.st_size : -1;
}

static unsigned char *read_all(const char *path, long *len)
{
    *len = file_size(path);
    FILE *f = fopen(path, "rb");
    if (!f || *len < 0)
        return NULL;
    unsigned char *d = malloc((size_t)*len + 1);
    if (d && fread(d, 1, (size_t)*len, f) != (size_t)*len) {
        free(d);
        d = NULL;
    }
    fclose(f);
    return d;
}

static void write_all(const char *path, const unsigned char *d, long len)
{
    FILE *f = fopen(path, "wb");
    if (f) {
        fwrite(d, 1, (size_t)len, f);
        fclose(f);
    }
}

/* Rewrites the file's CRC so that only the field we changed makes it foreign. */
static void fix_crc(unsigned char *d, long len)
{
    uint32_t crc = (uint32_t)crc32(crc32(0L, Z_NULL, 0), d + 48, (uInt)(len - 48));
    memcpy(d + 44, &crc, 4);
}

int main(void)
{
    hp_log_set_level(HP_LOG_WARN);
    char dir[] = "/tmp/hdrpost-cache-XXXXXX";
    if (!mkdtemp(dir))
        return tap_bail("mkdtemp failed");
    snprintf(cache_path, sizeof(cache_path), "%s/pipeline.cache", dir);
    hp_err err = {0};
    hp_gpu_info info;

    /* First start: no file yet. */
    bool ok = start(true, &info, &err);
    long size = file_size(cache_path);
    tap_ok(ok && info.cache_state == HP_CACHE_ABSENT && size >= 48 + 32,
           "first start compiles from scratch and saves the cache (%ld bytes): %s", size, ok ? "" : err.message);
    uint32_t created = info.pipelines_created;

    /* Second start: the cache is handed to the driver. */
    ok = start(false, &info, &err);
    tap_ok(ok && info.cache_state == HP_CACHE_LOADED && (long)info.cache_bytes_loaded == size - 48,
           "second start loads the saved cache (%s, %zu bytes handed to the driver)",
           hp_cache_state_name(info.cache_state), info.cache_bytes_loaded);
    tap_diag("pipelines created %u, reported as cache hits by the driver %u", info.pipelines_created,
             info.pipelines_from_cache);
    tap_ok(info.pipelines_created == created, "the same %u pipelines are created from the cache", created);
    /* Some drivers keep nothing in the cache beyond its 32-byte header (Mesa 22's lavapipe); where one
     * keeps pipelines and reports creation feedback, every pipeline of the second start must hit. */
    if (size > 48 + 32 && info.pipelines_from_cache + 1 > 1)
        tap_ok(info.pipelines_from_cache == info.pipelines_created,
               "the driver served all %u pipelines from the cache (%u hits)", info.pipelines_created,
               info.pipelines_from_cache);
    else
        tap_diag("this driver stores %ld bytes of pipelines and reported %u cache hits: hit check not applicable",
                 size - 48 - 32, info.pipelines_from_cache);

    long len;
    unsigned char *good = read_all(cache_path, &len);
    if (!good)
        return tap_bail("cannot read back %s", cache_path);
    unsigned char *bad = malloc((size_t)len);

    struct {
        const char *what;
        hp_cache_state want;
        void (*mutate)(unsigned char *d, long *len);
    } cases[] = {
        {"a flipped bit in the driver's data", HP_CACHE_CORRUPT, NULL},
        {"a truncated file", HP_CACHE_CORRUPT, NULL},
        {"garbage", HP_CACHE_CORRUPT, NULL},
        {"an empty file", HP_CACHE_CORRUPT, NULL},
        {"another device id", HP_CACHE_FOREIGN, NULL},
        {"another driver version", HP_CACHE_FOREIGN, NULL},
        {"another pipelineCacheUUID", HP_CACHE_FOREIGN, NULL},
        {"a driver header naming another vendor under a valid checksum", HP_CACHE_FOREIGN, NULL},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        memcpy(bad, good, (size_t)len);
        long n = len;
        switch (i) {
        case 0: bad[len - 1] ^= 0x10; break;
        case 1: n = len / 2; break;
        case 2: for (long j = 0; j < n; j++) bad[j] = (unsigned char)(j * 131 + 7); break;
        case 3: n = 0; break;
        case 4: bad[16] ^= 1; fix_crc(bad, n); break;
        case 5: bad[20] ^= 1; fix_crc(bad, n); break;
        case 6: bad[24] ^= 1; fix_crc(bad, n); break;
        case 7: bad[48 + 8] ^= 1; fix_crc(bad, n); break;
        }
        write_all(cache_path, bad, n);
        ok = start(false, &info, &err);
        tap_ok(ok && info.cache_state == cases[i].want && info.cache_bytes_loaded == 0,
               "%s: ignored as %s, pipelines still created and run%s%s", cases[i].what,
               hp_cache_state_name(info.cache_state), ok ? "" : ": ", ok ? "" : err.message);
    }

    /* After a damaged file, saving repairs it. */
    ok = start(true, &info, &err) && start(false, &info, &err);
    tap_ok(ok && info.cache_state == HP_CACHE_LOADED, "a later save replaces a damaged file (%s)",
           hp_cache_state_name(info.cache_state));

    /* An unwritable location is an error with the path in it, not a crash. */
    snprintf(cache_path, sizeof(cache_path), "%s/missing-dir/pipeline.cache", dir);
    ok = start(true, &info, &err);
    tap_ok(!ok && err.code == HP_ERR_IO && strstr(err.message, "missing-dir"),
           "saving into a missing directory fails with the path: %s", err.message);

    free(bad);
    free(good);
    snprintf(cache_path, sizeof(cache_path), "%s/pipeline.cache", dir);
    unlink(cache_path);
    rmdir(dir);
    gpu_test_validation_clean();
    return tap_done();
}
