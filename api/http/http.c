#include "api/http/trusted_proxies.h"
#include "api/http/http.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <malloc.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/random.h>
#include <unistd.h>

#include "api/http/deferred.h"
#include "api/http/http_guard.h"
#include "api/http/live_stats.h"
#include "api/http/metrics.h"
#include "api/http/route.h"
#include "common/bigbuf.h"
#include "common/budget.h"
#include "common/ratelimit.h"
#include "common/utf8.h"
#include "common/log.h"

/* Each connection's memory in libmicrohttpd: the headers, and the read buffer a body arrives through,
 * which grows into what the headers leave. It is also the largest header block a client can make the
 * server hold (libmicrohttpd answers 431 past it): at 1 MiB, 500 connections with 900 KB of unfinished
 * headers held 440 MB. 64 KiB bounds that to 32 MiB at max_connections' default, and still reads a body
 * in pieces of tens of KiB at the same pace: side by side on an H100, a 4K frame's 28 MB arrived in 11.8
 * and 9.7 ms p50 against 11.6 and 10.3 ms at 1 MiB (docs/BENCHMARKS.md, "The hardened request path"). */
#define HP_HTTP_CONNECTION_MEMORY (64u << 10)

/* A body read only to be dropped (its request refused from the headers, over a limit, or sent to a route
 * that takes none) is read up to this, then the connection is closed: enough for a client that writes a 4K
 * frame's body before it reads the answer to see that answer, not a way to make the server read gigabytes. */
#define HP_HTTP_DISCARD_MAX ((uint64_t)64 << 20)

/* --- Routes ------------------------------------------------------------------------------------------ */

/* Answered without the bearer token: the health checks, and /metrics when the daemon says so. */
static bool route_open(const hp_http_params *params, const hp_route *route)
{
    return route->open || (params->metrics_open && route->metrics);
}

/* Which listener a request came in on, as the closure libmicrohttpd hands on_request: set before that
 * listener's threads start, so a request reads it without a race. (Comparing the connection's daemon with
 * probe_mhd did race: probe_mhd is written once the probe's MHD_start_daemon returns, while the API's
 * threads already answer; ThreadSanitizer found it, issue 38.) */
typedef struct listener {
    struct hp_http *http;
    bool probe;
} listener;

struct hp_http {
    struct MHD_Daemon *mhd;
    struct MHD_Daemon *probe_mhd; /* the probe listener's, or NULL */
    listener api_listener, probe_listener;
    hp_guard *guard;              /* the API's connections */
    hp_guard *probe_guard;        /* the probe listener's */
    hp_budget *budget;            /* bytes held by requests in flight (the daemon's; may be NULL) */
    hp_http_params params;
    char address[INET6_ADDRSTRLEN + 8];
    char probe_address[INET6_ADDRSTRLEN + 8];
    _Atomic int state; /* hp_service_state */

    /* Requests between their first callback and their completion, for the drain at shutdown. */
    pthread_mutex_t lock;
    pthread_cond_t idle; /* signalled when in_flight drops to 0 */
    unsigned in_flight;
    bool trim_due;           /* requests have ended since the heap was last trimmed */
    struct timespec idle_since; /* when in_flight last fell to 0 */
    hp_deferred_list deferred; /* deferred replies not yet freed, for a drain that times out */

    _Atomic unsigned long long id_counter; /* request ids when getrandom() fails */
    char *auth_token;                      /* NULL: no authentication */
    bool tls;
    hp_http_backend backend;
    _Atomic bool backend_set; /* backend is whole (hp_http_set_backend) */
    bool local_names_only;    /* no token and a loopback listener: Host must name this machine (host_problem) */
    char *allowed_origins;    /* allowed_origins' copy: origins besides the daemon's own; NULL: none */
    hp_trusted_proxies trusted; /* trusted_proxies, parsed */
    struct timespec created; /* CLOCK_MONOTONIC */
};

/* The server answers (health checks, /v1/stats for a console already open) while the daemon is still
 * starting, so the backend is published once, whole: a route sees the empty one or the one set, never a
 * copy half made (release here, acquire in hp_http_get_backend). */
void hp_http_set_backend(hp_http *http, const hp_http_backend *backend)
{
    http->backend = *backend;
    atomic_store_explicit(&http->backend_set, true, memory_order_release);
}
static double ms_since(const struct timespec *t0);
bool hp_http_console(const hp_http *http) { return http->params.console; }
bool hp_http_metrics_open(const hp_http *http) { return http->params.metrics_open; }
const char *hp_http_version(const hp_http *http) { return http->params.version ? http->params.version : "unknown"; }
double hp_http_uptime_s(const hp_http *http) { return ms_since(&http->created) / 1e3; }
const hp_http_backend *hp_http_get_backend(const hp_http *http)
{
    static const hp_http_backend none = {0};
    return atomic_load_explicit(&http->backend_set, memory_order_acquire) ? &http->backend : &none;
}

const char *hp_service_state_name(hp_service_state state)
{
    switch (state) {
    case HP_SERVICE_STARTING: return "starting";
    case HP_SERVICE_READY: return "ready";
    case HP_SERVICE_DRAINING: return "draining";
    case HP_SERVICE_DEVICE_LOST: return "device_lost";
    }
    return "unknown";
}

void hp_http_set_state(hp_http *http, hp_service_state state) { atomic_store(&http->state, (int)state); }
bool hp_http_advance_state(hp_http *http, hp_service_state from, hp_service_state to)
{
    int expected = (int)from;
    return atomic_compare_exchange_strong(&http->state, &expected, (int)to);
}
hp_service_state hp_http_get_state(const hp_http *http)
{
    return (hp_service_state)atomic_load(&http->state);
}
const char *hp_http_address(const hp_http *http) { return http->address; }
bool hp_http_accepting(const hp_http *http) { return !http->guard || hp_guard_accepting(http->guard); }
void hp_http_connections(const hp_http *http, unsigned *open, uint64_t *evicted)
{
    *open = 0, *evicted = 0;
    if (http->guard)
        hp_guard_counts(http->guard, open, evicted);
}
const char *hp_http_probe_address(const hp_http *http) { return http->probe_mhd ? http->probe_address : NULL; }

/* --- Listen address ---------------------------------------------------------------------------------- */

hp_code hp_listen_addr_parse(const char *text, hp_listen_addr *out, hp_err *err)
{
    static const char expected[] = "expected HOST:PORT with a numeric IPv4 address or a bracketed IPv6 "
                                   "address, e.g. 127.0.0.1:8080, 0.0.0.0:8080 or [::1]:8080";
    memset(out, 0, sizeof(*out));
    char host[INET6_ADDRSTRLEN + 1];
    const char *port_text;

    if (text[0] == '[') {
        const char *close = strchr(text, ']');
        if (!close || close[1] != ':' || (size_t)(close - text - 1) >= sizeof(host))
            return hp_fail(err, HP_ERR_INVALID_ARGUMENT, "%s", expected);
        memcpy(host, text + 1, (size_t)(close - text - 1));
        host[close - text - 1] = '\0';
        port_text = close + 2;
        out->family = AF_INET6;
    } else {
        const char *colon = strrchr(text, ':');
        if (!colon || strchr(text, ':') != colon || (size_t)(colon - text) >= sizeof(host))
            return hp_fail(err, HP_ERR_INVALID_ARGUMENT, "%s", expected);
        memcpy(host, text, (size_t)(colon - text));
        host[colon - text] = '\0';
        port_text = colon + 1;
        out->family = AF_INET;
    }

    char *end;
    errno = 0;
    long port = strtol(port_text, &end, 10);
    if (port_text[0] < '0' || port_text[0] > '9' || *end != '\0' || errno == ERANGE || port < 0 || port > 65535)
        return hp_fail(err, HP_ERR_INVALID_ARGUMENT, "port \"%s\" is not a number from 0 to 65535; %s", port_text,
                       expected);
    out->port = (uint16_t)port;

    if (out->family == AF_INET) {
        struct sockaddr_in *sin = (struct sockaddr_in *)&out->addr;
        sin->sin_family = AF_INET;
        sin->sin_port = htons(out->port);
        if (inet_pton(AF_INET, host, &sin->sin_addr) != 1)
            return hp_fail(err, HP_ERR_INVALID_ARGUMENT, "\"%s\" is not an IPv4 address; %s", host, expected);
        out->addr_len = sizeof(*sin);
    } else {
        struct sockaddr_in6 *sin6 = (struct sockaddr_in6 *)&out->addr;
        sin6->sin6_family = AF_INET6;
        sin6->sin6_port = htons(out->port);
        if (inet_pton(AF_INET6, host, &sin6->sin6_addr) != 1)
            return hp_fail(err, HP_ERR_INVALID_ARGUMENT, "\"%s\" is not an IPv6 address; %s", host, expected);
        out->addr_len = sizeof(*sin6);
    }
    return HP_OK;
}

static void format_address(const struct sockaddr_storage *ss, char *out, size_t size)
{
    char host[INET6_ADDRSTRLEN] = "?";
    if (ss->ss_family == AF_INET6) {
        const struct sockaddr_in6 *sin6 = (const struct sockaddr_in6 *)ss;
        inet_ntop(AF_INET6, &sin6->sin6_addr, host, sizeof(host));
        snprintf(out, size, "[%s]:%u", host, ntohs(sin6->sin6_port));
    } else {
        const struct sockaddr_in *sin = (const struct sockaddr_in *)ss;
        inet_ntop(AF_INET, &sin->sin_addr, host, sizeof(host));
        snprintf(out, size, "%s:%u", host, ntohs(sin->sin_port));
    }
}

/* We bind the socket ourselves rather than let libmicrohttpd do it: its failure is a log line, ours is
 * an errno we can turn into a sentence the operator can act on. */
static hp_code open_listen_socket(const hp_listen_addr *la, const char *text, int *out, hp_err *err)
{
    int fd = socket(la->family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (fd < 0)
        return hp_fail(err, HP_ERR_IO, "cannot listen on %s: socket: %s", text, strerror(errno));
    int one = 1;
    /* A restart must not wait out TIME_WAIT from the previous process's connections. */
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    /* "[::]:8080" means IPv6 only, whatever net.ipv6.bindv6only says on this host. */
    if (la->family == AF_INET6)
        setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof(one));

    if (bind(fd, (const struct sockaddr *)&la->addr, la->addr_len) != 0) {
        int e = errno;
        close(fd);
        const char *hint = e == EADDRINUSE      ? ": another process (another hdrpostd?) holds it; choose another "
                                                  "port with --listen"
                           : e == EADDRNOTAVAIL ? ": no interface of this host has that address"
                           : e == EACCES        ? ": ports below 1024 need CAP_NET_BIND_SERVICE"
                                                : "";
        return hp_fail(err, HP_ERR_IO, "cannot listen on %s: %s%s", text, strerror(e), hint);
    }
    if (listen(fd, SOMAXCONN) != 0) {
        int e = errno;
        close(fd);
        return hp_fail(err, HP_ERR_IO, "cannot listen on %s: %s", text, strerror(e));
    }
    *out = fd;
    return HP_OK;
}

/* --- Requests ---------------------------------------------------------------------------------------- */

static bool request_id_is_sane(const char *id)
{
    size_t n = strlen(id);
    if (n == 0 || n > HP_REQUEST_ID_MAX)
        return false;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)id[i];
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || strchr("._:@/+=-", c)))
            return false;
    }
    return true;
}

static void request_id_make(hp_http *http, char *out, size_t size)
{
    uint64_t r;
    if (getrandom(&r, sizeof(r), GRND_NONBLOCK) != (ssize_t)sizeof(r))
        r = ((uint64_t)getpid() << 40) ^ atomic_fetch_add(&http->id_counter, 1);
    snprintf(out, size, "%016llx", (unsigned long long)r);
}

/* Client-controlled text (a decoded path may hold a newline) is escaped before it reaches the log. */
static void log_safe(const char *in, char *out, size_t size)
{
    size_t n = 0;
    for (; *in && n + 5 < size; in++) {
        unsigned char c = (unsigned char)*in;
        if (c < 0x20 || c >= 0x7f || c == '"' || c == '\\')
            n += (size_t)snprintf(out + n, size - n, "\\x%02x", c);
        else
            out[n++] = (char)c;
    }
    out[n] = '\0';
}

static double ms_since(const struct timespec *t0)
{
    struct timespec t1;
    clock_gettime(CLOCK_MONOTONIC, &t1);
    return (double)(t1.tv_sec - t0->tv_sec) * 1e3 + (double)(t1.tv_nsec - t0->tv_nsec) / 1e6;
}

/* Whether the live window (api/http/live_stats.h) takes this request: the work (frames posted) and the errors
 * someone should look at. Not the probe listener's requests, not the health checks (503 all through a start
 * is the state, which /v1/stats shows), and not a 401: a console tab left without its token polls every two
 * seconds, and anyone who reaches the port could otherwise fill the operator's list of errors with text of
 * their choosing. /metrics counts every request. */
static bool live_counts(const hp_request *req, unsigned status)
{
    if (req->probe || status == 401 || !strcmp(req->path, "/livez") || !strcmp(req->path, "/readyz"))
        return false;
    bool frame = req->route && req->route->frame;
    return frame || status >= 400;
}

/* An error answer for the live view's recent errors: its code and message. */
static void note_error(const hp_request *req, const hp_reply *reply)
{
    json_t *e = reply->status >= 400 && reply->body ? json_object_get(reply->body, "error") : NULL;
    if (!json_is_object(e) || !live_counts(req, reply->status))
        return;
    hp_live_error(reply->status, json_string_value(json_object_get(e, "code")),
                  json_string_value(json_object_get(e, "message")), req->path);
}

static bool from_trusted_proxy(const hp_request *req);

static bool has_header(const hp_reply *reply, const char *name)
{
    for (unsigned i = 0; i < reply->header_count; i++)
        if (!strcasecmp(reply->headers[i].name, name))
            return true;
    return false;
}

/* A replica whose GPU is lost tells a client behind a proxy "again in a second": the proxy takes it out of the
 * rotation at its next health checks (/readyz is 503 too; 2 s with deploy/replicas.py's haproxy.cfg), and the
 * frame sent again goes to another replica. Only for a frame's route, relayed: from a trusted proxy
 * (trusted_proxies) with X-Forwarded-For, as HAProxy's option forwardfor sends it. To a client talking to it
 * directly, on any address, the 503 has no Retry-After: this process takes no frame again, and hdrpost leaves it
 * for the run (client/servers.h). hdrpost reads a device_lost with Retry-After as a failure to retry (counted
 * against --retries), never as a wait. */
static void device_lost_behind_proxy(hp_request *req, hp_reply *reply)
{
    if (reply->status != 503 || !req->connection || !req->route || !req->route->frame ||
        has_header(reply, "Retry-After") ||
        !MHD_lookup_connection_value(req->connection, MHD_HEADER_KIND, "X-Forwarded-For"))
        return;
    json_t *e = reply->body ? json_object_get(reply->body, "error") : NULL;
    const char *code = json_string_value(json_object_get(e, "code"));
    bool lost = hp_http_get_state(req->http) == HP_SERVICE_DEVICE_LOST || (code && !strcmp(code, "device_lost"));
    if (lost && from_trusted_proxy(req))
        hp_reply_header_add(reply, "Retry-After", "1");
}

static enum MHD_Result send_reply(hp_request *req, hp_reply *reply)
{
    /* Used when the body cannot be built (out of memory): a constant needs no allocation. */
    static const char fallback[] =
        "{\"error\":{\"code\":\"internal_error\",\"message\":\"cannot build the response\",\"field\":null}}\n";

    note_error(req, reply);
    device_lost_behind_proxy(req, reply);
    char *text = reply->body ? json_dumps(reply->body, JSON_COMPACT) : NULL;
    struct MHD_Response *resp = NULL;
    unsigned status = reply->status;
    const char *content_type = "application/json";
    if (reply->bytes) {
        /* An owned body (the PNG finished where the GPU wrote it, in the request's pinned block) goes back
         * to its owner when libmicrohttpd is done sending it. */
        resp = reply->bytes_release
                   ? MHD_create_response_from_buffer_with_free_callback_cls(reply->bytes_len, reply->bytes,
                                                                            reply->bytes_release, reply->bytes_owner)
                   : MHD_create_response_from_buffer(reply->bytes_len, reply->bytes, MHD_RESPMEM_MUST_FREE);
        if (resp) {
            reply->bytes = NULL; /* libmicrohttpd frees it */
            reply->bytes_release = NULL;
            reply->bytes_owner = NULL;
            content_type = reply->content_type ? reply->content_type : "application/octet-stream";
        }
    } else if (text) {
        size_t len = strlen(text);
        char *body = malloc(len + 2);
        if (body) {
            memcpy(body, text, len);
            memcpy(body + len, "\n", 2);
            resp = MHD_create_response_from_buffer(len + 1, body, MHD_RESPMEM_MUST_FREE);
            if (!resp)
                free(body);
        }
        free(text);
    }
    if (!resp) {
        status = 500;
        reply->header_count = 0;
        resp = MHD_create_response_from_buffer(sizeof(fallback) - 1, (void *)fallback, MHD_RESPMEM_PERSISTENT);
        if (!resp)
            return MHD_NO;
    }

    MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, content_type);
    MHD_add_response_header(resp, "X-Request-Id", req->id);
    bool cache_control = false; /* a route may say its own (the console's files: revalidate by ETag) */
    for (unsigned i = 0; i < reply->header_count; i++)
        cache_control = cache_control || !strcasecmp(reply->headers[i].name, MHD_HTTP_HEADER_CACHE_CONTROL);
    if (!cache_control)
        MHD_add_response_header(resp, MHD_HTTP_HEADER_CACHE_CONTROL, "no-store");
    /* A browser takes every answer for what Content-Type says (the console reads them; an error's JSON is
     * never run as a script). */
    MHD_add_response_header(resp, "X-Content-Type-Options", "nosniff");
    for (unsigned i = 0; i < reply->header_count; i++)
        MHD_add_response_header(resp, reply->headers[i].name, reply->headers[i].value);
    /* While draining, a kept-alive connection is closed after its response, so the drain waits only for
     * requests already in flight and the stop that follows finds no connection mid-request. */
    if (hp_http_get_state(req->http) == HP_SERVICE_DRAINING)
        MHD_add_response_header(resp, MHD_HTTP_HEADER_CONNECTION, "close");

    enum MHD_Result ret = MHD_queue_response(req->connection, status, resp);
    MHD_destroy_response(resp);
    if (ret == MHD_YES) {
        req->status = status;
        hp_guard_replying(req->connection); /* a client that does not read it may be closed under pressure */
    }
    return ret;
}

/* "/console/" holds every path under it; "/" and the others only themselves. */
static bool route_path_matches(const char *route, const char *path)
{
    size_t n = strlen(route);
    return n > 1 && route[n - 1] == '/' ? strncmp(route, path, n) == 0 && path[n] : strcmp(route, path) == 0;
}

/* Finds the route and, for a path served by other methods only, the Allow list. */
static const hp_route *route_find(const hp_http *http, const char *method, const char *path, bool *path_known,
                                  char *allow, size_t allow_size)
{
    const hp_route *routes = http->params.routes;
    *path_known = false;
    size_t n = 0;
    allow[0] = '\0';
    for (size_t i = 0; i < http->params.route_count; i++) {
        if (!route_path_matches(routes[i].path, path))
            continue;
        *path_known = true;
        bool get = strcmp(routes[i].method, "GET") == 0;
        if (strcmp(routes[i].method, method) == 0 || (get && strcmp(method, "HEAD") == 0))
            return &routes[i];
        n += (size_t)snprintf(allow + n, allow_size - n, "%s%s%s", n ? ", " : "", routes[i].method,
                              get ? ", HEAD" : "");
        if (n >= allow_size)
            n = allow_size - 1;
    }
    return NULL;
}

/* A PEM file's text, NUL-terminated; NULL with errno set on failure. PEM files are small: capped at 1 MiB. */
static char *read_text_file(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    char *text = malloc((1 << 20) + 1);
    size_t n = text ? fread(text, 1, 1 << 20, f) : 0;
    bool ok = text && !ferror(f) && feof(f);
    fclose(f);
    if (!ok) {
        free(text);
        errno = EFBIG;
        return NULL;
    }
    text[n] = '\0';
    return text;
}

bool hp_http_is_tls(const hp_http *http) { return http->tls; }

/* The bearer token, compared in constant time so its length and content cannot be learnt from timing. */
static bool token_matches(hp_http *http, struct MHD_Connection *connection)
{
    const char *auth = MHD_lookup_connection_value(connection, MHD_HEADER_KIND, MHD_HTTP_HEADER_AUTHORIZATION);
    if (!auth || strncasecmp(auth, "Bearer ", 7) != 0)
        return false;
    const char *given = auth + 7;
    size_t want_len = strlen(http->auth_token), given_len = strlen(given);
    unsigned char diff = (unsigned char)(want_len != given_len);
    for (size_t i = 0; i < want_len; i++)
        diff |= (unsigned char)(http->auth_token[i] ^ (i < given_len ? given[i] : 0));
    return diff == 0;
}

/* Ends a body's arrival: a reader still waiting gives up, and what the route started early is dropped
 * (joined), so that the buffer can be freed or regrown. */
static void stop_arriving(hp_request *req)
{
    if (!req->arriving)
        return;
    hp_arrival_end(&req->arrival);
    if (req->early_drop)
        req->early_drop(req);
    req->early_drop = NULL;
    hp_arrival_destroy(&req->arrival);
    req->arriving = false;
}

bool hp_budget_refused(hp_http *http, uint64_t bytes, uint64_t held, const char *what, hp_reply *reply)
{
    hp_budget *b = http->budget;
    if (hp_budget_take(b, bytes))
        return false;
    double mib = 1.0 / (1 << 20);
    if (bytes + held > b->limit) { /* retrying can never help */
        hp_reply_error(reply, 413, "too_large", NULL, "%s needs %.1f MiB, and with what this request holds already "
                       "(%.1f MiB) that is more than the %.1f MiB all requests in flight may hold (max_inflight_mb)",
                       what, (double)bytes * mib, (double)held * mib, (double)b->limit * mib);
    } else {
        hp_reply_error(reply, 503, "memory_full", NULL, "%s needs %.1f MiB and requests in flight hold %.1f of the "
                       "%.1f MiB they may (max_inflight_mb); retry shortly", what, (double)bytes * mib,
                       (double)hp_budget_used(b) * mib, (double)b->limit * mib);
        hp_reply_header_add(reply, "Retry-After", "1");
    }
    return true;
}

struct hp_budget *hp_http_budget(hp_http *http) { return http->budget; }

/* The route for a request; on the probe listener only the health checks exist there. */
/* The route table's path that holds the request's path, whatever the method ("/console/" for each of the
 * console's files and for itself, as the label always was), for the requests' metrics; NULL: none. */
static const char *metrics_label(const hp_request *req)
{
    const hp_http_params *p = &req->http->params;
    for (size_t i = 0; req->path && i < p->route_count; i++)
        if (route_path_matches(p->routes[i].path, req->path) || strcmp(p->routes[i].path, req->path) == 0)
            return p->routes[i].path;
    return NULL;
}

static const hp_route *request_route(const hp_request *req, bool *path_known, char *allow, size_t allow_size)
{
    const hp_route *r = route_find(req->http, req->method, req->path, path_known, allow, allow_size);
    /* The probe listener answers the health checks and nothing else: not /metrics when it is open, and not the
     * console, whose files are open too (the probe address is often reachable from further away). */
    bool health = !strcmp(req->path, "/livez") || !strcmp(req->path, "/readyz");
    if (req->probe && !(r && health)) {
        /* /livez and /readyz are known there (405 for another method), nothing else is */
        *path_known = *path_known && health;
        return NULL;
    }
    return r;
}

/* First call: the headers are complete. The request object lives until on_completed. */
static hp_request *request_begin(hp_http *http, bool probe, struct MHD_Connection *connection, const char *method,
                                 const char *url)
{
    hp_request *req = calloc(1, sizeof(*req));
    if (!req)
        return NULL;
    req->http = http;
    req->deferreds = &http->deferred;
    req->connection = connection;
    req->method = method;
    req->path = url;
    req->probe = probe;
    char allow[128];
    req->route = request_route(req, &req->path_known, allow, sizeof(allow));
    clock_gettime(CLOCK_MONOTONIC, &req->started);
    const char *client_id = MHD_lookup_connection_value(connection, MHD_HEADER_KIND, "X-Request-Id");
    if (client_id && request_id_is_sane(client_id))
        snprintf(req->id, sizeof(req->id), "%s", client_id);
    else
        request_id_make(http, req->id, sizeof(req->id));
    pthread_mutex_lock(&http->lock);
    http->in_flight++;
    pthread_mutex_unlock(&http->lock);
    return req;
}

typedef struct header_counts {
    unsigned host, content_length, transfer_encoding, authorization;
} header_counts;

static enum MHD_Result count_header(void *cls, enum MHD_ValueKind kind, const char *key, const char *value)
{
    (void)kind, (void)value;
    header_counts *n = cls;
    n->host += strcasecmp(key, MHD_HTTP_HEADER_HOST) == 0;
    n->content_length += strcasecmp(key, MHD_HTTP_HEADER_CONTENT_LENGTH) == 0;
    n->transfer_encoding += strcasecmp(key, MHD_HTTP_HEADER_TRANSFER_ENCODING) == 0;
    n->authorization += strcasecmp(key, MHD_HTTP_HEADER_AUTHORIZATION) == 0;
    return MHD_YES;
}

/* Whether Host names this machine by loopback: "localhost", an IPv4 literal in 127.0.0.0/8 or "[::1]", any
 * port. A web page on another site that rebinds its own name to 127.0.0.1 still sends that name as Host
 * (DNS rebinding): with no token to stop it, only the Host tells it from the console's own page. */
static bool host_is_local(struct MHD_Connection *c)
{
    const char *host = MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_HOST);
    if (!host)
        return true;
    char name[256];
    size_t len = host[0] == '[' ? strcspn(host, "]") + 1 : strcspn(host, ":");
    if (len >= sizeof(name) || (host[len] && host[len] != ':'))
        return false;
    memcpy(name, host, len);
    name[len] = '\0';
    struct in_addr v4;
    if (!strcasecmp(name, "localhost") || !strcmp(name, "[::1]"))
        return true;
    return inet_pton(AF_INET, name, &v4) == 1 && (ntohl(v4.s_addr) >> 24) == 127;
}

/* What the request line held that libmicrohttpd let through (api/http/http_guard.h): a literal NUL or control
 * byte in the target, a %00, more query arguments than a connection can hold. False: none. */
static bool target_problem(hp_request *req, const char *version, hp_reply *reply)
{
    switch (hp_guard_target_problem(req->connection, version)) {
    case HP_TARGET_OK: return false;
    case HP_TARGET_ENCODED_NUL:
        hp_reply_error(reply, 400, "bad_url", NULL, "the path or query holds an encoded NUL (%%00)");
        break;
    case HP_TARGET_LITERAL_NUL:
        hp_reply_error(reply, 400, "bad_url", NULL, "the request target holds a NUL byte (the path would end there)");
        break;
    case HP_TARGET_CONTROL:
        hp_reply_error(reply, 400, "bad_url", NULL, "the request target holds a control byte (0x01-0x1f or 0x7f); "
                       "escape it as %%XX");
        break;
    case HP_TARGET_TOO_MANY_ARGS:
        hp_reply_error(reply, 400, "too_many_arguments", NULL, "the query has more than %d arguments; the API has "
                       "far fewer parameters (GET /v1/params)", HP_GUARD_QUERY_ARGS_MAX);
        break;
    }
    return true;
}

/* Transfer-Encoding as this server reads it: "chunked" alone, once. RFC 9112 6.1: chunked must be the final
 * coding and applied once, and a request whose chunked is not final is answered 400; libmicrohttpd reads
 * any other value as a body of unknown length and waited for the connection to close. */
static bool transfer_encoding_bad(struct MHD_Connection *c, unsigned count, hp_reply *reply)
{
    const char *te = MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_TRANSFER_ENCODING);
    if (count > 1)
        hp_reply_error(reply, 400, "bad_framing", NULL, "the request has %u Transfer-Encoding headers; send one, "
                       "\"chunked\"", count);
    else if (te && strcasecmp(te, "chunked") != 0)
        hp_reply_error(reply, 400, "bad_framing", NULL, "Transfer-Encoding \"%.64s\": this server takes \"chunked\" "
                       "alone (or a Content-Length)", te);
    else
        return false;
    return true;
}

/* Whether the request came through a proxy the daemon trusts (trusted_proxies). */
static bool from_trusted_proxy(const hp_request *req)
{
    if (!req->http->trusted.count)
        return false;
    const union MHD_ConnectionInfo *ai = MHD_get_connection_info(req->connection, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
    return ai && hp_trusted_proxies_has(&req->http->trusted, ai->client_addr);
}

/* Framing that libmicrohttpd accepts and a proxy in front may read otherwise (RFC 9112 6.3: more than one
 * Content-Length, or one beside Transfer-Encoding, is how requests are smuggled past a proxy), a missing or
 * repeated Host (RFC 9112 3.2: 400), a target libmicrohttpd would cut short, and two Authorization headers
 * (the first won: a proxy that checks the last would let another token through). Answered 400, and the
 * connection closed: what follows on it cannot be trusted to be a request. */
static bool header_problem(hp_request *req, const char *version, hp_reply *reply)
{
    header_counts n = {0};
    MHD_get_connection_values(req->connection, MHD_HEADER_KIND, count_header, &n);
    if (target_problem(req, version, reply))
        ;
    else if (n.content_length > 1)
        hp_reply_error(reply, 400, "bad_framing", NULL, "the request has %u Content-Length headers; send one",
                       n.content_length);
    else if (n.content_length && n.transfer_encoding)
        hp_reply_error(reply, 400, "bad_framing", NULL,
                       "the request has both Content-Length and Transfer-Encoding; send one of them");
    else if (transfer_encoding_bad(req->connection, n.transfer_encoding, reply))
        ;
    else if (n.host > 1)
        hp_reply_error(reply, 400, "bad_host", NULL, "the request has %u Host headers; send one", n.host);
    else if (!n.host && version && strcmp(version, MHD_HTTP_VERSION_1_0) != 0)
        hp_reply_error(reply, 400, "bad_host", NULL, "an %s request needs a Host header", version);
    else if (req->http->local_names_only && !req->probe && n.host && !host_is_local(req->connection))
        hp_reply_error(reply, 400, "bad_host", NULL,
                       "without an auth_token this daemon answers requests addressed to localhost, 127.0.0.1 or "
                       "[::1] only (so that a web page elsewhere cannot reach it by DNS rebinding); set auth_token "
                       "to serve other names");
    else if (n.authorization > 1)
        hp_reply_error(reply, 400, "bad_header", "Authorization", "the request has %u Authorization headers; send one",
                       n.authorization);
    else
        return false;
    hp_reply_header_add(reply, MHD_HTTP_HEADER_CONNECTION, "close");
    return true;
}

/* The length of n bytes ending in host[:port] without the scheme's default port, for comparing origins (a
 * browser never sends "http://host:80"; a Host header may). */
static size_t without_default_port(const char *text, size_t n, bool tls)
{
    const char *port = tls ? ":443" : ":80";
    size_t p = strlen(port);
    return n > p && !strncmp(text + n - p, port, p) && text[n - p - 1] != ':' ? n - p : n;
}

/* An origin's (scheme://host[:port]) length without its scheme's default port. */
static size_t origin_len(const char *origin, size_t n)
{
    return without_default_port(origin, n, n > 8 && !strncasecmp(origin, "https://", 8));
}

/* Whether origin is one of allowed_origins (comma- or space-separated; "*" allows every origin), the
 * scheme's default port written or not. */
static bool origin_listed(const char *list, const char *origin)
{
    size_t want = origin_len(origin, strlen(origin));
    for (const char *p = list ? list : ""; *p;) {
        p += strspn(p, ", \t");
        size_t n = strcspn(p, ", \t");
        if (n && ((n == 1 && *p == '*') || (origin_len(p, n) == want && strncasecmp(p, origin, want) == 0)))
            return true;
        p += n;
    }
    return false;
}

/* A browser says where a page came from in Origin (RFC 6454) on every cross-origin request, and on a
 * same-origin POST. A page on another site may send a "simple" POST (a form, text/plain) that no CORS
 * preflight stops: without a token it would render on this GPU. A foreign Origin is refused 403 unless
 * allowed_origins names it; the console's own page (Origin: the scheme and Host it was served from) and
 * clients that send no Origin (curl, hdrpost, render farm jobs) pass. */
static bool origin_refused(hp_request *req, hp_reply *reply)
{
    struct MHD_Connection *c = req->connection;
    const char *origin = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Origin");
    if (!origin || req->probe || origin_listed(req->http->allowed_origins, origin))
        return false;
    const char *host = MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_HOST);
    bool tls = req->http->tls;
    const char *scheme = tls ? "https://" : "http://";
    size_t sl = strlen(scheme);
    if (host && strncasecmp(origin, scheme, sl) == 0) {
        size_t ol = without_default_port(origin + sl, strlen(origin + sl), tls);
        size_t hl = without_default_port(host, strlen(host), tls);
        if (ol == hl && strncasecmp(origin + sl, host, hl) == 0)
            return false;
    }
    char shown[128];
    log_safe(origin, shown, sizeof(shown));
    hp_reply_error(reply, 403, "foreign_origin", "Origin", "requests from a page at %s are refused: this daemon "
                   "answers its own console and clients that send no Origin; allowed_origins names others", shown);
    return true;
}

static uint64_t declared_length(struct MHD_Connection *c)
{
    const char *len = MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_LENGTH);
    return len ? strtoull(len, NULL, 10) : 0;
}

/* A body this server will not read at all: 411 without a length, 413 over max_body_mb, or over what it reads
 * to drop for a route that takes none. Answered at once (the connection then closes: reading gigabytes to
 * refuse them helps nobody). */
static bool body_unreadable(hp_http *http, hp_request *req, const hp_route *r, hp_reply *reply)
{
    struct MHD_Connection *c = req->connection;
    const char *te = MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_TRANSFER_ENCODING);
    bool has_len = MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_LENGTH) != NULL;
    uint64_t len = declared_length(c);
    bool takes = r && r->takes_body;
    if (takes && !has_len && !(te && strcasestr(te, "chunked")))
        hp_reply_error(reply, 411, "length_required", NULL,
                       "%s needs a body with a Content-Length (or chunked transfer encoding)", req->path);
    else if (takes && len > http->params.max_body_bytes)
        hp_reply_error(reply, 413, "body_too_large", NULL, "the body is %llu bytes; this server accepts at most %llu "
                       "(max_body_mb)", (unsigned long long)len, (unsigned long long)http->params.max_body_bytes);
    else if (!takes && len > HP_HTTP_DISCARD_MAX)
        hp_reply_error(reply, 413, "body_too_large", NULL, "%s %s takes no body, and this one is %llu bytes",
                       req->method, req->path, (unsigned long long)len);
    else
        return false;
    return true;
}

/* Admission from the headers, before any of the body is stored or decoded (under overload, a full queue
 * answered only after the frame was decoded halved the frames served): 401 without the token, 503 while
 * not ready, 429 with the queue full, 503 or 413 when the memory budget cannot take the body. Otherwise the
 * body's bytes are taken from the budget: twice its length for a form, whose frame part is copied. */
/* A route that needs the token, asked without it: 401. Without a token at all, the daemon serves this machine
 * alone (it listens on loopback: local_names_only), and a request relayed by a trusted proxy may come from
 * anywhere (HAProxy on 0.0.0.0 in front of replicas on 127.0.0.1): 403 then, the open routes (health,
 * metrics where open) still answered, so that the proxy's health checks work. True when refused. */
static bool unauthenticated(hp_http *http, hp_request *req, const hp_route *r, hp_reply *reply)
{
    if (route_open(&http->params, r))
        return false;
    if (http->auth_token && !token_matches(http, req->connection)) {
        hp_reply_error(reply, 401, "unauthorized", NULL, "this server needs \"Authorization: Bearer <token>\"");
        hp_reply_header_add(reply, MHD_HTTP_HEADER_WWW_AUTHENTICATE, "Bearer");
        return true;
    }
    if (!http->auth_token && http->local_names_only && from_trusted_proxy(req)) {
        hp_reply_error(reply, 403, "proxy_needs_token", NULL,
                       "without an auth_token this daemon serves this machine alone, and a request relayed by a "
                       "proxy (trusted_proxies) may come from anywhere: set auth_token to serve through it");
        return true;
    }
    return false;
}

static bool body_inadmissible(hp_http *http, hp_request *req, const hp_route *r, hp_reply *reply)
{
    struct MHD_Connection *c = req->connection;
    const char *len = MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_LENGTH);
    const char *ctype = MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_TYPE);
    req->body_factor = ctype && strncasecmp(ctype, "multipart/form-data", 19) == 0 ? 2 : 1;
    uint64_t charge = (len ? strtoull(len, NULL, 10) : 0) * req->body_factor;
    const hp_http_backend *be = &http->backend;
    hp_service_state state = hp_http_get_state(http);
    if (unauthenticated(http, req, r, reply)) {
        /* answered */
    } else if (state != HP_SERVICE_READY && state != HP_SERVICE_DRAINING) {
        hp_reply_error(reply, 503, "not_ready", NULL, "%s: this server takes no frames now",
                       hp_service_state_name(state));
        if (state == HP_SERVICE_STARTING)
            hp_reply_header_add(reply, "Retry-After", "1");
    } else if (be->queue_depth && be->queue_capacity && be->queue_depth(be->ctx) >= be->queue_capacity(be->ctx)) {
        hp_reply_error(reply, 429, "queue_full", NULL, "the queue is full (%u frames waiting); retry shortly",
                       be->queue_depth(be->ctx));
        hp_reply_header_add(reply, "Retry-After", "1");
    } else if (!hp_budget_refused(http, charge, 0, "the body", reply)) {
        req->budget_bytes = charge;
        return false;
    }
    return true;
}

/* Whether the client waits for "100 Continue" before it sends its body (RFC 9110 10.1.1): it can then be
 * answered from the headers. A client that sends its body at once is answered once the body is in
 * (discarded as it arrives): many (Python's http.client, urllib) write the whole body before they read,
 * and see only a broken pipe if the answer comes first and the connection closes under them. */
static bool expects_continue(struct MHD_Connection *c)
{
    const char *expect = MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_EXPECT);
    return expect && strcasecmp(expect, "100-continue") == 0;
}

static bool body_declared(struct MHD_Connection *c)
{
    const char *len = MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_LENGTH);
    return MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_TRANSFER_ENCODING) ||
           (len && strtoull(len, NULL, 10) > 0);
}

/* Reserves a declared length's buffer at once and tells the route (it may read the body as it arrives).
 * Not with Transfer-Encoding as well: libmicrohttpd then reads chunks past the declared length, and the
 * buffer an early reader holds would be regrown under it. */
static void body_reserve(hp_request *req, const hp_route *r)
{
    struct MHD_Connection *c = req->connection;
    const char *len = MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_LENGTH);
    const char *te = MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_TRANSFER_ENCODING);
    size_t want = len ? (size_t)strtoull(len, NULL, 10) : 0;
    if (want > 0 && !te && r->body_begins && (req->body = hp_bigbuf_get(want)) != NULL) {
        req->body_cap = want;
        req->arriving = true;
        hp_arrival_init(&req->arrival);
        r->body_begins(req);
    }
}

static enum MHD_Result send_now(hp_request *req, hp_reply *reply)
{
    enum MHD_Result ret = send_reply(req, reply);
    hp_reply_release(reply);
    return ret;
}

/* A refusal from the headers: answered now to a client waiting for 100 Continue or sending no body, else once
 * its body, discarded as it arrives, is in. */
static enum MHD_Result refuse_after_body(hp_request *req, hp_reply *refusal)
{
    if (expects_continue(req->connection) || !body_declared(req->connection) ||
        declared_length(req->connection) > HP_HTTP_DISCARD_MAX)
        return send_now(req, refusal);
    req->refusal = *refusal;
    return MHD_YES;
}

static enum MHD_Result on_headers(hp_http *http, hp_request *req, const char *version)
{
    const hp_route *r = req->route;
    hp_reply early = {0};
    /* Any body is timed as it arrives, read or discarded, on every route (the guard). */
    hp_guard_headers_in(req->connection, body_declared(req->connection));
    if (header_problem(req, version, &early) || body_unreadable(http, req, r, &early))
        return send_now(req, &early);
    if (origin_refused(req, &early))
        return refuse_after_body(req, &early);
    if (!r || !r->takes_body)
        return MHD_YES;
    if (body_inadmissible(http, req, r, &early))
        return refuse_after_body(req, &early);
    body_reserve(req, r);
    return MHD_YES;
}

/* Drops the body read so far: too large, or over the budget; the rest is discarded as it arrives. */
static void body_drop(hp_request *req)
{
    hp_bigbuf_put(req->body);
    req->body = NULL;
    req->body_len = req->body_cap = 0;
}

/* Room for `need` bytes of body: the declared length sizes the buffer once, a chunked body grows it by
 * doubling, each growth taken from the budget as it comes (a declared length was at its headers). A
 * frame-sized body comes from the pool of warm buffers (common/bigbuf.h): a fresh mapping of 28 MB would be
 * paged in again for every request. False when out of memory. */
static bool body_grow(hp_http *http, hp_request *req, size_t need)
{
    const char *len = MHD_lookup_connection_value(req->connection, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_LENGTH);
    size_t want = len ? (size_t)strtoull(len, NULL, 10) : 0;
    size_t cap = req->body_cap ? req->body_cap * 2 : 1 << 20;
    if (want > cap)
        cap = want;
    while (cap < need)
        cap *= 2;
    uint64_t charge = (uint64_t)cap * req->body_factor;
    if (charge > req->budget_bytes) {
        if (!hp_budget_take(http->budget, charge - req->budget_bytes)) {
            req->budget_full = true;
            req->budget_never = charge > http->budget->limit; /* 413: no retry would fit it */
            body_drop(req);
            return true;
        }
        req->budget_bytes = charge;
    }
    uint8_t *grown = hp_bigbuf_get(cap);
    if (!grown)
        return false;
    if (req->body_len)
        memcpy(grown, req->body, req->body_len);
    hp_bigbuf_put(req->body);
    req->body = grown;
    req->body_cap = cap;
    return true;
}

/* A piece of a request's body: stored for a route that takes one and an admitted request, else dropped
 * (timed by the guard either way). */
static enum MHD_Result on_body_piece(hp_http *http, hp_request *req, const char *data, size_t n)
{
    const hp_route *r = req->route;
    hp_guard_body_bytes(req->connection, n);
    if (!r || !r->takes_body || req->status != 0 || req->body_too_large || req->budget_full || req->refusal.status) {
        req->discarded += n;
        return req->discarded <= HP_HTTP_DISCARD_MAX ? MHD_YES : MHD_NO; /* MHD_NO: closed, unanswered */
    }
    /* More than the declared length (it should not happen: see the first call): whoever reads the body as it
     * arrives stops before the buffer is regrown or freed. */
    if (req->arriving && req->body_len + n > req->body_cap)
        stop_arriving(req);
    if (req->body_len + n > http->params.max_body_bytes) {
        req->body_too_large = true; /* chunked bodies are only judged as they arrive */
        body_drop(req);
        return MHD_YES;
    }
    if (req->body_len + n > req->body_cap && !body_grow(http, req, req->body_len + n))
        return MHD_NO;
    if (req->budget_full)
        return MHD_YES;
    memcpy(req->body + req->body_len, data, n);
    req->body_len += n;
    if (req->arriving)
        hp_arrival_add(&req->arrival, req->body_len);
    return MHD_YES;
}

/* A suspended request resumed: its deferred reply is ready (hp_deferred_complete). */
static enum MHD_Result on_resumed(hp_request *req)
{
    if (!hp_deferred_ready(req->slot) || req->status != 0)
        return MHD_YES;
    enum MHD_Result ret = send_reply(req, &req->deferred_reply);
    hp_reply_release(&req->deferred_reply);
    return ret;
}

/* The whole request is in: refused from its headers, refused for its body, or handed to its route (which
 * answers now or defers its reply, suspending the connection). */
static enum MHD_Result on_body_in(hp_http *http, hp_request *req)
{
    struct MHD_Connection *connection = req->connection;
    const char *method = req->method, *url = req->path;
    hp_guard_body_in(connection);
    if (req->refusal.status)
        return send_now(req, &req->refusal);
    clock_gettime(CLOCK_MONOTONIC, &req->body_done);
    if (req->arriving)
        hp_arrival_end(&req->arrival);

    hp_reply reply = {0};
    bool path_known = req->path_known;
    char allow[128] = "";
    const hp_route *route = req->route;
    if (!route && path_known) /* the Allow list for the 405, only then */
        request_route(req, &path_known, allow, sizeof(allow));
    if (route && unauthenticated(http, req, route, &reply)) {
        /* answered */
    } else if (route && route->takes_body && req->budget_never) {
        hp_reply_error(&reply, 413, "too_large", NULL, "the body is more than the %.1f MiB that all requests in "
                       "flight may hold (max_inflight_mb)", (double)http->budget->limit / (1 << 20));
    } else if (route && route->takes_body && req->budget_full) {
        hp_reply_error(&reply, 503, "memory_full", NULL, "the body outgrew what requests in flight may hold now "
                       "(max_inflight_mb); retry shortly");
        hp_reply_header_add(&reply, "Retry-After", "1");
    } else if (route && route->takes_body && req->body_too_large) {
        hp_reply_error(&reply, 413, "body_too_large", NULL, "the body is over %llu bytes (max_body_mb)",
                       (unsigned long long)http->params.max_body_bytes);
    } else if (route) {
        route->handler(req, &reply);
        if (req->deferred) {
            hp_reply_release(&reply);
            hp_deferred_suspend(req);
            return MHD_YES;
        }
    } else if (path_known) {
        hp_reply_error(&reply, 405, "method_not_allowed", NULL, "%s is not allowed on %s; allowed: %s", method, url,
                       allow);
        hp_reply_header_add(&reply, MHD_HTTP_HEADER_ALLOW, "%s", allow);
    } else {
        hp_reply_error(&reply, 404, "not_found", NULL, "no such endpoint: %s", url);
    }
    enum MHD_Result ret = send_reply(req, &reply);
    hp_reply_release(&reply);
    return ret;
}


static enum MHD_Result on_request(void *cls, struct MHD_Connection *connection, const char *url,
                                  const char *method, const char *version, const char *upload_data,
                                  size_t *upload_data_size, void **req_cls)
{
    const listener *from = cls;
    hp_http *http = from->http;
    hp_request *req = *req_cls;

    if (!req) {
        if (hp_guard_refused(connection) || !(req = request_begin(http, from->probe, connection, method, url)))
            return MHD_NO;
        *req_cls = req;
        return on_headers(http, req, version);
    }

    if (*upload_data_size != 0) {
        size_t n = *upload_data_size;
        *upload_data_size = 0;
        return on_body_piece(http, req, upload_data, n);
    }
    if (req->deferred)
        return on_resumed(req);
    if (req->status != 0)
        return MHD_YES;
    return on_body_in(http, req);
}


/* The request's X-Forwarded-For lines in order (RFC 9110 5.3: one list): a client may send its own, and the
 * proxy adds another after it (HAProxy's option forwardfor), so the first line alone would be the client's
 * word. Read from the last line back: only the right-hand end matters, however long the client's part. */
typedef struct forwarded_lines {
    const char *line[32];
    unsigned count;
} forwarded_lines;

static enum MHD_Result collect_forwarded(void *cls, enum MHD_ValueKind kind, const char *key, const char *value)
{
    (void)kind;
    forwarded_lines *f = cls;
    if (key && value && strcasecmp(key, "X-Forwarded-For") == 0) {
        if (f->count == sizeof(f->line) / sizeof(f->line[0])) /* keep the last ones: the proxies' */
            memmove(f->line, f->line + 1, sizeof(f->line) - sizeof(f->line[0])), f->count--;
        f->line[f->count++] = value;
    }
    return MHD_YES;
}

/* " for CLIENT" where a trusted proxy (trusted_proxies) passed the client on in X-Forwarded-For: the log line
 * then names the client, not the proxy; "" otherwise. */
static void forwarded_client(const hp_request *req, char *out, size_t size)
{
    out[0] = '\0';
    if (!req->connection || !from_trusted_proxy(req))
        return;
    forwarded_lines f = {.count = 0};
    MHD_get_connection_values(req->connection, MHD_HEADER_KIND, collect_forwarded, &f);
    char addr[64];
    for (unsigned i = f.count; i-- > 0;) {
        hp_xff_result r = hp_trusted_proxies_client(&req->http->trusted, f.line[i], addr, sizeof(addr));
        if (r == HP_XFF_FOUND)
            snprintf(out, size, " for %s", addr);
        if (r != HP_XFF_ONLY_PROXIES)
            return;
    }
}

static void on_completed(void *cls, struct MHD_Connection *connection, void **req_cls,
                         enum MHD_RequestTerminationCode toe)
{
    hp_http *http = cls;
    hp_request *req = *req_cls;
    if (!req)
        return;

    static const char *const reasons[] = {
        [MHD_REQUEST_TERMINATED_WITH_ERROR] = " (connection error)",
        [MHD_REQUEST_TERMINATED_TIMEOUT_REACHED] = " (timed out)",
        [MHD_REQUEST_TERMINATED_DAEMON_SHUTDOWN] = " (server stopped)",
        [MHD_REQUEST_TERMINATED_READ_ERROR] = " (client went away)",
        [MHD_REQUEST_TERMINATED_CLIENT_ABORT] = " (client aborted)",
    };
    const char *reason = "";
    if (toe != MHD_REQUEST_TERMINATED_COMPLETED_OK && (size_t)toe < sizeof(reasons) / sizeof(reasons[0]) &&
        reasons[toe])
        reason = reasons[toe];
    char method[64], path[512], client[80] = "";
    log_safe(req->method, method, sizeof(method));
    log_safe(req->path, path, sizeof(path));
    forwarded_client(req, client, sizeof(client));
    hp_info("http: id=%s %s %s %zu bytes%s%s %u %.2f ms%s%s", req->id, method, path, req->body_len,
            req->log_note[0] ? " " : "", req->log_note, req->status, ms_since(&req->started), reason, client);
    hp_metrics_request(metrics_label(req), req->status);
    if (live_counts(req, req->status))
        hp_live_request(req->status);
    if (req->slot)
        hp_deferred_request_gone(req->slot);
    /* A body cut off: an early reader stops waiting, and is dropped (counted as a client gone when it was). */
    req->client_left = toe == MHD_REQUEST_TERMINATED_READ_ERROR || toe == MHD_REQUEST_TERMINATED_CLIENT_ABORT;
    stop_arriving(req);
    hp_bigbuf_put(req->body);
    hp_budget_give(http->budget, req->budget_bytes);
    hp_guard_request_done(connection);
    hp_reply_release(&req->deferred_reply);
    hp_reply_release(&req->refusal);
    free(req);
    *req_cls = NULL;

    pthread_mutex_lock(&http->lock);
    if (--http->in_flight == 0) {
        pthread_cond_broadcast(&http->idle);
        http->trim_due = true;
        clock_gettime(CLOCK_MONOTONIC, &http->idle_since);
    }
    pthread_mutex_unlock(&http->lock);
}

/* The C heap given back to the system once requests have stopped for HP_HTTP_TRIM_IDLE_MS (the guard's tick).
 * glibc's malloc keeps what its arenas freed for reuse, one arena per thread that allocated at once (up to
 * 8 per core): after a 2-minute soak of mixed requests the process kept 476-492 MB against 192 at start,
 * most of it free in those arenas (docs/SECURITY.md, "Memory after a load"). malloc_trim(0) returns every
 * arena's free pages; between requests nothing is lost but the next allocation's page faults. */
#define HP_HTTP_TRIM_IDLE_MS 1000.0

static void idle_tick(void *ctx)
{
    hp_http *http = ctx;
    pthread_mutex_lock(&http->lock);
    bool due = http->trim_due && http->in_flight == 0 && ms_since(&http->idle_since) >= HP_HTTP_TRIM_IDLE_MS;
    if (due)
        http->trim_due = false;
    pthread_mutex_unlock(&http->lock);
    if (due)
        malloc_trim(0);
}

/* libmicrohttpd's messages (MHD_USE_ERROR_LOG) go to our log, without their trailing newline. Most are
 * about one client's connection (dropped, malformed, over a limit), which any client can cause as often as
 * it likes: at most 20 lines in 10 s, the rest counted (hdrpost_log_lines_suppressed_total) and summed up
 * in one line. Connections refused at a limit or for their framing are counted by reason as well. */
static void on_mhd_log(void *cls, const char *fmt, va_list ap)
{
    (void)cls;
    static hp_ratelimit limit = HP_RATELIMIT_INIT(10.0, 20);
    char line[1024];
    vsnprintf(line, sizeof(line), fmt, ap);
    size_t n = strlen(line);
    while (n && (line[n - 1] == '\n' || line[n - 1] == '\r'))
        line[--n] = '\0';
    if (strstr(line, "connection limit") || strstr(line, "per-IP"))
        hp_metrics_connection_closed("limit");
    else if (strstr(line, "Error processing request")) /* one per refused request (a "Failed to parse" may precede) */
        hp_metrics_connection_closed("protocol");
    uint64_t left_out = 0;
    bool allowed = hp_ratelimit_allow(&limit, &left_out);
    if (left_out)
        hp_warn("http: libmicrohttpd: %llu more message(s) left out of the log in 10 s (rate limit)",
                (unsigned long long)left_out);
    if (allowed)
        hp_warn("http: libmicrohttpd: %s", line);
    else
        hp_metrics_log_suppressed(1);
}

/* --- Lifetime ---------------------------------------------------------------------------------------- */

/* Parses and binds an address; address gets what was bound (the kernel's port for port 0). */
/* Whether the socket is bound to a loopback address (127.0.0.0/8, ::1). */
static bool fd_is_loopback(int fd)
{
    struct sockaddr_storage ss;
    socklen_t len = sizeof(ss);
    if (getsockname(fd, (struct sockaddr *)&ss, &len) != 0)
        return false;
    if (ss.ss_family == AF_INET)
        return (ntohl(((const struct sockaddr_in *)&ss)->sin_addr.s_addr) >> 24) == 127;
    return ss.ss_family == AF_INET6 && IN6_IS_ADDR_LOOPBACK(&((const struct sockaddr_in6 *)&ss)->sin6_addr);
}

static hp_code bind_listener(const char *text, int *fd, int *family, char *address, size_t address_size,
                             hp_err *err)
{
    hp_listen_addr la;
    hp_code code = hp_listen_addr_parse(text, &la, err);
    if (code != HP_OK || (code = open_listen_socket(&la, text, fd, err)) != HP_OK)
        return code;
    struct sockaddr_storage bound;
    socklen_t bound_len = sizeof(bound);
    if (getsockname(*fd, (struct sockaddr *)&bound, &bound_len) != 0)
        bound = la.addr;
    format_address(&bound, address, address_size);
    *family = la.family;
    return HP_OK;
}

/* The PEM texts of tls_cert and tls_key; both NULL for plain HTTP. */
static hp_code load_tls(const hp_http_params *params, char **cert, char **key, hp_err *err)
{
    *cert = *key = NULL;
    bool has_cert = params->tls_cert && *params->tls_cert, has_key = params->tls_key && *params->tls_key;
    if (!has_cert && !has_key)
        return HP_OK;
    if (!has_cert || !has_key)
        return hp_fail(err, HP_ERR_INVALID_ARGUMENT, "TLS needs both tls_cert and tls_key");
    if (!MHD_is_feature_supported(MHD_FEATURE_TLS))
        return hp_fail(err, HP_ERR_MISSING_FEATURE, "this libmicrohttpd was built without TLS (GnuTLS)");
    *cert = read_text_file(params->tls_cert);
    *key = read_text_file(params->tls_key);
    if (*cert && *key)
        return HP_OK;
    hp_code code = hp_fail(err, HP_ERR_IO, "cannot read %s: %s", !*cert ? params->tls_cert : params->tls_key,
                           strerror(errno));
    free(*cert);
    free(*key);
    *cert = *key = NULL;
    return code;
}

/* One libmicrohttpd daemon on a bound socket, with its connection limits and guard; threads 0 or 1: its one
 * internal thread, no pool (the option is then left out: libmicrohttpd warns about a pool of 0 or 1). */
static struct MHD_Daemon *start_mhd(hp_http *http, const listener *from, int fd, int family, unsigned threads,
                                    unsigned limit, hp_guard *guard, const char *cert, const char *key)
{
    /* MHD_USE_ITC: MHD_quiesce_daemon() needs it to wake the polling threads.
     * poll(), not epoll (what MHD_USE_AUTO_INTERNAL_THREAD picks on Linux): with epoll and a thread pool,
     * libmicrohttpd 0.9.75's MHD_quiesce_daemon takes the listening socket out of each worker's epoll set from
     * the draining thread, while a worker that has seen the quiesce takes it out too, and the second removal
     * fails (ENOENT) into MHD_PANIC: the daemon aborted at a drain under load ("Failed to remove listen FD from
     * epoll set"). With poll() the quiesce only wakes the workers (the ITC), and each stops polling the socket
     * itself. A worker polls its own connections, a few hundred at most (max_connections over the pool). */
    unsigned flags = MHD_USE_POLL_INTERNAL_THREAD | MHD_USE_ERROR_LOG | MHD_USE_ITC | MHD_ALLOW_SUSPEND_RESUME;
    if (family == AF_INET6)
        flags |= MHD_USE_IPv6;
    if (cert)
        flags |= MHD_USE_TLS;
    struct MHD_OptionItem options[] = {
        {MHD_OPTION_EXTERNAL_LOGGER, (intptr_t)on_mhd_log, http}, /* first: catches start-up */
        {MHD_OPTION_LISTEN_SOCKET, fd, NULL},
        {MHD_OPTION_CONNECTION_TIMEOUT, http->params.idle_timeout_s, NULL},
        {MHD_OPTION_CONNECTION_MEMORY_LIMIT, HP_HTTP_CONNECTION_MEMORY, NULL},
        {MHD_OPTION_CONNECTION_LIMIT, limit, NULL},
        /* No MHD_OPTION_PER_IP_CONNECTION_LIMIT: the guard's accept policy counts an IPv6 /64 as one client,
         * where libmicrohttpd counts every address. */
        {MHD_OPTION_NOTIFY_CONNECTION, (intptr_t)hp_guard_on_connection, guard},
        {MHD_OPTION_URI_LOG_CALLBACK, (intptr_t)hp_guard_uri_log, guard},
        {MHD_OPTION_UNESCAPE_CALLBACK, (intptr_t)hp_guard_unescape, guard},
        {MHD_OPTION_NOTIFY_COMPLETED, (intptr_t)on_completed, http},
        {threads > 1 ? MHD_OPTION_THREAD_POOL_SIZE : MHD_OPTION_END, threads, NULL},
        {cert ? MHD_OPTION_HTTPS_MEM_CERT : MHD_OPTION_END, 0, (void *)cert},
        {MHD_OPTION_HTTPS_MEM_KEY, 0, (void *)key},
        {MHD_OPTION_END, 0, NULL},
    };
    /* An END in the middle ends the list there: the thread pool and TLS come last, in that order. */
    if (threads <= 1) {
        options[9] = options[10];
        options[10] = options[11];
        options[11] = (struct MHD_OptionItem){MHD_OPTION_END, 0, NULL};
    }
    struct MHD_Daemon *mhd = MHD_start_daemon(flags, 0, hp_guard_accept_policy, guard, on_request, (void *)from,
                                              MHD_OPTION_ARRAY, options, MHD_OPTION_END);
    if (mhd)
        hp_guard_watch_listener(guard, fd);
    return mhd;
}

/* The probe listener: /livez and /readyz on an address of their own, plain HTTP, one thread, a few
 * connections, a few from one address, and a short deadline for their headers (a probe sends its request
 * at once): a kubelet's probes still answer while the API's connections are all taken, and idle or
 * trickling connections cannot take the probe listener's for long. */
#define HP_PROBE_CONNECTIONS 64
#define HP_PROBE_CONNECTIONS_PER_IP 8
#define HP_PROBE_HEADER_TIMEOUT_S 5.0

static hp_code start_probe(hp_http *http, const char *listen, hp_err *err)
{
    int fd = -1, family = 0;
    hp_code code = bind_listener(listen, &fd, &family, http->probe_address, sizeof(http->probe_address), err);
    hp_guard_params gp = {.name = "probe", .max_connections = HP_PROBE_CONNECTIONS, .threads = 1,
                          .per_client = HP_PROBE_CONNECTIONS_PER_IP, .header_timeout_s = HP_PROBE_HEADER_TIMEOUT_S,
                          .min_body_rate = http->params.min_body_rate, .body_grace_s = http->params.body_grace_s};
    if (code == HP_OK && (code = hp_guard_create(&gp, &http->probe_guard, err)) != HP_OK)
        close(fd);
    if (code != HP_OK)
        return code;
    http->probe_listener = (listener){.http = http, .probe = true};
    http->probe_mhd = start_mhd(http, &http->probe_listener, fd, family, 0, HP_PROBE_CONNECTIONS, http->probe_guard,
                                NULL, NULL);
    if (http->probe_mhd)
        return HP_OK;
    close(fd);
    return hp_fail(err, HP_ERR_IO, "cannot start the probe listener on %s (libmicrohttpd refused; see the "
                   "messages above)", http->probe_address);
}

static hp_http *http_new(const hp_http_params *params)
{
    hp_http *http = calloc(1, sizeof(*http));
    if (!http)
        return NULL;
    http->params = *params;
    http->params.listen = http->params.probe_listen = NULL; /* not kept: the caller's strings */
    http->params.auth_token = NULL;
    if (!http->params.max_body_bytes)
        http->params.max_body_bytes = 1ull << 30;
    http->params.allowed_origins = NULL;
    if ((params->auth_token && *params->auth_token && !(http->auth_token = strdup(params->auth_token))) ||
        (params->allowed_origins && *params->allowed_origins &&
         !(http->allowed_origins = strdup(params->allowed_origins)))) {
        free(http->auth_token);
        free(http);
        return NULL;
    }
    http->budget = params->budget;
    atomic_init(&http->state, HP_SERVICE_STARTING);
    pthread_mutex_init(&http->lock, NULL);
    pthread_condattr_t attr;
    pthread_condattr_init(&attr);
    pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
    pthread_cond_init(&http->idle, &attr);
    pthread_condattr_destroy(&attr);
    return http;
}

static void http_free(hp_http *http)
{
    /* The guards' threads stop looking at the listening sockets before libmicrohttpd closes them (a number
     * closed may be reused at once). */
    if (http->probe_guard)
        hp_guard_watch_listener(http->probe_guard, -1);
    if (http->probe_mhd)
        MHD_stop_daemon(http->probe_mhd);
    if (http->deferred.watching)
        hp_deferred_list_detach(&http->deferred);
    hp_guard_destroy(&http->guard);
    hp_guard_destroy(&http->probe_guard);
    pthread_cond_destroy(&http->idle);
    pthread_mutex_destroy(&http->lock);
    free(http->auth_token);
    free(http->allowed_origins);
    free(http);
}

hp_code hp_http_create(const hp_http_params *params, hp_http **out, hp_err *err)
{
    *out = NULL;
    if (!params->listen)
        return hp_fail(err, HP_ERR_INVALID_ARGUMENT, "no listen address");
    if (params->threads < 1 || params->threads > 256)
        return hp_fail(err, HP_ERR_INVALID_ARGUMENT, "http threads %u is outside 1..256", params->threads);
    if (!params->routes || params->route_count == 0)
        return hp_fail(err, HP_ERR_INVALID_ARGUMENT, "no routes (hp_http_params.routes: api/routes/routes.h)");
    hp_http *http = http_new(params);
    if (!http)
        return hp_fail(err, HP_ERR_OUT_OF_MEMORY, "out of memory creating the HTTP server");
    clock_gettime(CLOCK_MONOTONIC, &http->created);
    hp_code parsed = hp_trusted_proxies_parse(params->trusted_proxies, &http->trusted, err);
    if (parsed != HP_OK) {
        http_free(http);
        return parsed;
    }
    hp_guard_params gp = {.name = "api", .max_connections = params->max_connections, .threads = params->threads,
                          .per_client = params->max_connections_per_ip, .trusted = &http->trusted,
                          .header_timeout_s = params->header_timeout_s,
                          .min_body_rate = params->min_body_rate, .body_grace_s = params->body_grace_s,
                          .tick = idle_tick, .tick_ctx = http};
    int fd = -1, family = 0;
    char *cert = NULL, *key = NULL;
    hp_code code = hp_guard_create(&gp, &http->guard, err);
    if (code == HP_OK)
        code = hp_deferred_list_init(&http->deferred, err);
    if (code == HP_OK)
        code = bind_listener(params->listen, &fd, &family, http->address, sizeof(http->address), err);
    if (code == HP_OK)
        http->local_names_only = !http->auth_token && fd_is_loopback(fd);
    if (code == HP_OK && (code = load_tls(params, &cert, &key, err)) != HP_OK)
        close(fd);
    if (code != HP_OK) {
        http_free(http);
        return code;
    }
    http->api_listener = (listener){.http = http, .probe = false};
    /* Set before the polling threads start: every request with an Origin reads it (origin_refused). */
    http->tls = cert != NULL;
    http->mhd = start_mhd(http, &http->api_listener, fd, family, params->threads, params->max_connections,
                          http->guard, cert, key);
    /* libmicrohttpd copies the PEM text into GnuTLS at start: ours can go (the key wiped first). */
    if (key)
        explicit_bzero(key, strlen(key));
    free(cert);
    free(key);
    if (!http->mhd) {
        close(fd);
        code = hp_fail(err, HP_ERR_IO, "cannot start the HTTP server on %s (libmicrohttpd refused; see the "
                       "messages above)", http->address);
    } else if (params->probe_listen && *params->probe_listen) {
        code = start_probe(http, params->probe_listen, err);
    }
    if (code != HP_OK) {
        if (http->mhd) {
            hp_guard_watch_listener(http->guard, -1);
            MHD_stop_daemon(http->mhd);
        }
        http_free(http);
        return code;
    }
    *out = http;
    return HP_OK;
}

void hp_http_destroy(hp_http **p)
{
    hp_http *http = *p;
    if (!http)
        return;
    *p = NULL;
    if (hp_http_get_state(http) != HP_SERVICE_DRAINING)
        hp_http_set_state(http, HP_SERVICE_DRAINING);

    /* Stop accepting first, then let the requests in flight finish, then stop the threads: stopping at
     * once would drop a response half-written. A kept-alive connection that sends a new request in the
     * instant between the count reaching zero and the stop sees its connection closed unanswered, which
     * HTTP allows for idle connections and clients retry. */
    hp_guard_watch_listener(http->guard, -1);
    MHD_socket fd = MHD_quiesce_daemon(http->mhd);
    if (fd != MHD_INVALID_SOCKET)
        close(fd);
    else
        hp_warn("http: cannot stop accepting connections before the drain; stopping at once");

    struct timespec deadline;
    clock_gettime(CLOCK_MONOTONIC, &deadline);
    double whole = (double)(long long)http->params.drain_timeout_s;
    deadline.tv_sec += (time_t)whole;
    deadline.tv_nsec += (long)((http->params.drain_timeout_s - whole) * 1e9);
    if (deadline.tv_nsec >= 1000000000L) {
        deadline.tv_sec++;
        deadline.tv_nsec -= 1000000000L;
    }
    pthread_mutex_lock(&http->lock);
    while (fd != MHD_INVALID_SOCKET && http->in_flight > 0)
        if (pthread_cond_timedwait(&http->idle, &http->lock, &deadline) == ETIMEDOUT)
            break;
    unsigned left = http->in_flight;
    pthread_mutex_unlock(&http->lock);
    if (left) {
        unsigned forced = hp_deferred_list_force(&http->deferred, http->params.drain_timeout_s);
        hp_warn("http: %u request(s) still in flight after %g s; %u waiting for a frame answered 503, the rest "
                "closed", left, http->params.drain_timeout_s, forced);
        /* The answered ones complete on the polling threads: a moment for them before the stop. */
        clock_gettime(CLOCK_MONOTONIC, &deadline);
        deadline.tv_sec += 2;
        pthread_mutex_lock(&http->lock);
        while (forced && http->in_flight > 0)
            if (pthread_cond_timedwait(&http->idle, &http->lock, &deadline) == ETIMEDOUT)
                break;
        pthread_mutex_unlock(&http->lock);
    }

    MHD_stop_daemon(http->mhd);
    /* Replies still to come (frames the worker finishes after this) no longer belong to a server: after the
     * stop, so that no handler still running can link a slot into the list after it was let go. */
    hp_deferred_list_detach(&http->deferred);
    http_free(http); /* the probe listener answered /readyz 503 through the drain; it stops here */
}
