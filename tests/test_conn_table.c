/* api/http/conn_table.h: the connection table the HTTP guard keeps. Clients are IPv4 addresses or IPv6 /64s; a
 * client's connections are refused past per_client; a worker is pressed above its mark (slots less an
 * eighth, at least one); the victim chosen under pressure is another live connection of the same worker,
 * waiting for headers before a lagging body before a stalled answer, the busiest client's then the oldest,
 * never a request being handled; deadlines: header_timeout_s (pressed_header_timeout_s under pressure) and
 * the body rate floor. */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/http/conn_table.h"
#include "tap.h"

/* The table's allocations, counted while `counting`: the test is linked with --wrap for these, so that a
 * client record kept after its last connection (a leak that hp_conns_destroy would hide) shows. */
void *__real_malloc(size_t size);
void *__real_calloc(size_t n, size_t size);
void __real_free(void *p);
void *__wrap_malloc(size_t size);
void *__wrap_calloc(size_t n, size_t size);
void __wrap_free(void *p);
static bool counting;
static long outstanding;

void *__wrap_malloc(size_t size)
{
    void *p = __real_malloc(size);
    outstanding += p && counting;
    return p;
}

void *__wrap_calloc(size_t n, size_t size)
{
    void *p = __real_calloc(n, size);
    outstanding += p && counting;
    return p;
}

void __wrap_free(void *p)
{
    outstanding -= p && counting;
    __real_free(p);
}

static hp_client_key key_v4(const char *text)
{
    struct sockaddr_in sa = {.sin_family = AF_INET};
    inet_pton(AF_INET, text, &sa.sin_addr);
    return hp_client_key_of((const struct sockaddr *)&sa, sizeof(sa));
}

static hp_client_key key_v6(const char *text)
{
    struct sockaddr_in6 sa = {.sin6_family = AF_INET6};
    inet_pton(AF_INET6, text, &sa.sin6_addr);
    return hp_client_key_of((const struct sockaddr *)&sa, sizeof(sa));
}

static bool same_key(hp_client_key a, hp_client_key b) { return !memcmp(a.bytes, b.bytes, sizeof(a.bytes)); }

static void keys(void)
{
    tap_ok(same_key(key_v6("2001:db8:1:2::1"), key_v6("2001:db8:1:2:dead:beef:0:42")),
           "two IPv6 addresses in one /64 are one client");
    tap_ok(!same_key(key_v6("2001:db8:1:2::1"), key_v6("2001:db8:1:3::1")),
           "IPv6 addresses in different /64s are different clients");
    tap_ok(!same_key(key_v4("203.0.113.7"), key_v4("203.0.113.8")), "two IPv4 addresses are two clients");
    tap_ok(same_key(key_v6("::ffff:203.0.113.7"), key_v4("203.0.113.7")),
           "an IPv4-mapped IPv6 address (a dual-stack socket's IPv4 client) is that IPv4 client");
    tap_ok(!same_key(key_v6("::ffff:203.0.113.7"), key_v6("::ffff:203.0.113.8")),
           "two IPv4-mapped addresses in one /64 stay two clients (IPv4 is not grouped by /64)");

    char text[64];
    hp_client_key k = key_v4("203.0.113.7");
    hp_client_key_format(&k, text, sizeof(text));
    tap_ok(!strcmp(text, "203.0.113.7"), "an IPv4 client prints as its address (\"%s\")", text);
    k = key_v6("2001:db8:1:2:aaaa:bbbb:cccc:dddd");
    hp_client_key_format(&k, text, sizeof(text));
    tap_ok(!strcmp(text, "2001:db8:1:2::/64"), "an IPv6 client prints as its /64 (\"%s\")", text);

    struct sockaddr_in6 sa = {.sin6_family = AF_INET6};
    inet_pton(AF_INET6, "2001:db8:1:2::1", &sa.sin6_addr);
    hp_client_key zero = {{0}};
    tap_ok(same_key(hp_client_key_of((const struct sockaddr *)&sa, sizeof(struct sockaddr_in)), zero) &&
               same_key(hp_client_key_of(NULL, 0), zero),
           "an address shorter than its family's, or none, gives the all-zero key (nothing read past it)");
}

static hp_conn_policy policy_of(unsigned slots, unsigned workers, unsigned per_client)
{
    return (hp_conn_policy){.slots = slots, .workers = workers, .per_client = per_client};
}

static void marks(void)
{
    static const unsigned slots[] = {1, 2, 7, 8, 9, 15, 16, 17, 64, 100, 512};
    bool all = true;
    for (size_t i = 0; i < sizeof(slots) / sizeof(slots[0]); i++) {
        hp_conn_policy p = policy_of(slots[i], 1, 0);
        hp_conn_table *t = hp_conns_create(&p);
        unsigned reserve = slots[i] / 8 > 1 ? slots[i] / 8 : 1;
        unsigned want = slots[i] - reserve;
        if (!t || hp_conns_mark(t) != want) {
            tap_diag("slots %u: mark %u, want %u", slots[i], t ? hp_conns_mark(t) : 0, want);
            all = false;
        }
        hp_conns_destroy(t);
    }
    tap_ok(all, "the mark is slots less max(1, slots / 8) (1 -> 0, 8 -> 7, 16 -> 14, 512 -> 448)");

    hp_conn_policy p = policy_of(0, 0, 0);
    hp_conn_table *t = hp_conns_create(&p);
    tap_ok(t && hp_conns_policy(t)->slots == 1 && hp_conns_policy(t)->workers == 1 && hp_conns_mark(t) == 0,
           "a policy of 0 slots and 0 workers is taken as 1 of each");
    hp_conns_destroy(t);
}

static void admission(void)
{
    hp_conn_policy p = policy_of(64, 1, 2);
    hp_conn_table *t = hp_conns_create(&p);
    hp_client_key a = key_v6("2001:db8::1"), a2 = key_v6("2001:db8::2"), b = key_v4("192.0.2.1");
    hp_conn c[3];
    tap_ok(hp_conns_admit(t, &a), "a client with no connection is admitted");
    hp_conns_add(t, &c[0], &a, 0, 10, 0);
    tap_ok(hp_conns_admit(t, &a2) && hp_conns_client_count(&c[0]) == 1, "one connection of 2 allowed: admitted");
    hp_conns_add(t, &c[1], &a2, 0, 11, 0);
    tap_ok(hp_conns_client_count(&c[0]) == 2 && hp_conns_client_count(&c[1]) == 2,
           "two addresses of one /64 count as one client's two connections");
    tap_ok(!hp_conns_admit(t, &a) && !hp_conns_admit(t, &a2), "a client at per_client (2) is refused, any address of its /64");
    tap_ok(hp_conns_admit(t, &b), "another client is still admitted");
    hp_conns_remove(t, &c[1]);
    tap_ok(hp_conns_admit(t, &a) && hp_conns_client_count(&c[0]) == 1,
           "after one of its connections is removed the client is admitted again");
    hp_conns_remove(t, &c[0]);
    tap_ok(hp_conns_first(t) == NULL && hp_conns_open(t) == 0, "removing every connection leaves the table empty");
    /* The client's record is freed with its last connection: a new one starts from a count of 1. */
    hp_conns_add(t, &c[2], &a, 0, 12, 0);
    tap_ok(hp_conns_client_count(&c[2]) == 1 && hp_conns_admit(t, &a),
           "a client whose last connection was removed starts again from nothing");
    hp_conns_remove(t, &c[2]);
    hp_conns_destroy(t);

    /* Clients come and go: each one's record is freed with its last connection. */
    p = policy_of(64, 1, 0);
    t = hp_conns_create(&p);
    counting = true;
    for (int i = 0; i < 100; i++) {
        char text[32];
        snprintf(text, sizeof(text), "2001:db8:%x::%x", i, i + 1);
        hp_client_key k = key_v6(text);
        hp_conns_add(t, &c[0], &k, 0, i, i);
        hp_conns_add(t, &c[1], &k, 0, i, i);
        hp_conns_remove(t, &c[0]);
        hp_conns_remove(t, &c[1]);
    }
    counting = false;
    tap_ok(outstanding == 0, "100 clients that came and went hold no memory in the table (%ld allocations left)", outstanding);
    hp_conns_destroy(t);

    p = policy_of(1000, 1, 0);
    t = hp_conns_create(&p);
    enum { N = 200 };
    hp_conn *many = calloc(N, sizeof(*many));
    bool admitted = true;
    for (int i = 0; i < N; i++) {
        admitted = admitted && hp_conns_admit(t, &b);
        hp_conns_add(t, &many[i], &b, 0, i, 0);
    }
    tap_ok(admitted && hp_conns_client_count(&many[0]) == N && hp_conns_open(t) == N,
           "per_client 0: one client is never refused (%d connections)", N);
    unsigned walked = 0;
    for (hp_conn *r = hp_conns_first(t); r; r = r->next)
        walked++;
    tap_ok(walked == N, "hp_conns_first walks every linked connection once (%u)", walked);
    for (int i = 0; i < N; i++)
        hp_conns_remove(t, &many[i]);
    free(many);
    hp_conns_destroy(t);
}

static void pressure(void)
{
    /* 8 slots: the mark is 7. */
    hp_conn_policy p = policy_of(8, 2, 0);
    p.pressed_body_rate = 1000;
    hp_conn_table *t = hp_conns_create(&p);
    hp_conn c[9], other;
    hp_client_key k = key_v4("198.51.100.1");
    hp_conns_add(t, &other, &k, 1, 100, 0);
    for (int i = 0; i < 7; i++)
        hp_conns_add(t, &c[i], &k, 0, i, 0);
    tap_ok(hp_conns_live(t, 0) == 7 && !hp_conns_pressed(t, 0), "7 live connections on a worker of mark 7: not pressed");
    tap_ok(hp_conns_victim(t, &c[6], 0) == NULL && hp_conns_live(t, 0) == 7,
           "without pressure there is no victim, and nothing is given up");
    hp_conns_add(t, &c[7], &k, 0, 7, 0);
    tap_ok(hp_conns_pressed(t, 0) && !hp_conns_pressed(t, 1), "8 live: that worker is pressed, the other is not");
    tap_ok(hp_conns_pressed(t, 2) && hp_conns_live(t, 2) == 8, "a worker index past the workers maps onto them (2 -> 0)");
    for (int i = 0; i < 8; i++)
        hp_conns_remove(t, &c[i]);
    hp_conns_remove(t, &other);
    hp_conns_destroy(t);

    /* 1 slot: the mark is 0, a lone connection is pressed, and the only candidate is itself. */
    p = policy_of(1, 1, 0);
    t = hp_conns_create(&p);
    hp_conns_add(t, &c[0], &k, 0, 0, 0);
    tap_ok(hp_conns_pressed(t, 0) && hp_conns_victim(t, &c[0], 0) == NULL && !c[0].closing,
           "the new connection is never its own victim");
    hp_conns_remove(t, &c[0]);
    hp_conns_destroy(t);
}

/* A table of 8 slots on two workers (mark 7) with connections on worker 0 from clients given by `who`,
 * each added at time `at[i]`; the caller sets phases. */
static hp_conn_table *pressed_table(const hp_conn_policy *p, hp_conn *c, int n, const hp_client_key *who, const double *at)
{
    hp_conn_table *t = hp_conns_create(p);
    for (int i = 0; i < n; i++)
        hp_conns_add(t, &c[i], &who[i], 0, i, at[i]);
    return t;
}

static void clear(hp_conn_table *t)
{
    while (hp_conns_first(t))
        hp_conns_remove(t, hp_conns_first(t));
    hp_conns_destroy(t);
}

static void victims(void)
{
    hp_conn_policy p = policy_of(8, 2, 0);
    p.pressed_body_rate = 1000;
    hp_client_key who[8];
    double at[8];
    hp_conn c[8], far;
    for (int i = 0; i < 8; i++) {
        char text[32];
        snprintf(text, sizeof(text), "192.0.2.%d", i + 1);
        who[i] = key_v4(text);
        at[i] = 100 + i;
    }

    /* Every other connection is being handled: nothing may be given up. A HEADERS connection on the other
     * worker is not this worker's to give up either. */
    hp_conn_table *t = pressed_table(&p, c, 8, who, at);
    for (int i = 0; i < 7; i++)
        hp_conns_set_phase(t, &c[i], HP_CONN_HANDLED, 100);
    hp_conns_add(t, &far, &who[0], 1, 99, 0);
    tap_ok(hp_conns_pressed(t, 0) && hp_conns_victim(t, &c[7], 200) == NULL,
           "a request being handled is never the victim, nor another worker's waiting connection");
    tap_ok(!far.closing && hp_conns_live(t, 1) == 1, "the other worker's connection is left live");
    clear(t);

    /* A lagging body (0 bytes for 10 s) and a connection waiting for headers: the headers one goes first. */
    t = pressed_table(&p, c, 8, who, at);
    for (int i = 0; i < 7; i++)
        hp_conns_set_phase(t, &c[i], HP_CONN_HANDLED, 100);
    hp_conns_set_phase(t, &c[0], HP_CONN_BODY, 100); /* the oldest, its client busiest would not matter */
    hp_conns_set_phase(t, &c[5], HP_CONN_HEADERS, 105);
    hp_conn *v = hp_conns_victim(t, &c[7], 110);
    tap_ok(v == &c[5], "a connection waiting for headers goes before a lagging body");
    tap_ok(v && v->closing && hp_conns_live(t, 0) == 7 && hp_conns_open(t) == 8,
           "the victim is marked closing: no longer live (8 -> 7), still open until removed");
    tap_ok(!hp_conns_pressed(t, 0) && hp_conns_victim(t, &c[7], 110) == NULL,
           "after one victim the worker is back at its mark: no second victim");
    hp_conns_remove(t, &c[5]);
    tap_ok(hp_conns_open(t) == 7 && hp_conns_live(t, 0) == 7, "a removed victim is no longer open, and counted live once only");
    clear(t);

    /* Only a lagging body is left: it is the victim. */
    t = pressed_table(&p, c, 8, who, at);
    for (int i = 0; i < 7; i++)
        hp_conns_set_phase(t, &c[i], HP_CONN_HANDLED, 100);
    hp_conns_set_phase(t, &c[2], HP_CONN_BODY, 100);
    hp_conns_add_bytes(&c[2], 999); /* under 1000 B/s over 10 s */
    tap_ok(hp_conns_victim(t, &c[7], 110) == &c[2], "a body slower than pressed_body_rate past its first second is a victim");
    clear(t);

    /* A body fast enough, or in its first second, is kept. */
    t = pressed_table(&p, c, 8, who, at);
    for (int i = 0; i < 7; i++)
        hp_conns_set_phase(t, &c[i], HP_CONN_HANDLED, 100);
    hp_conns_set_phase(t, &c[2], HP_CONN_BODY, 100);
    hp_conns_add_bytes(&c[2], 10000); /* 1000 B/s over 10 s: not slower */
    hp_conns_set_phase(t, &c[3], HP_CONN_BODY, 109.5); /* 0 bytes, but half a second old */
    tap_ok(hp_conns_victim(t, &c[7], 110) == NULL && !c[2].closing && !c[3].closing,
           "a body at pressed_body_rate, or within its first second, is not a victim");
    tap_ok(hp_conns_victim(t, &c[7], 111) == &c[2], "the same body a second later, now under the rate, is the victim");
    clear(t);

    /* pressed_body_rate 0: a body is never given up, however slow. */
    hp_conn_policy q = p;
    q.pressed_body_rate = 0;
    t = pressed_table(&q, c, 8, who, at);
    for (int i = 0; i < 7; i++)
        hp_conns_set_phase(t, &c[i], HP_CONN_BODY, 0);
    tap_ok(hp_conns_victim(t, &c[7], 1000) == NULL, "with pressed_body_rate 0 no body is ever a victim");
    clear(t);

    /* Among connections waiting for headers: the client with the most connections, even if newer. */
    hp_client_key busy[8];
    for (int i = 0; i < 8; i++)
        busy[i] = who[i];
    busy[4] = busy[6] = who[6]; /* client 6 holds c[4], c[6] */
    t = pressed_table(&p, c, 8, busy, at);
    v = hp_conns_victim(t, &c[7], 200);
    tap_ok((v == &c[4] || v == &c[6]) && !c[0].closing,
           "among connections waiting for headers, the busiest client's is given up, not the oldest");
    tap_ok(v == &c[4] && !c[6].closing, "within the busiest client, its connection longest in its phase goes first");
    hp_client_key fresh = key_v4("192.0.2.200");
    hp_conns_add(t, &far, &fresh, 0, 99, 200); /* pressed again: 8 live */
    tap_ok(hp_conns_victim(t, &far, 200) == &c[6] && hp_conns_live(t, 0) == 7,
           "a connection already given up is never chosen again (client 6's other connection is)");
    hp_conns_remove(t, &far);
    clear(t);

    /* Same counts: the longest in its phase, which is not the order they were added in. */
    double shuffled[8] = {105, 103, 101, 107, 102, 104, 106, 108};
    t = pressed_table(&p, c, 8, who, shuffled);
    tap_ok(hp_conns_victim(t, &c[7], 200) == &c[2], "among clients of equal counts, the connection longest waiting goes first");
    /* The new connection's own client counts for nothing here: c[7] is the newest and is never chosen. */
    hp_conns_set_phase(t, &c[5], HP_CONN_HEADERS, 300); /* since moves with a phase change */
    hp_conns_add(t, &far, &who[1], 0, 99, 300); /* 9 live on worker 0 (c[2] given up): pressed */
    hp_conn *second = hp_conns_victim(t, &far, 300);
    tap_ok(second == &c[1], "a second victim is chosen among those not closing, by the same order (client 2 of 2, since 103)");
    hp_conns_remove(t, &far);
    clear(t);
}

/* Answers being sent: one whose client read it slower than pressed_reply_rate over a window of
 * HP_CONNS_REPLY_WINDOW_S (2 s) while bytes waited is a victim, after connections waiting for headers and
 * lagging bodies. */
static void replies(void)
{
    hp_conn_policy p = policy_of(8, 1, 0);
    p.pressed_body_rate = 1000;
    p.pressed_reply_rate = 1000;
    p.header_timeout_s = 30;
    p.min_body_rate = 100;
    p.body_grace_s = 10;
    hp_conn c[7], n[3];
    hp_client_key who[10];
    for (int i = 0; i < 10; i++) {
        char text[32];
        snprintf(text, sizeof(text), "198.51.100.%d", i + 1);
        who[i] = key_v4(text);
    }
    hp_conn_table *t = hp_conns_create(&p);
    for (int i = 0; i < 7; i++) {
        hp_conns_add(t, &c[i], &who[i], 0, i, 100);
        hp_conns_set_phase(t, &c[i], HP_CONN_HANDLED, 100);
    }
    hp_conns_set_phase(t, &c[1], HP_CONN_REPLYING, 100);
    hp_conns_reply_progress(t, &c[1], 5000, 0, 101); /* a window opens */
    hp_conns_add(t, &n[0], &who[7], 0, 7, 102);   /* 8 live: pressed */
    hp_conns_reply_progress(t, &c[1], 5000, 0, 102.75);
    tap_ok(hp_conns_victim(t, &n[0], 102.75) == NULL, "an answer not read for 1.75 s is not a victim yet (its window "
           "is not over)");
    hp_conns_reply_progress(t, &c[1], 5000, 0, 103);
    tap_ok(hp_conns_victim(t, &n[0], 103) == &c[1], "an answer whose client read nothing in a 2 s window while bytes "
           "waited is the victim");
    hp_conns_remove(t, &c[1]);
    hp_conns_add(t, &c[1], &who[1], 0, 1, 100);
    hp_conns_set_phase(t, &c[1], HP_CONN_REPLYING, 100);
    hp_conns_set_phase(t, &n[0], HP_CONN_HANDLED, 100); /* 8 live again, only c[1] a candidate */
    hp_conns_reply_progress(t, &c[1], 5000, 1000, 100);
    hp_conns_reply_progress(t, &c[1], 5000, 4000, 102); /* 1500 B/s, its socket full throughout */
    tap_ok(!c[1].reply_lagging && hp_conns_victim(t, &n[0], 102) == NULL,
           "a client reading faster than pressed_reply_rate is no victim, its socket full or not");
    hp_conns_reply_progress(t, &c[1], 5000, 5000, 104); /* 500 B/s over the next window */
    tap_ok(c[1].reply_lagging && hp_conns_victim(t, &n[0], 104) == &c[1],
           "one reading a trickle (500 B/s, under pressed_reply_rate's 1000) over a whole window is the victim: a "
           "slow reader holds its slot as one that does not read");
    hp_conns_remove(t, &c[1]);
    hp_conns_add(t, &c[1], &who[1], 0, 1, 100);
    hp_conns_set_phase(t, &c[1], HP_CONN_REPLYING, 100);
    hp_conns_reply_progress(t, &c[1], 300, 0, 100);
    hp_conns_reply_progress(t, &c[1], 0, 0, 101);
    hp_conns_reply_progress(t, &c[1], 0, 0, 110);
    tap_ok(!c[1].reply_lagging && !c[1].window_open && hp_conns_victim(t, &n[0], 110) == NULL,
           "an answer with nothing waiting in its socket keeps up, whatever its rate");
    hp_conns_reply_progress(t, &c[1], 300, 700, 111);
    hp_conns_set_phase(t, &c[1], HP_CONN_HEADERS, 112);
    hp_conns_set_phase(t, &c[1], HP_CONN_HANDLED, 112.5);
    hp_conns_set_phase(t, &c[1], HP_CONN_REPLYING, 113);
    tap_ok(c[1].unsent == 300 && c[1].acked == 700 && c[1].window_open && c[1].window_since == 111,
           "the window runs on across the connection's next request and answer (its socket counts what was taken)");
    hp_conns_reply_progress(t, &c[1], 300, 800, 113.5);
    tap_ok(c[1].reply_lagging && hp_conns_victim(t, &n[0], 113.5) == &c[1],
           "a client pipelining small answers and reading 40 B/s is measured over both answers: the victim");
    tap_ok(hp_conns_overdue(t, &c[1], 1e6) == NULL && hp_conns_overdue(t, &n[0], 1e6) == NULL,
           "an answer being sent, or a request being handled, is never overdue here (neither header nor body deadline)");
    clear(t);

    /* pressed_reply_rate 0: only an answer read not at all is a victim. */
    p.pressed_reply_rate = 0;
    t = hp_conns_create(&p);
    hp_conns_add(t, &c[0], &who[0], 0, 0, 100);
    hp_conns_set_phase(t, &c[0], HP_CONN_REPLYING, 100);
    hp_conns_reply_progress(t, &c[0], 5000, 0, 100);
    hp_conns_reply_progress(t, &c[0], 5000, 1, 102);
    bool trickle = c[0].reply_lagging;
    hp_conns_reply_progress(t, &c[0], 5000, 1, 104);
    tap_ok(!trickle && c[0].reply_lagging, "with pressed_reply_rate 0 a byte a window keeps an answer off the list, "
           "nothing at all puts it on");
    clear(t);
    p.pressed_reply_rate = 1000;

    /* A stalled answer, a lagging body and a connection waiting for headers: in that order from the end. */
    t = hp_conns_create(&p);
    for (int i = 0; i < 7; i++) {
        hp_conns_add(t, &c[i], &who[i], 0, i, 100);
        hp_conns_set_phase(t, &c[i], HP_CONN_HANDLED, 100);
    }
    hp_conns_set_phase(t, &c[0], HP_CONN_REPLYING, 100);
    hp_conns_reply_progress(t, &c[0], 9000, 0, 100);
    hp_conns_reply_progress(t, &c[0], 9000, 0, 102);
    hp_conns_set_phase(t, &c[2], HP_CONN_BODY, 100);
    hp_conns_set_phase(t, &c[3], HP_CONN_HEADERS, 109);
    hp_conn *got[3];
    for (int i = 0; i < 3; i++) {
        hp_conns_add(t, &n[i], &who[7 + i], 0, 10 + i, 110);
        got[i] = hp_conns_victim(t, &n[i], 110);
        hp_conns_set_phase(t, &n[i], HP_CONN_HANDLED, 110);
    }
    tap_ok(got[0] == &c[3] && got[1] == &c[2] && got[2] == &c[0],
           "a connection waiting for headers goes first, then a lagging body, then a stalled answer");
    clear(t);

    /* hp_conns_victim_on: the guard's thread making room for connections waiting to be accepted. */
    t = hp_conns_create(&p);
    for (int i = 0; i < 7; i++)
        hp_conns_add(t, &c[i], &who[i], 0, i, 100 + i);
    tap_ok(hp_conns_victim_on(t, 0, 200) == NULL, "without pressure hp_conns_victim_on gives up nothing");
    hp_conns_add(t, &n[0], &who[7], 0, 7, 90); /* 8 live; the newest, but the longest waiting */
    tap_ok(hp_conns_victim_on(t, 3, 200) == &n[0] && n[0].closing,
           "under pressure hp_conns_victim_on may choose any connection, the newest too (worker 3 folds onto 0)");
    for (int i = 0; i < 7; i++)
        hp_conns_set_phase(t, &c[i], HP_CONN_HANDLED, 200);
    hp_conns_add(t, &n[1], &who[8], 0, 8, 200);
    hp_conns_set_phase(t, &n[1], HP_CONN_HANDLED, 200);
    tap_ok(hp_conns_pressed(t, 0) && hp_conns_victim_on(t, 0, 300) == NULL,
           "every connection being handled: hp_conns_victim_on finds none");
    clear(t);
    /* Pressed but with a slot free: libmicrohttpd still accepts on that thread, and room is made as each
     * connection comes, not by the guard's thread. */
    hp_conn_policy q = policy_of(16, 1, 0); /* mark 14 */
    t = hp_conns_create(&q);
    hp_conn m[15];
    hp_client_key one = key_v4("203.0.113.9");
    for (int i = 0; i < 15; i++)
        hp_conns_add(t, &m[i], &one, 0, i, 100 + i);
    tap_ok(hp_conns_pressed(t, 0) && hp_conns_victim_on(t, 0, 200) == NULL,
           "a thread pressed but with a slot free (15 of 16): hp_conns_victim_on gives up nothing");
    hp_conns_give_up(t, &m[0]);
    hp_conns_add(t, &n[2], &one, 0, 20, 150);
    tap_ok(hp_conns_victim_on(t, 0, 200) == &m[1],
           "all 16 slots held, one of them closing: hp_conns_victim_on gives up the oldest waiting for headers");
    clear(t);
}

static void overdue(void)
{
    hp_conn_policy p = policy_of(8, 1, 0);
    p.header_timeout_s = 30;
    p.pressed_header_timeout_s = 5;
    p.min_body_rate = 100;
    p.body_grace_s = 10;
    hp_conn_table *t = hp_conns_create(&p);
    hp_client_key k = key_v4("192.0.2.9");
    hp_conn c[8];
    hp_conns_add(t, &c[0], &k, 0, 0, 0);
    tap_ok(hp_conns_overdue(t, &c[0], 29.5) == NULL, "headers within header_timeout_s are not overdue");
    const char *why = hp_conns_overdue(t, &c[0], 30.5);
    tap_ok(why && !strcmp(why, "header_timeout"), "headers past header_timeout_s: header_timeout");
    tap_ok(hp_conns_overdue(t, &c[0], 6) == NULL, "without pressure the shorter pressed_header_timeout_s does not apply");
    for (int i = 1; i < 8; i++)
        hp_conns_add(t, &c[i], &k, 0, i, 0);
    why = hp_conns_overdue(t, &c[0], 6);
    tap_ok(hp_conns_pressed(t, 0) && why && !strcmp(why, "header_timeout"),
           "under pressure headers past pressed_header_timeout_s (5 s) are overdue");
    tap_ok(hp_conns_overdue(t, &c[0], 4.5) == NULL, "under pressure, headers within 5 s are not");

    hp_conns_set_phase(t, &c[1], HP_CONN_BODY, 100);
    tap_ok(hp_conns_overdue(t, &c[1], 109) == NULL, "a body with no bytes yet is not overdue within body_grace_s");
    why = hp_conns_overdue(t, &c[1], 111);
    tap_ok(why && !strcmp(why, "slow_body"), "a body slower than min_body_rate after body_grace_s: slow_body");
    hp_conns_add_bytes(&c[1], 1100);
    tap_ok(hp_conns_overdue(t, &c[1], 111) == NULL, "a body at min_body_rate (1100 B in 11 s) is not overdue");
    tap_ok(hp_conns_overdue(t, &c[1], 1000) && !strcmp(hp_conns_overdue(t, &c[1], 1000), "slow_body"),
           "a body that stops falls under the rate later: slow_body");
    hp_conns_set_phase(t, &c[1], HP_CONN_BODY, 1000);
    tap_ok(c[1].bytes == 0 && c[1].since == 1000 && hp_conns_overdue(t, &c[1], 1005) == NULL,
           "a phase change starts the clock and the byte count again");
    hp_conns_set_phase(t, &c[2], HP_CONN_HANDLED, 0);
    tap_ok(hp_conns_overdue(t, &c[2], 1e6) == NULL, "a request being handled is never overdue here");

    unsigned live = hp_conns_live(t, 0);
    hp_conns_give_up(t, &c[3]);
    hp_conns_give_up(t, &c[3]);
    tap_ok(c[3].closing && hp_conns_live(t, 0) == live - 1 && hp_conns_open(t) == 8,
           "giving up a connection twice counts it once: live drops by one, open stays");
    clear(t);

    /* No header_timeout_s at all: under pressure the pressed deadline still applies, otherwise none. */
    p.header_timeout_s = 0;
    p.min_body_rate = 0;
    t = hp_conns_create(&p);
    hp_conns_add(t, &c[0], &k, 0, 0, 0);
    tap_ok(hp_conns_overdue(t, &c[0], 1e6) == NULL, "header_timeout_s 0 and no pressure: never overdue");
    for (int i = 1; i < 8; i++)
        hp_conns_add(t, &c[i], &k, 0, i, 0);
    tap_ok(hp_conns_overdue(t, &c[0], 6) != NULL, "header_timeout_s 0 under pressure: pressed_header_timeout_s applies");
    hp_conns_set_phase(t, &c[1], HP_CONN_BODY, 0);
    tap_ok(hp_conns_overdue(t, &c[1], 1e6) == NULL, "min_body_rate 0: a body is never slow_body");
    clear(t);

    /* pressed_header_timeout_s 0, or longer than header_timeout_s: header_timeout_s holds under pressure. */
    p.header_timeout_s = 3;
    p.pressed_header_timeout_s = 0;
    t = hp_conns_create(&p);
    for (int i = 0; i < 8; i++)
        hp_conns_add(t, &c[i], &k, 0, i, 0);
    tap_ok(hp_conns_pressed(t, 0) && hp_conns_overdue(t, &c[0], 2.5) == NULL && hp_conns_overdue(t, &c[0], 3.5) != NULL,
           "pressed_header_timeout_s 0: under pressure header_timeout_s is the deadline");
    clear(t);
    p.pressed_header_timeout_s = 10;
    t = hp_conns_create(&p);
    for (int i = 0; i < 8; i++)
        hp_conns_add(t, &c[i], &k, 0, i, 0);
    tap_ok(hp_conns_overdue(t, &c[0], 3.5) != NULL,
           "a pressed deadline longer than header_timeout_s never lengthens it");
    clear(t);
}

int main(void)
{
    keys();
    marks();
    admission();
    pressure();
    victims();
    replies();
    overdue();
    return tap_done();
}
