/* Talking to hdrpostd: one exchange over HTTP (libcurl, one easy handle per thread, its connections kept alive
 * between requests, to each server it talks to; the retry policy across servers is client/servers.h's). libcurl sends "Expect: 100-continue" with a large body, so a frame
 * the daemon refuses from its headers is not uploaded at all (docs/SECURITY.md). */
#ifndef HP_CLIENT_TRANSPORT_H
#define HP_CLIENT_TRANSPORT_H

#include <stdatomic.h>
#include <signal.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct hp_response {
    long status;           /* the HTTP status; 0 when there was no answer (error says why) */
    char error[256];       /* the transport's failure, or the daemon's error as "code: message" */
    uint8_t *body;         /* malloc'd, NUL-terminated */
    size_t len;
    char content_type[64];
    double retry_after_s;  /* from Retry-After; -1 without one */
    char server_timing[512];
    unsigned attempts;     /* requests made for this answer */
} hp_response;

/* A 503 naming device_lost: a daemon that lost its GPU. Said to a client directly it has no Retry-After: it
 * does not come back (/livez asks for a restart), and nothing sent to it again can succeed. A replica behind a
 * proxy adds one (api/http/http.c): another replica may take the request. */
/* A 503 naming device_lost, with or without Retry-After (a replica behind a proxy adds one: another replica may
 * take the request). */
bool hp_response_names_device_lost(const hp_response *r);

typedef struct hp_client hp_client;

/* server: "http://host:port" (no trailing slash needed); token: NULL or "" for none. stop: the run's signal
 * count (NULL: none): an exchange is abandoned once it reaches abort_at (2 for frames, which a first SIGINT
 * lets finish; 1 for the short questions asked before a run). */
hp_client *hp_client_new(const char *server, const char *token, _Atomic int *stop, int abort_at);
void hp_client_free(hp_client *client);
/* The server the next exchange goes to ("http://host:port", as hp_client_new takes it), with any password in
 * it: for requests; what is shown is hp_url_redact's form (client/servers.h). */
void hp_client_use(hp_client *client, const char *server);
const char *hp_client_server(const hp_client *client);
/* 1 to 1.25 at random (the thread's own seed): a wait's jitter. */
double hp_client_jitter(hp_client *client);

/* Seconds on a monotonic clock. */
double hp_now(void);

/* One exchange. body NULL: GET. accept: NULL, or the Accept header's value. */
void hp_client_send(hp_client *client, const char *path, const uint8_t *body, size_t len, const char *accept,
                    hp_response *out);

void hp_response_free(hp_response *r);

/* Sleeps up to seconds, waking early when *stop (if any) is set. */
void hp_pause(double seconds, _Atomic int *stop);

/* What a 401 or 403 means for the user: a token the daemon needs and none was given, or the one given refused
 * (the daemon says the same for both; the client knows which). */
void hp_auth_refusal(const hp_response *r, bool sent_token, char *out, size_t size);

/* A status that retrying cannot change for the better, and that is the request's fault (4xx but 429). */
bool hp_response_refused(const hp_response *r);

#endif
