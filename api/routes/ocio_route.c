/* GET /v1/ocio (issue 34; docs/COLOR.md): the studio config the daemon loaded, as a client or the console needs
 * it to fill its choices: its name, displays with their views and defaults, looks, colour spaces and roles, and
 * how the programs made from it fare. Without a config: "config" null and empty lists, so that a client tells
 * "no config" from an error. */
#include <jansson.h>

#include "api/http/http.h"
#include "api/routes/routes.h"
#include "pipeline/ocio_stage.h"
#include "pipeline/params.h"

static json_t *names(const hp_ocio_config *c, hp_ocio_list list)
{
    json_t *a = json_array();
    for (size_t i = 0; c && i < hp_ocio_count(c, list); i++)
        json_array_append_new(a, json_string(hp_ocio_name(c, list, i)));
    return a;
}

static json_t *displays(const hp_ocio_config *c)
{
    json_t *a = json_array();
    for (size_t d = 0; c && d < hp_ocio_count(c, HP_OCIO_DISPLAYS); d++) {
        const char *display = hp_ocio_name(c, HP_OCIO_DISPLAYS, d);
        json_t *views = json_array();
        for (size_t v = 0; v < hp_ocio_view_count(c, display); v++)
            json_array_append_new(views, json_string(hp_ocio_view_name(c, display, v)));
        json_array_append_new(a, json_pack("{s:s, s:s, s:o}", "name", display, "default_view",
                                           hp_ocio_default_view(c, display), "views", views));
    }
    return a;
}

static json_t *roles(const hp_ocio_config *c)
{
    json_t *o = json_object();
    for (size_t i = 0; c && i < hp_ocio_count(c, HP_OCIO_ROLES); i++)
        json_object_set_new(o, hp_ocio_name(c, HP_OCIO_ROLES, i), json_string(hp_ocio_role_colorspace(c, i)));
    return o;
}

static json_t *programs(hp_ocio_stage *stage)
{
    if (!stage)
        return json_null();
    hp_ocio_stage_stats s;
    hp_ocio_stage_stats_get(stage, &s);
    return json_pack("{s:i, s:I, s:I, s:I, s:I, s:f, s:f}", "kept", (int)s.kept, "made", (json_int_t)s.made, "found",
                     (json_int_t)s.hits, "evicted", (json_int_t)s.evicted, "failed", (json_int_t)s.failed,
                     "made_ms_total", s.made_ms, "made_ms_last", s.last_made_ms);
}

void hp_route_ocio(hp_request *request, hp_reply *reply)
{
    const hp_ocio_config *c = hp_params_ocio_config();
    const hp_http_backend *be = hp_http_get_backend(request->http);
    json_t *config = c ? json_pack("{s:s, s:s, s:s}", "path", hp_ocio_config_path(c), "name", hp_ocio_config_name(c),
                                   "description", hp_ocio_config_description(c))
                       : json_null();
    json_t *body = json_pack("{s:o, s:o, s:o, s:o, s:o, s:o, s:o, s:o}", "config", config, "default_display",
                             c ? json_string(hp_ocio_default_display(c)) : json_null(), "scene_linear",
                             c ? json_string(hp_ocio_default_input(c)) : json_null(), "displays", displays(c),
                             "looks", names(c, HP_OCIO_LOOKS), "colorspaces", names(c, HP_OCIO_COLORSPACES), "roles",
                             roles(c), "programs", programs(be ? be->ocio : NULL));
    if (!body) {
        hp_reply_error(reply, 503, "out_of_memory", NULL, "out of memory describing the OCIO config");
        return;
    }
    hp_reply_json(reply, 200, body);
}
