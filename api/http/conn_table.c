/* The connection table (api/http/conn_table.h). */
#include "api/http/conn_table.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A client's record: its key and how many linked connections it has. Chained in a small hash table: a
 * listener holds at most max_connections connections, so at most that many clients. */
struct hp_conn_client {
    hp_conn_client *next;
    hp_client_key key;
    unsigned count;
};

#define CLIENT_BUCKETS 1024u

struct hp_conn_table {
    hp_conn_policy policy;
    unsigned mark;     /* live connections a worker holds before pressure: slots less an eighth */
    hp_conn *head;
    unsigned open;
    unsigned *live;    /* by worker */
    unsigned *held;    /* by worker: linked, live or closing (libmicrohttpd's count of the worker's) */
    hp_conn_client *buckets[CLIENT_BUCKETS];
};

hp_conn_table *hp_conns_create(const hp_conn_policy *policy)
{
    hp_conn_table *t = calloc(1, sizeof(*t));
    if (!t)
        return NULL;
    t->policy = *policy;
    if (t->policy.slots < 1)
        t->policy.slots = 1;
    if (t->policy.workers < 1)
        t->policy.workers = 1;
    /* An eighth of the share kept free, at least one: accepting goes on while those closed are closing. */
    unsigned reserve = t->policy.slots / 8 ? t->policy.slots / 8 : 1;
    t->mark = t->policy.slots > reserve ? t->policy.slots - reserve : 0;
    t->live = calloc(t->policy.workers, sizeof(*t->live));
    t->held = calloc(t->policy.workers, sizeof(*t->held));
    if (!t->live || !t->held) {
        free(t->live);
        free(t->held);
        free(t);
        return NULL;
    }
    return t;
}

void hp_conns_destroy(hp_conn_table *t)
{
    if (!t)
        return;
    for (unsigned b = 0; b < CLIENT_BUCKETS; b++)
        for (hp_conn_client *cl = t->buckets[b], *next; cl; cl = next) {
            next = cl->next;
            free(cl);
        }
    free(t->live);
    free(t->held);
    free(t);
}

hp_client_key hp_client_key_of(const struct sockaddr *sa, socklen_t len)
{
    hp_client_key k = {{0}};
    if (sa && sa->sa_family == AF_INET && len >= (socklen_t)sizeof(struct sockaddr_in)) {
        k.bytes[10] = k.bytes[11] = 0xff;
        memcpy(k.bytes + 12, &((const struct sockaddr_in *)sa)->sin_addr, 4);
    } else if (sa && sa->sa_family == AF_INET6 && len >= (socklen_t)sizeof(struct sockaddr_in6)) {
        const struct in6_addr *a = &((const struct sockaddr_in6 *)sa)->sin6_addr;
        if (IN6_IS_ADDR_V4MAPPED(a)) /* a dual-stack socket's IPv4 client is that IPv4 client */
            memcpy(k.bytes, a->s6_addr, 16);
        else
            memcpy(k.bytes, a->s6_addr, 8);
    }
    return k;
}

static bool key_is_v4(const hp_client_key *k)
{
    static const uint8_t prefix[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
    return memcmp(k->bytes, prefix, sizeof(prefix)) == 0;
}

void hp_client_key_format(const hp_client_key *key, char *out, size_t size)
{
    char text[INET6_ADDRSTRLEN] = "?";
    if (key_is_v4(key)) {
        inet_ntop(AF_INET, key->bytes + 12, text, sizeof(text));
        snprintf(out, size, "%s", text);
    } else {
        inet_ntop(AF_INET6, key->bytes, text, sizeof(text));
        snprintf(out, size, "%s/64", text);
    }
}

/* FNV-1a over the key's 16 bytes. */
static unsigned bucket_of(const hp_client_key *k)
{
    uint32_t h = 2166136261u;
    for (size_t i = 0; i < sizeof(k->bytes); i++)
        h = (h ^ k->bytes[i]) * 16777619u;
    return h % CLIENT_BUCKETS;
}

static hp_conn_client *client_find(const hp_conn_table *t, const hp_client_key *k)
{
    for (hp_conn_client *cl = t->buckets[bucket_of(k)]; cl; cl = cl->next)
        if (!memcmp(cl->key.bytes, k->bytes, sizeof(k->bytes)))
            return cl;
    return NULL;
}

bool hp_conns_admit(const hp_conn_table *t, const hp_client_key *key)
{
    if (!t->policy.per_client)
        return true;
    const hp_conn_client *cl = client_find(t, key);
    return !cl || cl->count < t->policy.per_client;
}

static unsigned worker_of(const hp_conn_table *t, unsigned worker)
{
    return worker < t->policy.workers ? worker : worker % t->policy.workers;
}

bool hp_conns_add(hp_conn_table *t, hp_conn *c, const hp_client_key *key, unsigned worker, int fd, double now)
{
    hp_conn_client *cl = client_find(t, key);
    if (!cl) {
        if (!(cl = calloc(1, sizeof(*cl))))
            return false;
        cl->key = *key;
        unsigned b = bucket_of(key);
        cl->next = t->buckets[b];
        t->buckets[b] = cl;
    }
    cl->count++;
    *c = (hp_conn){.client = cl, .worker = worker_of(t, worker), .fd = fd, .phase = HP_CONN_HEADERS, .since = now};
    c->next = t->head;
    if (t->head)
        t->head->prev = c;
    t->head = c;
    t->open++;
    t->live[c->worker]++;
    t->held[c->worker]++;
    return true;
}

void hp_conns_give_up(hp_conn_table *t, hp_conn *c)
{
    if (c->closing)
        return;
    c->closing = true;
    t->live[c->worker]--;
}

void hp_conns_remove(hp_conn_table *t, hp_conn *c)
{
    hp_conns_give_up(t, c);
    if (c->prev)
        c->prev->next = c->next;
    else
        t->head = c->next;
    if (c->next)
        c->next->prev = c->prev;
    c->prev = c->next = NULL;
    t->open--;
    t->held[c->worker]--;
    hp_conn_client *cl = c->client;
    c->client = NULL;
    if (cl && --cl->count == 0) {
        hp_conn_client **p = &t->buckets[bucket_of(&cl->key)];
        while (*p != cl)
            p = &(*p)->next;
        *p = cl->next;
        free(cl);
    }
}

void hp_conns_set_phase(hp_conn_table *t, hp_conn *c, hp_conn_phase phase, double now)
{
    (void)t;
    /* The answers' window runs on across a connection's answers: a client that pipelines small answers and
     * reads a trickle finishes each within a window, and would otherwise never be measured. The bytes it has
     * taken are counted by its socket, whatever answer they were. Only a socket found empty ends it. */
    c->phase = phase;
    c->bytes = 0;
    c->since = now;
}

void hp_conns_add_bytes(hp_conn *c, uint64_t bytes) { c->bytes += bytes; }

void hp_conns_reply_progress(const hp_conn_table *t, hp_conn *c, uint64_t unsent, uint64_t acked, double now)
{
    c->unsent = unsent;
    c->acked = acked;
    if (!unsent) { /* nothing waits for the client: it keeps up, whatever its rate */
        c->window_open = c->reply_lagging = false;
        return;
    }
    if (!c->window_open) {
        c->window_open = true;
        c->window_since = now;
        c->window_acked = acked;
        return;
    }
    double span = now - c->window_since;
    if (span < HP_CONNS_REPLY_WINDOW_S)
        return;
    uint64_t taken = acked > c->window_acked ? acked - c->window_acked : 0;
    c->reply_lagging = !taken || (double)taken < (double)t->policy.pressed_reply_rate * span;
    c->window_since = now;
    c->window_acked = acked;
}

bool hp_conns_pressed(const hp_conn_table *t, unsigned worker)
{
    return t->live[worker_of(t, worker)] > t->mark;
}

/* A body under pressure: past its first second and slower than pressed_body_rate. */
static bool body_laggard(const hp_conn_table *t, const hp_conn *c, double now)
{
    double age = now - c->since;
    return t->policy.pressed_body_rate && age > 1.0 && (double)c->bytes < (double)t->policy.pressed_body_rate * age;
}

/* What a connection is as a victim: 0 waiting for headers, 1 a lagging body, 2 an answer its client does not
 * read, 3 none (never chosen). */
static int victim_kind(const hp_conn_table *t, const hp_conn *c, double now)
{
    switch (c->phase) {
    case HP_CONN_HEADERS: return 0;
    case HP_CONN_BODY: return body_laggard(t, c, now) ? 1 : 3;
    case HP_CONN_REPLYING: return c->reply_lagging ? 2 : 3;
    case HP_CONN_HANDLED: return 3;
    }
    return 3;
}

/* The order victims are chosen in: a lower kind first, then the client with the most connections, then the
 * longest in its phase. Negative: a before b. */
static int victim_order(const hp_conn *a, int kind_a, const hp_conn *b, int kind_b)
{
    if (kind_a != kind_b)
        return kind_a < kind_b ? -1 : 1;
    if (a->client->count != b->client->count)
        return a->client->count > b->client->count ? -1 : 1;
    return a->since < b->since ? -1 : a->since > b->since ? 1 : 0;
}

static hp_conn *victim_except(hp_conn_table *t, unsigned worker, const hp_conn *except, double now)
{
    worker = worker_of(t, worker);
    if (!hp_conns_pressed(t, worker))
        return NULL;
    hp_conn *best = NULL;
    int best_kind = 3;
    for (hp_conn *v = t->head; v; v = v->next) {
        if (v == except || v->closing || v->worker != worker)
            continue;
        int kind = victim_kind(t, v, now);
        if (kind < 3 && (!best || victim_order(v, kind, best, best_kind) < 0)) {
            best = v;
            best_kind = kind;
        }
    }
    if (best)
        hp_conns_give_up(t, best);
    return best;
}

hp_conn *hp_conns_victim(hp_conn_table *t, const hp_conn *c, double now)
{
    return victim_except(t, c->worker, c, now);
}

hp_conn *hp_conns_victim_on(hp_conn_table *t, unsigned worker, double now)
{
    if (t->held[worker_of(t, worker)] < t->policy.slots)
        return NULL;
    return victim_except(t, worker, NULL, now);
}

const char *hp_conns_overdue(const hp_conn_table *t, const hp_conn *c, double now)
{
    const hp_conn_policy *p = &t->policy;
    double age = now - c->since;
    double headers = p->header_timeout_s;
    if (hp_conns_pressed(t, c->worker) && p->pressed_header_timeout_s > 0 &&
        (headers <= 0 || p->pressed_header_timeout_s < headers))
        headers = p->pressed_header_timeout_s;
    if (c->phase == HP_CONN_HEADERS && headers > 0 && age > headers)
        return "header_timeout";
    if (c->phase == HP_CONN_BODY && p->min_body_rate && age > p->body_grace_s &&
        (double)c->bytes < (double)p->min_body_rate * age)
        return "slow_body";
    return NULL;
}

hp_conn *hp_conns_first(const hp_conn_table *t) { return t->head; }
unsigned hp_conns_client_count(const hp_conn *c) { return c->client ? c->client->count : 0; }
const hp_client_key *hp_conns_client_key(const hp_conn *c) { return &c->client->key; }
unsigned hp_conns_live(const hp_conn_table *t, unsigned worker) { return t->live[worker_of(t, worker)]; }
unsigned hp_conns_open(const hp_conn_table *t) { return t->open; }
unsigned hp_conns_mark(const hp_conn_table *t) { return t->mark; }
const hp_conn_policy *hp_conns_policy(const hp_conn_table *t) { return &t->policy; }
