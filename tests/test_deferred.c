/* Deferred replies (api/http/deferred.c) under each interleaving of the threads that touch a suspended request:
 * the handler's (suspend), the completer's (the finishing pool), the watch's (a client gone), the drain's
 * (force), and libmicrohttpd's, which ends the request (request_gone, then free, as http.c's on_completed).
 *
 * libmicrohttpd's suspend, resume and connection info are this file's own (the executable's definitions
 * take precedence over the library's): a connection records its suspensions and resumptions, and a resume
 * of a connection whose request has ended fails the test. A resume can also play libmicrohttpd's polling
 * thread: it starts the request's end on another thread at once, as a resumed connection whose answer is
 * sent completes, and looks whether that end could finish while the resume was still running. That is the
 * race ThreadSanitizer found: the completer read req->connection after letting go of the slot's lock, so the
 * request could be freed under it. Each interleaving is driven in a fixed order; the last test runs them in
 * random orders on several threads (and under ThreadSanitizer in the test command's TSan pass). */
#include <errno.h>
#include <microhttpd.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "api/http/deferred.h"
#include "api/http/route.h"
#include "tap.h"

/* --- libmicrohttpd's side, played here --------------------------------------------------------------------- */

#define ALIVE 0x600dc0deu

struct MHD_Connection {
    _Atomic unsigned magic; /* ALIVE while its request is there */
    _Atomic int suspends, resumes;
    _Atomic int bad_resumes; /* of a connection whose request had ended, or not suspended */
    _Atomic bool suspended;
    int fd;
    /* The polling thread's part, when set: a resume starts the request's end on a thread of its own. */
    bool end_on_resume;
    int end_wait_ms; /* how long the resume looks for that end finishing */
    pthread_t ender;
    _Atomic bool ender_started, ended;
    _Atomic bool ended_during_resume;
};

typedef struct fake_request {
    hp_request req;
    struct MHD_Connection conn;
    unsigned answered; /* the status of the reply the request held at its end */
} fake_request;

static void *end_request_thread(void *arg);

void MHD_suspend_connection(struct MHD_Connection *c)
{
    c->suspends++;
    c->suspended = true;
}

void MHD_resume_connection(struct MHD_Connection *c)
{
    if (c->magic != ALIVE || !c->suspended)
        c->bad_resumes++;
    c->suspended = false;
    c->resumes++;
    if (!c->end_on_resume || c->ender_started)
        return;
    c->ender_started = true;
    pthread_create(&c->ender, NULL, end_request_thread, c);
    /* A while for that end to finish: it must not, while the resume that started it runs. */
    for (int i = 0; i < c->end_wait_ms * 10 && !c->ended; i++)
        usleep(100);
    if (c->ended)
        c->ended_during_resume = true;
}

const union MHD_ConnectionInfo *MHD_get_connection_info(struct MHD_Connection *c, enum MHD_ConnectionInfoType type,
                                                        ...)
{
    static _Thread_local union MHD_ConnectionInfo info;
    if (type != MHD_CONNECTION_INFO_CONNECTION_FD)
        return NULL;
    info.connect_fd = c->fd;
    return &info;
}

/* --- The requests ---------------------------------------------------------------------------------------- */

static fake_request *request_new(hp_deferred_list *list, int fd)
{
    fake_request *f = calloc(1, sizeof(*f));
    f->conn.magic = ALIVE;
    f->conn.fd = fd;
    f->conn.end_wait_ms = 200;
    f->req.connection = &f->conn;
    f->req.deferreds = list;
    return f;
}

/* What on_completed does: the slot told, the reply released, the request freed (its memory poisoned first:
 * a resume of it fails the test). */
static void request_end(fake_request *f)
{
    if (f->req.slot)
        hp_deferred_request_gone(f->req.slot);
    f->answered = f->req.deferred_reply.status;
    hp_reply_release(&f->req.deferred_reply);
    f->conn.magic = 0;
    f->conn.ended = true;
}

static void *end_request_thread(void *arg)
{
    struct MHD_Connection *c = arg;
    fake_request *f = (fake_request *)((char *)c - offsetof(fake_request, conn));
    request_end(f);
    return NULL;
}

static void request_free(fake_request *f)
{
    if (f->conn.ender_started)
        pthread_join(f->conn.ender, NULL);
    free(f);
}

static hp_reply reply_of(unsigned status)
{
    hp_reply r = {0};
    hp_reply_error(&r, status, "test", NULL, "status %u", status);
    return r;
}

/* --- The interleavings ------------------------------------------------------------------------------------ */

static void reply_after_suspend(hp_deferred_list *list)
{
    fake_request *f = request_new(list, -1);
    f->conn.end_on_resume = true;
    hp_deferred *slot = hp_request_defer(&f->req);
    hp_deferred_suspend(&f->req);
    tap_ok(f->conn.suspends == 1 && f->conn.resumes == 0, "reply after suspend: suspended, not resumed yet");
    hp_reply r = reply_of(200);
    hp_deferred_complete(slot, &r);
    pthread_join(f->conn.ender, NULL);
    f->conn.ender_started = false;
    tap_ok(f->conn.resumes == 1 && f->conn.bad_resumes == 0 && f->answered == 200,
           "reply after suspend: the completer resumes it once, and its reply is the request's at its end");
    tap_ok(!f->conn.ended_during_resume && f->conn.ended,
           "reply after suspend: the request's end, started by the resume, cannot finish while the completer still "
           "holds the connection (it waits for the slot's lock)");
    request_free(f);
}

static void reply_before_suspend(hp_deferred_list *list)
{
    fake_request *f = request_new(list, -1);
    hp_deferred *slot = hp_request_defer(&f->req);
    hp_reply r = reply_of(200);
    hp_deferred_complete(slot, &r); /* the frame finished before its handler returned */
    tap_ok(f->conn.resumes == 0 && f->conn.suspends == 0 && hp_deferred_ready(slot),
           "reply before suspend: handed over, nothing to resume yet");
    f->conn.end_on_resume = true;
    hp_deferred_suspend(&f->req);
    pthread_join(f->conn.ender, NULL);
    f->conn.ender_started = false;
    tap_ok(f->conn.suspends == 1 && f->conn.resumes == 1 && f->conn.bad_resumes == 0,
           "reply before suspend: the handler suspends and resumes at once, once");
    tap_ok(!f->conn.ended_during_resume && f->conn.ended,
           "reply before suspend: the request cannot end while the handler's resume runs");
    request_free(f);
}

typedef struct gone_case {
    fake_request *f;
    hp_deferred *slot;
    _Atomic int told;
    pthread_t finisher;
} gone_case;

/* The finishing pool's part after a cancel: the job is answered as cancelled (499). */
static void *finish_cancelled(void *arg)
{
    gone_case *g = arg;
    hp_reply r = reply_of(499);
    hp_deferred_complete(g->slot, &r);
    return NULL;
}

/* The watch's call, under the slot's lock: it must not complete the slot itself, so the cancel goes to another
 * thread, as the worker's cancel hands the job to the finishing pool. */
static void on_gone(void *arg)
{
    gone_case *g = arg;
    pthread_create(&g->finisher, NULL, finish_cancelled, g);
    g->told++; /* after the thread's id is stored: the test joins it once it sees this */
}

static void client_gone_while_suspended(hp_deferred_list *list)
{
    int sv[2];
    if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv) != 0) {
        tap_ok(false, "client gone while suspended: socketpair: %s", strerror(errno));
        return;
    }
    gone_case g = {0};
    g.f = request_new(list, sv[0]);
    g.f->conn.end_on_resume = true;
    g.slot = hp_request_defer(&g.f->req);
    hp_deferred_watch(g.slot, on_gone, &g);
    hp_deferred_suspend(&g.f->req);
    tap_ok(!hp_deferred_client_gone(g.slot), "client gone while suspended: a client still there is not gone");
    close(sv[1]); /* the client hangs up */
    for (int i = 0; i < 2000 && !g.told; i++)
        usleep(1000);
    tap_ok(g.told == 1, "client gone while suspended: the watch tells the job once (within 2 s; it looks every %d ms)",
           HP_DEFERRED_WATCH_MS);
    if (g.told)
        pthread_join(g.finisher, NULL);
    if (g.f->conn.ender_started)
        pthread_join(g.f->conn.ender, NULL);
    g.f->conn.ender_started = false;
    tap_ok(g.f->conn.resumes == 1 && g.f->conn.bad_resumes == 0 && g.f->conn.ended && !g.f->conn.ended_during_resume &&
               g.f->answered == 499,
           "client gone while suspended: the cancelled job's answer resumes the connection once, and its end waits "
           "for that resume");
    usleep(3 * HP_DEFERRED_WATCH_MS * 1000);
    tap_ok(g.told == 1, "client gone while suspended: not told again once answered");
    close(sv[0]);
    request_free(g.f);
}

/* On a list of its own: after the force, the list stays forced. */
static void drain_while_suspended(void)
{
    hp_deferred_list own, *list = &own;
    hp_err err = {0};
    if (hp_deferred_list_init(list, &err) != HP_OK) {
        tap_ok(false, "drain while suspended: the watch starts: %s", err.message);
        return;
    }
    fake_request *f = request_new(list, -1);
    f->conn.end_on_resume = true;
    hp_deferred *slot = hp_request_defer(&f->req);
    hp_deferred_suspend(&f->req);
    unsigned forced = hp_deferred_list_force(list, 1.5);
    pthread_join(f->conn.ender, NULL);
    f->conn.ender_started = false;
    tap_ok(forced == 1 && f->conn.resumes == 1 && f->conn.bad_resumes == 0 && !f->conn.ended_during_resume &&
               f->answered == 503,
           "drain while suspended: the drain answers it and resumes it once, the request's end waiting for the "
           "resume");
    hp_reply r = reply_of(200);
    hp_deferred_complete(slot, &r); /* the frame finished after the drain had answered */
    tap_ok(f->conn.resumes == 1 && f->conn.bad_resumes == 0, "drain while suspended: the completer that comes after "
           "the request's end drops its reply and resumes nothing");
    request_free(f);

    /* The drain and the completer the other way round: the completer first, the drain then leaves it alone. */
    f = request_new(list, -1);
    slot = hp_request_defer(&f->req);
    hp_deferred_suspend(&f->req);
    r = reply_of(200);
    hp_deferred_complete(slot, &r);
    forced = hp_deferred_list_force(list, 1.5);
    tap_ok(forced == 0 && f->conn.resumes == 1 && f->conn.bad_resumes == 0,
           "drain after the reply: nothing forced, resumed once (by the completer)");
    request_end(f);
    request_free(f);

    /* A request deferred after the force (its body came in during the drain's last wait): libmicrohttpd's stop
     * aborts on a connection still suspended, so the drain answers it at once. */
    f = request_new(list, -1);
    slot = hp_request_defer(&f->req);
    hp_deferred_suspend(&f->req);
    tap_ok(f->conn.suspends == 1 && f->conn.resumes == 1 && f->req.deferred_reply.status == 503,
           "a request deferred after the drain's force is answered 503 and resumed at once");
    r = reply_of(200);
    hp_deferred_complete(slot, &r);
    tap_ok(f->conn.resumes == 1 && f->req.deferred_reply.status == 503, "... and its frame's reply, later, is dropped");
    request_end(f);
    request_free(f);
    hp_deferred_list_detach(list);
}

/* --- Random orders on several threads --------------------------------------------------------------------- */

typedef struct race {
    fake_request *f;
    hp_deferred *slot;
    hp_deferred_list *list;
    unsigned seed;
    _Atomic bool suspended_yet;
} race;

static void *race_complete(void *arg)
{
    race *r = arg;
    if (rand_r(&r->seed) % 2)
        usleep(rand_r(&r->seed) % 300);
    hp_reply rep = reply_of(200);
    hp_deferred_complete(r->slot, &rep);
    return NULL;
}

static void *race_force(void *arg)
{
    race *r = arg;
    usleep(rand_r(&r->seed) % 300);
    hp_deferred_list_force(r->list, 1.0);
    return NULL;
}

/* 300 requests, each with its completer and a drain racing the handler's suspend; libmicrohttpd ends each
 * once it has been resumed (as a resumed connection's answer completes it). */
static void random_orders(hp_deferred_list *list)
{
    int bad = 0, unresumed = 0, during = 0;
    for (unsigned i = 0; i < 300; i++) {
        race r = {.list = list, .seed = i * 2654435761u};
        r.f = request_new(list, -1);
        r.f->conn.end_on_resume = true;
        r.f->conn.end_wait_ms = 2;
        r.slot = hp_request_defer(&r.f->req);
        pthread_t a, b;
        pthread_create(&a, NULL, race_complete, &r);
        bool drain = i % 3 == 0;
        if (drain)
            pthread_create(&b, NULL, race_force, &r);
        if (rand_r(&r.seed) % 2)
            usleep(rand_r(&r.seed) % 300);
        hp_deferred_suspend(&r.f->req);
        pthread_join(a, NULL);
        if (drain)
            pthread_join(b, NULL);
        if (r.f->conn.ender_started)
            pthread_join(r.f->conn.ender, NULL);
        bad += r.f->conn.bad_resumes;
        during += r.f->conn.ended_during_resume;
        unresumed += r.f->conn.resumes != 1;
        r.f->conn.ender_started = false;
        if (!r.f->conn.ended)
            request_end(r.f);
        request_free(r.f);
    }
    tap_ok(bad == 0 && unresumed == 0 && during == 0, "300 requests with the completer, a drain and the suspend in "
           "random orders: each resumed exactly once, never after its end, and never ended while being resumed "
           "(%d bad, %d not once, %d during)", bad, unresumed, during);
}

int main(void)
{
    hp_deferred_list list;
    hp_err err = {0};
    if (hp_deferred_list_init(&list, &err) != HP_OK) {
        tap_ok(false, "the watch starts: %s", err.message);
        return tap_done();
    }
    reply_after_suspend(&list);
    reply_before_suspend(&list);
    client_gone_while_suspended(&list);
    drain_while_suspended();
    random_orders(&list);
    hp_deferred_list_detach(&list);
    return tap_done();
}
