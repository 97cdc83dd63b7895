/* What hdrpost's verbs share (hdrpost.c parses, verbs.c runs). */
#ifndef HP_CLIENT_CLI_H
#define HP_CLIENT_CLI_H

#include <stdatomic.h>
#include <signal.h>
#include <stdbool.h>

#include "client/frames.h"
#include "client/params.h"
#include "client/servers.h"

/* Exit statuses, the same for every verb (docs/CLIENT.md's table): a script can tell a daemon to wait for from a
 * token to fix and from a command to fix. */
enum {
    HP_EXIT_DONE = 0,        /* every frame done; status: the daemon is ready */
    HP_EXIT_SOME_FAILED = 1, /* some frames failed (listed) or the run was interrupted */
    HP_EXIT_USAGE = 2,       /* the command: an option, a file, a parameter (the daemon's 400 for every frame) */
    HP_EXIT_UNREACHABLE = 3, /* no answer from the server (or it stopped answering mid-run) */
    HP_EXIT_REFUSED = 4,     /* the token missing or refused (401, 403) */
    HP_EXIT_NOT_READY = 5,   /* the daemon answers but is not ready (503: starting past --wait, draining, lost) */
};

typedef struct hp_cli_options {
    const char *server, *servers_file, *token; /* --server URL[,URL...] (or HDRPOST_SERVER), --servers FILE */
    hp_servers servers;          /* the list, parsed (hdrpost.c) */
    size_t asked;                /* the server the questions before a run go to: the first ready one */
    hp_param_set params;         /* --params, then --set merged over it (prepare in verbs.c) */
    hp_param_set sets;           /* --set */
    hp_frame_list frames;
    bool has_range;
    long first, last;
    unsigned jobs, retries;
    double wait_s;               /* --wait: how long a starting daemon (503) is waited for before the first frame */
    bool json, csv, resume, overwrite;
    const char *out_dir, *timings, *format, *exposure;
    _Atomic int *stop; /* SIGINT or SIGTERM */
} hp_cli_options;

int hp_verb_render(hp_cli_options *o);
int hp_verb_analyze(hp_cli_options *o);
int hp_verb_status(hp_cli_options *o);

/* "hdrpost VERB: <message>" and the pointer to --help, for a command line that is wrong; HP_EXIT_USAGE. */
int hp_cli_usage_error(const char *verb, const char *fmt, const char *arg);
/* "hdrpost VERB: <message>" alone, for what --help would not help with (a missing file, a bad parameter's
 * value: the message says what to do); HP_EXIT_USAGE. */
int hp_cli_error(const char *verb, const char *fmt, const char *arg);

#endif
