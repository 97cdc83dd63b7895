/* Request parameters on the wire: JSON bodies and URL query strings in, the effective parameters out.
 * Every name, range and default comes from the schema table (pipeline/params.c); docs/PARAMETERS.md
 * describes the format for clients.
 *
 * Both parsers apply what the request sets on top of *p (start from hp_params_defaults) and finish with
 * hp_params_check. On failure *p is unchanged and err names the parameter: err->field holds its dotted
 * name (empty when the request as a whole is malformed) and err->message says what it accepts. */
#ifndef HP_PARAMS_JSON_H
#define HP_PARAMS_JSON_H

#include <jansson.h>

#include "common/error.h"
#include "pipeline/params.h"

/* obj: a JSON object, nested by stage ({"tonemap": {"operator": "hable"}}), with dotted keys
 * ({"tonemap.operator": "hable"}), or both mixed. Refused: unknown keys (with the closest known name when
 * one is near), values of the wrong JSON type, out-of-range values, and one parameter given twice. */
hp_code hp_params_from_json(const json_t *obj, hp_params *p, hp_err *err);

/* query: "tonemap.operator=hable&output.quality=95", without the leading '?'; NULL or "" sets nothing.
 * Keys and values are percent-decoded ('+' is a space). Refused: unknown keys, a key given twice, a key
 * without '=' or with an empty value, empty pairs ("a=1&&b=2", a trailing '&') and bad escapes. */
hp_code hp_params_from_query(const char *query, hp_params *p, hp_err *err);

/* Sets the parameters of look `look` (pipeline/looks.h) on *p, through the query parser. */
hp_code hp_params_apply_look(hp_params *p, uint32_t look, hp_err *err);
/* A source of parameters (a JSON object, a query, a whole request) read onto *p. */
typedef hp_code (*hp_params_reader)(const void *src, hp_params *p, hp_err *err);
/* Reads src onto *p as the daemon reads a request: once to learn the look it names, then, when it names
 * one, again on top of that look, so that the source's own values override the look's in whatever order
 * they come. *p is left as it was on a failure. */
hp_code hp_params_read_with_look(hp_params_reader read, const void *src, hp_params *p, hp_err *err);
/* hp_params_from_json and hp_params_from_query through hp_params_read_with_look. */
hp_code hp_params_from_json_with_look(const json_t *obj, hp_params *p, hp_err *err);
hp_code hp_params_from_query_with_look(const char *query, hp_params *p, hp_err *err);

/* Every parameter, nested by stage, in the same form hp_params_from_json reads; NULL when out of memory. */
json_t *hp_params_to_json(const hp_params *p);

/* The parameter table as data (GET /v1/params; the console builds its form from it, the OpenAPI document its
 * query parameters), made from the schema (pipeline/params.c) and the looks (pipeline/looks.h):
 *   {"parameters": [{"name", "group" (the stage: the name's first part), "type" ("number", "number_or_auto",
 *                    "integer", "boolean", "enum", "string"), "default", "minimum" or "exclusiveMinimum",
 *                    "maximum" or "exclusiveMaximum" (numbers), "choices" (enums and integers that take a
 *                    list), "maxLength" (strings), "unit", "applies" (or null), "description"}],
 *    "looks": [{"name", "sets" ({dotted name: value as in a query}), "description"}],
 *    "rules": [{"field", "description"}]}
 * NULL when out of memory. */
json_t *hp_param_schema_json(void);

#endif
