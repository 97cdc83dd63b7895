#include "client/run.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

bool hp_run_init(hp_run *run, const hp_frame_list *frames)
{
    run->frames = frames;
    run->done = calloc(frames->count ? frames->count : 1, sizeof(*run->done));
    run->failure = calloc(frames->count ? frames->count : 1, sizeof(*run->failure));
    run->server_of = malloc((frames->count ? frames->count : 1) * sizeof(*run->server_of));
    for (size_t i = 0; run->server_of && i < frames->count; i++)
        run->server_of[i] = SIZE_MAX;
    pthread_mutex_init(&run->lock, NULL);
    return run->done && run->failure && run->server_of;
}

void hp_run_skip(hp_run *run, size_t i)
{
    run->done[i] = true;
    run->skipped++;
}

/* The progress line on a terminal, redrawn in place: done and failed of the frames to do, their rate, the
 * time left at that rate. Under the run's lock. */
static void progress_line(hp_run *run, bool last)
{
    size_t todo = run->frames->count - run->skipped;
    double elapsed = hp_now() - run->started;
    double rate = elapsed > 0 ? (double)run->finished / elapsed : 0;
    double left = rate > 0 ? (double)(todo - run->finished) / rate : 0;
    fprintf(stderr, "\r\033[K%s %zu/%zu, %zu failed, %.1f frames/s, %s%.0f s%s%s%s", run->phase, run->finished,
            todo, run->failed, rate, last ? "took " : "ETA ", last ? elapsed : left,
            !last && run->waiting[0] ? "; " : "", last ? "" : run->waiting, last ? "\n" : "");
    fflush(stderr);
}

void hp_run_note_retry(hp_run *run, size_t i, const hp_retry_note *note)
{
    const hp_response *r = note->r;
    pthread_mutex_lock(&run->lock);
    if (r->status == 429)
        run->waits.busy_429++;
    else if (r->status == 503 && r->retry_after_s >= 0 && !hp_response_names_device_lost(r)) /* servers.h's kinds */
        run->waits.busy_503++;
    else
        run->waits.failures++;
    char reason[300];
    if (r->status == 0)
        snprintf(reason, sizeof(reason), "no answer (%s)", r->error);
    else if (r->status == 429)
        snprintf(reason, sizeof(reason), "the daemon's queue is full (HTTP 429)");
    else
        snprintf(reason, sizeof(reason), "HTTP %ld, %s", r->status, r->error);
    /* With several servers the line names both: the one that answered, and where the frame goes next. */
    char from[540] = "", then[600];
    if (run->servers->count > 1) {
        snprintf(from, sizeof(from), "%s: ", note->from);
        if (note->wait_s > 0)
            snprintf(then, sizeof(then), "retry %u on %s in %.1f s", note->retry, note->to, note->wait_s);
        else
            snprintf(then, sizeof(then), "retry %u on %s now", note->retry, note->to);
    } else {
        snprintf(then, sizeof(then), "retry %u in %.1f s", note->retry, note->wait_s);
    }
    if (run->terminal) {
        snprintf(run->waiting, sizeof(run->waiting), "%s: %s%s, %s",
                 r->status == 0 || r->status >= 500 ? "waiting for the daemon" : "waiting", from, reason, then);
        progress_line(run, false);
    } else {
        fprintf(stderr, "hdrpost: %s: %s%s, %s\n", run->frames->items[i].name, from, reason, then);
    }
    pthread_mutex_unlock(&run->lock);
}

void hp_retry_counts_text(const hp_retry_counts *c, char *out, size_t size)
{
    size_t total = c->failures + c->busy_429 + c->busy_503;
    if (!total)
        snprintf(out, size, "; no retries");
    else
        snprintf(out, size, "; %zu retries: %zu after no answer or a 5xx, %zu answers 429, %zu answers 503 waited out",
                 total, c->failures, c->busy_429, c->busy_503);
}

typedef struct worker {
    hp_run *run;
    pthread_t thread;
    bool terminal;
} worker;

static void frame_finished(hp_run *run, size_t i, hp_frame_outcome outcome, const char *why, bool terminal,
                           double ms)
{
    if (outcome == HP_FRAME_NOT_DONE)
        return;
    bool ok = outcome == HP_FRAME_DONE;
    pthread_mutex_lock(&run->lock);
    run->finished++;
    run->done[i] = ok;
    run->waiting[0] = '\0';
    if (!ok) {
        run->failed++;
        run->failure[i] = strdup(why);
    }
    if (terminal)
        progress_line(run, false);
    else if (ok && run->servers->count > 1 && run->server_of[i] < run->servers->count)
        fprintf(stderr, "hdrpost: %s %s by %s (%.0f ms)\n", run->frames->items[i].name,
                !strcmp(run->phase, "analysing") ? "analysed" : "rendered",
                run->servers->items[run->server_of[i]].shown, ms);
    else if (ok)
        fprintf(stderr, "hdrpost: %s %s (%.0f ms)\n", run->frames->items[i].name,
                !strcmp(run->phase, "analysing") ? "analysed" : "rendered", ms);
    else
        fprintf(stderr, "hdrpost: %s failed: %s\n", run->frames->items[i].name, why);
    pthread_mutex_unlock(&run->lock);
}

static void *worker_main(void *arg)
{
    worker *w = arg;
    hp_run *run = w->run;
    hp_client *client = hp_client_new(run->servers->items[0].url, run->token, run->stop, 2);
    for (;;) {
        pthread_mutex_lock(&run->lock);
        while (run->next < run->frames->count && run->done[run->next])
            run->next++; /* skipped (--resume) */
        size_t i = run->next++;
        bool stop = !client || run->fatal || (run->stop && *run->stop) || i >= run->frames->count;
        pthread_mutex_unlock(&run->lock);
        if (stop)
            break;
        char why[512] = "";
        int fatal = 0;
        double t0 = hp_now();
        hp_frame_outcome outcome = run->work(run, client, i, why, sizeof(why), &fatal);
        if (fatal) {
            pthread_mutex_lock(&run->lock);
            if (!run->fatal) {
                snprintf(run->fatal_why, sizeof(run->fatal_why), "%s", why);
                run->fatal = fatal;
            }
            pthread_mutex_unlock(&run->lock);
        }
        frame_finished(run, i, outcome, why, w->terminal, (hp_now() - t0) * 1e3);
    }
    hp_client_free(client);
    return NULL;
}

bool hp_run_frames(hp_run *run)
{
    unsigned jobs = run->jobs ? run->jobs : 1;
    worker *workers = calloc(jobs, sizeof(*workers));
    if (!workers)
        return false;
    run->started = hp_now();
    run->next = 0;
    bool terminal = run->terminal = isatty(STDERR_FILENO);
    unsigned started = 0;
    for (; started < jobs; started++) {
        workers[started] = (worker){.run = run, .terminal = terminal};
        if (pthread_create(&workers[started].thread, NULL, worker_main, &workers[started]) != 0)
            break;
    }
    for (unsigned k = 0; k < started; k++)
        pthread_join(workers[k].thread, NULL);
    free(workers);
    if (terminal) {
        pthread_mutex_lock(&run->lock);
        progress_line(run, true);
        pthread_mutex_unlock(&run->lock);
    }
    return started > 0;
}

void hp_run_free(hp_run *run)
{
    for (size_t i = 0; run->failure && i < run->frames->count; i++)
        free(run->failure[i]);
    free(run->failure);
    free(run->server_of);
    free(run->done);
    pthread_mutex_destroy(&run->lock);
}
