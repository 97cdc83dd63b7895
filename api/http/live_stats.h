/* What the last minute looked like (GET /v1/stats, the web console's live view; issue 18): requests, frames
 * and errors per second over a sliding window of HP_LIVE_WINDOW_S one-second buckets, each stage's mean time
 * per second, its p50 and p99 over the last HP_LIVE_SAMPLES frames, status counts and the recent errors.
 *
 * /metrics (api/http/metrics.h) holds the same events as Prometheus counters and histograms since start-up, which
 * a Prometheus turns into rates; a person looking at one node has no Prometheus, so the node keeps its own
 * window. api/http/metrics.c feeds both from one call, so they cannot disagree about what happened. One mutex,
 * held for microseconds per event. */
#ifndef HP_LIVE_STATS_H
#define HP_LIVE_STATS_H

#include <jansson.h>

#define HP_LIVE_WINDOW_S 60
#define HP_LIVE_SAMPLES 256
#define HP_LIVE_RECENT_ERRORS 20

/* A finished request (any route) and its status. */
void hp_live_request(unsigned status);
/* A frame's phase (DECISIONS.md 10 names) in milliseconds; "total" also counts the frame. */
void hp_live_stage(const char *stage, double ms);
/* An error answer: its status, code, message and path (copied, cut to fit). */
void hp_live_error(unsigned status, const char *code, const char *message, const char *path);

/* The window as /v1/stats shows it (docs/API.md): requests_per_s, frames_per_s, per_second {t_end, requests,
 * frames, errors, stages_ms}, status_counts, errors_by_code, recent_errors, stages_ms {p50, p99, count}, set
 * on `into`. Returns 0, or -1 when out of memory (into then holds part of it). */
int hp_live_stats_json(json_t *into);

#endif
