/* What a route handler sees and fills: private to api/. The dispatcher in http.c finds the route,
 * calls its handler, and turns the reply into an HTTP response with the headers every response carries
 * (Content-Type, X-Request-Id, Cache-Control) and one log line.
 *
 * Adding a route is one row in http.c's table plus its handler. */
#ifndef HP_ROUTE_H
#define HP_ROUTE_H

#include <jansson.h>
#include <stdbool.h>
#include <time.h>

#include "api/http.h"

/* A client's X-Request-Id is echoed when it is 1..HP_REQUEST_ID_MAX characters of [A-Za-z0-9._:@/+=-]
 * (what tracing systems use); anything else would let a client put arbitrary bytes in our logs. */
#define HP_REQUEST_ID_MAX 128
#define HP_REPLY_MAX_HEADERS 4

typedef struct hp_request {
    hp_http *http;
    struct MHD_Connection *connection;
    const char *method;          /* as sent; valid until the request completes */
    const char *path;            /* decoded, without the query string */
    char id[HP_REQUEST_ID_MAX + 1];
    struct timespec started;     /* CLOCK_MONOTONIC, when the headers were complete */
    unsigned status;             /* once a response is queued; 0 before */
} hp_request;

typedef struct hp_reply_header {
    const char *name; /* a string literal */
    char value[128];
} hp_reply_header;

typedef struct hp_reply {
    unsigned status;
    json_t *body;     /* owned by the reply; NULL sends no body */
    hp_reply_header headers[HP_REPLY_MAX_HEADERS];
    unsigned header_count;
} hp_reply;

typedef void (*hp_route_handler)(hp_request *request, hp_reply *reply);

/* Sets status and body (the reply takes body's reference). */
void hp_reply_json(hp_reply *reply, unsigned status, json_t *body);

/* The one error shape: {"error": {"code": code, "message": message, "field": field or null}}. code is a
 * stable snake_case word clients branch on (not_found, method_not_allowed, not_ready, ...); field names
 * the request field at fault, or NULL. */
void hp_reply_error(hp_reply *reply, unsigned status, const char *code, const char *field, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));

/* Adds a header (name must outlive the reply: a literal). Ignored past HP_REPLY_MAX_HEADERS. */
void hp_reply_header_add(hp_reply *reply, const char *name, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* --- Handlers (one file per group of routes) -------------------------------------------------------- */

/* health.c: GET /livez, GET /readyz. */
void hp_route_livez(hp_request *request, hp_reply *reply);
void hp_route_readyz(hp_request *request, hp_reply *reply);

#endif
