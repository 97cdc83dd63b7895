/* hdrpost render and hdrpost analyze: a shot's frames through the daemon (docs/CLIENT.md). */
#include "client/render.h"

#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "client/cli.h"
#include "client/run.h"
#include "common/file.h"

/* A frame's bytes, malloc'd; NULL with errno set. Frames are posted whole (libcurl then sends
 * Content-Length and Expect: 100-continue, so a refused frame is not uploaded). */
static uint8_t *read_file(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    uint8_t *data = NULL;
    if (fseek(f, 0, SEEK_END) == 0) {
        long n = ftell(f);
        if (n >= 0 && fseek(f, 0, SEEK_SET) == 0 && (data = malloc((size_t)n + 1)) != NULL &&
            fread(data, 1, (size_t)n, f) != (size_t)n) {
            free(data);
            data = NULL;
            errno = EIO;
        }
        *len = n >= 0 ? (size_t)n : 0;
    }
    fclose(f);
    return data;
}

/* Written to a temporary name in the same directory and renamed when complete (common/file.h): an output
 * that exists is whole, whatever stopped the run (--resume relies on it), and runs on several farm hosts may
 * share the output directory (a unique temporary name). */
bool hp_write_atomically(const char *path, const uint8_t *data, size_t len, mode_t mode, char *why, size_t why_size)
{
    hp_file_piece piece = {data, len};
    int e = hp_write_file_atomically(path, &piece, 1, (unsigned)mode);
    if (e)
        snprintf(why, why_size, "cannot write %s: %s", path, strerror(e));
    return e == 0;
}

static void output_path(const hp_shot_job *job, size_t i, char *out, size_t size)
{
    snprintf(out, size, "%s/%s.%s", job->out_dir, job->frames->items[i].name, job->extension);
}

/* A 400 naming a parameter that only the daemon could check: its OCIO config's names (ocio.*, input.colorspace;
 * hdrpost.c leaves them to it) and its own looks (look). Every frame would get the same answer, as with a bad
 * parameter checked here. */
static bool refused_config_name(const hp_response *r)
{
    if (r->status != 400)
        return false;
    json_t *doc = json_loadb((const char *)r->body, r->len, 0, NULL);
    const char *field = json_string_value(json_object_get(json_object_get(doc, "error"), "field"));
    bool name = field && (!strncmp(field, "ocio.", 5) || !strcmp(field, "input.colorspace") || !strcmp(field, "look"));
    json_decref(doc);
    return name;
}

/* The policy's on_retry: the run counts the retry and says it. */
typedef struct frame_retries {
    hp_run *run;
    size_t index;
} frame_retries;

static void on_frame_retry(void *user, const hp_retry_note *note)
{
    const frame_retries *f = user;
    hp_run_note_retry(f->run, f->index, note);
}

/* One frame posted under the retry policy: DONE with the answer in r when it is 200. A refused token or
 * config name (every frame would get it), a daemon that lost its GPU, and one that no longer answers after every
 * retry stop the run;
 * a frame the run was stopped on while it waited is not done (--resume does it). */
static hp_frame_outcome post_frame(hp_run *run, hp_client *client, size_t i, const char *path, hp_response *r,
                                   char *why, size_t why_size, int *fatal)
{
    const hp_shot_job *job = run->user;
    size_t len = 0;
    uint8_t *body = read_file(run->frames->items[i].path, &len);
    if (!body) {
        snprintf(why, why_size, "cannot read %s: %s", run->frames->items[i].path, strerror(errno));
        return HP_FRAME_FAILED;
    }
    frame_retries retries = {run, i};
    hp_retry_policy policy = {.retries = job->retries, .max_wait_s = job->max_wait_s, .stop = run->stop,
                              .on_retry = on_frame_retry, .user = &retries};
    size_t server;
    hp_servers_send(run->servers, client, &policy, path, body, len, job->accept, r, &server);
    free(body);
    run->server_of[i] = server; /* frame i is this thread's alone until it is finished */
    if (r->status == 200)
        return HP_FRAME_DONE;
    if (run->stop && *run->stop && !hp_response_refused(r))
        return HP_FRAME_NOT_DONE;
    if (r->status == 401 || r->status == 403) {
        *fatal = HP_EXIT_REFUSED;
        hp_auth_refusal(r, run->token && *run->token, why, why_size);
        return HP_FRAME_FAILED;
    }
    *fatal = r->status == 0                          ? HP_EXIT_UNREACHABLE
             : hp_response_names_device_lost(r)      ? HP_EXIT_NOT_READY
             : refused_config_name(r)                ? HP_EXIT_USAGE
                                                     : 0;
    const char *where = server < run->servers->count ? run->servers->items[server].shown : "the server";
    if (r->status == 0 && run->servers->count > 1)
        snprintf(why, why_size, "every server unreachable after %u attempt(s); the last, %s: %s", r->attempts, where,
                 r->error);
    else if (r->status == 0)
        snprintf(why, why_size, "%s unreachable after %u attempt(s): %s", where, r->attempts, r->error);
    else if (run->servers->count > 1)
        snprintf(why, why_size, "%s: HTTP %ld, %s", where, r->status, r->error);
    else
        snprintf(why, why_size, "HTTP %ld, %s", r->status, r->error);
    return HP_FRAME_FAILED;
}

/* --- Analyze ---------------------------------------------------------------------------------------- */

static hp_frame_outcome analyze_one(hp_run *run, hp_client *client, size_t i, char *why, size_t why_size,
                                    int *fatal)
{
    hp_shot_job *job = run->user;
    char *path = NULL;
    if (asprintf(&path, "/v1/analyze%s%s", job->query[0] ? "?" : "", job->query) < 0)
        return snprintf(why, why_size, "out of memory"), HP_FRAME_FAILED;
    hp_response r = {0};
    hp_frame_outcome outcome = post_frame(run, client, i, path, &r, why, why_size, fatal);
    free(path);
    bool ok = outcome == HP_FRAME_DONE;
    json_t *doc = ok ? json_loadb((const char *)r.body, r.len, 0, NULL) : NULL;
    json_t *stats = json_object_get(doc, "stats"), *pct = json_object_get(doc, "percentiles");
    if (ok && !json_is_object(stats)) {
        snprintf(why, why_size, "the daemon's answer has no statistics");
        ok = false;
    }
    if (ok) {
        hp_frame_stats *s = &job->stats[i];
        s->log_average = json_number_value(json_object_get(stats, "log_average"));
        s->max = json_number_value(json_object_get(stats, "max"));
        s->p01 = json_number_value(json_object_get(pct, "p01"));
        s->p99 = json_number_value(json_object_get(pct, "p99"));
        s->ok = true;
        job->analyses[i] = json_incref(doc);
    }
    json_decref(doc);
    hp_response_free(&r);
    return outcome == HP_FRAME_DONE && !ok ? HP_FRAME_FAILED : outcome;
}

/* --- Render ----------------------------------------------------------------------------------------- */

/* The query of frame i, malloc'd: the run's, with the shot's exposure lock when there is one (the run's
 * query then holds none of the names the lock sets: verbs.c takes them out). */
static char *frame_query(const hp_shot_job *job, size_t i)
{
    char lock[512] = "";
    if (job->locks) {
        const hp_frame_lock *l = &job->locks[i];
        int n = 0;
        n += snprintf(lock + n, sizeof(lock) - (size_t)n,
                      "&exposure.mode=fixed&exposure.adaptation=%.17g&exposure.key=%.17g&exposure.stops=%.17g",
                      l->adaptation, l->key, l->stops);
        if (l->white > 0)
            n += snprintf(lock + n, sizeof(lock) - (size_t)n, "&tonemap.white_point=%.17g", l->white);
        if (l->scene_max > 0)
            snprintf(lock + n, sizeof(lock) - (size_t)n,
                     "&tonemap.drago.scene_log_average=%.17g&tonemap.drago.scene_max=%.17g", l->scene_log_average,
                     l->scene_max);
    }
    char *q = NULL;
    const char *extra = job->query[0] ? lock : lock + (lock[0] == '&');
    return asprintf(&q, "%s%s", job->query, extra) < 0 ? NULL : q;
}

static hp_frame_outcome render_one(hp_run *run, hp_client *client, size_t i, char *why, size_t why_size,
                                   int *fatal)
{
    hp_shot_job *job = run->user;
    char *query = frame_query(job, i), *path = NULL, out[4200];
    if (!query || asprintf(&path, "/v1/render%s%s", query[0] ? "?" : "", query) < 0) {
        free(query);
        snprintf(why, why_size, "out of memory");
        return HP_FRAME_FAILED;
    }
    free(query);
    hp_response r = {0};
    hp_frame_outcome outcome = post_frame(run, client, i, path, &r, why, why_size, fatal);
    free(path);
    if (outcome == HP_FRAME_DONE) {
        output_path(job, i, out, sizeof(out));
        if (!hp_write_atomically(out, r.body, r.len, job->file_mode, why, why_size))
            outcome = HP_FRAME_FAILED;
    }
    if (outcome != HP_FRAME_NOT_DONE) { /* --timings lists the frames posted to the end */
        snprintf(job->timings[i], sizeof(job->timings[i]), "%s", r.server_timing);
        job->statuses[i] = r.status;
    }
    hp_response_free(&r);
    return outcome;
}

/* --- The run ---------------------------------------------------------------------------------------- */

bool hp_shot_job_init(hp_shot_job *job)
{
    mode_t mask = umask(0); /* read once, before any thread: umask() can only be read by setting it */
    umask(mask);
    job->file_mode = 0666 & ~mask;
    size_t n = job->frames->count ? job->frames->count : 1;
    job->stats = calloc(n, sizeof(*job->stats));
    job->locks = NULL;
    job->analyses = calloc(n, sizeof(*job->analyses));
    job->timings = calloc(n, sizeof(*job->timings));
    job->statuses = calloc(n, sizeof(*job->statuses));
    return job->stats && job->analyses && job->timings && job->statuses;
}

void hp_shot_job_free(hp_shot_job *job)
{
    for (size_t i = 0; job->analyses && i < job->frames->count; i++)
        json_decref(job->analyses[i]);
    free(job->analyses);
    free(job->stats);
    free(job->locks);
    free(job->timings);
    free(job->statuses);
}

bool hp_shot_analyze(hp_shot_job *job, hp_run *run)
{
    run->phase = "analysing";
    run->work = analyze_one;
    run->user = job;
    return hp_run_frames(run);
}

bool hp_shot_render(hp_shot_job *job, hp_run *run)
{
    run->phase = "rendering";
    run->work = render_one;
    run->user = job;
    return hp_run_frames(run);
}

bool hp_shot_output_exists(const hp_shot_job *job, size_t i)
{
    char out[4200];
    output_path(job, i, out, sizeof(out));
    struct stat st;
    return stat(out, &st) == 0;
}
