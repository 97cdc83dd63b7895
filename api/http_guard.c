/* The connection guard (api/http_guard.h): a record per connection, the phase of its request, and a thread
 * that closes the connections whose requests arrive too slowly. */
#include "api/http_guard.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>

#include "api/metrics.h"
#include "common/clock.h"
#include "common/log.h"

/* How often the thread looks: a deadline is kept to within this. */
#define GUARD_PERIOD_MS 250

typedef enum conn_phase {
    PHASE_HEADERS, /* waiting for a request's headers (a new or kept-alive connection) */
    PHASE_BODY,    /* the headers are in, the body arriving */
    PHASE_HANDLED, /* the request is the server's: handled, queued, answered */
} conn_phase;

typedef struct conn {
    struct conn *prev, *next;
    hp_guard *guard;
    int fd;
    conn_phase phase;
    struct timespec since; /* the phase's start */
    uint64_t bytes;        /* of the body so far */
    bool nul_in_url;
    bool closing;          /* shut down by the guard: counted once */
} conn;

struct hp_guard {
    hp_guard_params params;
    pthread_mutex_t lock; /* the list and every record's fields */
    pthread_cond_t wake;
    conn *head;
    bool stop;
    pthread_t thread;
};

static conn *conn_of(struct MHD_Connection *connection)
{
    const union MHD_ConnectionInfo *ci = MHD_get_connection_info(connection, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
    return ci ? ci->socket_context : NULL;
}

static void set_phase(struct MHD_Connection *connection, conn_phase phase)
{
    conn *c = conn_of(connection);
    if (!c)
        return;
    pthread_mutex_lock(&c->guard->lock);
    c->phase = phase;
    c->bytes = 0;
    clock_gettime(CLOCK_MONOTONIC, &c->since);
    pthread_mutex_unlock(&c->guard->lock);
}

void hp_guard_headers_in(struct MHD_Connection *connection, bool body_follows)
{
    set_phase(connection, body_follows ? PHASE_BODY : PHASE_HANDLED);
}

void hp_guard_body_in(struct MHD_Connection *connection) { set_phase(connection, PHASE_HANDLED); }

void hp_guard_request_done(struct MHD_Connection *connection)
{
    conn *c = conn_of(connection);
    if (c) {
        pthread_mutex_lock(&c->guard->lock);
        c->nul_in_url = false;
        pthread_mutex_unlock(&c->guard->lock);
    }
    set_phase(connection, PHASE_HEADERS);
}

void hp_guard_body_bytes(struct MHD_Connection *connection, size_t bytes)
{
    conn *c = conn_of(connection);
    if (!c)
        return;
    pthread_mutex_lock(&c->guard->lock);
    c->bytes += bytes;
    pthread_mutex_unlock(&c->guard->lock);
}

bool hp_guard_nul_in_url(struct MHD_Connection *connection)
{
    conn *c = conn_of(connection);
    if (!c)
        return false;
    pthread_mutex_lock(&c->guard->lock);
    bool nul = c->nul_in_url;
    pthread_mutex_unlock(&c->guard->lock);
    return nul;
}

void hp_guard_on_connection(void *cls, struct MHD_Connection *connection, void **socket_context,
                            enum MHD_ConnectionNotificationCode code)
{
    hp_guard *g = cls;
    if (code == MHD_CONNECTION_NOTIFY_STARTED) {
        conn *c = calloc(1, sizeof(*c));
        if (!c)
            return; /* not guarded: libmicrohttpd's idle timeout still bounds it */
        const union MHD_ConnectionInfo *ci = MHD_get_connection_info(connection, MHD_CONNECTION_INFO_CONNECTION_FD);
        c->guard = g;
        c->fd = ci ? ci->connect_fd : -1;
        c->phase = PHASE_HEADERS;
        clock_gettime(CLOCK_MONOTONIC, &c->since);
        pthread_mutex_lock(&g->lock);
        c->next = g->head;
        if (g->head)
            g->head->prev = c;
        g->head = c;
        pthread_mutex_unlock(&g->lock);
        *socket_context = c;
        return;
    }
    /* Closed: libmicrohttpd closes the socket after this returns, so while the record is in the list (under
     * the lock) its fd is the connection's and the thread may shut it down. */
    conn *c = *socket_context;
    if (!c)
        return;
    pthread_mutex_lock(&g->lock);
    if (c->prev)
        c->prev->next = c->next;
    else
        g->head = c->next;
    if (c->next)
        c->next->prev = c->prev;
    pthread_mutex_unlock(&g->lock);
    free(c);
    *socket_context = NULL;
}

static int hex_value(char ch)
{
    if (ch >= '0' && ch <= '9')
        return ch - '0';
    if (ch >= 'a' && ch <= 'f')
        return ch - 'a' + 10;
    if (ch >= 'A' && ch <= 'F')
        return ch - 'A' + 10;
    return -1;
}

/* libmicrohttpd's own decoding (MHD_http_unescape: %XX, in place, a malformed escape kept as it is), except
 * that %00 stays "%00" and marks the request, which the handler then refuses: a NUL would end the C string
 * there and the server would answer for a path the client did not send. */
size_t hp_guard_unescape(void *cls, struct MHD_Connection *connection, char *s)
{
    (void)cls;
    char *out = s;
    bool nul = false;
    for (const char *in = s; *in;) {
        int hi, lo;
        if (in[0] == '%' && (hi = hex_value(in[1])) >= 0 && (lo = hex_value(in[2])) >= 0) {
            if (hi == 0 && lo == 0) {
                nul = true;
                memmove(out, in, 3);
                out += 3;
            } else {
                *out++ = (char)(hi << 4 | lo);
            }
            in += 3;
        } else {
            *out++ = *in++;
        }
    }
    *out = '\0';
    conn *c = nul ? conn_of(connection) : NULL;
    if (c) {
        pthread_mutex_lock(&c->guard->lock);
        c->nul_in_url = true;
        pthread_mutex_unlock(&c->guard->lock);
    }
    return (size_t)(out - s);
}

/* Under the lock: the reason a connection is past its deadline, or NULL. */
static const char *overdue(const hp_guard *g, const conn *c, const struct timespec *now)
{
    double age = hp_ms_between(&c->since, now) / 1e3;
    if (c->phase == PHASE_HEADERS && g->params.header_timeout_s > 0 && age > g->params.header_timeout_s)
        return "header_timeout";
    if (c->phase == PHASE_BODY && g->params.min_body_rate && age > g->params.body_grace_s &&
        (double)c->bytes < (double)g->params.min_body_rate * age)
        return "slow_body";
    return NULL;
}

static void *guard_main(void *arg)
{
    pthread_setname_np(pthread_self(), "hp-guard"); /* top -H, perf and /proc name it */
    hp_guard *g = arg;
    pthread_mutex_lock(&g->lock);
    while (!g->stop) {
        struct timespec now, until;
        clock_gettime(CLOCK_MONOTONIC, &now);
        until = now;
        until.tv_nsec += GUARD_PERIOD_MS * 1000000L;
        if (until.tv_nsec >= 1000000000L)
            until.tv_sec++, until.tv_nsec -= 1000000000L;
        for (conn *c = g->head; c; c = c->next) {
            const char *why = c->closing || c->fd < 0 ? NULL : overdue(g, c, &now);
            if (!why)
                continue;
            /* libmicrohttpd sees the end of the stream on its next read and closes the connection itself
             * (an error reply would need a write the client may never read). */
            shutdown(c->fd, SHUT_RDWR);
            c->closing = true;
            hp_metrics_connection_closed(why);
            hp_debug("http: closed a connection: %s", why);
        }
        while (!g->stop && pthread_cond_timedwait(&g->wake, &g->lock, &until) != ETIMEDOUT)
            ;
    }
    pthread_mutex_unlock(&g->lock);
    return NULL;
}

hp_code hp_guard_create(const hp_guard_params *params, hp_guard **out, hp_err *err)
{
    hp_guard *g = calloc(1, sizeof(*g));
    if (!g)
        return hp_fail(err, HP_ERR_OUT_OF_MEMORY, "out of memory for the connection guard");
    g->params = *params;
    pthread_mutex_init(&g->lock, NULL);
    pthread_condattr_t attr;
    pthread_condattr_init(&attr);
    pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
    pthread_cond_init(&g->wake, &attr);
    pthread_condattr_destroy(&attr);
    int e = pthread_create(&g->thread, NULL, guard_main, g);
    if (e) {
        pthread_cond_destroy(&g->wake);
        pthread_mutex_destroy(&g->lock);
        free(g);
        return hp_fail(err, HP_ERR_IO, "cannot start the connection guard's thread: %s", strerror(e));
    }
    *out = g;
    return HP_OK;
}

void hp_guard_destroy(hp_guard **p)
{
    hp_guard *g = *p;
    if (!g)
        return;
    *p = NULL;
    pthread_mutex_lock(&g->lock);
    g->stop = true;
    pthread_cond_signal(&g->wake);
    pthread_mutex_unlock(&g->lock);
    pthread_join(g->thread, NULL);
    /* Records of connections libmicrohttpd never reported closed (none after its stop), freed anyway. */
    for (conn *c = g->head, *next; c; c = next) {
        next = c->next;
        free(c);
    }
    pthread_cond_destroy(&g->wake);
    pthread_mutex_destroy(&g->lock);
    free(g);
}
