/* The API described for programs: an OpenAPI 3.1 document (GET /openapi.json; issue 18), made at each request
 * from what the server itself runs on, so that it cannot drift from it:
 *   - the route table (api/routes/routes.c, hp_api_routes[]): every (method, path) of the document is a row of it, and
 *     every row is in the document; a row's `open` column gives the operation's security;
 *   - the parameter table as GET /v1/params serves it (hp_param_schema_json, made from pipeline/params.c, the
 *     table the parsers read): each parameter a query parameter of POST /v1/render and /v1/analyze, and a
 *     key of the JSON `params` object (components/schemas/Params);
 *   - the console's embedded files (api/routes/assets.h): the files and types GET /console/{file} answers.
 * What no table holds (what each route answers, its errors, the request bodies) is written here, beside the
 * routes' own files' error codes; tests/http/test_openapi.mjs validates the document with an OpenAPI
 * validator and checks it against the route table, /v1/params and real answers. */
#ifndef HP_OPENAPI_H
#define HP_OPENAPI_H

#include <jansson.h>
#include <stdbool.h>

/* The document, with info.version = version (the daemon's); metrics_open: /metrics is answered without the
 * token (the setting), so its operation says security []. NULL when out of memory. */
json_t *hp_openapi_document(const char *version, bool metrics_open);

#endif
