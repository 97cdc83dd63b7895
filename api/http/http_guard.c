/* The connection guard (api/http/http_guard.h): a record per connection in a connection table
 * (api/http/conn_table.h), the accept policy and the eviction it decides, the request line's checks, and a
 * thread that closes the connections whose requests arrive too slowly and watches the accept queue. */
#include "api/http/trusted_proxies.h"
#include "api/http/http_guard.h"

#include <errno.h>
#include <stddef.h>
#include <netinet/in.h>
#include <linux/tcp.h> /* struct tcp_info with tcpi_bytes_acked (glibc's netinet/tcp.h stops before it) */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <linux/sockios.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <time.h>

#include "api/http/conn_table.h"
#include "api/http/metrics.h"
#include "common/clock.h"
#include "common/log.h"
#include "common/ratelimit.h"

/* How often the thread looks: a deadline is kept to within this. */
#define GUARD_PERIOD_MS 250
/* Connections waiting in the accept queue this long with none accepted: the API cannot take work. */
#define GUARD_STALL_S 1.0
/* libmicrohttpd's polling threads a guard tells apart (http_threads' maximum). */
#define GUARD_WORKERS_MAX 256

/* A connection's record: its row in the table, and what its current request line held. */
typedef struct conn {
    hp_conn row; /* linked in the table while `linked` */
    hp_guard *guard;
    bool linked;
    bool refused;             /* over max_connections_per_ip once counted: its requests are not served */
    hp_target_problem target; /* found in the request line (uri log, unescape) */
    const char *target_text;  /* the raw target as libmicrohttpd's buffer holds it */
    size_t target_len;        /* its length up to the first NUL */
} conn;

struct hp_guard {
    hp_guard_params params;
    pthread_mutex_t lock; /* the table, every record's fields, and what follows */
    pthread_cond_t wake;
    hp_conn_table *table;
    pthread_t workers[GUARD_WORKERS_MAX]; /* the polling threads seen, in the order they were: their index */
    unsigned worker_count;
    bool stop;
    pthread_t thread;
    int listen_fd;
    uint64_t accepts, accepts_seen; /* connections accepted; as the thread last saw it */
    double stalled_since;           /* the accept queue not moving since (0: it moves) */
    bool accepting;
    uint64_t evicted, refused;
    hp_ratelimit log_limit;
    bool nul_by_layout; /* the request line laid out as libmicrohttpd 0.9 does: a literal NUL can be found */
};

static double now_s(void) { return (double)hp_now_ns() * 1e-9; }

static conn *conn_of(struct MHD_Connection *connection)
{
    const union MHD_ConnectionInfo *ci = MHD_get_connection_info(connection, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
    return ci ? ci->socket_context : NULL;
}

static void set_phase(struct MHD_Connection *connection, hp_conn_phase phase)
{
    conn *c = conn_of(connection);
    if (!c)
        return;
    pthread_mutex_lock(&c->guard->lock);
    if (c->linked)
        hp_conns_set_phase(c->guard->table, &c->row, phase, now_s());
    pthread_mutex_unlock(&c->guard->lock);
}

void hp_guard_headers_in(struct MHD_Connection *connection, bool body_follows)
{
    set_phase(connection, body_follows ? HP_CONN_BODY : HP_CONN_HANDLED);
}

void hp_guard_body_in(struct MHD_Connection *connection) { set_phase(connection, HP_CONN_HANDLED); }
void hp_guard_replying(struct MHD_Connection *connection) { set_phase(connection, HP_CONN_REPLYING); }

void hp_guard_request_done(struct MHD_Connection *connection)
{
    conn *c = conn_of(connection);
    if (c) {
        pthread_mutex_lock(&c->guard->lock);
        c->target = HP_TARGET_OK;
        c->target_text = NULL;
        c->target_len = 0;
        pthread_mutex_unlock(&c->guard->lock);
    }
    set_phase(connection, HP_CONN_HEADERS);
}

void hp_guard_body_bytes(struct MHD_Connection *connection, size_t bytes)
{
    conn *c = conn_of(connection);
    if (!c)
        return;
    pthread_mutex_lock(&c->guard->lock);
    hp_conns_add_bytes(&c->row, bytes);
    pthread_mutex_unlock(&c->guard->lock);
}

/* --- Accepting, evicting --------------------------------------------------------------------------------- */

/* Under the lock: the calling polling thread's index. */
static unsigned worker_index(hp_guard *g)
{
    pthread_t self = pthread_self();
    for (unsigned i = 0; i < g->worker_count; i++)
        if (pthread_equal(g->workers[i], self))
            return i;
    if (g->worker_count < GUARD_WORKERS_MAX)
        g->workers[g->worker_count++] = self;
    return g->worker_count - 1;
}

/* A line for the log, made under the guard's lock and written after it (the log takes a lock of its own and
 * writes to stderr). At most two a 10 s (log_limit): a flood would otherwise write a line a connection. */
typedef struct guard_note {
    char text[400];
} guard_note;

static void note_write(hp_guard *g, guard_note *n)
{
    if (n->text[0])
        hp_warn("http: %s: %s", g->params.name, n->text);
    n->text[0] = '\0';
}

/* Under the lock: a refusal counted, and noted when the rate limit lets it. */
static void refuse(hp_guard *g, const hp_client_key *key, guard_note *n)
{
    g->refused++;
    hp_metrics_connection_closed("client_limit");
    uint64_t left_out = 0;
    if (hp_ratelimit_allow(&g->log_limit, &left_out)) {
        char who[64];
        hp_client_key_format(key, who, sizeof(who));
        snprintf(n->text, sizeof(n->text), "refused a connection from %s, which holds max_connections_per_ip (%u) "
                 "already (%llu refused so far)", who, g->params.per_client, (unsigned long long)g->refused);
    }
}

enum MHD_Result hp_guard_accept_policy(void *cls, const struct sockaddr *addr, socklen_t addrlen)
{
    hp_guard *g = cls;
    hp_client_key key = hp_client_key_of(addr, addrlen);
    bool proxy = hp_trusted_proxies_has(g->params.trusted, addr);
    guard_note n = {{0}};
    pthread_mutex_lock(&g->lock);
    g->accepts++; /* taken from the accept queue, admitted or not: the queue moves (watch_accepts) */
    bool ok = proxy || hp_conns_admit(g->table, &key);
    if (!ok)
        refuse(g, &key, &n);
    pthread_mutex_unlock(&g->lock);
    note_write(g, &n);
    return ok ? MHD_YES : MHD_NO;
}

/* Under the lock: a victim closed to make room on its polling thread (libmicrohttpd sees the end of the
 * stream on its next read and closes it itself), counted, and noted. */
static void evict(hp_guard *g, hp_conn *v, guard_note *n)
{
    shutdown(v->fd, SHUT_RDWR);
    g->evicted++;
    hp_metrics_connection_closed("evicted");
    uint64_t left_out = 0;
    if (hp_ratelimit_allow(&g->log_limit, &left_out)) {
        char who[64];
        hp_client_key_format(hp_conns_client_key(v), who, sizeof(who));
        snprintf(n->text, sizeof(n->text), "connection slots short (%u open of max_connections %u; a polling "
                 "thread holds %u of its %u): closing idle and slow connections to make room, the busiest "
                 "clients' first (this one %s's, which holds %u; %llu closed so far)", hp_conns_open(g->table),
                 g->params.max_connections, hp_conns_live(g->table, v->worker), hp_conns_policy(g->table)->slots,
                 who, hp_conns_client_count(v), (unsigned long long)g->evicted);
    }
}

/* Under the lock, for a connection just linked: its client over max_connections_per_ip (the accept policy
 * looked before the connection was counted, and polling threads accept at once: it is counted here, so the
 * limit holds exactly), or, when its polling thread's slots run short, one other connection of that thread
 * closed to make room. */
static void admit_linked(hp_guard *g, conn *c, const hp_client_key *key, bool proxy, double now, guard_note *n)
{
    unsigned per_client = hp_conns_policy(g->table)->per_client;
    if (per_client && !proxy && hp_conns_client_count(&c->row) > per_client) {
        c->refused = true; /* bytes that came with the connect would still be read and served */
        shutdown(c->row.fd, SHUT_RDWR);
        hp_conns_give_up(g->table, &c->row);
        refuse(g, key, n);
        return;
    }
    hp_conn *v = hp_conns_victim(g->table, &c->row, now);
    if (v)
        evict(g, v, n);
}

static void on_started(hp_guard *g, struct MHD_Connection *connection, void **socket_context)
{
    conn *c = calloc(1, sizeof(*c));
    if (!c)
        return; /* not guarded: libmicrohttpd's idle timeout still bounds it */
    const union MHD_ConnectionInfo *fi = MHD_get_connection_info(connection, MHD_CONNECTION_INFO_CONNECTION_FD);
    const union MHD_ConnectionInfo *ai = MHD_get_connection_info(connection, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
    const struct sockaddr *sa = ai ? ai->client_addr : NULL;
    hp_client_key key = hp_client_key_of(sa, !sa ? 0 : sa->sa_family == AF_INET6 ? sizeof(struct sockaddr_in6)
                                                                                 : sizeof(struct sockaddr_in));
    c->guard = g;
    double now = now_s();
    guard_note n = {{0}};
    pthread_mutex_lock(&g->lock);
    c->linked = hp_conns_add(g->table, &c->row, &key, worker_index(g), fi ? fi->connect_fd : -1, now);
    if (c->linked)
        admit_linked(g, c, &key, hp_trusted_proxies_has(g->params.trusted, sa), now, &n);
    pthread_mutex_unlock(&g->lock);
    note_write(g, &n);
    *socket_context = c;
}

void hp_guard_on_connection(void *cls, struct MHD_Connection *connection, void **socket_context,
                            enum MHD_ConnectionNotificationCode code)
{
    hp_guard *g = cls;
    if (code == MHD_CONNECTION_NOTIFY_STARTED) {
        on_started(g, connection, socket_context);
        return;
    }
    /* Closed: libmicrohttpd closes the socket after this returns, so while the record is in the table (under
     * the lock) its fd is the connection's and the other threads may shut it down. */
    conn *c = *socket_context;
    if (!c)
        return;
    pthread_mutex_lock(&g->lock);
    if (c->linked)
        hp_conns_remove(g->table, &c->row);
    pthread_mutex_unlock(&g->lock);
    free(c);
    *socket_context = NULL;
}

/* --- The request line -------------------------------------------------------------------------------------- */

/* Called once per request with the raw target, after libmicrohttpd has found where the query starts and
 * before it splits the query into arguments or decodes anything (connection.c, parse_initial_message). The
 * target lies in the connection's own read buffer, which is writable. */
void *hp_guard_uri_log(void *cls, const char *uri, struct MHD_Connection *connection)
{
    (void)cls;
    conn *c = conn_of(connection);
    if (!c)
        return NULL;
    hp_target_problem problem = HP_TARGET_OK;
    size_t args = 0, len = 0;
    const char *query = NULL;
    for (; uri[len]; len++) {
        unsigned char ch = (unsigned char)uri[len];
        if (ch < 0x20 || ch == 0x7f)
            problem = HP_TARGET_CONTROL;
        if (ch == '?' && !query)
            query = uri + len;
        args += query && (ch == '&' || ch == '?');
    }
    if (args > HP_GUARD_QUERY_ARGS_MAX) {
        /* libmicrohttpd ends the target at the '?' and parses what follows it: with an empty query there it
         * keeps no argument at all, and the handler answers 400 instead of the connection closing unanswered
         * once its memory is full. */
        ((char *)query)[1] = '\0';
        if (problem == HP_TARGET_OK)
            problem = HP_TARGET_TOO_MANY_ARGS;
    }
    pthread_mutex_lock(&c->guard->lock);
    c->target = problem;
    c->target_text = uri;
    c->target_len = len;
    pthread_mutex_unlock(&c->guard->lock);
    return NULL;
}

bool hp_guard_refused(struct MHD_Connection *connection)
{
    conn *c = conn_of(connection);
    if (!c)
        return false;
    pthread_mutex_lock(&c->guard->lock);
    bool refused = c->refused;
    pthread_mutex_unlock(&c->guard->lock);
    return refused;
}

hp_target_problem hp_guard_target_problem(struct MHD_Connection *connection, const char *version)
{
    conn *c = conn_of(connection);
    if (!c)
        return HP_TARGET_OK;
    pthread_mutex_lock(&c->guard->lock);
    hp_target_problem problem = c->target;
    /* libmicrohttpd found the version from the end of the line and ended the target with a NUL just before
     * it: a target whose first NUL lies earlier held a literal NUL (the request line is at most the 64 KiB of
     * the connection's memory). */
    uintptr_t text = (uintptr_t)c->target_text, v = (uintptr_t)version;
    if (problem == HP_TARGET_OK && c->guard->nul_by_layout && c->target_text && v > text && v - text <= (64u << 10) &&
        v != text + c->target_len + 1)
        problem = HP_TARGET_LITERAL_NUL;
    pthread_mutex_unlock(&c->guard->lock);
    return problem;
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
        if (c->target == HP_TARGET_OK)
            c->target = HP_TARGET_ENCODED_NUL;
        pthread_mutex_unlock(&c->guard->lock);
    }
    return (size_t)(out - s);
}

/* --- The thread ---------------------------------------------------------------------------------------------- */

/* An answer's progress: the bytes waiting in its socket (SIOCOUTQ) and those its client has acknowledged
 * (TCP_INFO's tcpi_bytes_acked): a client that does not read leaves the first and stops the second. */
static void read_progress(hp_guard *g, hp_conn *r, double now)
{
    int unsent = 0;
    struct tcp_info ti;
    socklen_t len = sizeof(ti);
    if (ioctl(r->fd, SIOCOUTQ, &unsent) == 0 && getsockopt(r->fd, IPPROTO_TCP, TCP_INFO, &ti, &len) == 0 &&
        len >= offsetof(struct tcp_info, tcpi_bytes_acked) + sizeof(ti.tcpi_bytes_acked))
        hp_conns_reply_progress(g->table, r, unsent > 0 ? (uint64_t)unsent : 0, ti.tcpi_bytes_acked, now);
}

/* Under the lock: the answers' progress read, and the connections past their deadlines shut down. */
static void close_overdue(hp_guard *g, double now)
{
    for (hp_conn *r = hp_conns_first(g->table); r; r = r->next) {
        if (r->phase == HP_CONN_REPLYING && !r->closing && r->fd >= 0)
            read_progress(g, r, now);
        const char *why = r->closing || r->fd < 0 ? NULL : hp_conns_overdue(g->table, r, now);
        if (!why)
            continue;
        /* libmicrohttpd sees the end of the stream on its next read and closes the connection itself
         * (an error reply would need a write the client may never read). */
        shutdown(r->fd, SHUT_RDWR);
        hp_conns_give_up(g->table, r);
        hp_metrics_connection_closed(why);
        hp_debug("http: %s: closed a connection: %s", g->params.name, why);
    }
}

/* Under the lock: whether the accept queue moves. Linux reports a listening socket's accept queue length in
 * TCP_INFO's tcpi_unacked (tcp_get_info: sk_ack_backlog). */
static void watch_accepts(hp_guard *g, double now)
{
    if (g->listen_fd < 0)
        return;
    struct tcp_info ti;
    socklen_t len = sizeof(ti);
    unsigned waiting = getsockopt(g->listen_fd, IPPROTO_TCP, TCP_INFO, &ti, &len) == 0 ? ti.tcpi_unacked : 0;
    /* A thread whose slots are all taken accepts nothing, so nothing makes room as connections come: a
     * connection that has become a victim since (an answer that stalled) is closed here, one per connection
     * waiting, so that libmicrohttpd accepts again. */
    guard_note n = {{0}};
    for (unsigned w = 0, left = waiting; w < g->worker_count && left; w++) {
        hp_conn *v;
        while (left && (v = hp_conns_victim_on(g->table, w, now)) != NULL) {
            evict(g, v, &n);
            left--;
        }
    }
    if (n.text[0]) { /* watch_accepts runs under the lock: the line goes out after it */
        pthread_mutex_unlock(&g->lock);
        note_write(g, &n);
        pthread_mutex_lock(&g->lock);
    }
    bool moved = g->accepts != g->accepts_seen;
    g->accepts_seen = g->accepts;
    if (!waiting || moved) {
        if (!g->accepting)
            hp_info("http: %s: accepting connections again", g->params.name);
        g->stalled_since = 0;
        g->accepting = true;
        return;
    }
    if (!g->stalled_since)
        g->stalled_since = now;
    if (g->accepting && now - g->stalled_since >= GUARD_STALL_S) {
        g->accepting = false;
        hp_warn("http: %s: %u connection(s) wait to be accepted and none was for %.1f s: every slot holds a "
                "request in progress (%u open of max_connections %u); /readyz says 503 until one is taken",
                g->params.name, waiting, now - g->stalled_since, hp_conns_open(g->table), g->params.max_connections);
    }
}

static void *guard_main(void *arg)
{
    pthread_setname_np(pthread_self(), "hp-guard"); /* top -H, perf and /proc name it */
    hp_guard *g = arg;
    pthread_mutex_lock(&g->lock);
    while (!g->stop) {
        struct timespec until;
        clock_gettime(CLOCK_MONOTONIC, &until);
        until.tv_nsec += GUARD_PERIOD_MS * 1000000L;
        if (until.tv_nsec >= 1000000000L)
            until.tv_sec++, until.tv_nsec -= 1000000000L;
        double now = now_s();
        close_overdue(g, now);
        watch_accepts(g, now);
        if (g->params.tick) {
            pthread_mutex_unlock(&g->lock);
            g->params.tick(g->params.tick_ctx);
            pthread_mutex_lock(&g->lock);
        }
        while (!g->stop && pthread_cond_timedwait(&g->wake, &g->lock, &until) != ETIMEDOUT)
            ;
    }
    pthread_mutex_unlock(&g->lock);
    return NULL;
}

void hp_guard_watch_listener(hp_guard *g, int fd)
{
    pthread_mutex_lock(&g->lock);
    g->listen_fd = fd;
    g->accepting = true;
    g->stalled_since = 0;
    pthread_mutex_unlock(&g->lock);
}

bool hp_guard_accepting(hp_guard *g)
{
    pthread_mutex_lock(&g->lock);
    bool accepting = g->accepting;
    pthread_mutex_unlock(&g->lock);
    return accepting;
}

void hp_guard_counts(hp_guard *g, unsigned *open, uint64_t *evicted)
{
    pthread_mutex_lock(&g->lock);
    *open = hp_conns_open(g->table);
    *evicted = g->evicted;
    pthread_mutex_unlock(&g->lock);
}

hp_code hp_guard_create(const hp_guard_params *params, hp_guard **out, hp_err *err)
{
    hp_guard *g = calloc(1, sizeof(*g));
    if (!g)
        return hp_fail(err, HP_ERR_OUT_OF_MEMORY, "out of memory for the connection guard");
    g->params = *params;
    if (!g->params.name)
        g->params.name = "api";
    /* hp_guard_target_problem finds a literal NUL by where libmicrohttpd 0.9 puts the version, just after the
     * target (connection.c, parse_initial_message); 1.0 parses the request line otherwise. */
    g->nul_by_layout = strncmp(MHD_get_version(), "0.9.", 4) == 0;
    if (!g->nul_by_layout)
        hp_warn("http: libmicrohttpd %s: a literal NUL in a request's target is not looked for (0.9's request line "
                "layout is assumed)", MHD_get_version());
    unsigned threads = params->threads > 1 ? params->threads : 1;
    /* libmicrohttpd gives each polling thread max_connections / threads (MHD_start_daemon: conns_per_thread,
     * the first threads one more of the rest): the smaller share is every thread's. */
    hp_conn_policy policy = {
        .slots = params->max_connections / threads ? params->max_connections / threads : 1,
        .workers = threads,
        .per_client = params->per_client,
        .header_timeout_s = params->header_timeout_s,
        .pressed_header_timeout_s = HP_GUARD_PRESSED_HEADER_TIMEOUT_S,
        .min_body_rate = params->min_body_rate,
        .body_grace_s = params->body_grace_s,
        .pressed_body_rate = params->min_body_rate * HP_GUARD_PRESSED_BODY_RATE_FACTOR,
        /* An answer's floor is the body's own: a client downloading slower than 64 KiB/s is rare, and the
         * answer is work already done. */
        .pressed_reply_rate = params->min_body_rate,
    };
    g->table = hp_conns_create(&policy);
    g->listen_fd = -1;
    g->accepting = true;
    pthread_mutex_init(&g->log_limit.lock, NULL);
    g->log_limit.window_s = 10.0;
    g->log_limit.burst = 2;
    if (!g->table) {
        free(g);
        return hp_fail(err, HP_ERR_OUT_OF_MEMORY, "out of memory for the connection guard");
    }
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
        hp_conns_destroy(g->table);
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
    for (hp_conn *r = hp_conns_first(g->table), *next; r; r = next) {
        next = r->next;
        hp_conns_remove(g->table, r);
        free((conn *)r);
    }
    hp_conns_destroy(g->table);
    pthread_cond_destroy(&g->wake);
    pthread_mutex_destroy(&g->lock);
    pthread_mutex_destroy(&g->log_limit.lock);
    free(g);
}
