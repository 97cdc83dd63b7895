/* The last minute, per second, for /v1/stats (api/http/live_stats.h). */
#include "api/http/live_stats.h"

#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/utf8.h"

/* DECISIONS.md 10's names, in the order a frame meets them. */
static const char *const stages[] = {"recv",   "decode", "queue",    "upload", "reduce", "dof",
                                     "bokeh",  "tonemap", "png_gpu", "download", "encode", "total"};
#define STAGES (sizeof(stages) / sizeof(stages[0]))
#define STAGE_TOTAL (STAGES - 1)

typedef struct second {
    long long t; /* unix seconds this bucket holds; another value: empty */
    unsigned requests, frames, errors;
    double stage_sum[STAGES];
    unsigned stage_count[STAGES];
} second;

typedef struct counted {
    char key[32];
    unsigned long long count;
} counted;

typedef struct recent_error {
    long long time;
    unsigned status;
    char code[32], message[256], path[64];
} recent_error;

/* Room for every status and error code the daemon answers with (api/ uses about 20 of each); past it, new
 * ones go uncounted rather than taking memory per client-chosen value. */
#define MAX_KEYS 48

static struct {
    pthread_mutex_t lock;
    second window[HP_LIVE_WINDOW_S];
    double samples[STAGES][HP_LIVE_SAMPLES];
    unsigned long long sample_count[STAGES];
    counted statuses[MAX_KEYS], codes[MAX_KEYS];
    size_t status_n, code_n;
    recent_error recent[HP_LIVE_RECENT_ERRORS];
    unsigned long long recent_count;
} g = {.lock = PTHREAD_MUTEX_INITIALIZER};

/* The buckets are keyed by the monotonic clock's seconds: a wall clock stepped back would add new events to
 * seconds already counted, one stepped forward would empty the window. Unix time is only what the answer
 * shows (t_end, an error's time). */
static long long now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (long long)t.tv_sec;
}

static long long unix_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_REALTIME, &t);
    return (long long)t.tv_sec;
}

/* The bucket of second t, emptied when it last held another second. Under the lock. */
static second *bucket(long long t)
{
    second *s = &g.window[(unsigned long long)t % HP_LIVE_WINDOW_S];
    if (s->t != t)
        *s = (second){.t = t};
    return s;
}

static void count_key(counted *table, size_t *n, const char *key)
{
    size_t i = 0;
    while (i < *n && strcmp(table[i].key, key) != 0)
        i++;
    if (i == *n) {
        if (*n == MAX_KEYS)
            return;
        snprintf(table[i].key, sizeof(table[i].key), "%s", key);
        (*n)++;
    }
    table[i].count++;
}

void hp_live_request(unsigned status)
{
    char key[16];
    snprintf(key, sizeof(key), "%u", status);
    pthread_mutex_lock(&g.lock);
    second *s = bucket(now_s());
    s->requests++;
    s->errors += status >= 400;
    count_key(g.statuses, &g.status_n, key);
    pthread_mutex_unlock(&g.lock);
}

void hp_live_stage(const char *stage, double ms)
{
    for (size_t k = 0; k < STAGES; k++) {
        if (strcmp(stage, stages[k]) != 0)
            continue;
        if (!isfinite(ms))
            return;
        pthread_mutex_lock(&g.lock);
        second *s = bucket(now_s());
        s->stage_sum[k] += ms;
        s->stage_count[k]++;
        s->frames += k == STAGE_TOTAL;
        g.samples[k][g.sample_count[k]++ % HP_LIVE_SAMPLES] = ms;
        pthread_mutex_unlock(&g.lock);
        return;
    }
}

void hp_live_error(unsigned status, const char *code, const char *message, const char *path)
{
    pthread_mutex_lock(&g.lock);
    count_key(g.codes, &g.code_n, code ? code : "unknown");
    recent_error *e = &g.recent[g.recent_count++ % HP_LIVE_RECENT_ERRORS];
    e->time = unix_s();
    e->status = status;
    snprintf(e->code, sizeof(e->code), "%s", code ? code : "unknown");
    snprintf(e->message, sizeof(e->message), "%s", message ? message : "");
    snprintf(e->path, sizeof(e->path), "%s", path ? path : "");
    /* A path is the client's bytes (and a cut can split a character): JSON takes UTF-8 only. */
    hp_utf8_clean(e->code);
    hp_utf8_clean(e->message);
    hp_utf8_clean(e->path);
    pthread_mutex_unlock(&g.lock);
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* The nearest-rank percentile of n sorted values (p in (0, 1]). */
static double percentile(const double *sorted, size_t n, double p)
{
    size_t rank = (size_t)ceil(p * (double)n);
    return sorted[rank ? rank - 1 : 0];
}

/* A copy of the state, taken under the lock, so that the JSON is built (and allocates) outside it. */
typedef struct snapshot {
    long long t_end;      /* monotonic seconds of the last bucket */
    long long t_end_unix; /* the same second in Unix time */
    second window[HP_LIVE_WINDOW_S]; /* oldest first */
    double samples[STAGES][HP_LIVE_SAMPLES];
    size_t sample_n[STAGES];
    counted statuses[MAX_KEYS], codes[MAX_KEYS];
    size_t status_n, code_n;
    recent_error recent[HP_LIVE_RECENT_ERRORS]; /* newest first */
    size_t recent_n;
} snapshot;

static void take_snapshot(snapshot *s)
{
    pthread_mutex_lock(&g.lock);
    s->t_end = now_s();
    s->t_end_unix = unix_s();
    for (int i = 0; i < HP_LIVE_WINDOW_S; i++) {
        long long t = s->t_end - (HP_LIVE_WINDOW_S - 1) + i;
        const second *b = &g.window[(unsigned long long)t % HP_LIVE_WINDOW_S];
        s->window[i] = b->t == t ? *b : (second){.t = t};
    }
    for (size_t k = 0; k < STAGES; k++) {
        s->sample_n[k] = g.sample_count[k] < HP_LIVE_SAMPLES ? (size_t)g.sample_count[k] : HP_LIVE_SAMPLES;
        memcpy(s->samples[k], g.samples[k], s->sample_n[k] * sizeof(double));
    }
    memcpy(s->statuses, g.statuses, sizeof(g.statuses));
    memcpy(s->codes, g.codes, sizeof(g.codes));
    s->status_n = g.status_n, s->code_n = g.code_n;
    s->recent_n = g.recent_count < HP_LIVE_RECENT_ERRORS ? (size_t)g.recent_count : HP_LIVE_RECENT_ERRORS;
    for (size_t i = 0; i < s->recent_n; i++)
        s->recent[i] = g.recent[(g.recent_count - 1 - i) % HP_LIVE_RECENT_ERRORS];
    pthread_mutex_unlock(&g.lock);
}

static json_t *per_second_json(const snapshot *s, double *requests, double *frames)
{
    json_t *req = json_array(), *fr = json_array(), *err = json_array(), *st = json_object();
    json_t *o = json_pack("{s:I, s:o, s:o, s:o, s:o}", "t_end", (json_int_t)s->t_end_unix, "requests", req, "frames",
                          fr, "errors", err, "stages_ms", st);
    if (!o)
        return NULL;
    int rc = 0;
    *requests = *frames = 0;
    for (int i = 0; i < HP_LIVE_WINDOW_S; i++) {
        rc |= json_array_append_new(req, json_integer(s->window[i].requests));
        rc |= json_array_append_new(fr, json_integer(s->window[i].frames));
        rc |= json_array_append_new(err, json_integer(s->window[i].errors));
        *requests += s->window[i].requests;
        *frames += s->window[i].frames;
    }
    for (size_t k = 0; k < STAGES; k++) {
        json_t *series = json_array();
        for (int i = 0; series && i < HP_LIVE_WINDOW_S; i++) {
            const second *b = &s->window[i];
            rc |= json_array_append_new(series, b->stage_count[k] ? json_real(b->stage_sum[k] / b->stage_count[k])
                                                                   : json_null());
        }
        rc |= json_object_set_new(st, stages[k], series);
    }
    if (rc) {
        json_decref(o);
        return NULL;
    }
    return o;
}

static json_t *counts_json(const counted *table, size_t n)
{
    json_t *o = json_object();
    for (size_t i = 0; o && i < n; i++)
        if (json_object_set_new(o, table[i].key, json_integer((json_int_t)table[i].count)) != 0) {
            json_decref(o);
            return NULL;
        }
    return o;
}

static json_t *recent_json(const snapshot *s)
{
    json_t *a = json_array();
    for (size_t i = 0; a && i < s->recent_n; i++) {
        const recent_error *e = &s->recent[i];
        if (json_array_append_new(a, json_pack("{s:I, s:i, s:s, s:s, s:s}", "time", (json_int_t)e->time, "status",
                                               (int)e->status, "code", e->code, "message", e->message, "path",
                                               e->path)) != 0) {
            json_decref(a);
            return NULL;
        }
    }
    return a;
}

static json_t *percentiles_json(snapshot *s)
{
    json_t *o = json_object();
    for (size_t k = 0; o && k < STAGES; k++) {
        size_t n = s->sample_n[k];
        if (!n)
            continue;
        qsort(s->samples[k], n, sizeof(double), cmp_double);
        if (json_object_set_new(o, stages[k], json_pack("{s:f, s:f, s:I}", "p50", percentile(s->samples[k], n, 0.5),
                                                        "p99", percentile(s->samples[k], n, 0.99), "count",
                                                        (json_int_t)n)) != 0) {
            json_decref(o);
            return NULL;
        }
    }
    return o;
}

int hp_live_stats_json(json_t *into)
{
    snapshot *s = malloc(sizeof(*s));
    if (!s)
        return -1;
    take_snapshot(s);
    double requests = 0, frames = 0;
    int rc = json_object_set_new(into, "window_s", json_integer(HP_LIVE_WINDOW_S));
    rc |= json_object_set_new(into, "per_second", per_second_json(s, &requests, &frames));
    rc |= json_object_set_new(into, "requests_per_s", json_real(requests / HP_LIVE_WINDOW_S));
    rc |= json_object_set_new(into, "frames_per_s", json_real(frames / HP_LIVE_WINDOW_S));
    rc |= json_object_set_new(into, "status_counts", counts_json(s->statuses, s->status_n));
    rc |= json_object_set_new(into, "errors_by_code", counts_json(s->codes, s->code_n));
    rc |= json_object_set_new(into, "recent_errors", recent_json(s));
    rc |= json_object_set_new(into, "stages_ms", percentiles_json(s));
    free(s);
    return rc ? -1 : 0;
}
