/* The connection guard: what keeps one client from holding the server's connections (docs/SECURITY.md).
 *
 * libmicrohttpd bounds how many connections there are (MHD_OPTION_CONNECTION_LIMIT, per IP too) and how
 * long one may be silent (MHD_OPTION_CONNECTION_TIMEOUT), but not how long a request may take to arrive: a
 * client that sends one byte every 50 s keeps a connection forever, and a few hundred of them hold the
 * limit. The guard keeps a record of every connection (MHD_OPTION_NOTIFY_CONNECTION) and the phase its
 * current request is in, and a thread that closes (shutdown(2)) one whose headers are not in within
 * header_timeout_s of the previous request's end, or whose body arrives slower than min_body_rate after
 * body_grace_s. A request being handled (its frame queued or on the GPU) is never timed here: the queue's
 * own deadline (request_timeout_s) bounds it.
 *
 * It also decodes the URL for libmicrohttpd (MHD_OPTION_UNESCAPE_CALLBACK), so that a %00 in the path or
 * the query, which would cut the decoded string short ("GET /livez%00" answered as /livez), is seen and
 * refused instead.
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

typedef struct hp_guard_params {
    double header_timeout_s;     /* from a connection's start, or its previous request's end, to the end of
                                  * the next request's headers; 0: no deadline */
    uint64_t min_body_rate;      /* bytes per second a body must average once body_grace_s has passed; 0: none */
    double body_grace_s;         /* the first seconds of a body, not judged (slow start, a client's own stall) */
} hp_guard_params;

typedef struct hp_guard hp_guard;

hp_code hp_guard_create(const hp_guard_params *params, hp_guard **out, hp_err *err);
/* Stops the thread. After every libmicrohttpd daemon using it has stopped. */
void hp_guard_destroy(hp_guard **guard);

/* libmicrohttpd's callbacks: MHD_OPTION_NOTIFY_CONNECTION and MHD_OPTION_UNESCAPE_CALLBACK, cls the guard. */
void hp_guard_on_connection(void *cls, struct MHD_Connection *connection, void **socket_context,
                            enum MHD_ConnectionNotificationCode code);
size_t hp_guard_unescape(void *cls, struct MHD_Connection *connection, char *s);

/* The phases of a connection's request, told by the request handler. */
void hp_guard_headers_in(struct MHD_Connection *connection, bool body_follows); /* timing the body, or not */
void hp_guard_body_bytes(struct MHD_Connection *connection, size_t bytes);
void hp_guard_body_in(struct MHD_Connection *connection);       /* handled from here on: not timed */
void hp_guard_request_done(struct MHD_Connection *connection);  /* waiting for the next request's headers */

/* Whether the request's path or query held an encoded NUL (%00). */
bool hp_guard_nul_in_url(struct MHD_Connection *connection);

#endif
