/* The routes that describe the API to programs: GET /v1/params, the parameter table as data (the console
 * builds its form from it), made from the one table in pipeline/params.c, and GET /openapi.json, the whole API
 * as OpenAPI 3.1, made from that table and the route table (api/routes/routes.c, api/routes/openapi.h). */
#include "api/routes/openapi.h"
#include "api/frames/params_json.h"
#include "api/routes/routes.h"

void hp_route_params(hp_request *request, hp_reply *reply)
{
    (void)request;
    json_t *schema = hp_param_schema_json();
    if (!schema) {
        hp_reply_error(reply, 503, "out_of_memory", NULL, "out of memory describing the parameters");
        return;
    }
    hp_reply_json(reply, 200, schema);
}

void hp_route_openapi(hp_request *request, hp_reply *reply)
{
    json_t *document = hp_openapi_document(hp_http_version(request->http), hp_http_metrics_open(request->http));
    if (!document) {
        hp_reply_error(reply, 503, "out_of_memory", NULL, "out of memory describing the API");
        return;
    }
    hp_reply_json(reply, 200, document);
}
