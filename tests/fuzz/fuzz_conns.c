/* Fuzz target: the connection table (api/http/conn_table.h), driven the way the HTTP guard drives it. The input
 * is a program. Its first 8 bytes are the policy (slots 1..64, workers 1..8, per_client 0..16, the header
 * deadlines, the body rates and grace); then each op is a byte and its arguments:
 *   open from client k on worker w (admitted or skipped as the accept policy does, then a victim chosen as
 *   make_room does), close one, set one's phase, add body bytes to one, let time pass, sweep the overdue
 *   (given up as close_overdue does), report an answer's unsent bytes (as close_overdue reads them), make
 *   room on a worker for connections waiting to be accepted (as watch_accepts does).
 * A shadow model beside it knows every connection's client, worker, phase, age, bytes and whether it was
 * given up, and the target aborts when the table disagrees: counts per client, open and live per worker,
 * the per-client limit, pressure, and every victim and deadline against what the policy says.
 *
 * Times are multiples of 0.25 s and byte counts stay far below 2^53, so every product and comparison the
 * table makes in doubles is exact and the shadow's same arithmetic cannot disagree with it by rounding. */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/http/conn_table.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define MAX_CONNS 256 /* linked at once: keeps each run fast */
#define CLIENTS 192   /* shadow client ids: 0..63 IPv4 (direct or mapped), 64..191 IPv6 /64s: enough to share
                        * some of the table's hash buckets */
_Static_assert(CLIENTS <= MAX_CONNS, "one connection per client is left linked at the end");

typedef struct shadow {
    hp_conn rec;
    bool linked, closing;
    int client;
    unsigned worker;
    hp_conn_phase phase;
    double since;
    uint64_t bytes;
    uint64_t unsent;     /* replying: the last reading */
    uint64_t acked;      /* replying: the bytes acknowledged at the last reading */
    bool window_open;    /* replying: a window of the client's reading is measured */
    double window_since;
    uint64_t window_acked;
    bool lagging;        /* the last whole window was read slower than pressed_reply_rate, bytes waiting */
} shadow;

typedef struct program {
    const uint8_t *data;
    size_t size, at;
} program;

static bool more(const program *p) { return p->at < p->size; }
static uint8_t next(program *p) { return p->at < p->size ? p->data[p->at++] : 0; }

typedef struct state {
    hp_conn_table *t;
    hp_conn_policy policy;
    unsigned mark;
    shadow conn[MAX_CONNS];
    unsigned client_count[CLIENTS];
    unsigned live[8]; /* by worker: linked and not given up */
    unsigned open;
    double now;
} state;

/* The checks run after every op and compare hundreds of values: left out of libFuzzer's comparison tracing,
 * which would spend most of each run there and guide nothing (the table's own code is still traced). */
#if defined(__clang__)
#define NOT_TRACED __attribute__((no_sanitize("coverage")))
#else
#define NOT_TRACED
#endif

static void check(bool ok)
{
    if (!ok)
        abort();
}

/* Client k's address: bit 7 IPv6 (128 /64s, 2001:db8:0:k::, any interface identifier), else IPv4
 * 10.0.0.k (64 of them), through an AF_INET socket or, bit 6, as an IPv4-mapped AF_INET6 address of a
 * dual-stack socket. */
static hp_client_key address_of(uint8_t k, uint8_t low, int *client)
{
    if (k & 0x80) {
        struct sockaddr_in6 sa = {.sin6_family = AF_INET6};
        sa.sin6_addr.s6_addr[0] = 0x20;
        sa.sin6_addr.s6_addr[1] = 0x01;
        sa.sin6_addr.s6_addr[2] = 0x0d;
        sa.sin6_addr.s6_addr[3] = 0xb8;
        sa.sin6_addr.s6_addr[7] = k & 0x7f;
        /* The interface identifier varies in many bytes, so a /64 that grouped less would show. */
        for (int i = 8; i < 16; i++)
            sa.sin6_addr.s6_addr[i] = (uint8_t)(low * (i + 1) + i);
        *client = 64 + (k & 0x7f);
        return hp_client_key_of((const struct sockaddr *)&sa, sizeof(sa));
    }
    uint8_t v4[4] = {10, 0, 0, k & 0x3f};
    *client = k & 0x3f;
    if (k & 0x40) {
        struct sockaddr_in6 sa = {.sin6_family = AF_INET6};
        sa.sin6_addr.s6_addr[10] = sa.sin6_addr.s6_addr[11] = 0xff;
        memcpy(sa.sin6_addr.s6_addr + 12, v4, 4);
        return hp_client_key_of((const struct sockaddr *)&sa, sizeof(sa));
    }
    struct sockaddr_in sa = {.sin_family = AF_INET};
    memcpy(&sa.sin_addr, v4, 4);
    return hp_client_key_of((const struct sockaddr *)&sa, sizeof(sa));
}

static bool pressed(const state *s, unsigned worker) { return s->live[worker] > s->mark; }

/* The policy's victim kinds: 0 waiting for headers, 1 a body slower than pressed_body_rate after its first
 * second, 2 an answer its client read slower than pressed_reply_rate over its last whole window, 3 never. */
static int kind_of(const state *s, const shadow *c)
{
    if (c->phase == HP_CONN_HEADERS)
        return 0;
    double age = s->now - c->since;
    if (c->phase == HP_CONN_BODY && s->policy.pressed_body_rate && age > 1.0 &&
        (double)c->bytes < (double)s->policy.pressed_body_rate * age)
        return 1;
    if (c->phase == HP_CONN_REPLYING && c->lagging)
        return 2;
    return 3;
}

/* Whether a is a better victim than b: lower kind, then the busier client, then the longer in its phase. */
static int order(const state *s, const shadow *a, const shadow *b)
{
    int ka = kind_of(s, a), kb = kind_of(s, b);
    if (ka != kb)
        return ka < kb ? -1 : 1;
    unsigned ca = s->client_count[a->client], cb = s->client_count[b->client];
    if (ca != cb)
        return ca > cb ? -1 : 1;
    return a->since < b->since ? -1 : a->since > b->since ? 1 : 0;
}

/* A record's shadow: its fd is its index (the table never changes fd). NULL for a record not ours. */
NOT_TRACED static shadow *shadow_of(state *s, const hp_conn *r)
{
    if (!r || r->fd < 0 || r->fd >= MAX_CONNS || &s->conn[r->fd].rec != r)
        return NULL;
    return &s->conn[r->fd];
}

/* The table against the shadow, whole. Every record walked is a distinct linked shadow (the walk is no
 * longer than open, prev pointers agree), and as many as open: so the walk covers every linked shadow. */
NOT_TRACED static void agree(state *s)
{
    check(hp_conns_open(s->t) == s->open);
    check(hp_conns_mark(s->t) == s->mark);
    unsigned walked = 0;
    const hp_conn *prev = NULL;
    for (const hp_conn *r = hp_conns_first(s->t); r; prev = r, r = r->next) {
        check(++walked <= s->open); /* no cycle */
        check(r->prev == prev);
        const shadow *c = shadow_of(s, r);
        check(c && c->linked);
        check(hp_conns_client_count(r) == s->client_count[c->client]);
        check(r->closing == c->closing && r->worker == c->worker && r->phase == c->phase);
        check(r->since == c->since && r->bytes == c->bytes);
        check(r->unsent == c->unsent && r->acked == c->acked && r->window_open == c->window_open &&
              r->reply_lagging == c->lagging && (!c->window_open || (r->window_since == c->window_since &&
                                                                       r->window_acked == c->window_acked)));
        check(!s->policy.per_client || s->client_count[c->client] <= s->policy.per_client);
    }
    check(walked == s->open);
    for (unsigned w = 0; w < s->policy.workers; w++) {
        check(hp_conns_live(s->t, w) == s->live[w]);
        check(hp_conns_pressed(s->t, w) == pressed(s, w));
    }
}

/* A phase begun, as hp_conns_set_phase begins one: its time, nothing of its body; the answers' window runs on
 * across the connection's answers. */
static void shadow_phase(shadow *c, hp_conn_phase phase, double now)
{
    c->phase = phase;
    c->since = now;
    c->bytes = 0;
}

/* The i-th linked connection, counting on from the start (NULL when none is linked). */
static shadow *pick(state *s, uint8_t i)
{
    if (!s->open)
        return NULL;
    unsigned n = i % s->open;
    for (unsigned j = 0; j < MAX_CONNS; j++)
        if (s->conn[j].linked && n-- == 0)
            return &s->conn[j];
    return NULL;
}

static void give_up(state *s, shadow *c)
{
    c->closing = true;
    s->live[c->worker]--;
}

static bool make_room(state *s, unsigned worker, const shadow *except);

static void op_open(state *s, program *p)
{
    uint8_t k = next(p), low = next(p), w = next(p);
    int client;
    hp_client_key key = address_of(k, low, &client);
    bool admit = hp_conns_admit(s->t, &key);
    check(admit == (!s->policy.per_client || s->client_count[client] < s->policy.per_client));
    if (!admit || s->open == MAX_CONNS)
        return; /* refused: the accept policy says MHD_NO */
    shadow *c = NULL;
    for (unsigned i = 0; i < MAX_CONNS && !c; i++)
        if (!s->conn[i].linked)
            c = &s->conn[i];
    /* Worker indices past the workers: the guard's may be (threads it has not seen before); the table folds
     * them. */
    if (!hp_conns_add(s->t, &c->rec, &key, w % 12, (int)(c - s->conn), s->now))
        return; /* out of memory: not linked, as the guard treats it */
    c->linked = true;
    c->closing = false;
    c->client = client;
    c->worker = (w % 12) % s->policy.workers;
    shadow_phase(c, HP_CONN_HEADERS, s->now);
    c->unsent = c->acked = 0; /* a new connection: its socket has sent nothing */
    c->window_open = c->lagging = false;
    s->client_count[client]++;
    s->live[c->worker]++;
    s->open++;

    make_room(s, c->worker, c); /* as the guard's make_room does for the connection just linked */
}

/* A victim on worker `index` (folded onto the workers as the table does) other than `except` (NULL: any), by
 * hp_conns_victim or, without one, hp_conns_victim_on: the best candidate by the policy if the worker is
 * pressed, else none. Whether one was given up. */
static bool make_room(state *s, unsigned index, const shadow *except)
{
    unsigned worker = index % s->policy.workers;
    bool was_pressed = pressed(s, worker);
    unsigned held = 0; /* the worker's linked connections, live or closing: libmicrohttpd's count */
    for (unsigned i = 0; i < MAX_CONNS; i++)
        held += s->conn[i].linked && s->conn[i].worker == worker;
    if (!except) /* hp_conns_victim_on: only a thread whose slots are all held */
        was_pressed = was_pressed && held >= s->policy.slots;
    const shadow *best = NULL;
    for (const hp_conn *r = hp_conns_first(s->t); r; r = r->next) {
        const shadow *v = shadow_of(s, r);
        check(v != NULL);
        if (v != except && !v->closing && v->worker == worker && kind_of(s, v) < 3 && (!best || order(s, v, best) < 0))
            best = v;
    }
    hp_conn *vr = except ? hp_conns_victim(s->t, &except->rec, s->now) : hp_conns_victim_on(s->t, index, s->now);
    if (!was_pressed || !best) {
        check(vr == NULL);
        return false;
    }
    check(vr != NULL);
    shadow *v = shadow_of(s, vr);
    check(v && v->linked && v != except && !v->closing && v->worker == worker && v->phase != HP_CONN_HANDLED);
    check(kind_of(s, best) != 0 || v->phase == HP_CONN_HEADERS); /* headers first when there were any */
    check(kind_of(s, v) < 3 && order(s, v, best) == 0);          /* as good as the best: ties may go either way */
    check(vr->closing);
    char who[64];
    hp_client_key_format(hp_conns_client_key(vr), who, sizeof(who)); /* as the guard logs it */
    check(who[0] != '\0');
    give_up(s, v);
    return true;
}

static void op_close(state *s, program *p)
{
    shadow *c = pick(s, next(p));
    if (!c)
        return;
    hp_conns_remove(s->t, &c->rec);
    if (!c->closing)
        s->live[c->worker]--;
    s->client_count[c->client]--;
    s->open--;
    c->linked = c->closing = false;
}

static void op_phase(state *s, program *p)
{
    shadow *c = pick(s, next(p));
    hp_conn_phase phase = (hp_conn_phase)(next(p) % 4);
    if (!c)
        return;
    /* A connection given up but not yet closed by libmicrohttpd can still move on: the guard sets it. */
    hp_conns_set_phase(s->t, &c->rec, phase, s->now);
    shadow_phase(c, phase, s->now);
}

/* The guard reads a live answer's progress every period: with bytes waiting, each window of
 * HP_CONNS_REPLY_WINDOW_S ends with the client read slower than pressed_reply_rate or not; nothing waiting
 * ends the window, not lagging. The acknowledged count only grows (TCP's), by 0..255 a reading. */
static void op_unsent(state *s, program *p)
{
    shadow *c = pick(s, next(p));
    uint64_t unsent = next(p);
    unsent |= (uint64_t)next(p) << 8;
    uint64_t more = next(p) % 4 ? 0 : next(p);
    if (!c || c->phase != HP_CONN_REPLYING || c->closing)
        return;
    uint64_t acked = c->acked + more;
    hp_conns_reply_progress(s->t, &c->rec, unsent, acked, s->now);
    c->unsent = unsent;
    c->acked = acked;
    if (!unsent) {
        c->window_open = c->lagging = false;
    } else if (!c->window_open) {
        c->window_open = true;
        c->window_since = s->now;
        c->window_acked = acked;
    } else if (s->now - c->window_since >= HP_CONNS_REPLY_WINDOW_S) {
        uint64_t taken = acked - c->window_acked;
        c->lagging = !taken || (double)taken < (double)s->policy.pressed_reply_rate * (s->now - c->window_since);
        c->window_since = s->now;
        c->window_acked = acked;
    }
}

/* watch_accepts: for each connection waiting to be accepted, a victim on a worker while there is one. The
 * indices start anywhere in 0..11, past the table's workers too, which it folds onto them. */
static void op_waiting(state *s, program *p)
{
    unsigned left = next(p) % 8, first = next(p) % 12;
    for (unsigned w = first; w < first + 12 && left; w++)
        while (left && make_room(s, w, NULL))
            left--;
}

static void op_bytes(state *s, program *p)
{
    shadow *c = pick(s, next(p));
    uint64_t bytes = next(p);
    bytes |= (uint64_t)next(p) << 8;
    if (!c)
        return;
    hp_conns_add_bytes(&c->rec, bytes);
    c->bytes += bytes;
}

/* close_overdue: each live connection past its deadline given up, pressure taken as it stands at each. */
static void op_sweep(state *s)
{
    for (hp_conn *r = hp_conns_first(s->t); r; r = r->next) {
        shadow *c = shadow_of(s, r);
        check(c != NULL);
        if (c->closing)
            continue;
        const hp_conn_policy *pol = &s->policy;
        double age = s->now - c->since, headers = pol->header_timeout_s;
        if (pressed(s, c->worker) && pol->pressed_header_timeout_s > 0 &&
            (headers <= 0 || pol->pressed_header_timeout_s < headers))
            headers = pol->pressed_header_timeout_s;
        const char *want = NULL;
        if (c->phase == HP_CONN_HEADERS && headers > 0 && age > headers)
            want = "header_timeout";
        else if (c->phase == HP_CONN_BODY && pol->min_body_rate && age > pol->body_grace_s &&
                 (double)c->bytes < (double)pol->min_body_rate * age)
            want = "slow_body";
        const char *why = hp_conns_overdue(s->t, r, s->now);
        check(want ? why && !strcmp(why, want) : why == NULL);
        if (why) {
            hp_conns_give_up(s->t, r);
            give_up(s, c);
        }
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    program p = {data, size, 0};
    state *s = calloc(1, sizeof(*s));
    if (!s)
        return 0;
    /* Read first: the order an initializer list's expressions are evaluated in is unspecified. */
    uint8_t b[8];
    for (int i = 0; i < 8; i++)
        b[i] = next(&p);
    s->policy = (hp_conn_policy){
        .slots = 1 + b[0] % 64,
        .workers = 1 + b[1] % 8,
        .per_client = b[2] % 17,
        .header_timeout_s = (b[3] % 64) * 0.25,
        .pressed_header_timeout_s = (b[4] % 64) * 0.25,
        .min_body_rate = (b[5] % 16) * 100,
        .body_grace_s = (b[6] % 64) * 0.25,
        .pressed_body_rate = (b[7] % 16) * 100,
        .pressed_reply_rate = (b[7] % 16) * 100, /* the guard gives both the same rate */
    };
    unsigned reserve = s->policy.slots / 8 > 1 ? s->policy.slots / 8 : 1;
    s->mark = s->policy.slots - reserve;
    s->now = 1000;
    if (!(s->t = hp_conns_create(&s->policy))) {
        free(s);
        return 0;
    }
    agree(s);
    while (more(&p)) {
        switch (next(&p) % 8) {
        case 0: op_open(s, &p); break;
        case 1: op_close(s, &p); break;
        case 2: op_phase(s, &p); break;
        case 3: op_bytes(s, &p); break;
        case 4: s->now += next(&p) * 0.25; break;
        case 5: op_sweep(s); break;
        case 6: op_unsent(s, &p); break;
        case 7: op_waiting(s, &p); break;
        }
        agree(s);
    }
    /* Everything removed, the table gone: a client record left behind is a leak LeakSanitizer reports. */
    for (unsigned i = 0; i < MAX_CONNS; i++)
        if (s->conn[i].linked) {
            hp_conns_remove(s->t, &s->conn[i].rec);
            s->client_count[s->conn[i].client]--;
        }
    check(hp_conns_open(s->t) == 0 && hp_conns_first(s->t) == NULL);
    for (unsigned w = 0; w < s->policy.workers; w++)
        check(hp_conns_live(s->t, w) == 0);
    /* Each client's count went with its last connection: one connection more is its only one. Those stay
     * linked: destroying a table frees its client records, not the connections (the caller's). */
    for (unsigned i = 0; i < CLIENTS; i++) {
        int client;
        hp_client_key key = address_of((uint8_t)(i < 64 ? i : 0x80 | (i - 64)), (uint8_t)i, &client);
        check(client == (int)i && hp_conns_admit(s->t, &key));
        if (hp_conns_add(s->t, &s->conn[i].rec, &key, i, (int)i, s->now))
            check(hp_conns_client_count(&s->conn[i].rec) == 1);
    }
    hp_conns_destroy(s->t);
    free(s);
    return 0;
}
