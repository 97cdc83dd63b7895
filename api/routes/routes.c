/* The service's routes: every path the daemon answers, its method, its handler and what the server checks
 * before calling it (api/http/route.h's hp_route). Adding a route is a row here plus its handler. */
#include "api/routes/routes.h"

#include "api/frames/early_decode.h"
#include "api/frames/render.h"

const hp_route hp_api_routes[] = {
    /* method  path             handler            body begins               body   open   metrics frame */
    {"GET",    "/livez",        hp_route_livez,    NULL,                     false, true,  false,  false},
    {"GET",    "/readyz",       hp_route_readyz,   NULL,                     false, true,  false,  false},
    {"POST",   "/v1/render",    hp_route_render,   hp_route_render_begins,   true,  false, false,  true},
    {"POST",   "/v1/analyze",   hp_route_analyze,  hp_route_analyze_begins,  true,  false, false,  true},
    {"GET",    "/v1/gpu",       hp_route_gpu,      NULL,                     false, false, false,  false},
    {"GET",    "/metrics",      hp_route_metrics,  NULL,                     false, false, true,   false},
    {"GET",    "/v1/stats",     hp_route_stats,    NULL,                     false, false, false,  false},
    {"GET",    "/v1/params",    hp_route_params,   NULL,                     false, false, false,  false},
    {"GET",    "/v1/ocio",      hp_route_ocio,     NULL,                     false, false, false,  false},
    /* Behind the token like /v1/params, which it is made from: it names the daemon's version (as /v1/stats
     * does). A client that can call the API has the token to read it. */
    {"GET",    "/openapi.json", hp_route_openapi,  NULL,                     false, false, false,  false},
    /* The console's files are public, as a page is before it can ask for the token (api/routes/console.c). */
    {"GET",    "/",             hp_route_console,  NULL,                     false, true,  false,  false},
    {"GET",    "/console/",     hp_route_console,  NULL,                     false, true,  false,  false},
};

const size_t hp_api_route_count = sizeof hp_api_routes / sizeof hp_api_routes[0];
