/* What a route handler sees and fills: private to api/. The dispatcher in api/http/http.c finds the route,
 * calls its handler, and turns the reply into an HTTP response with the headers every response carries
 * (Content-Type, X-Request-Id, Cache-Control) and one log line.
 *
 * Adding a route is one row in api/routes/routes.c's table plus its handler. */
#ifndef HP_ROUTE_H
#define HP_ROUTE_H

#include <jansson.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <time.h>

#include "api/http/http.h"
#include "common/arrival.h"

/* A client's X-Request-Id is echoed when it is 1..HP_REQUEST_ID_MAX characters of [A-Za-z0-9._:@/+=-]
 * (what tracing systems use); anything else would let a client put arbitrary bytes in our logs. */
#define HP_REQUEST_ID_MAX 128
#define HP_REPLY_MAX_HEADERS 12

typedef struct hp_reply_header {
    const char *name; /* a string literal */
    char value[512];
} hp_reply_header;

typedef struct hp_reply {
    unsigned status;
    json_t *body;             /* owned by the reply; NULL sends no JSON body */
    uint8_t *bytes;           /* or a binary body (malloc'd, owned by the reply) */
    size_t bytes_len;
    void (*bytes_release)(void *owner); /* non-NULL: bytes is not malloc'd; this lets go of it */
    void *bytes_owner;
    const char *content_type; /* for bytes: a literal such as "image/png" */
    hp_reply_header headers[HP_REPLY_MAX_HEADERS];
    unsigned header_count;
} hp_reply;

typedef struct hp_request {
    hp_http *http;
    struct MHD_Connection *connection;
    const char *method;          /* as sent; valid until the request completes */
    const char *path;            /* decoded, without the query string */
    char id[HP_REQUEST_ID_MAX + 1];
    struct timespec started;     /* CLOCK_MONOTONIC, when the headers were complete */
    struct timespec body_done;   /* when the last byte of the body arrived */
    unsigned status;             /* once a response is queued; 0 before */
    char log_note[48];           /* what the route adds to the request's log line ("exr 3840x2160") */

    /* Routes that take a body get it whole, up to hp_http_params.max_body_bytes (in common/bigbuf.h's
     * memory, which the server puts back when the request ends). */
    uint8_t *body;
    size_t body_len, body_cap;
    bool body_too_large;
    /* A body with a Content-Length is sized once when its headers come, and its arrival told as it comes
     * in (common/arrival.h), so that a route's body_begins can start reading it early. */
    bool arriving;
    hp_arrival arrival;
    /* What body_begins started (render.c's early decoding): dropped with the request unless the handler
     * took it. The drop runs after the arrival has ended, so that nothing waits on it any more. */
    void *early;
    void (*early_drop)(struct hp_request *request);
    bool client_left; /* the request ended because its client went away (read error, abort) */

    /* Bytes of the memory budget (common/budget.h) the body holds, given back when the request ends. */
    uint64_t budget_bytes;
    bool budget_full;            /* a chunked body outgrew the budget: discarded, answered 503 */
    bool budget_never;           /* ... outgrew all of it: answered 413 */
    uint64_t discarded;          /* body bytes read only to be dropped (at most HP_HTTP_DISCARD_MAX) */
    unsigned body_factor;        /* the budget's bytes per body byte: 2 for a form (its frame part is copied) */
    hp_reply refusal;            /* refused from the headers, answered once the body is in (discarded) */
    bool probe;                  /* on the probe listener: the health routes alone */
    const struct hp_route *route; /* found once, when the headers are in (NULL: none for this method and path) */
    bool path_known;             /* the path exists for another method (405) */

    /* A handler that answers later (from another thread) calls hp_request_defer(); the connection is
     * suspended until hp_deferred_complete() hands over the reply. */
    bool deferred;
    struct hp_deferred_list *deferreds; /* the server's list of them (api/http/deferred.h), where the slot goes */
    struct hp_deferred *slot;
    hp_reply deferred_reply;
} hp_request;

/* Takes bytes from the budget of requests in flight (common/budget.h), or fills reply and returns true: 413
 * too_large when they and what the request holds already (held) exceed the whole budget, 503 memory_full
 * with Retry-After when it is full now. what names them for the message ("the body", "a 8192x8192 frame"). */
bool hp_budget_refused(hp_http *http, uint64_t bytes, uint64_t held, const char *what, hp_reply *reply);

typedef void (*hp_route_handler)(hp_request *request, hp_reply *reply);

/* Sets status and body (the reply takes body's reference). */
void hp_reply_json(hp_reply *reply, unsigned status, json_t *body);

/* The one error shape: {"error": {"code": code, "message": message, "field": field or null}}. code is a
 * stable snake_case word clients branch on (not_found, method_not_allowed, not_ready, ...); field names
 * the request field at fault, or NULL. */
void hp_reply_error(hp_reply *reply, unsigned status, const char *code, const char *field, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));

/* Sets status and a binary body (the reply takes data, which must be malloc'd). */
void hp_reply_bytes(hp_reply *reply, unsigned status, const char *content_type, uint8_t *data, size_t len);
/* The same with a body that is not malloc'd: release(owner) lets go of it once it is sent or dropped. */
void hp_reply_bytes_owned(hp_reply *reply, unsigned status, const char *content_type, uint8_t *data, size_t len,
                          void (*release)(void *owner), void *owner);

/* Frees what a reply owns (a reply that was sent needs nothing). */
void hp_reply_release(hp_reply *reply);

/* A deferred request's link to whoever answers it later. It outlives the request: if the connection goes
 * away first (a client gone at shutdown), the reply is dropped instead of written into freed memory. */
typedef struct hp_deferred hp_deferred;

/* Called by a handler that will answer later, before handing its work to another thread: the connection
 * is suspended when the handler returns. NULL when out of memory (answer at once instead). */
hp_deferred *hp_request_defer(hp_request *request);
/* Takes a deferral back while the work was never handed over (the queue refused it). */
void hp_request_undefer(hp_request *request);
/* From any thread, once: hands the reply over (moving it), resumes the connection, releases the slot. */
void hp_deferred_complete(hp_deferred *slot, hp_reply *reply);
/* Asks to be told, once, when the client closes its connection while the request waits for its reply
 * (api/http/deferred.h's watch looks every HP_DEFERRED_WATCH_MS). gone(arg) runs on the watch thread with the
 * slot's lock held, so it must not complete the slot; arg stays valid through it as long as the completer
 * completes the slot before it frees arg. Not called once the reply is handed over. */
void hp_deferred_watch(hp_deferred *slot, void (*gone)(void *arg), void *arg);
#define HP_DEFERRED_WATCH_MS 50
/* Whether the client has closed its connection while the request waits for its reply: a look now, from any
 * thread, at a connection that is still there (under the slot's lock). */
bool hp_deferred_client_gone(hp_deferred *slot);

/* Adds a header (name must outlive the reply: a literal). Ignored past HP_REPLY_MAX_HEADERS. */
void hp_reply_header_add(hp_reply *reply, const char *name, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* --- The route table ---------------------------------------------------------------------------------- */

/* One route. The table is the service's (api/routes/routes.c); the server (api/http/http.c) finds a request's
 * route in it, checks its token and body, calls its handler and answers. */
typedef struct hp_route {
    const char *method; /* GET routes also answer HEAD (RFC 9110 9.3.2); libmicrohttpd drops the body */
    const char *path;   /* exact match, or with a trailing '/' every path under it */
    hp_route_handler handler;
    void (*body_begins)(hp_request *request); /* optional: the body's buffer is ready, nothing arrived yet */
    bool takes_body;    /* the body is collected (up to max_body_bytes) before the handler runs */
    bool open;          /* answered without the bearer token (health checks) */
    bool metrics;       /* answered without the token as well when the daemon says so (metrics_open) */
    bool frame;         /* a frame's route: the live window (api/http/live_stats.h) counts every request */
} hp_route;

#endif
