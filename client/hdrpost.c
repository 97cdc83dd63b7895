/* hdrpost: the command-line client a render farm runs on a whole shot (docs/CLIENT.md).
 *
 *   hdrpost render FRAMES... -o DIR     every frame rendered, with the shot's exposure locked
 *   hdrpost analyze FRAMES...           every frame's statistics
 *   hdrpost status                      the daemon's state, device, queue, memory and OCIO config
 *
 * Exit status (cli.h, docs/CLIENT.md): 0 done (status: ready), 1 some frames failed or interrupted, 2 the command
 * (an option, a file, a parameter), 3 the server unreachable, 4 the token missing or refused, 5 not ready. */
#include <stdatomic.h>
#include <curl/curl.h>
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "client/cli.h"

/* An atomic, not a volatile sig_atomic_t: the frames' threads read it while the handler, on whichever thread
 * took the signal, writes it (ThreadSanitizer's pass over client_http saw that race); a lock-free atomic is
 * async-signal-safe. */
static _Atomic int stop_requested;
static void on_signal(int sig)
{
    (void)sig;
    /* The first asks to stop taking frames; a second also abandons the frames in flight (transport.c). */
    if (stop_requested < 2)
        stop_requested++;
}

int hp_cli_usage_error(const char *verb, const char *fmt, const char *arg)
{
    fprintf(stderr, "hdrpost %s: ", verb);
    fprintf(stderr, fmt, arg);
    fprintf(stderr, "\n(hdrpost %s --help lists the options)\n", verb);
    return HP_EXIT_USAGE;
}

int hp_cli_error(const char *verb, const char *fmt, const char *arg)
{
    fprintf(stderr, "hdrpost %s: ", verb);
    fprintf(stderr, fmt, arg);
    fprintf(stderr, "\n");
    return HP_EXIT_USAGE;
}

#define EXIT_STATUS_HELP                                                                                    \
    "Exit status: 0 done (status: the daemon is ready), 1 some frames failed (listed) or interrupted,\n"    \
    "2 the command (an option, a file, a parameter), 3 the server unreachable, 4 the token missing or\n"    \
    "refused, 5 the daemon not ready (still starting after --wait, draining, or its GPU lost).\n"

static const char render_help[] =
    "usage: hdrpost render FRAMES... -o DIR [options]\n"
    "\n"
    "Posts every frame to hdrpostd and writes DIR/<name>.<webp|png|jpg|avif>. FRAMES are files, directories (their\n"
    ".exr, .hdr and .pfm files), or numbered patterns (shot.####.exr, shot.%04d.exr) with --frames.\n"
    "\n"
    "  -o, --output DIR        where the images go (made if missing)\n"
    "  --frames FIRST-LAST     the frames of a numbered pattern\n"
    "  --server URL[,URL...]   default http://127.0.0.1:8080, or HDRPOST_SERVER; several: each frame goes to\n"
    "                          the one with the fewest in flight, one that stops answering is left for a\n"
    "                          while and its frames sent elsewhere, and the summary says which rendered what\n"
    "  --servers FILE          the servers, one URL a line ('#' comments)\n"
    "  --token TOKEN           the daemon's bearer token, or HDRPOST_TOKEN\n"
    "  --params FILE|JSON      request parameters (docs/PARAMETERS.md) as a JSON object\n"
    "  --set NAME=VALUE        one parameter (repeatable; wins over --params); the names of the daemon's\n"
    "                          OCIO config (ocio.display, ocio.view, ocio.looks, input.colorspace) it checks\n"
    "  --format FORMAT         output.format: webp (the default), png, jpeg or avif\n"
    "  --exposure MODE         shot (one exposure for the shot; the default for more than one frame),\n"
    "                          window=N (a centred window of N frames), frame (each its own)\n"
    "  --jobs N                frames in flight (default from the daemon's queue, else 4)\n"
    "  --retries N             retries of a failed connection or 5xx (default 5)\n"
    "  --wait SECONDS          how long to wait for a daemon that is starting (503) before the first frame\n"
    "                          (default 120; 0: not at all)\n"
    "  --resume                skip frames whose output exists (outputs are written whole)\n"
    "  --overwrite             render frames whose output exists again (not with --resume)\n"
    "  --timings FILE.csv      every frame's Server-Timing, a column per phase the daemon reports\n"
    "  --json                  a summary object on stdout\n"
    "\n" EXIT_STATUS_HELP;

static const char analyze_help[] =
    "usage: hdrpost analyze FRAMES... [options]\n"
    "\n"
    "Every frame's luminance statistics (/v1/analyze): a table, or --json / --csv.\n"
    "\n"
    "  --frames FIRST-LAST, --server URL[,URL...], --servers FILE, --token TOKEN, --params FILE|JSON,\n"
    "  --set NAME=VALUE, --jobs N,\n"
    "  --retries N, --wait SECONDS: as for render\n"
    "  --json                  one object per frame, in an array\n"
    "  --csv                   frame,log_average,mean,min,max,p01,p50,p99\n"
    "\n" EXIT_STATUS_HELP;

static const char status_help[] =
    "usage: hdrpost status [--server URL[,URL...] | --servers FILE] [--token TOKEN] [--json]\n"
    "\n"
    "The daemon's ready state, device, queue, GPU memory and OCIO config in one screen (/readyz, /v1/gpu and\n"
    "/v1/ocio). It does not wait: its exit status says whether the daemon can take frames now.\n"
    "\n"
    "Exit status: 0 ready, 3 the server unreachable, 4 the token missing or refused (the rest is still\n"
    "shown), 5 not ready (starting, draining, or its GPU lost), 2 a usage error.\n";

/* Options common to the verbs; returns 0 to go on, or an exit status. */
static int parse(const char *verb, const char *help, int argc, char **argv, hp_cli_options *o)
{
    enum { O_FRAMES = 256, O_SERVER, O_SERVERS, O_TOKEN, O_PARAMS, O_SET, O_FORMAT, O_EXPOSURE, O_JOBS, O_RETRIES,
           O_RESUME, O_OVERWRITE, O_TIMINGS, O_JSON, O_CSV, O_WAIT, O_HELP };
    static const struct option long_options[] = {
        {"output", required_argument, NULL, 'o'},      {"frames", required_argument, NULL, O_FRAMES},
        {"server", required_argument, NULL, O_SERVER}, {"token", required_argument, NULL, O_TOKEN},
        {"servers", required_argument, NULL, O_SERVERS},
        {"params", required_argument, NULL, O_PARAMS}, {"set", required_argument, NULL, O_SET},
        {"format", required_argument, NULL, O_FORMAT}, {"exposure", required_argument, NULL, O_EXPOSURE},
        {"jobs", required_argument, NULL, O_JOBS},     {"retries", required_argument, NULL, O_RETRIES},
        {"resume", no_argument, NULL, O_RESUME},       {"overwrite", no_argument, NULL, O_OVERWRITE},
        {"timings", required_argument, NULL, O_TIMINGS}, {"json", no_argument, NULL, O_JSON},
        {"csv", no_argument, NULL, O_CSV},             {"help", no_argument, NULL, O_HELP},
        {"wait", required_argument, NULL, O_WAIT},
        {NULL, 0, NULL, 0},
    };
    o->server = getenv("HDRPOST_SERVER") ? getenv("HDRPOST_SERVER") : "http://127.0.0.1:8080";
    o->token = getenv("HDRPOST_TOKEN");
    o->retries = 5;
    o->wait_s = 120; /* a GPU daemon's start: the device, its pipelines and a warm-up frame, with room to spare */
    hp_err err = {0};
    bool server_given = false;
    for (int c; (c = getopt_long(argc, argv, "o:", long_options, NULL)) != -1;) {
        char *end;
        long n;
        switch (c) {
        case 'o': o->out_dir = optarg; break;
        case O_FRAMES:
            if (!hp_frame_range_parse(optarg, &o->first, &o->last)) {
                long first, last;
                char tail;
                if (sscanf(optarg, "%ld-%ld%c", &first, &last, &tail) == 2 && first > last) {
                    char message[160];
                    snprintf(message, sizeof message, "the first frame (%ld) is after the last (%ld): give "
                             "FIRST-LAST, e.g. --frames %ld-%ld", first, last, last, first);
                    return hp_cli_usage_error(verb, "--frames: %s", message);
                }
                return hp_cli_usage_error(verb, "--frames %s: expected FIRST-LAST, e.g. 1001-1240 (at most a "
                                          "million frames)", optarg);
            }
            o->has_range = true;
            break;
        case O_SERVER: o->server = optarg, server_given = true; break;
        case O_SERVERS: o->servers_file = optarg; break;
        case O_TOKEN: o->token = optarg; break;
        case O_PARAMS:
            if (hp_param_set_json(&o->params, optarg, &err) != HP_OK)
                return hp_cli_error(verb, "%s", err.message);
            break;
        case O_SET:
            if (hp_param_set_assign(&o->sets, optarg, &err) != HP_OK)
                return hp_cli_error(verb, "%s", err.message);
            break;
        case O_FORMAT: o->format = optarg; break;
        case O_EXPOSURE: o->exposure = optarg; break;
        case O_JOBS:
        case O_RETRIES:
            n = strtol(optarg, &end, 10);
            if (end == optarg || *end || n < (c == O_JOBS) || n > 256)
                return hp_cli_usage_error(verb, c == O_JOBS ? "--jobs %s: expected 1 to 256" : "--retries %s: expected 0 to 256",
                                   optarg);
            *(c == O_JOBS ? &o->jobs : &o->retries) = (unsigned)n;
            break;
        case O_RESUME: o->resume = true; break;
        case O_OVERWRITE: o->overwrite = true; break;
        case O_TIMINGS: o->timings = optarg; break;
        case O_WAIT:
            o->wait_s = strtod(optarg, &end);
            if (end == optarg || *end || !(o->wait_s >= 0 && o->wait_s <= 86400))
                return hp_cli_usage_error(verb, "--wait %s: expected seconds, 0 to 86400", optarg);
            break;
        case O_JSON: o->json = true; break;
        case O_CSV: o->csv = true; break;
        case O_HELP: fputs(help, stdout); return -1;
        default: return hp_cli_usage_error(verb, "%s", "unknown option");
        }
    }
    if (server_given && o->servers_file)
        return hp_cli_usage_error(verb, "%s", "--server and --servers together: give the servers one way");
    char why[1200];
    if (o->servers_file ? !hp_servers_read(&o->servers, o->servers_file, why, sizeof why)
                        : !hp_servers_parse(&o->servers, o->server, why, sizeof why))
        return hp_cli_usage_error(verb, o->servers_file ? "--servers: %s" : "--server: %s", why);
    if (o->resume && o->overwrite)
        return hp_cli_usage_error(verb, "%s", "--resume and --overwrite together: --resume keeps the frames already "
                                  "rendered, --overwrite renders them again; give one");
    for (int i = optind; i < argc; i++)
        if (hp_frames_add(&o->frames, argv[i], o->has_range, o->first, o->last, &err) != HP_OK)
            return hp_cli_error(verb, "%s", err.message);
    return 0;
}

int main(int argc, char **argv)
{
    if (argc < 2 || !strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")) {
        fputs("usage: hdrpost render|analyze|status [options]  (hdrpost VERB --help for each)\n", argc < 2 ? stderr : stdout);
        return argc < 2 ? HP_EXIT_USAGE : HP_EXIT_DONE;
    }
    static const struct {
        const char *name, *help;
        int (*run)(hp_cli_options *o);
    } verbs[] = {{"render", render_help, hp_verb_render}, {"analyze", analyze_help, hp_verb_analyze},
                 {"status", status_help, hp_verb_status}};
    const char *verb = argv[1];
    size_t v = 0;
    while (v < sizeof(verbs) / sizeof(verbs[0]) && strcmp(verbs[v].name, verb))
        v++;
    if (v == sizeof(verbs) / sizeof(verbs[0]))
        return hp_cli_usage_error(verb, "%s", "unknown verb: render, analyze or status");
    curl_global_init(CURL_GLOBAL_DEFAULT);
    /* SIGINT: no new frame is taken; those in flight finish and their outputs are written whole. */
    struct sigaction sa = {.sa_handler = on_signal};
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    /* Names of the daemon's OCIO config (ocio.*, input.colorspace) cannot be checked here, with no config: the
     * daemon checks them, with its messages; everything else is still checked before a frame is sent. */
    hp_params_accept_open_names(true);
    hp_cli_options o = {.stop = &stop_requested};
    int rc = parse(verb, verbs[v].help, argc - 1, argv + 1, &o);
    if (rc == 0)
        rc = verbs[v].run(&o);
    hp_param_set_free(&o.params);
    hp_param_set_free(&o.sets);
    hp_frames_free(&o.frames);
    hp_servers_free(&o.servers);
    curl_global_cleanup();
    return rc < 0 ? HP_EXIT_DONE : rc;
}
