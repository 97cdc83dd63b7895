/* Prometheus metrics (GET /metrics, text exposition format 0.0.4), all named hdrpost_*. Counters and
 * histograms live here, updated by the request path from any thread; gauges (queue depth, frames in
 * flight, GPU memory) are read from the backend when scraped. */
#ifndef HP_METRICS_H
#define HP_METRICS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* One finished request: its route, as the path of its row in the route table (a string that lives as long as
 * the table: the label set is the table's, whatever paths clients make up), or NULL for "other"; and its
 * status. */
void hp_metrics_request(const char *route, unsigned status);
/* One phase of a frame (DECISIONS.md 10 names), in milliseconds. */
void hp_metrics_stage(const char *stage, double ms);
/* A frame processed: the bytes of its body and its pixels. */
void hp_metrics_frame(uint64_t body_bytes, uint64_t pixels);

/* A connection the server closed before its request was in: "header_timeout", "slow_body", "evicted" (closed
 * to make room while slots ran short), "client_limit" (refused: its client held max_connections_per_ip) (the
 * connection guard, api/http/http_guard.h), "limit" (libmicrohttpd's, over max_connections), "protocol"
 * (libmicrohttpd refused its framing). */
void hp_metrics_connection_closed(const char *reason);
/* A frame whose client went away before its answer: "arriving" (its body cut off while an early decoder
 * read it), "queued" (taken out of the queue at once), "running" (on the GPU or encoding by then). */
void hp_metrics_cancelled(const char *stage);
/* A PNG deflated on the GPU answered: in_place when its stream landed in the request's own pinned memory
 * and the file was finished there and sent from it; else copied (no pinned block to be had: the stream
 * came through the graph's memory, or the file was copied out). */
void hp_metrics_png_gpu_answer(bool in_place);
/* An EXR ZIP frame's chunks inflated on the CPU, on the GPU, or on the CPU after the GPU refused a chunk or
 * gave up; the GPU time of its passes, every run's. */
/* Where a ZIP frame's chunks were inflated: the CPU, the GPU, the CPU with the rest on the GPU (the split),
 * or the CPU's whole decoder after the GPU's path did not finish (the CPU's verdict stands). */
typedef enum hp_exr_zip_decoded {
    HP_EXR_ZIP_ON_CPU,
    HP_EXR_ZIP_ON_GPU,
    HP_EXR_ZIP_GPU_THEN_CPU,
    HP_EXR_ZIP_SPLIT,
    HP_EXR_ZIP_SPLIT_THEN_CPU,
    HP_EXR_ZIP_DECODED_COUNT
} hp_exr_zip_decoded;
void hp_metrics_exr_zip(hp_exr_zip_decoded where);
void hp_metrics_exr_zip_gpu_time(double gpu_ms);
/* An EXR frame the GPU's decoders could not take, by why: reason a static string of a small fixed set
 * (api/frames/early_decode.c names them). Returns the reason's count with this frame (1: the first). */
uint64_t hp_metrics_exr_cpu(const char *reason);
/* Log lines left out by a rate limit (common/ratelimit.h), added up. */
void hp_metrics_log_suppressed(uint64_t lines);

/* Appends the counters and histograms to *buf (malloc'd, grown as needed). Returns 0, or -1 when out of
 * memory. */
int hp_metrics_format(char **buf, size_t *len, size_t *cap);
/* The same append, for gauge lines made elsewhere. */
int hp_metrics_printf(char **buf, size_t *len, size_t *cap, const char *fmt, ...) __attribute__((format(printf, 4, 5)));

#endif
