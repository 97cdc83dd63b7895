/* The service's routes: the table the HTTP server answers from (routes.c), and the handlers of the routes
 * that describe the daemon rather than take a frame (the frames' are api/frames/render.h's). Adding a route is
 * one row in routes.c plus its handler. */
#ifndef HP_ROUTES_H
#define HP_ROUTES_H

#include <stddef.h>

#include "api/http/route.h"

extern const hp_route hp_api_routes[];
extern const size_t hp_api_route_count;

/* health.c: GET /livez, GET /readyz. */
void hp_route_livez(hp_request *request, hp_reply *reply);
void hp_route_readyz(hp_request *request, hp_reply *reply);

/* gpu_status.c: GET /v1/gpu, GET /metrics, GET /v1/stats (the last minute, api/http/live_stats.h). */
void hp_route_gpu(hp_request *request, hp_reply *reply);
void hp_route_metrics(hp_request *request, hp_reply *reply);
void hp_route_stats(hp_request *request, hp_reply *reply);

/* console.c: GET / and GET /console/... (issue 18): the web console's embedded files, with the headers that
 * keep a page of ours from running anything but its own scripts; 404 when the console is off. */
void hp_route_console(hp_request *request, hp_reply *reply);

/* ocio_route.c: GET /v1/ocio (issue 34): the studio's OCIO config as clients and the console need it. */
void hp_route_ocio(hp_request *request, hp_reply *reply);

/* describe.c: GET /v1/params (the parameter table as data) and GET /openapi.json (the API described). */
void hp_route_params(hp_request *request, hp_reply *reply);
void hp_route_openapi(hp_request *request, hp_reply *reply);

#endif
