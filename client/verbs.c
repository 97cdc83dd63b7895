/* hdrpost's verbs: render, analyze, status (docs/CLIENT.md). */
#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "client/cli.h"
#include "client/render.h"
#include "client/run.h"
#include "client/shot.h"
#include "client/transport.h"
#include "pipeline/looks.h"

/* GET path with one retry: the daemon's JSON, or NULL with r saying why. */
static json_t *get_json(hp_client *client, const char *path, hp_response *r)
{
    hp_retry_policy quick = {.retries = 1, .max_wait_s = 0};
    hp_client_send_retrying(client, &quick, path, NULL, 0, NULL, r);
    return r->status == 200 ? json_loadb((const char *)r->body, r->len, 0, NULL) : NULL;
}

/* The daemon's 401, 403, 503 or no answer as an exit status (cli.h), with a message naming server (as shown:
 * hp_server.shown); 0 for any other status. */
static int server_refusal(const char *server, const char *token, const hp_response *r, char *why, size_t why_size)
{
    if (r->status == 0) {
        snprintf(why, why_size, "%s: unreachable: %s", server, r->error);
        return HP_EXIT_UNREACHABLE;
    }
    if (r->status == 401 || r->status == 403) {
        hp_auth_refusal(r, token && *token, why, why_size);
        return HP_EXIT_REFUSED;
    }
    if (r->status == 503) {
        snprintf(why, why_size, "%s: not ready: %s", server, r->error);
        return HP_EXIT_NOT_READY;
    }
    return 0;
}

enum { PROBE_STARTING = -1 };

/* One server asked, before a frame is sent, whether it can take frames: rc 0 with its /v1/gpu in gpu,
 * PROBE_STARTING (503 with Retry-After from /readyz: its device and pipelines are being made; retry_after_s says
 * when to ask again), else the exit status with why. error: its last answer's, for the wait's line. */
typedef struct probe_job {
    hp_cli_options *o;
    const hp_server *server; /* asked at its url, named by its shown form */
    pthread_t thread;
    int rc;
    json_t *gpu;
    double retry_after_s;
    char why[1100], error[256];
} probe_job;

static void *probe(void *arg)
{
    probe_job *j = arg;
    hp_response r = {0};
    j->gpu = NULL;
    hp_client *client = hp_client_new(j->server->url, j->o->token, j->o->stop, 1);
    if (!client) {
        j->rc = HP_EXIT_UNREACHABLE, snprintf(j->why, sizeof j->why, "%s: out of memory", j->server->shown);
        return NULL;
    }
    hp_retry_policy quick = {.retries = 1, .max_wait_s = 0};
    hp_client_send_retrying(client, &quick, "/readyz", NULL, 0, NULL, &r);
    /* /v1/gpu says what /readyz cannot: the token, the queue (a 404 for /readyz: an older daemon). Draining and
     * a lost GPU have no Retry-After. */
    bool starting = r.status == 503 && r.retry_after_s >= 0 && !hp_response_names_device_lost(&r);
    if (!starting && (r.status == 200 || r.status == 404))
        j->gpu = get_json(client, "/v1/gpu", &r);
    starting = !j->gpu && r.status == 503 && r.retry_after_s >= 0 && !hp_response_names_device_lost(&r);
    hp_client_free(client);
    j->rc = j->gpu ? 0
            : starting ? PROBE_STARTING
                       : server_refusal(j->server->shown, j->o->token, &r, j->why, sizeof j->why);
    if (!j->rc && !j->gpu && !starting)
        j->rc = HP_EXIT_UNREACHABLE, snprintf(j->why, sizeof j->why, "%s: %s", j->server->shown, r.error);
    j->retry_after_s = r.retry_after_s;
    snprintf(j->error, sizeof j->error, "%s", r.error);
    hp_response_free(&r);
    return NULL;
}

/* Every server asked at once (a host that does not answer costs its connect timeout once, not once per server
 * before it); where a thread cannot be made, asked on this one. */
static void probe_all(probe_job *jobs, size_t n)
{
    bool *threaded = calloc(n, sizeof(*threaded));
    for (size_t k = 0; k < n; k++) {
        json_decref(jobs[k].gpu);
        jobs[k].gpu = NULL;
        if (!threaded || pthread_create(&jobs[k].thread, NULL, probe, &jobs[k]) != 0)
            probe(&jobs[k]);
        else
            threaded[k] = true;
    }
    for (size_t k = 0; k < n; k++)
        if (threaded && threaded[k])
            pthread_join(jobs[k].thread, NULL);
    free(threaded);
}

/* The wait for a starting server, shown: in place on a terminal, a line every 10 s in a log (*said: when it was
 * last shown; -1 never). */
static void show_wait(const char *verb, const hp_cli_options *o, double waited, double *said, const char *error)
{
    const char *who = o->servers.count > 1 ? "a server" : "the daemon";
    if (isatty(STDERR_FILENO))
        fprintf(stderr, "\r\033[Khdrpost %s: waiting for %s to be ready (%.0f s of at most %g, --wait): %s", verb, who,
                waited, o->wait_s, error);
    else if (*said < 0 || waited - *said >= 10) {
        fprintf(stderr, "hdrpost %s: waiting for %s to be ready (%.0f s of at most %g, --wait): %s\n", verb, who,
                waited, o->wait_s, error);
        *said = waited;
    }
}

/* Before a single frame: a server is ready (starting ones, 503 with Retry-After from /readyz, are waited for up
 * to --wait, and the wait is shown), answers and takes the token, and the ready servers' queues size the default
 * jobs. With several servers the run starts once one is ready; the others are named, and take frames once they
 * answer (client/servers.h). A refused token stops it whichever server refuses. */
static int check_server(const char *verb, hp_cli_options *o)
{
    size_t n = o->servers.count, ready = 0;
    probe_job *jobs = calloc(n, sizeof(*jobs));
    if (!jobs)
        return fprintf(stderr, "hdrpost %s: out of memory\n", verb), HP_EXIT_UNREACHABLE;
    for (size_t k = 0; k < n; k++)
        jobs[k] = (probe_job){.o = o, .server = &o->servers.items[k]};
    json_int_t capacity = 0;
    double started = hp_now(), said = -1;
    bool waiting = false;
    int status = 0;
    for (;;) {
        probe_all(jobs, n);
        size_t starting = SIZE_MAX; /* the first starting server: the wait's line and pace are its */
        for (size_t k = 0; k < n; k++) {
            if (!jobs[k].rc && !ready++)
                o->asked = k;
            if (!jobs[k].rc) { /* as many frames in flight as the daemon queues, at most 8: more would only wait */
                json_int_t c = json_integer_value(json_object_get(json_object_get(jobs[k].gpu, "queue"), "capacity"));
                capacity += c > 0 ? (c < 8 ? c : 8) : 4;
            }
            if (jobs[k].rc == PROBE_STARTING && starting == SIZE_MAX)
                starting = k;
            if (jobs[k].rc == HP_EXIT_REFUSED)
                status = HP_EXIT_REFUSED;
        }
        if (status || ready || starting == SIZE_MAX || (o->stop && *o->stop))
            break;
        double waited = hp_now() - started;
        if (waited >= o->wait_s) {
            for (size_t k = 0; k < n; k++)
                if (jobs[k].rc == PROBE_STARTING)
                    jobs[k].rc = HP_EXIT_NOT_READY,
                    snprintf(jobs[k].why, sizeof jobs[k].why, "%s: still not ready after %.0f s (--wait %g): %s",
                             jobs[k].server->shown, waited, o->wait_s, jobs[k].error);
            break;
        }
        show_wait(verb, o, waited, &said, jobs[starting].error);
        waiting = true;
        hp_pause(fmin(fmax(jobs[starting].retry_after_s, 0.2), 5.0), o->stop);
    }
    if (waiting && isatty(STDERR_FILENO))
        fprintf(stderr, "\r\033[K");
    if (waiting && ready)
        fprintf(stderr, "hdrpost %s: %s is ready after %.1f s\n", verb, n > 1 ? o->servers.items[o->asked].shown
                                                                           : "the daemon", hp_now() - started);
    size_t shown = 0; /* the first failure's status and message stand for all when none is ready */
    while (shown < n && jobs[shown].rc <= 0)
        shown++;
    if (!status && !ready && o->stop && *o->stop) {
        fprintf(stderr, "hdrpost %s: interrupted\n", verb);
        status = HP_EXIT_SOME_FAILED;
    } else if (status || !ready) {
        status = status ? status : shown < n ? jobs[shown].rc : HP_EXIT_UNREACHABLE;
        for (size_t k = 0; k < n; k++)
            if (jobs[k].rc > 0 && (n > 1 || k == shown) && (status != HP_EXIT_REFUSED || jobs[k].rc == HP_EXIT_REFUSED))
                fprintf(stderr, "hdrpost %s: %s\n", verb, jobs[k].why);
    } else {
        for (size_t k = 0; k < n; k++)
            if (jobs[k].rc)
                fprintf(stderr, "hdrpost %s: %s; its frames go to the other servers until it answers\n", verb,
                        jobs[k].rc == PROBE_STARTING ? jobs[k].server->shown : jobs[k].why);
        if (!o->jobs)
            o->jobs = (unsigned)(capacity < 256 ? capacity : 256);
    }
    for (size_t k = 0; k < n; k++)
        json_decref(jobs[k].gpu);
    free(jobs);
    return status;
}

/* The daemon's look of that name as the query its "sets" make, values escaped as a request's are; NULL with why
 * (the daemon's looks listed when it has none of that name). */
static char *look_query(json_t *params_doc, const char *name, char *why, size_t why_size)
{
    json_t *looks = json_object_get(params_doc, "looks"), *item, *found = NULL;
    size_t i, at = 0;
    json_array_foreach(looks, i, item) {
        const char *n = json_string_value(json_object_get(item, "name"));
        if (n && !strcmp(n, name))
            found = item;
        if (n && at < why_size)
            at += (size_t)snprintf(why + at, why_size - at, "%s%s", i ? ", " : "", n);
    }
    if (!found)
        return NULL;
    hp_param_set set = {0};
    hp_err err = {0};
    const char *key;
    json_t *value;
    bool ok = true;
    json_object_foreach(json_object_get(found, "sets"), key, value)
        ok = ok && json_is_string(value) && hp_param_set_put(&set, key, json_string_value(value), &err) == HP_OK;
    char *query = NULL;
    hp_params checked;
    if (!ok || hp_param_set_query(&set, &query, &checked, &err) != HP_OK)
        snprintf(why, why_size, "its settings do not parse here: %s", err.message[0] ? err.message : "not text");
    hp_param_set_free(&set);
    return query;
}

/* A look hdrpost does not know (a studio look of the daemon's, its studio_looks setting) is learnt from the daemon
 * (GET /v1/params), so that the client reads the request as the daemon will: the exposure lock, the files'
 * extension and every rule see what the look sets. A look the daemon lacks stops the run before a frame is sent. */
static int learn_look(const char *verb, hp_cli_options *o, const char *name)
{
    const hp_server *server = &o->servers.items[o->asked];
    hp_client *client = hp_client_new(server->url, o->token, o->stop, 1);
    hp_response r = {0};
    json_t *doc = client ? get_json(client, "/v1/params", &r) : NULL;
    char why[1100] = "", message[1700];
    char *query = doc ? look_query(doc, name, why, sizeof why) : NULL;
    hp_err err = {0};
    int rc = 0;
    if (!doc)
        snprintf(message, sizeof message, "look %s: the daemon's looks could not be read (GET /v1/params): %s", name,
                 r.error[0] ? r.error : "not JSON");
    else if (!query && !strstr(why, "do not parse"))
        snprintf(message, sizeof message, "look %s: neither hdrpost's nor the daemon's (%s) look; its looks: %s",
                 name, server->shown, why);
    else if (!query)
        snprintf(message, sizeof message, "look %s (the daemon's): %s", name, why);
    else if (hp_looks_add(name, query, "A look of the daemon's own (its studio_looks setting).", &err) != HP_OK)
        snprintf(message, sizeof message, "look %s: %s", name, err.message);
    else
        message[0] = '\0';
    if (message[0])
        rc = hp_cli_error(verb, "%s", message);
    free(query);
    json_decref(doc);
    hp_response_free(&r);
    hp_client_free(client);
    return rc;
}

static json_t *failures_json(const hp_run *run)
{
    json_t *a = json_array();
    for (size_t i = 0; i < run->frames->count; i++)
        if (run->failure[i])
            json_array_append_new(a, json_pack("{s:s, s:s, s:s}", "frame", run->frames->items[i].name, "path",
                                               run->frames->items[i].path, "error", run->failure[i]));
    return a;
}

static void print_failures(const char *verb, const hp_run *run)
{
    if (run->failed)
        fprintf(stderr, "hdrpost %s: %zu frame(s) failed:\n", verb, run->failed);
    for (size_t i = 0; i < run->frames->count; i++)
        if (run->failure[i])
            fprintf(stderr, "  %s (%s): %s\n", run->frames->items[i].name, run->frames->items[i].path,
                    run->failure[i]);
}

/* The frames of a run never tried to the end: left when it stopped (a daemon gone, SIGINT). */
static size_t not_tried(const hp_run *run) { return run->frames->count - run->skipped - run->finished; }

/* The run's end: the status a frame said stop with (a refused token 4, a daemon gone 3, a name only the daemon
 * knows 2), 1 when frames failed or were left (SIGINT), 0. */
static int run_status(const char *verb, const hp_run *run)
{
    size_t left = not_tried(run);
    if (run->fatal) {
        fprintf(stderr, "hdrpost %s: stopped: %s", verb, run->fatal_why);
        if (left)
            fprintf(stderr, "; %zu frame(s) not tried (%s does them)", left,
                    !strcmp(verb, "render") ? "--resume" : "a run once the daemon answers");
        fprintf(stderr, "\n");
        return run->fatal;
    }
    if (left)
        fprintf(stderr, "hdrpost %s: interrupted: %zu frame(s) not done%s\n", verb, left,
                !strcmp(verb, "render") ? " (--resume does them)" : "");
    return run->failed || left ? HP_EXIT_SOME_FAILED : HP_EXIT_DONE;
}

/* The file name's extension of an image of this format: what a viewer or a browser expects to find. */
static const char *output_extension(hp_output_format format)
{
    switch (format) {
    case HP_OUTPUT_PNG: return "png";
    case HP_OUTPUT_JPEG: return "jpg";
    case HP_OUTPUT_AVIF: return "avif";
    case HP_OUTPUT_WEBP: break;
    }
    return "webp";
}

static int prepare(const char *verb, hp_cli_options *o, char **query, hp_params *params)
{
    /* --format is output.format: the daemon's own parser below names the formats when it is none of them. */
    hp_err err = {0};
    if ((o->format && hp_param_set_put(&o->sets, "output.format", o->format, &err) != HP_OK) ||
        hp_param_set_merge(&o->params, &o->sets, &err) != HP_OK)
        return hp_cli_error(verb, "%s", err.message);
    /* The daemon's own parser and messages, before a single frame is sent. */
    if (hp_param_set_query(&o->params, query, params, &err) != HP_OK)
        return hp_cli_error(verb, "%s", err.message);
    int rc = o->frames.count ? check_server(verb, o)
                             : hp_cli_usage_error(verb, "%s", "no frames: give files, directories or a pattern with --frames");
    if (!rc && params->look_name[0]) {
        /* Read again with the daemon's look known: its settings first, then the request's own. */
        char look[sizeof params->look_name];
        snprintf(look, sizeof look, "%s", params->look_name);
        free(*query);
        *query = NULL;
        rc = learn_look(verb, o, look);
        if (!rc && hp_param_set_query(&o->params, query, params, &err) != HP_OK)
            rc = hp_cli_error(verb, "%s", err.message);
    }
    if (rc) { /* nothing left to the caller on a failure (found by ASan on the wrong-token exit) */
        free(*query);
        *query = NULL;
    }
    return rc;
}

/* --- analyze ---------------------------------------------------------------------------------------- */

static void analyze_table(const hp_shot_job *job, bool csv)
{
    printf(csv ? "frame,log_average,mean,min,max,p01,p50,p99\n"
               : "%-28s %12s %12s %12s %12s %12s %12s %12s\n",
           "frame", "log_average", "mean", "min", "max", "p01", "p50", "p99");
    for (size_t i = 0; i < job->frames->count; i++) {
        json_t *stats = json_object_get(job->analyses[i], "stats");
        json_t *pct = json_object_get(job->analyses[i], "percentiles");
        if (!stats)
            continue;
        double v[7] = {json_number_value(json_object_get(stats, "log_average")),
                       json_number_value(json_object_get(stats, "mean")),
                       json_number_value(json_object_get(stats, "min")),
                       json_number_value(json_object_get(stats, "max")),
                       json_number_value(json_object_get(pct, "p01")), json_number_value(json_object_get(pct, "p50")),
                       json_number_value(json_object_get(pct, "p99"))};
        printf(csv ? "%s" : "%-28s", job->frames->items[i].name);
        for (int k = 0; k < 7; k++)
            printf(csv ? ",%.9g" : " %12.6g", v[k]);
        printf("\n");
    }
}

int hp_verb_analyze(hp_cli_options *o)
{
    char *query = NULL;
    hp_params params;
    int rc = prepare("analyze", o, &query, &params);
    if (rc)
        return rc;
    hp_shot_job job = {.frames = &o->frames, .query = query, .accept = "application/json", .retries = o->retries,
                       .max_wait_s = 600};
    hp_run run = {.servers = &o->servers, .token = o->token, .jobs = o->jobs, .stop = o->stop};
    if (!hp_shot_job_init(&job) || !hp_run_init(&run, &o->frames) || !hp_shot_analyze(&job, &run)) {
        fprintf(stderr, "hdrpost analyze: out of memory or threads\n");
        rc = HP_EXIT_USAGE;
    } else {
        if (o->json) {
            json_t *a = json_array();
            for (size_t i = 0; i < o->frames.count; i++)
                if (job.analyses[i])
                    json_array_append_new(a, json_pack("{s:s, s:O}", "frame", o->frames.items[i].name, "analysis",
                                                       job.analyses[i]));
            json_dumpf(a, stdout, JSON_INDENT(1));
            printf("\n");
            json_decref(a);
        } else {
            analyze_table(&job, o->csv);
        }
        char retries[200];
        hp_retry_counts_text(&run.waits, retries, sizeof retries);
        fprintf(stderr, "hdrpost analyze: %zu analysed, %zu failed, %zu not tried of %zu frames%s\n",
                run.finished - run.failed, run.failed, not_tried(&run), o->frames.count, retries);
        print_failures("analyze", &run);
        rc = run_status("analyze", &run);
    }
    hp_run_free(&run);
    hp_shot_job_free(&job);
    free(query);
    return rc;
}

/* --- render ----------------------------------------------------------------------------------------- */

/* --- The exposure lock --------------------------------------------------------------------------- */

/* What the lock fixes, from the request's parameters: the exposure (the request's own fixed adaptation or
 * stops kept, an automatic key the shot's), reinhard_extended's white point and drago's scene values unless
 * the request gives them. */
static hp_lock_request lock_request(const hp_params *p, hp_lock_mode mode, unsigned window)
{
    const hp_exposure_params *e = &p->exposure;
    bool fixed = e->mode == HP_EXPOSURE_FIXED;
    return (hp_lock_request){
        .mode = mode, .window = window, .key = e->key, .key_auto = e->key_auto, .compensation_ev = e->compensation_ev,
        .fixed = fixed, .fixed_adaptation = fixed ? e->adaptation : 0, .fixed_stops = fixed ? e->stops : 0,
        .fix_white = p->tonemap.op == HP_TONE_REINHARD_EXTENDED && p->tonemap.white_point == 0,
        .fix_drago = p->tonemap.op == HP_TONE_DRAGO && p->tonemap.drago_scene_max == 0 &&
                     p->tonemap.drago_scene_log_average == 0};
}

/* The request's own values of the names the lock sets are taken out of the render's query (the daemon
 * refuses a name given twice; the lock carries them, exactly as they are rendered); the analysis ran with
 * them. */
static void leave_to_lock(hp_param_set *set, const hp_lock_request *req)
{
    static const char *const exposure[] = {"exposure.mode", "exposure.adaptation", "exposure.key", "exposure.stops"};
    for (size_t i = 0; i < sizeof(exposure) / sizeof(exposure[0]); i++)
        hp_param_set_remove(set, exposure[i]);
    if (req->fix_white)
        hp_param_set_remove(set, "tonemap.white_point");
    if (req->fix_drago) {
        hp_param_set_remove(set, "tonemap.drago.scene_log_average");
        hp_param_set_remove(set, "tonemap.drago.scene_max");
    }
}

static const char *lock_mode_name(hp_lock_mode mode)
{
    return mode == HP_LOCK_SHOT ? "shot" : mode == HP_LOCK_WINDOW ? "window" : "frame";
}

static json_t *lock_json(const hp_frame_lock *l)
{
    return json_pack("{s:f, s:f, s:f, s:f, s:f, s:f}", "adaptation", l->adaptation, "stops", l->stops, "key", l->key,
                     "white_point", l->white, "drago_scene_log_average", l->scene_log_average, "drago_scene_max",
                     l->scene_max);
}

/* What the lock was made from: a recorded lock serves a resumed run only if it was made the same way. */
static json_t *request_json(const hp_lock_request *r)
{
    return json_pack("{s:s, s:i, s:f, s:b, s:f, s:b, s:f, s:f, s:b, s:b}", "mode", lock_mode_name(r->mode), "window",
                     (int)r->window, "key", r->key, "key_auto", r->key_auto, "compensation_ev", r->compensation_ev,
                     "fixed", r->fixed, "fixed_adaptation", r->fixed_adaptation, "fixed_stops", r->fixed_stops,
                     "fix_white", r->fix_white, "fix_drago", r->fix_drago);
}

/* DIR/exposure.json: the values every frame is rendered with, and what they were made from; written whole. */
static bool write_sidecar(const hp_cli_options *o, const hp_shot_job *job, const hp_lock_request *req)
{
    json_t *frames = json_array();
    for (size_t i = 0; i < o->frames.count; i++) {
        json_t *f = lock_json(&job->locks[i]);
        json_object_set_new(f, "frame", json_string(o->frames.items[i].name));
        json_object_set_new(f, "analysed", json_boolean(job->stats[i].ok));
        json_object_set_new(f, "log_average", json_real(job->stats[i].log_average));
        json_object_set_new(f, "max", json_real(job->stats[i].max));
        json_array_append_new(frames, f);
    }
    json_t *doc = json_pack("{s:s, s:i, s:o, s:o}", "mode", lock_mode_name(req->mode), "window", (int)req->window,
                            "request", request_json(req), "frames", frames);
    char *text = json_dumps(doc, JSON_INDENT(1)), path[4200], why[512] = "out of memory";
    snprintf(path, sizeof(path), "%s/exposure.json", o->out_dir);
    bool ok = text && hp_write_atomically(path, (const uint8_t *)text, strlen(text), job->file_mode, why, sizeof(why));
    if (!ok)
        fprintf(stderr, "hdrpost render: %s\n", why);
    free(text);
    json_decref(doc);
    return ok;
}

/* The parameter a user changes for each field of the lock's "request" (request_json). */
static const char *request_field_parameter(const char *field)
{
    static const char *const names[][2] = {
        {"mode", "--exposure"}, {"window", "--exposure"}, {"key", "exposure.key"}, {"key_auto", "exposure.key"},
        {"compensation_ev", "exposure.compensation_ev"}, {"fixed", "exposure.mode"},
        {"fixed_adaptation", "exposure.adaptation"}, {"fixed_stops", "exposure.stops"},
        {"fix_white", "tonemap.operator or tonemap.white_point"},
        {"fix_drago", "tonemap.operator or tonemap.drago.*"}};
    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
        if (!strcmp(field, names[i][0]))
            return names[i][1];
    return field;
}

/* A JSON value as short text ("0.5", "true", "\"shot\""), into out. */
static const char *value_text(const json_t *v, char *out, size_t size)
{
    char *text = v ? json_dumps(v, JSON_ENCODE_ANY | JSON_REAL_PRECISION(6)) : NULL;
    snprintf(out, size, "%s", text ? text : "none");
    free(text);
    return out;
}

/* The lock recorded in DIR/exposure.json, when it was made for these frames, in this mode, from the same
 * request: so that frames rendered after an interruption match those rendered before it. Read into locks
 * only on a whole match; otherwise changed says, in a few words, what differs. */
static bool reuse_sidecar(const hp_cli_options *o, hp_shot_job *job, const hp_lock_request *req, char *changed,
                          size_t changed_size)
{
    char path[4200];
    snprintf(path, sizeof(path), "%s/exposure.json", o->out_dir);
    json_t *doc = json_load_file(path, 0, NULL), *frames = json_object_get(doc, "frames");
    json_t *want = request_json(req), *had = json_object_get(doc, "request");
    bool ok = json_array_size(frames) == o->frames.count && json_equal(had, want);
    hp_frame_lock *locks = ok ? calloc(o->frames.count, sizeof(*locks)) : NULL;
    for (size_t i = 0; locks && ok && i < o->frames.count; i++) {
        json_t *f = json_array_get(frames, i);
        const char *name = json_string_value(json_object_get(f, "frame"));
        ok = name && !strcmp(name, o->frames.items[i].name);
        locks[i] = (hp_frame_lock){.valid = true, .adaptation = json_number_value(json_object_get(f, "adaptation")),
                                   .stops = json_number_value(json_object_get(f, "stops")),
                                   .key = json_number_value(json_object_get(f, "key")),
                                   .white = json_number_value(json_object_get(f, "white_point")),
                                   .scene_log_average = json_number_value(json_object_get(f, "drago_scene_log_average")),
                                   .scene_max = json_number_value(json_object_get(f, "drago_scene_max"))};
    }
    if (locks && ok)
        memcpy(job->locks, locks, o->frames.count * sizeof(*locks));
    else if (!doc)
        snprintf(changed, changed_size, "%.400s is missing or unreadable, so the exposure of the frames already there "
                 "is not known", path);
    else if (!json_equal(had, want)) {
        const char *field;
        json_t *value;
        char then[64], now[64];
        snprintf(changed, changed_size, "the parameters changed since %.400s was recorded", path);
        json_object_foreach(want, field, value)
            if (!json_equal(value, json_object_get(had, field))) {
                snprintf(changed, changed_size, "%s changed since %.400s was recorded (%s then, %s now)",
                         request_field_parameter(field), path, value_text(json_object_get(had, field), then, sizeof then),
                         value_text(value, now, sizeof now));
                break;
            }
    } else {
        snprintf(changed, changed_size, "the frames changed since %.400s was recorded (%zu then, %zu now, from %.200s)", path,
                 json_array_size(frames), o->frames.count, o->frames.items[0].name);
    }
    free(locks);
    json_decref(want);
    json_decref(doc);
    return locks && ok;
}

/* The analysis pass and the lock; 0, or the exit status. skipped: outputs already there (--resume), whose
 * exposure a new lock could not match. */
static int lock_exposure(hp_cli_options *o, hp_shot_job *job, const hp_lock_request *req, size_t skipped,
                         hp_retry_counts *waits)
{
    job->locks = calloc(o->frames.count, sizeof(*job->locks));
    if (!job->locks)
        return HP_EXIT_USAGE;
    char changed[1200] = "";
    if (skipped && reuse_sidecar(o, job, req, changed, sizeof changed)) {
        if (skipped < o->frames.count)
            fprintf(stderr, "hdrpost render: resuming: %zu of %zu frames already done; the rest are rendered with the "
                    "exposure recorded in %s/exposure.json (--resume).\n", skipped, o->frames.count, o->out_dir);
        return 0;
    }
    if (skipped) {
        fprintf(stderr, "hdrpost render: cannot resume: %s. Run with the same parameters and frames, or with "
                "--overwrite instead of --resume to render all %zu frames again.\n", changed, o->frames.count);
        return HP_EXIT_USAGE;
    }
    hp_run analysis = {.servers = &o->servers, .token = o->token, .jobs = o->jobs, .stop = o->stop};
    job->accept = "application/json";
    bool ran = hp_run_init(&analysis, &o->frames) && hp_shot_analyze(job, &analysis);
    job->accept = NULL;
    *waits = analysis.waits;
    int rc = 0;
    if (ran && o->stop && *o->stop) {
        fprintf(stderr, "hdrpost render: interrupted while measuring the shot: nothing rendered\n");
        rc = HP_EXIT_SOME_FAILED;
    } else if (!ran || analysis.fatal || !hp_lock_compute(job->stats, o->frames.count, req, job->locks)) {
        fprintf(stderr, "hdrpost render: the shot could not be measured for its exposure%s%s\n",
                analysis.fatal ? ": " : "", analysis.fatal ? analysis.fatal_why : "");
        print_failures("render (analysis)", &analysis);
        rc = analysis.fatal ? analysis.fatal : HP_EXIT_SOME_FAILED; /* its frames' failures, listed */
    } else if (!write_sidecar(o, job, req)) {
        rc = HP_EXIT_USAGE;
    }
    hp_run_free(&analysis);
    return rc;
}

/* The duration of one phase in a Server-Timing value ("recv;dur=0.3, decode;dur=11.1, ..."), or NULL. */
static const char *timing_of(const char *header, const char *name, char *out, size_t size)
{
    size_t n = strlen(name);
    for (const char *field = header; field && *field; field = strchr(field, ',')) {
        field += strspn(field, ", ");
        if (!strncmp(field, name, n) && !strncmp(field + n, ";dur=", 5)) {
            snprintf(out, size, "%.*s", (int)strcspn(field + n + 5, ","), field + n + 5);
            return out;
        }
    }
    return NULL;
}

enum { MAX_TIMING_COLUMNS = 32 };

/* The phases named in the frames' Server-Timing, in the order the daemon first gives them (a phase one frame
 * lacks, png_gpu with a WebP, is placed where the first frame that has it puts it): no list of the client's own
 * to go stale when the daemon adds a stage. */
static size_t timing_columns(const hp_shot_job *job, char (*columns)[32])
{
    size_t count = 0;
    for (size_t i = 0; i < job->frames->count; i++) {
        if (!job->statuses[i])
            continue;
        size_t after = 0; /* the place after this frame's previous phase */
        for (const char *field = job->timings[i]; *field; field += strcspn(field, ",")) {
            field += strspn(field, ", ");
            size_t n = strcspn(field, ";,");
            if (!n || n >= sizeof(columns[0]))
                continue;
            size_t k = 0;
            while (k < count && (strlen(columns[k]) != n || strncmp(columns[k], field, n)))
                k++;
            if (k == count && count < MAX_TIMING_COLUMNS) {
                memmove(columns + after + 1, columns + after, (count - after) * sizeof(columns[0]));
                snprintf(columns[after], sizeof(columns[0]), "%.*s", (int)n, field);
                k = after;
                count++;
            }
            after = k + 1;
        }
    }
    return count;
}

/* --timings: one row per frame posted, the server that answered it, its Server-Timing phases in milliseconds, a column per phase. */
static bool write_timings(const char *path, const hp_shot_job *job, const hp_run *run)
{
    FILE *f = fopen(path, "w");
    if (!f)
        return false;
    char columns[MAX_TIMING_COLUMNS][32];
    const size_t count = timing_columns(job, columns);
    fprintf(f, "frame,status,server");
    for (size_t k = 0; k < count; k++)
        fprintf(f, ",%s", columns[k]);
    fprintf(f, "\n");
    for (size_t i = 0; i < job->frames->count; i++) {
        if (!job->statuses[i])
            continue; /* not posted (skipped, or the run stopped first) */
        size_t k = run->server_of[i];
        fprintf(f, "%s,%ld,%s", job->frames->items[i].name, job->statuses[i],
                k < run->servers->count ? run->servers->items[k].shown : "");
        for (size_t k = 0; k < count; k++) {
            char value[32];
            fprintf(f, ",%s", timing_of(job->timings[i], columns[k], value, sizeof(value)) ? value : "");
        }
        fprintf(f, "\n");
    }
    return fclose(f) == 0;
}

/* The outputs that exist: skipped with --resume, replaced with --overwrite, else a usage error (nothing is
 * overwritten by surprise). */
static int existing_outputs(hp_cli_options *o, hp_shot_job *job, hp_run *run)
{
    for (size_t i = 0; i < o->frames.count; i++) {
        if (!hp_shot_output_exists(job, i) || o->overwrite)
            continue;
        if (!o->resume) {
            fprintf(stderr, "hdrpost render: %s/%s.%s exists: --resume skips the frames already rendered, "
                            "--overwrite renders them again\n", o->out_dir, o->frames.items[i].name, job->extension);
            return HP_EXIT_USAGE;
        }
        hp_run_skip(run, i);
    }
    return 0;
}

/* The frames rendered by server k. */
static size_t rendered_on(const hp_run *run, size_t k)
{
    size_t n = 0;
    for (size_t i = 0; i < run->frames->count; i++)
        n += run->server_of[i] == k && run->done[i] && !run->failure[i];
    return n;
}

/* Which server rendered what: each server's frames, its failed and busy answers (both passes) and its state. */
static json_t *servers_json(const hp_servers *servers, const hp_run *run)
{
    json_t *list = json_array();
    for (size_t k = 0; k < servers->count; k++) {
        const hp_server *v = &servers->items[k];
        json_t *frames = json_array();
        for (size_t i = 0; i < run->frames->count; i++)
            if (run->server_of[i] == k && run->done[i] && !run->failure[i])
                json_array_append_new(frames, json_string(run->frames->items[i].name));
        json_array_append_new(list, json_pack("{s:s, s:s, s:i, s:o, s:i, s:i, s:s}", "url", v->shown, "state",
                                              hp_server_state(v), "rendered", (int)json_array_size(frames), "frames",
                                              frames, "failed_attempts", (int)v->failed, "busy_answers", (int)v->busy,
                                              "last_error", v->last_error));
    }
    return list;
}

/* The summary: on stdout as JSON with --json (with the lock's values: those of the shot, or where to find
 * each frame's), and in a line on stderr. */
static void summary(const hp_cli_options *o, const hp_shot_job *job, const hp_run *run, hp_lock_mode mode,
                    const hp_retry_counts *analysis_waits, double seconds)
{
    size_t rendered = run->finished - run->failed;
    hp_retry_counts waits = {run->waits.failures + analysis_waits->failures,
                             run->waits.busy_429 + analysis_waits->busy_429,
                             run->waits.busy_503 + analysis_waits->busy_503};
    if (o->json) {
        json_t *exposure = mode == HP_LOCK_SHOT && job->locks ? lock_json(&job->locks[0]) : json_object();
        json_object_set_new(exposure, "mode", json_string(lock_mode_name(mode)));
        if (mode != HP_LOCK_FRAME) {
            char path[4200];
            snprintf(path, sizeof(path), "%s/exposure.json", o->out_dir);
            json_object_set_new(exposure, "frames", json_string(path));
        }
        json_t *retries = json_pack("{s:i, s:i, s:i}", "no_answer_or_5xx", (int)waits.failures, "busy_429",
                                    (int)waits.busy_429, "busy_503", (int)waits.busy_503);
        json_t *doc = json_pack("{s:i, s:i, s:i, s:o, s:i, s:f, s:s, s:o, s:o, s:o}", "frames", (int)o->frames.count,
                                "rendered", (int)rendered, "skipped", (int)run->skipped, "failed", failures_json(run),
                                "not_tried", (int)not_tried(run), "seconds", seconds, "output", o->out_dir, "exposure",
                                exposure, "retries", retries, "servers", servers_json(&o->servers, run));
        json_dumpf(doc, stdout, JSON_INDENT(1));
        printf("\n");
        json_decref(doc);
    }
    char retries[200];
    hp_retry_counts_text(&waits, retries, sizeof retries);
    fprintf(stderr, "hdrpost render: %zu rendered, %zu skipped, %zu failed, %zu not tried of %zu frames in %.1f s "
            "(exposure: %s)%s\n", rendered, run->skipped, run->failed, not_tried(run), o->frames.count, seconds,
            lock_mode_name(mode), retries);
    for (size_t k = 0; o->servers.count > 1 && k < o->servers.count; k++) {
        const hp_server *v = &o->servers.items[k];
        fprintf(stderr, "  %s: %zu rendered, %zu attempts failed, %zu busy answers, %s%s%s\n", v->shown,
                rendered_on(run, k), v->failed, v->busy, hp_server_state(v), v->last_error[0] ? "; last: " : "",
                v->last_error);
    }
    print_failures("render", run);
}

/* The shot's options checked: 0, or the exit status. */
static int render_options(hp_cli_options *o, hp_lock_mode *mode, unsigned *window)
{
    if (!o->out_dir)
        return hp_cli_usage_error("render", "%s", "no output directory: -o DIR");
    size_t a, b;
    if (hp_frames_name_clash(&o->frames, &a, &b))
        return hp_cli_error("render", "two frames would write the same output: %s", o->frames.items[b].path);
    *mode = o->frames.count > 1 ? HP_LOCK_SHOT : HP_LOCK_FRAME;
    *window = 0;
    if (o->exposure && !hp_lock_parse(o->exposure, mode, window))
        return hp_cli_usage_error("render", "--exposure %s: shot, window=N (N odd) or frame", o->exposure);
    return 0;
}

int hp_verb_render(hp_cli_options *o)
{
    hp_lock_mode mode;
    unsigned window;
    char *query = NULL, *render_query = NULL;
    hp_params params;
    int rc = render_options(o, &mode, &window);
    if (!rc)
        rc = prepare("render", o, &query, &params);
    if (rc)
        return rc;
    hp_lock_request req = lock_request(&params, mode, window);
    hp_err err = {0};
    if (mode != HP_LOCK_FRAME && params.exposure.mode == HP_EXPOSURE_HISTOGRAM) {
        free(query);
        return hp_cli_error("render", "%s", "exposure.mode=histogram exposes every frame by its own histogram; "
                                  "the shot's lock uses log-averages: use --exposure frame with it, or leave the mode");
    }
    if (mode != HP_LOCK_FRAME)
        leave_to_lock(&o->params, &req);
    if (hp_param_set_query(&o->params, &render_query, &(hp_params){0}, &err) != HP_OK ||
        (mkdir(o->out_dir, 0755) != 0 && errno != EEXIST)) {
        fprintf(stderr, "hdrpost render: %s\n", err.message[0] ? err.message : strerror(errno));
        free(query);
        return HP_EXIT_USAGE;
    }
    hp_shot_job job = {.frames = &o->frames, .query = query, .out_dir = o->out_dir,
                       .extension = output_extension(params.output.format), .retries = o->retries,
                       .max_wait_s = 600};
    hp_run run = {.servers = &o->servers, .token = o->token, .jobs = o->jobs, .stop = o->stop};
    double t0 = hp_now();
    hp_retry_counts analysis_waits = {0};
    if (!hp_shot_job_init(&job) || !hp_run_init(&run, &o->frames))
        rc = HP_EXIT_USAGE;
    else if (!(rc = existing_outputs(o, &job, &run)) && mode != HP_LOCK_FRAME)
        rc = lock_exposure(o, &job, &req, run.skipped, &analysis_waits); /* skipped ones too: they belong to the shot */
    else if (!rc && run.skipped && run.skipped < o->frames.count)
        fprintf(stderr, "hdrpost render: resuming: %zu of %zu frames already done (--resume).\n", run.skipped,
                o->frames.count);
    if (!rc && run.skipped == o->frames.count) {
        fprintf(stderr, "hdrpost render: nothing left to render: %zu frames already done (--resume)\n", run.skipped);
        if (o->json)
            summary(o, &job, &run, mode, &analysis_waits, hp_now() - t0);
    } else if (!rc && o->stop && *o->stop) {
        fprintf(stderr, "hdrpost render: interrupted before rendering\n");
        rc = HP_EXIT_SOME_FAILED;
    } else if (!rc) {
        job.query = render_query;
        hp_shot_render(&job, &run);
        summary(o, &job, &run, mode, &analysis_waits, hp_now() - t0);
        if (o->timings && !write_timings(o->timings, &job, &run))
            fprintf(stderr, "hdrpost render: cannot write %s\n", o->timings);
        rc = run_status("render", &run);
    }
    hp_run_free(&run);
    hp_shot_job_free(&job);
    free(query);
    free(render_query);
    return rc;
}

/* --- status ----------------------------------------------------------------------------------------- */

/* A string of the daemon's JSON, or fallback where it has none (printf's %s must never see NULL). */
static const char *text_of(const json_t *obj, const char *key, const char *fallback)
{
    const char *s = json_string_value(json_object_get(obj, key));
    return s && *s ? s : fallback;
}

static void print_gpu(const json_t *gpu, const hp_response *r)
{
    if (!gpu) {
        printf("gpu      %s\n", r->error);
        return;
    }
    json_t *q = json_object_get(gpu, "queue"), *h = json_object_get(gpu, "host_memory");
    printf("device   %s (%s %s, Vulkan %s)\n", text_of(gpu, "device", "?"), text_of(gpu, "driver", "?"),
           text_of(gpu, "driver_info", ""), text_of(gpu, "vulkan", "?"));
    printf("queue    %lld waiting of %lld, %lld in flight\n", (long long)json_integer_value(json_object_get(q, "depth")),
           (long long)json_integer_value(json_object_get(q, "capacity")),
           (long long)json_integer_value(json_object_get(q, "frames_in_flight")));
    size_t i;
    json_t *heap;
    json_array_foreach(json_object_get(gpu, "memory_heaps"), i, heap)
    {
        json_t *usage = json_object_get(heap, "usage_bytes"), *budget = json_object_get(heap, "budget_bytes");
        printf("heap %zu   %.0f MiB%s", i, json_number_value(json_object_get(heap, "size_bytes")) / 1048576.0,
               json_is_true(json_object_get(heap, "device_local")) ? " device-local" : "");
        if (usage && budget)
            printf(", %.0f MiB used of a %.0f MiB budget", json_number_value(usage) / 1048576.0,
                   json_number_value(budget) / 1048576.0);
        printf("\n");
    }
    printf("host     %lld blocks in use, %.0f MiB kept warm\n",
           (long long)json_integer_value(json_object_get(h, "blocks_in_use")),
           json_number_value(json_object_get(h, "kept_bytes")) / 1048576.0);
}

/* The studio config (GET /v1/ocio): its name, path and displays; "none" when the daemon runs without one;
 * "unknown" from a daemon older than the route (404), which cannot say either way. */
static void print_ocio(const json_t *ocio, const hp_response *r)
{
    const json_t *config = json_object_get(ocio, "config");
    if (json_is_object(config))
        printf("ocio     %s (%s), %zu displays, default %s\n", text_of(config, "name", "(unnamed)"),
               text_of(config, "path", "?"), json_array_size(json_object_get(ocio, "displays")),
               text_of(ocio, "default_display", "?"));
    else if (ocio)
        printf("ocio     none\n");
    else if (r->status == 404)
        printf("ocio     unknown (no /v1/ocio: the daemon is older than OCIO support)\n");
    else
        printf("ocio     %s\n", r->error);
}

/* One server's screen (or its JSON object, appended to out), naming it as shown (no password); its exit status. */
static int status_one(hp_cli_options *o, const hp_server *target, json_t *out)
{
    const char *server = target->shown;
    hp_client *client = hp_client_new(target->url, o->token, o->stop, 1);
    hp_response ready = {0}, r = {0}, ro = {0};
    hp_retry_policy once = {.retries = 0};
    if (client)
        hp_client_send_retrying(client, &once, "/readyz", NULL, 0, NULL, &ready);
    json_t *gpu = client && ready.status ? get_json(client, "/v1/gpu", &r) : NULL;
    json_t *ocio = client && ready.status ? get_json(client, "/v1/ocio", &ro) : NULL;
    /* The exit status a script gates on (cli.h): 0 ready, 3 unreachable, 4 the token missing or refused, 5 not
     * ready (the screen is still shown for 4 and 5: it says why). */
    int rc = HP_EXIT_DONE;
    char why[1100] = "";
    if (!ready.status)
        rc = HP_EXIT_UNREACHABLE, snprintf(why, sizeof why, "%s: unreachable: %s", server, ready.error);
    else if (!gpu && (r.status == 401 || r.status == 403))
        rc = HP_EXIT_REFUSED, hp_auth_refusal(&r, o->token && *o->token, why, sizeof why);
    else if (ready.status != 200 && ready.status != 404)
        rc = HP_EXIT_NOT_READY, snprintf(why, sizeof why, "%s: not ready: %s", server, ready.error);
    if (out) {
        /* ocio: /v1/ocio's answer ("config" null without one), or null where the daemon could not say; an
         * unreachable daemon too gets its object, so that a script reads exit_status from it. */
        json_array_append_new(out, json_pack("{s:s, s:b, s:O?, s:O?, s:i}", "server", server, "ready",
                                             ready.status == 200, "gpu", gpu, "ocio", ocio, "exit_status", rc));
    } else if (ready.status) { /* unreachable: nothing to show but the message */
        printf("server   %s\nready    %s\n", server, ready.status == 200 ? "yes" : ready.error);
        print_gpu(gpu, &r);
        print_ocio(ocio, &ro);
    }
    if (rc)
        fprintf(stderr, "hdrpost status: %s\n", why);
    json_decref(gpu);
    json_decref(ocio);
    hp_response_free(&ready);
    hp_response_free(&r);
    hp_response_free(&ro);
    hp_client_free(client);
    return rc;
}

/* Each server's screen, in the list's order (--json: its object, or an array of them for several). The exit
 * status is the first server's that is not ready: 0 when every one is. */
int hp_verb_status(hp_cli_options *o)
{
    json_t *docs = o->json ? json_array() : NULL;
    int rc = HP_EXIT_DONE;
    for (size_t k = 0; k < o->servers.count; k++) {
        if (k && !o->json)
            printf("\n");
        int one = status_one(o, &o->servers.items[k], docs);
        rc = rc ? rc : one;
    }
    if (docs) {
        json_dumpf(o->servers.count > 1 ? docs : json_array_get(docs, 0), stdout, JSON_INDENT(1));
        printf("\n");
        json_decref(docs);
    }
    return rc;
}
