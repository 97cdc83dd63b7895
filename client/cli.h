/* What hdrpost's verbs share (hdrpost.c parses, verbs.c runs). */
#ifndef HP_CLIENT_CLI_H
#define HP_CLIENT_CLI_H

#include <stdatomic.h>
#include <signal.h>
#include <stdbool.h>

#include "client/frames.h"
#include "client/params.h"

enum { HP_EXIT_DONE = 0, HP_EXIT_SOME_FAILED = 1, HP_EXIT_USAGE = 2 };

typedef struct hp_cli_options {
    const char *server, *token;
    hp_param_set params;         /* --params, then --set merged over it (prepare in verbs.c) */
    hp_param_set sets;           /* --set */
    hp_frame_list frames;
    bool has_range;
    long first, last;
    unsigned jobs, retries;
    bool json, csv, resume, overwrite;
    const char *out_dir, *timings, *format, *exposure;
    _Atomic int *stop; /* SIGINT or SIGTERM */
} hp_cli_options;

int hp_verb_render(hp_cli_options *o);
int hp_verb_analyze(hp_cli_options *o);
int hp_verb_status(hp_cli_options *o);

/* "hdrpost VERB: <message>" and the pointer to --help; HP_EXIT_USAGE. */
int hp_cli_usage_error(const char *verb, const char *fmt, const char *arg);

#endif
