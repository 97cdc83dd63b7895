/* Where a request goes, and where it goes again: the run's servers (hdrpost --server URL1,URL2,... or --servers
 * FILE) and the retry policy over them (docs/CLIENT.md, "Several servers").
 *
 * Each attempt goes to the server with the fewest of the run's requests in flight among those in use now (ties
 * taken in turn). An answer tells what becomes of its server:
 *   - 429, or 503 with Retry-After (busy, or starting): the server is left until the time it gave, a quarter
 *     more at random so that a farm's clients do not all come back at once;
 *   - no answer, 502, 503 without Retry-After, 504 (a daemon killed, draining, restarting; a proxy with no
 *     replica left): left for a back-off that doubles with its failures in a row (0.5, 1, 2, 4, 8, then 10 s),
 *     the same jitter; the attempts that fail while it is already left (sent before it was) do not lengthen it;
 *   - another 5xx (a 500 internal_error): the request's own failure; the request waits the same back-off, by
 *     its own failures, and the server serves on;
 *   - 503 naming device_lost: left for the rest of the run (its GPU does not come back; /livez asks for a
 *     restart, and a restarted daemon is a new run's); with Retry-After (a replica behind a proxy) a failure of
 *     the proxy's, as above: the proxy gives the request to another replica;
 *   - 200 or another 4xx: the answer; it and a busy answer end the server's failures in a row.
 * Failures count against the request's --retries (one more per further server); busy answers are waited out
 * for max_wait_s from the first, on the clock.
 * A request whose server was left is sent to another one in use at once, else it waits for the first to come
 * back. With one server this is the policy of a single daemon: every wait is that daemon's. */
#ifndef HP_CLIENT_SERVERS_H
#define HP_CLIENT_SERVERS_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "client/transport.h"

/* A retry or a wait, told before it happens so that none is silent. */
typedef struct hp_retry_note {
    const char *from, *to;  /* the server that answered r, and the one the request goes to next, as shown
                             * (hp_server.shown: no password) */
    const hp_response *r;   /* the answer that made it (status 0: none) */
    unsigned retry;         /* 1 for the first */
    double wait_s;          /* 0: sent at once (to another server) */
} hp_retry_note;

typedef struct hp_retry_policy {
    unsigned retries;  /* failed attempts (no answer, a 5xx but busy) retried this often, one more a further server */
    double max_wait_s; /* busy answers (above) waited out this long, per request, on the clock */
    _Atomic int *stop; /* set: no further attempt is made (SIGINT) */
    void (*on_retry)(void *user, const hp_retry_note *note); /* NULL: none */
    void *user;
} hp_retry_policy;

typedef struct hp_server {
    char url[512];   /* "http://host:port", no trailing slash: the requests', credentials and all (libcurl sends
                      * "user:password@" as Basic auth); never printed nor written */
    char shown[516]; /* url with its password "***" (hp_url_redact): what every message, summary, --json and
                      * --timings names the server by; "***" for a password of 1 character needs 2 more */
    /* Under the set's lock. */
    unsigned in_flight;
    unsigned failures_in_a_row;
    double back_at;        /* hp_now() before which it is left; 0: in use */
    bool gone;             /* its GPU lost: left for the run */
    size_t answered;       /* answers 200 */
    size_t failed;         /* attempts without an answer or with a 5xx */
    size_t busy;           /* answers 429, 503 with Retry-After */
    char last_error[256];  /* the last failed or busy attempt's, "" if none */
} hp_server;

typedef struct hp_servers {
    hp_server *items;
    size_t count;
    size_t turn; /* where the next tie is broken */
    pthread_mutex_t lock;
} hp_servers;

/* A server URL as it may be shown: the password of its userinfo replaced by "***", the rest as given
 * ("http://user:***@farm-lb:8080"; the user name kept, it tells servers apart; "http://user@h" unchanged). The
 * userinfo is everything before the last '@' of the authority (after "scheme://", up to the first '/', '?' or
 * '#'), the password what follows its first ':'; percent-encoded characters are left as they are. A string without
 * "scheme://" (one the list refuses) is read as all authority, so that "user:pw@host" without its scheme is hidden
 * too. The first n characters of url are read (the whole text, even when out is shorter); out is truncated to
 * size - 1 characters, as snprintf does. Returns out. */
const char *hp_url_redact(const char *url, size_t n, char *out, size_t size);

/* "URL[,URL...]": each http:// or https://, none twice. false with why naming the one that is not (as shown:
 * hp_url_redact). */
bool hp_servers_parse(hp_servers *s, const char *list, char *why, size_t why_size);
/* A file of URLs, one a line; blank lines and '#' comments are skipped. */
bool hp_servers_read(hp_servers *s, const char *path, char *why, size_t why_size);
void hp_servers_free(hp_servers *s);

/* A request under the policy across the servers: the last answer in out, and in *server the index of the
 * server that gave it (SIZE_MAX when none was tried: stopped before the first attempt). client: the calling
 * thread's own (its connections are kept alive to each server). */
void hp_servers_send(hp_servers *s, hp_client *client, const hp_retry_policy *p, const char *path,
                     const uint8_t *body, size_t len, const char *accept, hp_response *out, size_t *server);

/* hp_servers_send to the client's own server alone (the questions asked before a run). */
void hp_client_send_retrying(hp_client *client, const hp_retry_policy *p, const char *path, const uint8_t *body,
                             size_t len, const char *accept, hp_response *out);

/* The server's state in a word for a summary: "in use"; "left" (its last attempt failed, or it is busy until
 * back_at); "gone" (its GPU lost).
 * Under no lock: for after the run. */
const char *hp_server_state(const hp_server *server);

#endif
