/* The routes that describe the API to programs: GET /v1/params, the parameter table as data (the console
 * builds its form from it), made from the one table in pipeline/params.c. */
#include "api/params_json.h"
#include "api/route.h"

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
