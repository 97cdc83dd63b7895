/* Prometheus counters and histograms (api/http/metrics.h). One mutex: a scrape or a request's update takes
 * it for microseconds, far below the cost of the frame it accounts for. */
#include "api/http/metrics.h"

#include "api/http/live_stats.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const stages[] = {"recv", "decode", "queue", "upload", "reduce", "tonemap", "png_gpu",
                                     "download", "encode", "total"};
#define STAGES (sizeof(stages) / sizeof(stages[0]))

/* Seconds: 100 us to 10 s, the span from a GPU stage at 1080p to a 16K frame's encode. */
static const double bounds[] = {0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025,
                                0.05,   0.1,     0.25,   0.5,   1,      2.5,   5,     10};
#define BUCKETS (sizeof(bounds) / sizeof(bounds[0]))

static const char *const close_reasons[] = {"header_timeout", "slow_body", "limit", "protocol", "evicted",
                                             "client_limit"};
#define CLOSE_REASONS (sizeof(close_reasons) / sizeof(close_reasons[0]))

static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;
typedef struct request_row {
    const char *route; /* a path of the route table (a fixed set), NULL for "other" */
    unsigned status;
    uint64_t count;
} request_row;
static request_row g_requests[512]; /* routes x statuses seen: a few dozen */
static size_t g_request_rows;
static uint64_t g_stage_buckets[STAGES][BUCKETS + 1];
static double g_stage_sum[STAGES];
static uint64_t g_stage_count[STAGES];
static uint64_t g_bytes_in, g_pixels, g_frames;
static uint64_t g_closed[CLOSE_REASONS], g_log_suppressed;
static const char *const cancel_stages[] = {"arriving", "queued", "running"};
#define CANCEL_STAGES (sizeof(cancel_stages) / sizeof(cancel_stages[0]))
static uint64_t g_cancelled[CANCEL_STAGES];

void hp_metrics_cancelled(const char *stage)
{
    for (unsigned i = 0; i < CANCEL_STAGES; i++)
        if (strcmp(stage, cancel_stages[i]) == 0) {
            pthread_mutex_lock(&g_lock);
            g_cancelled[i]++;
            pthread_mutex_unlock(&g_lock);
        }
}

static uint64_t g_png_gpu[2]; /* copied, in place */
static uint64_t g_exr_zip[HP_EXR_ZIP_DECODED_COUNT]; /* by hp_exr_zip_decoded */
static double g_exr_zip_gpu_s;

void hp_metrics_exr_zip(hp_exr_zip_decoded where)
{
    pthread_mutex_lock(&g_lock);
    g_exr_zip[where]++;
    pthread_mutex_unlock(&g_lock);
}

void hp_metrics_exr_zip_gpu_time(double gpu_ms)
{
    pthread_mutex_lock(&g_lock);
    g_exr_zip_gpu_s += gpu_ms / 1e3;
    pthread_mutex_unlock(&g_lock);
}

/* Reasons seen so far, each its count; a fixed set of static strings, so a few rows. */
static struct {
    const char *reason;
    uint64_t frames;
} g_exr_cpu[16];

uint64_t hp_metrics_exr_cpu(const char *reason)
{
    uint64_t frames = 0;
    pthread_mutex_lock(&g_lock);
    for (size_t i = 0; i < sizeof g_exr_cpu / sizeof g_exr_cpu[0]; i++)
        if (!g_exr_cpu[i].reason || !strcmp(g_exr_cpu[i].reason, reason)) {
            g_exr_cpu[i].reason = reason;
            frames = ++g_exr_cpu[i].frames;
            break;
        }
    pthread_mutex_unlock(&g_lock);
    return frames;
}

void hp_metrics_png_gpu_answer(bool in_place)
{
    pthread_mutex_lock(&g_lock);
    g_png_gpu[in_place ? 1 : 0]++;
    pthread_mutex_unlock(&g_lock);
}

void hp_metrics_connection_closed(const char *reason)
{
    for (unsigned i = 0; i < CLOSE_REASONS; i++)
        if (strcmp(reason, close_reasons[i]) == 0) {
            pthread_mutex_lock(&g_lock);
            g_closed[i]++;
            pthread_mutex_unlock(&g_lock);
        }
}

void hp_metrics_log_suppressed(uint64_t lines)
{
    pthread_mutex_lock(&g_lock);
    g_log_suppressed += lines;
    pthread_mutex_unlock(&g_lock);
}

void hp_metrics_request(const char *route, unsigned status)
{
    pthread_mutex_lock(&g_lock);
    size_t i = 0;
    while (i < g_request_rows && !(g_requests[i].route == route && g_requests[i].status == status))
        i++;
    if (i == g_request_rows && g_request_rows < sizeof(g_requests) / sizeof(g_requests[0]))
        g_requests[g_request_rows++] = (request_row){route, status, 0};
    if (i < g_request_rows)
        g_requests[i].count++;
    pthread_mutex_unlock(&g_lock);
}

void hp_metrics_stage(const char *stage, double ms)
{
    hp_live_stage(stage, ms);
    for (unsigned s = 0; s < STAGES; s++) {
        if (strcmp(stage, stages[s]) != 0)
            continue;
        double sec = ms / 1000.0;
        unsigned b = 0;
        while (b < BUCKETS && sec > bounds[b])
            b++;
        pthread_mutex_lock(&g_lock);
        g_stage_buckets[s][b]++;
        g_stage_sum[s] += sec;
        g_stage_count[s]++;
        pthread_mutex_unlock(&g_lock);
        return;
    }
}

void hp_metrics_frame(uint64_t body_bytes, uint64_t pixels)
{
    pthread_mutex_lock(&g_lock);
    g_bytes_in += body_bytes;
    g_pixels += pixels;
    g_frames++;
    pthread_mutex_unlock(&g_lock);
}

int hp_metrics_printf(char **buf, size_t *len, size_t *cap, const char *fmt, ...)
{
    for (;;) {
        va_list ap;
        va_start(ap, fmt);
        int n = vsnprintf(*buf ? *buf + *len : NULL, *buf ? *cap - *len : 0, fmt, ap);
        va_end(ap);
        if (n < 0)
            return -1;
        if (*buf && *len + (size_t)n < *cap) {
            *len += (size_t)n;
            return 0;
        }
        size_t want = (*cap ? *cap * 2 : 16384) + (size_t)n;
        char *grown = realloc(*buf, want);
        if (!grown)
            return -1;
        *buf = grown;
        *cap = want;
    }
}

int hp_metrics_format(char **buf, size_t *len, size_t *cap)
{
    int rc = 0;
    pthread_mutex_lock(&g_lock);
    rc |= hp_metrics_printf(buf, len, cap, "# HELP hdrpost_requests_total HTTP requests answered, by route and status.\n"
                                           "# TYPE hdrpost_requests_total counter\n");
    for (size_t i = 0; i < g_request_rows; i++)
        rc |= hp_metrics_printf(buf, len, cap, "hdrpost_requests_total{route=\"%s\",status=\"%u\"} %llu\n",
                                g_requests[i].route ? g_requests[i].route : "other",
                                g_requests[i].status, (unsigned long long)g_requests[i].count);
    rc |= hp_metrics_printf(buf, len, cap,
                            "# HELP hdrpost_stage_duration_seconds Time of each phase of a frame (GPU stages from "
                            "timestamp queries).\n# TYPE hdrpost_stage_duration_seconds histogram\n");
    for (unsigned s = 0; s < STAGES; s++) {
        uint64_t cumulative = 0;
        for (unsigned b = 0; b < BUCKETS; b++) {
            cumulative += g_stage_buckets[s][b];
            rc |= hp_metrics_printf(buf, len, cap, "hdrpost_stage_duration_seconds_bucket{stage=\"%s\",le=\"%g\"} %llu\n",
                                    stages[s], bounds[b], (unsigned long long)cumulative);
        }
        cumulative += g_stage_buckets[s][BUCKETS];
        rc |= hp_metrics_printf(buf, len, cap,
                                "hdrpost_stage_duration_seconds_bucket{stage=\"%s\",le=\"+Inf\"} %llu\n"
                                "hdrpost_stage_duration_seconds_sum{stage=\"%s\"} %.9g\n"
                                "hdrpost_stage_duration_seconds_count{stage=\"%s\"} %llu\n",
                                stages[s], (unsigned long long)cumulative, stages[s], g_stage_sum[s], stages[s],
                                (unsigned long long)g_stage_count[s]);
    }
    rc |= hp_metrics_printf(buf, len, cap,
                            "# HELP hdrpost_frames_total Frames processed.\n# TYPE hdrpost_frames_total counter\n"
                            "hdrpost_frames_total %llu\n"
                            "# HELP hdrpost_body_bytes_total Request body bytes of processed frames.\n"
                            "# TYPE hdrpost_body_bytes_total counter\nhdrpost_body_bytes_total %llu\n"
                            "# HELP hdrpost_pixels_total Pixels of processed frames.\n"
                            "# TYPE hdrpost_pixels_total counter\nhdrpost_pixels_total %llu\n",
                            (unsigned long long)g_frames, (unsigned long long)g_bytes_in, (unsigned long long)g_pixels);
    rc |= hp_metrics_printf(buf, len, cap,
                            "# HELP hdrpost_connections_closed_total Connections closed before their request was in, "
                            "by reason.\n# TYPE hdrpost_connections_closed_total counter\n");
    for (unsigned i = 0; i < CLOSE_REASONS; i++)
        rc |= hp_metrics_printf(buf, len, cap, "hdrpost_connections_closed_total{reason=\"%s\"} %llu\n",
                                close_reasons[i], (unsigned long long)g_closed[i]);
    rc |= hp_metrics_printf(buf, len, cap,
                            "# HELP hdrpost_frames_cancelled_total Frames whose client went away before their answer "
                            "(logged 499, or status 0 when the closed connection was seen first), by where the frame "
                            "was: arriving (decoded as its body arrived), queued (taken out of the queue at once), "
                            "running (on the GPU or encoding, finished for nobody).\n"
                            "# TYPE hdrpost_frames_cancelled_total counter\n");
    for (unsigned i = 0; i < CANCEL_STAGES; i++)
        rc |= hp_metrics_printf(buf, len, cap, "hdrpost_frames_cancelled_total{stage=\"%s\"} %llu\n",
                                cancel_stages[i], (unsigned long long)g_cancelled[i]);
    rc |= hp_metrics_printf(buf, len, cap,
                            "# HELP hdrpost_png_gpu_answers_total PNGs deflated on the GPU, by where the stream went: "
                            "in_place (the request's pinned memory, the file finished and sent from it), copied "
                            "(no pinned block to be had: through the graph's memory).\n"
                            "# TYPE hdrpost_png_gpu_answers_total counter\n"
                            "hdrpost_png_gpu_answers_total{stream=\"in_place\"} %llu\n"
                            "hdrpost_png_gpu_answers_total{stream=\"copied\"} %llu\n",
                            (unsigned long long)g_png_gpu[1], (unsigned long long)g_png_gpu[0]);
    rc |= hp_metrics_printf(buf, len, cap,
                            "# HELP hdrpost_exr_zip_frames_total EXR ZIP frames decoded as their raw body arrived (bodies of "
                            "64 KiB or more), by where their chunks were inflated (exr_zip_decoder): cpu, gpu, split "
                            "(inflated on the CPU, the predictor, byte split and planes undone on the GPU), or "
                            "gpu_then_cpu and split_then_cpu (the GPU's path refused a chunk or gave up, and the CPU's "
                            "decoder decoded the frame).\n"
                            "# TYPE hdrpost_exr_zip_frames_total counter\n"
                            "hdrpost_exr_zip_frames_total{decoder=\"cpu\"} %llu\n"
                            "hdrpost_exr_zip_frames_total{decoder=\"gpu\"} %llu\n"
                            "hdrpost_exr_zip_frames_total{decoder=\"gpu_then_cpu\"} %llu\n"
                            "hdrpost_exr_zip_frames_total{decoder=\"split\"} %llu\n"
                            "hdrpost_exr_zip_frames_total{decoder=\"split_then_cpu\"} %llu\n"
                            "# HELP hdrpost_exr_zip_gpu_seconds_total GPU time of the frames' passes (inflate and "
                            "unzip; the split's copy and finish).\n"
                            "# TYPE hdrpost_exr_zip_gpu_seconds_total counter\n"
                            "hdrpost_exr_zip_gpu_seconds_total %.6f\n",
                            (unsigned long long)g_exr_zip[HP_EXR_ZIP_ON_CPU], (unsigned long long)g_exr_zip[HP_EXR_ZIP_ON_GPU],
                            (unsigned long long)g_exr_zip[HP_EXR_ZIP_GPU_THEN_CPU],
                            (unsigned long long)g_exr_zip[HP_EXR_ZIP_SPLIT],
                            (unsigned long long)g_exr_zip[HP_EXR_ZIP_SPLIT_THEN_CPU], g_exr_zip_gpu_s);
    rc |= hp_metrics_printf(buf, len, cap,
                            "# HELP hdrpost_exr_cpu_frames_total EXR frames sent as the raw body that the GPU's "
                            "decoders could not take, decoded on the CPU, by why (docs/API.md).\n"
                            "# TYPE hdrpost_exr_cpu_frames_total counter\n");
    for (size_t i = 0; i < sizeof g_exr_cpu / sizeof g_exr_cpu[0] && g_exr_cpu[i].reason; i++)
        rc |= hp_metrics_printf(buf, len, cap, "hdrpost_exr_cpu_frames_total{reason=\"%s\"} %llu\n",
                                g_exr_cpu[i].reason, (unsigned long long)g_exr_cpu[i].frames);
    rc |= hp_metrics_printf(buf, len, cap,
                            "# HELP hdrpost_log_lines_suppressed_total Repeated warnings left out of the log by its "
                            "rate limit.\n# TYPE hdrpost_log_lines_suppressed_total counter\n"
                            "hdrpost_log_lines_suppressed_total %llu\n", (unsigned long long)g_log_suppressed);
    pthread_mutex_unlock(&g_lock);
    return rc ? -1 : 0;
}
