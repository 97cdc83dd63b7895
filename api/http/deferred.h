/* Replies that come later (private to api/): a route that hands its work to another thread defers its
 * reply and its connection is suspended until the reply is handed over (route.h: hp_request_defer,
 * hp_deferred_complete). This room keeps the server's list of them for three jobs: a drain that times out
 * answers those still waiting; the server's end detaches the rest, whose replies are then dropped; and a
 * watch notices a client that hangs up while its connection is suspended (libmicrohttpd does not watch a
 * suspended socket), so that its work is cancelled at once rather than run for nobody. */
#ifndef HP_DEFERRED_H
#define HP_DEFERRED_H

#include <pthread.h>
#include <stdbool.h>

#include "api/http/route.h"
#include "common/error.h"

typedef struct hp_deferred_list {
    struct hp_deferred *head; /* under the process's deferred lock, as every slot's links */
    pthread_t watch;
    pthread_cond_t wake;
    bool watching, stop;
    bool forced; /* the drain timed out and answered those waiting: one deferred after that is answered at once */
    double drain_timeout_s;
} hp_deferred_list;

/* Starts the watch thread. */
hp_code hp_deferred_list_init(hp_deferred_list *list, hp_err *err);
/* Every slot still waiting for its reply is answered 503 (the drain's timeout, in the message) and its
 * connection resumed; returns how many. */
unsigned hp_deferred_list_force(hp_deferred_list *list, double drain_timeout_s);
/* Stops the watch and detaches the slots: replies that still come are dropped. After the server's last
 * connection is gone (MHD_stop_daemon). */
void hp_deferred_list_detach(hp_deferred_list *list);

/* The dispatcher, after a handler that deferred its reply: suspends the connection, or resumes it at once
 * when the reply came first. */
void hp_deferred_suspend(hp_request *req);
/* Whether the deferred reply has been handed over (on the connection's resumption). */
bool hp_deferred_ready(hp_deferred *slot);
/* The request has completed (its connection is going): a reply that still comes is dropped. */
void hp_deferred_request_gone(hp_deferred *slot);

#endif
