/* Replies that come later: the slots, the server's list of them, and the watch for clients that hang up
 * (api/http/deferred.h). */
#include "api/http/deferred.h"

#include <errno.h>
#include <microhttpd.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>

#include "common/log.h"

/* A request's deferred reply and its connection have one owner: the slot's lock. Whoever holds it decides,
 * and the connection is suspended and resumed under it alone:
 *   - the handler's thread suspends the connection (hp_deferred_suspend), or resumes it at once when the reply
 *     came first;
 *   - the completer (the finishing thread, hp_deferred_complete) or a drain that timed out
 *     (hp_deferred_list_force) hands the reply over and resumes a suspended connection;
 *   - the watch tells the job that its client has gone (it is completed as cancelled, as above);
 *   - libmicrohttpd's thread ends the request (hp_deferred_request_gone, from the request's completion):
 *     req becomes NULL, and nothing touches the request or its connection after that.
 * A suspended connection cannot complete until it is resumed, and it is resumed only under the lock with req
 * still set: so a resume never reaches a request that is gone, whichever of the completer, the watch, the
 * drain and the connection's end comes first (docs/RELIABILITY.md, "Threads"). Before, the completer read
 * req->connection after letting go of the lock, which ThreadSanitizer saw race with the request's free. */
struct hp_deferred {
    pthread_mutex_t lock;
    hp_request *req; /* NULL once the request is gone */
    int refs;        /* the request's and the completer's */
    bool suspended;  /* suspended by us and not yet resumed */
    bool reply_ready;
    bool forced;     /* answered by a drain that timed out: the completer's reply is dropped */
    void (*gone)(void *arg); /* hp_deferred_watch; NULL once told */
    void *gone_arg;
    hp_deferred_list *list; /* whose list it is in, or NULL (under deferred_lock, as the links) */
    struct hp_deferred *prev, *next;
};

/* The lists of deferred replies and each one's links, under one lock of the process's: a reply can be
 * completed by a worker after its server is gone (hp_deferred_list_detach). The order, where both are
 * taken: deferred_lock, then a slot's lock. */
static pthread_mutex_t deferred_lock = PTHREAD_MUTEX_INITIALIZER;

static void slot_unlink(hp_deferred *d)
{
    pthread_mutex_lock(&deferred_lock);
    if (d->list) {
        if (d->prev)
            d->prev->next = d->next;
        else
            d->list->head = d->next;
        if (d->next)
            d->next->prev = d->prev;
        d->list = NULL;
    }
    pthread_mutex_unlock(&deferred_lock);
}

static void slot_unref(hp_deferred *d)
{
    pthread_mutex_lock(&d->lock);
    int refs = --d->refs;
    pthread_mutex_unlock(&d->lock);
    if (refs == 0) {
        slot_unlink(d);
        pthread_mutex_destroy(&d->lock);
        free(d);
    }
}

hp_deferred *hp_request_defer(hp_request *req)
{
    hp_deferred *d = calloc(1, sizeof(*d));
    if (!d)
        return NULL;
    pthread_mutex_init(&d->lock, NULL);
    d->req = req;
    d->refs = 2;
    pthread_mutex_lock(&deferred_lock);
    d->list = req->deferreds;
    d->next = d->list->head;
    if (d->next)
        d->next->prev = d;
    d->list->head = d;
    pthread_mutex_unlock(&deferred_lock);
    req->slot = d;
    req->deferred = true;
    return d;
}

void hp_request_undefer(hp_request *req)
{
    hp_deferred *d = req->slot;
    if (!d)
        return;
    req->slot = NULL;
    req->deferred = false;
    slot_unlink(d);
    pthread_mutex_destroy(&d->lock);
    free(d);
}

/* Under the slot's lock: resumes a connection this slot suspended. libmicrohttpd's resume only marks it and
 * wakes its polling thread (its inter-thread channel); the request's completion, which ends the slot's hold
 * on it, waits for the lock (hp_deferred_request_gone). */
static void resume_locked(hp_deferred *d)
{
    if (d->suspended && d->req) {
        MHD_resume_connection(d->req->connection);
        d->suspended = false;
    }
}

void hp_deferred_complete(hp_deferred *d, hp_reply *reply)
{
    pthread_mutex_lock(&d->lock);
    hp_request *req = d->req;
    bool taken = req && !d->forced;
    if (taken) {
        req->deferred_reply = *reply;
        memset(reply, 0, sizeof(*reply));
        d->reply_ready = true;
        resume_locked(d);
    }
    d->gone = NULL;
    pthread_mutex_unlock(&d->lock);
    if (!taken)
        hp_reply_release(reply); /* the request is gone, or was answered by the drain: nobody to answer */
    slot_unref(d);
}

void hp_deferred_watch(hp_deferred *d, void (*gone)(void *arg), void *arg)
{
    pthread_mutex_lock(&d->lock);
    if (!d->reply_ready) {
        d->gone = gone;
        d->gone_arg = arg;
    }
    pthread_mutex_unlock(&d->lock);
}

/* Under the slot's lock: the drain's answer (503) for a request it reached, or one deferred after it. */
static void force_locked(hp_deferred *d, double drain_timeout_s)
{
    hp_reply_error(&d->req->deferred_reply, 503, "not_ready", NULL, "draining: shutting down, and this request did "
                   "not finish within the drain timeout (%g s)", drain_timeout_s);
    d->reply_ready = d->forced = true;
    resume_locked(d);
}

void hp_deferred_suspend(hp_request *req)
{
    hp_deferred *d = req->slot;
    /* A request deferred after the drain's force (its body came in during the last wait) is answered by the
     * drain at once: libmicrohttpd's stop would abort on a connection still suspended. */
    pthread_mutex_lock(&deferred_lock);
    bool forced = d->list && d->list->forced;
    double drain_timeout_s = forced ? d->list->drain_timeout_s : 0;
    pthread_mutex_lock(&d->lock);
    pthread_mutex_unlock(&deferred_lock);
    if (forced && !d->reply_ready)
        force_locked(d, drain_timeout_s);
    MHD_suspend_connection(req->connection);
    d->suspended = true;
    if (d->reply_ready) /* the reply came first: resume at once */
        resume_locked(d);
    pthread_mutex_unlock(&d->lock);
}

bool hp_deferred_ready(hp_deferred *d)
{
    pthread_mutex_lock(&d->lock);
    bool ready = d->reply_ready;
    pthread_mutex_unlock(&d->lock);
    return ready;
}

void hp_deferred_request_gone(hp_deferred *d)
{
    pthread_mutex_lock(&d->lock);
    d->req = NULL;
    d->gone = NULL;
    pthread_mutex_unlock(&d->lock);
    slot_unref(d);
}

/* --- The watch ----------------------------------------------------------------------------------------
 *
 * A suspended connection is not polled by libmicrohttpd, so a client that hangs up while its frame waits
 * in the queue would be noticed only when the frame's reply is written, after the GPU and the encoder
 * have done the work, and the frame's memory would be held until then. The watch peeks at each suspended
 * socket every HP_DEFERRED_WATCH_MS: 0 bytes from a readable socket is the peer's end of stream (a byte,
 * such as a pipelined request, is left where it is). poll() on the sockets would wake sooner, but it
 * would see a readable socket where a client merely pipelines, and the budget of a peek per waiting
 * request every 50 ms (queue_depth of them at most) is small. */

static bool peer_closed(struct MHD_Connection *connection)
{
    const union MHD_ConnectionInfo *ci = MHD_get_connection_info(connection, MHD_CONNECTION_INFO_CONNECTION_FD);
    if (!ci)
        return false;
    char byte;
    ssize_t n = recv(ci->connect_fd, &byte, 1, MSG_PEEK | MSG_DONTWAIT);
    return n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR);
}

bool hp_deferred_client_gone(hp_deferred *d)
{
    pthread_mutex_lock(&d->lock);
    bool gone = !d->reply_ready && d->req && peer_closed(d->req->connection);
    pthread_mutex_unlock(&d->lock);
    return gone;
}

/* Under deferred_lock: tells each slot whose client has gone. gone() runs under the slot's lock, which the
 * completer takes before it frees what gone() is given (hp_deferred_watch). */
static void watch_once(hp_deferred_list *list)
{
    for (hp_deferred *d = list->head; d; d = d->next) {
        pthread_mutex_lock(&d->lock);
        if (d->gone && d->suspended && !d->reply_ready && d->req && peer_closed(d->req->connection)) {
            void (*gone)(void *) = d->gone;
            d->gone = NULL;
            gone(d->gone_arg);
        }
        pthread_mutex_unlock(&d->lock);
    }
}

static void *watch_main(void *arg)
{
    pthread_setname_np(pthread_self(), "hp-watch"); /* top -H, perf and /proc name it */
    hp_deferred_list *list = arg;
    pthread_mutex_lock(&deferred_lock);
    while (!list->stop) {
        watch_once(list);
        struct timespec until;
        clock_gettime(CLOCK_MONOTONIC, &until);
        until.tv_nsec += HP_DEFERRED_WATCH_MS * 1000000L;
        if (until.tv_nsec >= 1000000000L)
            until.tv_sec++, until.tv_nsec -= 1000000000L;
        while (!list->stop && pthread_cond_timedwait(&list->wake, &deferred_lock, &until) != ETIMEDOUT)
            ;
    }
    pthread_mutex_unlock(&deferred_lock);
    return NULL;
}

hp_code hp_deferred_list_init(hp_deferred_list *list, hp_err *err)
{
    memset(list, 0, sizeof(*list));
    pthread_condattr_t attr;
    pthread_condattr_init(&attr);
    pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
    pthread_cond_init(&list->wake, &attr);
    pthread_condattr_destroy(&attr);
    if (pthread_create(&list->watch, NULL, watch_main, list) != 0) {
        pthread_cond_destroy(&list->wake);
        return hp_fail(err, HP_ERR_INTERNAL, "cannot start the thread that watches waiting clients");
    }
    list->watching = true;
    return HP_OK;
}

unsigned hp_deferred_list_force(hp_deferred_list *list, double drain_timeout_s)
{
    unsigned forced = 0;
    pthread_mutex_lock(&deferred_lock);
    list->forced = true;
    list->drain_timeout_s = drain_timeout_s;
    for (hp_deferred *d = list->head; d; d = d->next) {
        pthread_mutex_lock(&d->lock);
        if (d->req && !d->reply_ready) {
            /* One not yet suspended sees reply_ready when its handler returns and resumes itself. The resumed
             * connection's completion unlinks its slot on libmicrohttpd's thread, which waits for
             * deferred_lock: resuming never waits for that thread. */
            force_locked(d, drain_timeout_s);
            forced++;
        }
        pthread_mutex_unlock(&d->lock);
    }
    pthread_mutex_unlock(&deferred_lock);
    return forced;
}

void hp_deferred_list_detach(hp_deferred_list *list)
{
    pthread_mutex_lock(&deferred_lock);
    list->stop = true;
    pthread_cond_broadcast(&list->wake);
    pthread_mutex_unlock(&deferred_lock);
    if (list->watching)
        pthread_join(list->watch, NULL);
    list->watching = false;
    pthread_cond_destroy(&list->wake);
    /* Replies still to come (frames the worker finishes after this) no longer belong to a server. */
    pthread_mutex_lock(&deferred_lock);
    for (hp_deferred *d = list->head, *next; d; d = next) {
        next = d->next;
        d->list = NULL;
        d->prev = d->next = NULL;
    }
    list->head = NULL;
    pthread_mutex_unlock(&deferred_lock);
}
