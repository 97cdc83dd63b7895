/* The connection table: one listener's connections, whose they are, what their requests are doing, and the
 * policy that chooses which connection to give up when slots run short and when one is overdue
 * (docs/SECURITY.md, "Connections under a flood").
 *
 * A client is an IPv4 address or an IPv6 /64: one host is handed a whole /64 (RFC 6177, RFC 4291's
 * interface identifiers), so counting IPv6 addresses one by one would give a single attacker 2^64 clients.
 *
 * libmicrohttpd shares max_connections among its polling threads (its workers) and stops accepting on a
 * worker whose share is full, so slots run short per worker: when a worker holds more live connections
 * than its mark (its share less an eighth), each connection it accepts closes one other of that worker's,
 * as nginx and HAProxy reclaim idle keep-alive connections:
 *   1. one waiting for a request's headers (an idle keep-alive, or headers not yet complete), then
 *   2. one whose body arrives slower than pressed_body_rate after its first second;
 *   3. one whose client took its answer slower than pressed_reply_rate over the last HP_CONNS_REPLY_WINDOW_S
 *      while bytes waited for it (one that does not read, or reads a trickle: either holds its slot while
 *      libmicrohttpd waits to write, and libmicrohttpd's idle timeout restarts with every byte taken);
 * within a kind, the one whose client holds the most connections, then the longest in its phase. A request
 * being handled (queued, on the GPU, its answer being made) is never chosen. Under pressure a request's headers also
 * get pressed_header_timeout_s instead of header_timeout_s.
 *
 * Pure bookkeeping: no sockets, no threads, no clock (every call is given `now` in seconds), so that
 * tests/test_conn_table.c and tests/fuzz/fuzz_conns.c drive it directly. Not thread-safe: api/http/http_guard.c
 * holds its lock around every call. Records are the caller's (intrusive): the table links them. */
#ifndef HP_CONN_TABLE_H
#define HP_CONN_TABLE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

typedef enum hp_conn_phase {
    HP_CONN_HEADERS, /* waiting for a request's headers: a new or kept-alive connection */
    HP_CONN_BODY,    /* the headers are in, the body arriving */
    HP_CONN_HANDLED, /* the request is the server's: handled, queued, its answer being made */
    HP_CONN_REPLYING, /* its answer queued, being sent to the client */
} hp_conn_phase;

/* An IPv4 address as ::ffff:a.b.c.d, or an IPv6 address's first 64 bits and zeros. */
typedef struct hp_client_key {
    uint8_t bytes[16];
} hp_client_key;

typedef struct hp_conn_client hp_conn_client;

typedef struct hp_conn {
    struct hp_conn *prev, *next;
    hp_conn_client *client;
    unsigned worker;
    int fd;              /* for the caller: what to shut down */
    hp_conn_phase phase;
    double since;        /* the phase's start */
    uint64_t bytes;      /* of the body so far */
    uint64_t unsent;       /* replying: the answer's bytes in the socket not yet taken by the client, last told */
    uint64_t acked;        /* replying: the bytes the client has taken (acknowledged), last told */
    bool window_open;      /* a window of the client's reading is being measured (across its answers) */
    double window_since;   /* ... since then */
    uint64_t window_acked; /* ... from acked then */
    bool reply_lagging;    /* the last whole window was read slower than pressed_reply_rate, bytes waiting */
    bool closing;        /* given up (victim or overdue): no longer live, counted once */
} hp_conn;

typedef struct hp_conn_policy {
    unsigned slots;                  /* connections one worker may hold (its share of max_connections), >= 1 */
    unsigned workers;                /* libmicrohttpd's polling threads, >= 1 */
    unsigned per_client;             /* connections one client may hold; 0: no limit */
    double header_timeout_s;         /* 0: none */
    double pressed_header_timeout_s; /* under pressure; 0: as header_timeout_s */
    uint64_t min_body_rate;          /* bytes/s a body must average after body_grace_s; 0: none */
    double body_grace_s;
    uint64_t pressed_body_rate;      /* under pressure a body slower than this after 1 s may be given up; 0: none */
    uint64_t pressed_reply_rate;     /* under pressure an answer read slower than this may be given up; 0: only one
                                      * whose client read nothing in a window */
} hp_conn_policy;

typedef struct hp_conn_table hp_conn_table;

/* NULL when out of memory. */
hp_conn_table *hp_conns_create(const hp_conn_policy *policy);
void hp_conns_destroy(hp_conn_table *t); /* the records still linked are the caller's */

hp_client_key hp_client_key_of(const struct sockaddr *sa, socklen_t len);
/* "203.0.113.7" or "2001:db8:1:2::/64". */
void hp_client_key_format(const hp_client_key *key, char *out, size_t size);

/* Whether a connection from this client may be taken (its count under per_client). */
bool hp_conns_admit(const hp_conn_table *t, const hp_client_key *key);
/* Links a new connection in its headers phase. False when out of memory (c is then not linked). */
bool hp_conns_add(hp_conn_table *t, hp_conn *c, const hp_client_key *key, unsigned worker, int fd, double now);
void hp_conns_remove(hp_conn_table *t, hp_conn *c);
void hp_conns_set_phase(hp_conn_table *t, hp_conn *c, hp_conn_phase phase, double now);
void hp_conns_add_bytes(hp_conn *c, uint64_t bytes);
/* An answer's progress, read by the guard every period: the bytes waiting in its socket and the bytes the
 * client has acknowledged so far. Each HP_CONNS_REPLY_WINDOW_S with bytes waiting throughout ends a window:
 * the client read it slower than pressed_reply_rate (or read nothing) or not. Nothing waiting: it keeps up. */
void hp_conns_reply_progress(const hp_conn_table *t, hp_conn *c, uint64_t unsent, uint64_t acked, double now);
#define HP_CONNS_REPLY_WINDOW_S 2.0

/* Whether the worker holds more live connections than its mark. */
bool hp_conns_pressed(const hp_conn_table *t, unsigned worker);
/* Under pressure on c's worker, the connection to give up for c (never c itself), marked closing; NULL when
 * there is no pressure or no connection may be given up. */
hp_conn *hp_conns_victim(hp_conn_table *t, const hp_conn *c, double now);
/* The same for a worker whose slots are all taken, live or closing (libmicrohttpd accepts nothing on it),
 * while connections wait to be accepted: the guard's thread asks it, for a connection that became a victim
 * since the last accept (an answer read too slowly). NULL while the worker has a free slot. */
hp_conn *hp_conns_victim_on(hp_conn_table *t, unsigned worker, double now);
/* Why c is past its deadline ("header_timeout", "slow_body"), or NULL. */
const char *hp_conns_overdue(const hp_conn_table *t, const hp_conn *c, double now);
/* Marks c closing (overdue): it is no longer live. */
void hp_conns_give_up(hp_conn_table *t, hp_conn *c);

hp_conn *hp_conns_first(const hp_conn_table *t);
unsigned hp_conns_client_count(const hp_conn *c); /* connections its client holds, c included */
const hp_client_key *hp_conns_client_key(const hp_conn *c);
unsigned hp_conns_live(const hp_conn_table *t, unsigned worker);
unsigned hp_conns_open(const hp_conn_table *t);  /* linked, live or closing */
unsigned hp_conns_mark(const hp_conn_table *t);
const hp_conn_policy *hp_conns_policy(const hp_conn_table *t);

#endif
