/* The connection guard: what keeps one client from holding the server's connections (docs/SECURITY.md).
 *
 * libmicrohttpd bounds how many connections there are (MHD_OPTION_CONNECTION_LIMIT) and how long one may be
 * silent (MHD_OPTION_CONNECTION_TIMEOUT), but not how long a request may take to arrive, nor which
 * connection should give way when the slots are all taken: a client that sends one byte every 50 s keeps a
 * connection forever, and twenty addresses holding idle connections kept the API's port silent. The guard
 * keeps a record of every connection (MHD_OPTION_NOTIFY_CONNECTION) in a connection table
 * (api/http/conn_table.h: its client, the phase its current request is in, the eviction and deadline policy) and
 *   - refuses a connection whose client (an IPv4 address or an IPv6 /64) holds max_connections_per_ip
 *     (the accept policy callback);
 *   - when a polling thread's slots run short, closes one idle or slow connection of that thread for each
 *     one it accepts (shutdown(2)): waiting for headers, a slow body, or an answer its client does not read
 *     (bytes waiting in the socket and none acknowledged for 2 s);
 *   - closes, from a thread of its own, a connection whose headers are not in within header_timeout_s (5 s
 *     under pressure) or whose body arrives slower than min_body_rate after body_grace_s;
 *   - watches the listening socket's accept queue: connections waiting there for a second while nothing is
 *     accepted mean the API cannot take work (hp_guard_accepting: /readyz says 503).
 * A request being handled (its frame queued or on the GPU) is never timed or closed here: the queue's own
 * deadline (request_timeout_s) bounds it.
 *
 * It also reads the request line before libmicrohttpd decodes it (MHD_OPTION_URI_LOG_CALLBACK and
 * MHD_OPTION_UNESCAPE_CALLBACK), so that a literal control byte or NUL in the target, a %00, or more query
 * arguments than a connection's memory can hold are seen and refused instead of cutting the path short or
 * leaving the client without an answer.
 *
 * Private to api/: http.c wires it to libmicrohttpd. Thread-safe: every function may be called from any
 * of libmicrohttpd's threads. */
#ifndef HP_HTTP_GUARD_H
#define HP_HTTP_GUARD_H

#include <microhttpd.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/error.h"

/* Query arguments a request may carry. libmicrohttpd keeps each in the connection's 64 KiB of memory
 * (HP_HTTP_CONNECTION_MEMORY) at about 56 bytes a record: past some 1,100 it cannot build even its own 431
 * and closes the connection unanswered. Every parameter of the API (GET /v1/params) fits many times over. */
#define HP_GUARD_QUERY_ARGS_MAX 256

typedef struct hp_guard_params {
    const char *name;            /* "api" or "probe": the log's and the metrics' word for the listener */
    unsigned max_connections;    /* libmicrohttpd's limit, shared among its threads */
    unsigned threads;            /* libmicrohttpd's polling threads */
    unsigned per_client;         /* connections one client (an IPv4 address, an IPv6 /64) may hold; 0: none */
    const struct hp_trusted_proxies *trusted; /* proxies not held to per_client (they carry many clients); NULL */
    double header_timeout_s;     /* from a connection's start, or its previous request's end, to the end of
                                  * the next request's headers; 0: no deadline */
    uint64_t min_body_rate;      /* bytes per second a body must average once body_grace_s has passed; 0: none */
    double body_grace_s;         /* the first seconds of a body, not judged (slow start, a client's own stall) */
    void (*tick)(void *ctx);     /* optional: called by the guard's thread every period, outside its lock */
    void *tick_ctx;
} hp_guard_params;

/* Under pressure (a polling thread's slots short) headers get at most this long: what the probe listener
 * gives them always (a real client sends its headers at once). */
#define HP_GUARD_PRESSED_HEADER_TIMEOUT_S 5.0
/* Under pressure a body averaging less than this many times min_body_rate after its first second may be
 * closed to make room. */
#define HP_GUARD_PRESSED_BODY_RATE_FACTOR 4

typedef struct hp_guard hp_guard;

/* What the request line held that the handler refuses (400). */
typedef enum hp_target_problem {
    HP_TARGET_OK,
    HP_TARGET_ENCODED_NUL,  /* %00 in the path or the query */
    HP_TARGET_CONTROL,      /* a literal control byte (0x01-0x1f, 0x7f) */
    HP_TARGET_LITERAL_NUL,  /* a literal NUL: the path would end there */
    HP_TARGET_TOO_MANY_ARGS /* more than HP_GUARD_QUERY_ARGS_MAX query arguments (the query was dropped) */
} hp_target_problem;

hp_code hp_guard_create(const hp_guard_params *params, hp_guard **out, hp_err *err);
/* Stops the thread. After every libmicrohttpd daemon using it has stopped. */
void hp_guard_destroy(hp_guard **guard);

/* libmicrohttpd's callbacks, cls the guard: the accept policy (MHD_start_daemon's apc),
 * MHD_OPTION_NOTIFY_CONNECTION, MHD_OPTION_URI_LOG_CALLBACK (returns NULL) and MHD_OPTION_UNESCAPE_CALLBACK. */
enum MHD_Result hp_guard_accept_policy(void *cls, const struct sockaddr *addr, socklen_t addrlen);
void hp_guard_on_connection(void *cls, struct MHD_Connection *connection, void **socket_context,
                            enum MHD_ConnectionNotificationCode code);
void *hp_guard_uri_log(void *cls, const char *uri, struct MHD_Connection *connection);
size_t hp_guard_unescape(void *cls, struct MHD_Connection *connection, char *s);

/* The listening socket whose accept queue hp_guard_accepting watches; -1: none (before it is closed). */
void hp_guard_watch_listener(hp_guard *guard, int fd);
/* False while connections have waited in the accept queue for a second or more with none accepted. */
bool hp_guard_accepting(hp_guard *guard);
/* Connections open, and those closed to make room (evicted) so far. */
void hp_guard_counts(hp_guard *guard, unsigned *open, uint64_t *evicted);

/* The phases of a connection's request, told by the request handler. */
void hp_guard_headers_in(struct MHD_Connection *connection, bool body_follows); /* timing the body, or not */
void hp_guard_body_bytes(struct MHD_Connection *connection, size_t bytes);
void hp_guard_body_in(struct MHD_Connection *connection);       /* handled from here on: not timed */
void hp_guard_replying(struct MHD_Connection *connection);      /* its answer queued: being sent */
void hp_guard_request_done(struct MHD_Connection *connection);  /* waiting for the next request's headers */

/* Whether the connection was refused after it was counted (max_connections_per_ip): close it unanswered. */
bool hp_guard_refused(struct MHD_Connection *connection);

/* What the request's target held (the handler's first call passes libmicrohttpd's version string, which
 * lies just after the target in the request line: a literal NUL is found by where it lies). */
hp_target_problem hp_guard_target_problem(struct MHD_Connection *connection, const char *version);

#endif
