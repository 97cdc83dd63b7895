/* Health endpoints for a supervisor or load balancer. /livez says the process is worth keeping (restart it
 * if not): 503 only after the device is lost, which nothing short of a new process recovers from here.
 * /readyz says it should get work (take it out of rotation if not): 503 until every pipeline is warm,
 * while the API's address accepts no connection (its slots all hold requests in progress), while draining,
 * and after the device is lost. */
#include "api/routes/routes.h"

void hp_route_livez(hp_request *request, hp_reply *reply)
{
    if (hp_http_get_state(request->http) == HP_SERVICE_DEVICE_LOST) {
        hp_reply_error(reply, 503, "device_lost", NULL, "the GPU was lost: restart the process for a new device");
        return;
    }
    hp_reply_json(reply, 200, json_pack("{s:s}", "status", "alive"));
}

void hp_route_readyz(hp_request *request, hp_reply *reply)
{
    switch (hp_http_get_state(request->http)) {
    case HP_SERVICE_READY:
        if (!hp_http_accepting(request->http)) {
            /* A balancer would keep sending work to an address that takes no connection. */
            hp_reply_error(reply, 503, "not_accepting", NULL, "the API's address accepts no connection now: every "
                           "slot holds a request in progress (max_connections)");
            hp_reply_header_add(reply, "Retry-After", "1");
            return;
        }
        hp_reply_json(reply, 200, json_pack("{s:s}", "status", "ready"));
        return;
    case HP_SERVICE_STARTING:
        hp_reply_error(reply, 503, "not_ready", NULL, "starting: choosing the GPU and warming pipelines");
        /* Worth retrying soon; a drain ends with the process, so it gets no Retry-After. */
        hp_reply_header_add(reply, "Retry-After", "1");
        return;
    case HP_SERVICE_DRAINING:
        hp_reply_error(reply, 503, "not_ready", NULL, "draining: shutting down, finishing requests in flight");
        return;
    case HP_SERVICE_DEVICE_LOST:
        /* No Retry-After: this process does not get its device back (/livez asks for a restart). */
        hp_reply_error(reply, 503, "not_ready", NULL, "device lost: the GPU stopped responding");
        return;
    }
}
