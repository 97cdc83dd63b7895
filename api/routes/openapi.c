/* GET /openapi.json's document (api/routes/openapi.h): the route table, the parameter table and the console's files
 * as OpenAPI 3.1, with what each route answers written beside them. */
#include "api/routes/openapi.h"

#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/routes/assets.h"
#include "api/http/http.h"
#include "api/routes/routes.h"
#include "api/frames/params_json.h"
#include "common/log.h"

/* JSON written as JSON: the preprocessor's # makes the tokens a string literal, escaping the quotes and
 * backslashes of the string literals among them, so the fixed schemas below read as the JSON they become
 * ("\\." in a pattern is the JSON text "\\.", the regex \.). JSON has no parentheses or quotes outside its
 * strings, so any JSON text survives the trip; whitespace becomes single spaces. */
#define JSON_TEXT(...) #__VA_ARGS__

/* --- Building with every allocation checked ------------------------------------------------------------ */

/* The document under construction. Every helper takes NULL for a part that could not be made and notes the
 * failure, so that one check at the end covers every allocation (jansson's set and append functions take
 * the value's reference even when they fail, and fail for a NULL container or value). */
typedef struct doc {
    bool failed;
    json_t *param_rows; /* GET /v1/params' "parameters" */
    json_t *looks;      /* ... "looks" */
    json_t *rules;      /* ... "rules" */
    bool metrics_open;  /* the daemon answers /metrics without the token */
} doc;

static json_t *need(doc *d, json_t *v)
{
    if (!v)
        d->failed = true;
    return v;
}

static void put(doc *d, json_t *obj, const char *key, json_t *value)
{
    if (json_object_set_new(obj, key, value) != 0)
        d->failed = true;
}

static void append(doc *d, json_t *array, json_t *value)
{
    if (json_array_append_new(array, value) != 0)
        d->failed = true;
}

/* A fixed part of the document, from its JSON text: parsed once, then copied into each document. Once,
 * because jansson's parser does not survive every allocation failure (its lexer ignores a failed append; with
 * allocations failed one by one, json_loads freed a pointer it never allocated), and json_deep_copy does. A
 * text that does not parse is a bug of this file, which the test finds at once: the route answers 503 and the
 * log says where. A failed parse is not kept, so a failure for want of memory is tried again next time. */
#define PARSED_MAX 48
static pthread_mutex_t parsed_lock = PTHREAD_MUTEX_INITIALIZER;
static struct {
    const char *text; /* a literal of this file: its address is its key */
    json_t *value;    /* kept for the life of the process */
} parsed[PARSED_MAX];

static json_t *parse(doc *d, const char *what, const char *text)
{
    json_t *copy = NULL;
    pthread_mutex_lock(&parsed_lock);
    size_t i = 0;
    while (i < PARSED_MAX && parsed[i].text && parsed[i].text != text)
        i++;
    if (i < PARSED_MAX && !parsed[i].text) {
        json_error_t e;
        json_t *value = json_loads(text, 0, &e);
        if (value)
            parsed[i].text = text, parsed[i].value = value;
        else
            hp_error("openapi: the text of %s does not parse at column %d: %s", what, e.column, e.text);
    }
    if (i < PARSED_MAX && parsed[i].text == text)
        copy = json_deep_copy(parsed[i].value);
    pthread_mutex_unlock(&parsed_lock);
    if (i == PARSED_MAX)
        hp_error("openapi: more than %d fixed texts: raise PARSED_MAX", PARSED_MAX);
    return need(d, copy);
}

/* {"$ref": prefix + name}. */
static json_t *ref(doc *d, const char *prefix, const char *name)
{
    return need(d, json_pack("{s:s+}", "$ref", prefix, name));
}

static json_t *schema_ref(doc *d, const char *name) { return ref(d, "#/components/schemas/", name); }

/* content[media_type] = {"schema": schema}. */
static void media(doc *d, json_t *content, const char *media_type, json_t *schema)
{
    json_t *m = need(d, json_object());
    put(d, m, "schema", schema);
    put(d, content, media_type, m);
}

/* The words of a space-separated list, each as a JSON string or as a value made from it. */
static void words(doc *d, const char *list, json_t *into, json_t *(*make)(doc *d, const char *word))
{
    char word[64];
    for (const char *at = list; at && *at;) {
        size_t n = strcspn(at, " ");
        if (n > 0 && n < sizeof(word)) {
            memcpy(word, at, n);
            word[n] = '\0';
            if (make)
                put(d, into, word, make(d, word));
            else
                append(d, into, need(d, json_string(word)));
        }
        at += n + (at[n] == ' ');
    }
}

static json_t *header_ref(doc *d, const char *name) { return ref(d, "#/components/headers/", name); }

/* A response: its description, X-Request-Id (every response has it) and the header components named in
 * headers (space-separated, or NULL), and content (NULL: no body). */
static json_t *response(doc *d, const char *description, const char *headers, json_t *content)
{
    json_t *r = need(d, json_pack("{s:s, s:{}}", "description", description, "headers"));
    json_t *h = json_object_get(r, "headers");
    put(d, h, "X-Request-Id", header_ref(d, "X-Request-Id"));
    words(d, headers, h, header_ref);
    if (content)
        put(d, r, "content", content);
    return r;
}

/* --- The parameters: /v1/params' rows as JSON Schema --------------------------------------------------- */

/* The JSON type of a parameter type of /v1/params, or NULL for one this file does not know (the schema then
 * has no type, and the test, which knows them all, fails). */
static const char *schema_type(const char *param_type)
{
    static const char *const map[][2] = {{"number", "number"}, {"number_or_auto", "number"}, {"integer", "integer"},
                                         {"boolean", "boolean"}, {"enum", "string"},        {"string", "string"}};
    for (size_t i = 0; param_type && i < sizeof(map) / sizeof(map[0]); i++)
        if (!strcmp(map[i][0], param_type))
            return map[i][1];
    return NULL;
}

/* The row's description with its unit and where it applies, as docs/PARAMETERS.md's columns give them. */
static json_t *param_description(doc *d, const json_t *row)
{
    const char *help = json_string_value(json_object_get(row, "description"));
    const char *unit = json_string_value(json_object_get(row, "unit"));
    const char *applies = json_string_value(json_object_get(row, "applies"));
    return need(d, json_sprintf("%s%s%s%s%s%s", help ? help : "", unit && unit[0] ? " Unit: " : "",
                                unit && unit[0] ? unit : "", unit && unit[0] ? "." : "",
                                applies ? " Applies to: " : "", applies ? applies : ""));
}

/* One parameter's JSON Schema: its type, its range ("number_or_auto": a number in range, or "auto"), its
 * choices or longest length, its default and description, all copied from its row of /v1/params. */
static json_t *param_schema(doc *d, json_t *row)
{
    const char *type = json_string_value(json_object_get(row, "type"));
    const char *name = json_string_value(json_object_get(row, "name"));
    json_t *number = need(d, json_object()); /* the type and range */
    if (schema_type(type))
        put(d, number, "type", need(d, json_string(schema_type(type))));
    else
        hp_warn("openapi: parameter %s has type %s, which the document does not know: described without a type",
                name ? name : "?", type ? type : "(none)");
    static const char *const copied[] = {"minimum", "exclusiveMinimum", "maximum", "exclusiveMaximum", "maxLength"};
    for (size_t i = 0; i < sizeof(copied) / sizeof(copied[0]); i++) {
        json_t *v = json_object_get(row, copied[i]);
        if (v)
            put(d, number, copied[i], json_incref(v));
    }
    json_t *choices = json_object_get(row, "choices");
    if (choices)
        put(d, number, "enum", json_incref(choices));
    /* Filled before it is handed over: a value given to a container that fails is freed with it. */
    json_t *s = number;
    if (type && !strcmp(type, "number_or_auto"))
        s = need(d, json_pack("{s:[o, {s:s}]}", "oneOf", number, "const", "auto"));
    json_t *def = json_object_get(row, "default");
    if (def)
        put(d, s, "default", json_incref(def));
    put(d, s, "description", param_description(d, row));
    return s;
}

/* components/schemas/Params: the JSON object of a form's `params` part, nested by stage
 * ({"tonemap": {"operator": "hable"}}), with dotted keys at its top ({"tonemap.operator": "hable"}), or both
 * mixed, as hp_params_from_json reads it; nothing else (an unknown key is a 400). */
static json_t *group_schema(doc *d, const char *prefix)
{
    return need(d, json_pack("{s:s, s:b, s:{}, s:s+}", "type", "object", "additionalProperties", 0, "properties",
                             "description", "The parameters named ", prefix));
}

static void params_object(doc *d, json_t *schemas)
{
    json_t *root = need(d, json_pack("{s:s, s:b, s:{}, s:s}", "type", "object", "additionalProperties", 0,
                                     "properties", "description",
                                     "Request parameters as JSON (docs/PARAMETERS.md): nested by stage, or with "
                                     "dotted keys at the top, or both mixed; a parameter given twice in any "
                                     "spelling, an unknown key and a value out of range are refused (400 "
                                     "invalid_parameter). The JSON answers echo every parameter, nested."));
    json_t *props = json_object_get(root, "properties");
    size_t i;
    json_t *row;
    json_array_foreach(d->param_rows, i, row) {
        const char *name = json_string_value(json_object_get(row, "name"));
        char path[256], target[300];
        if (!name || snprintf(path, sizeof(path), "%s", name) >= (int)sizeof(path) ||
            snprintf(target, sizeof(target), "param.%s", name) >= (int)sizeof(target)) {
            d->failed = true;
            continue;
        }
        /* Nested: a group object per stage and sub-group ("tonemap" > "hable" > "white"). */
        json_t *at = props;
        char *segment = path;
        for (char *dot; (dot = strchr(segment, '.')); segment = dot + 1) {
            *dot = '\0';
            json_t *group = json_object_get(at, segment);
            if (!group) {
                char prefix[256];
                snprintf(prefix, sizeof(prefix), "%.*s.*", (int)(dot - path), name);
                put(d, at, segment, group_schema(d, prefix));
                group = json_object_get(at, segment); /* NULL if that failed (the group is then freed) */
            }
            at = json_object_get(group, "properties");
        }
        put(d, at, segment, schema_ref(d, target));
        /* Dotted, at the top (a name without a dot, such as "look", is there already). */
        if (strchr(name, '.'))
            put(d, props, name, schema_ref(d, target));
    }
    put(d, schemas, "Params", root);
}

/* components/parameters/<name>: each parameter as a query key (the same schema as in Params), and the
 * schemas param.<name> both refer to. */
static void param_components(doc *d, json_t *parameters, json_t *schemas)
{
    size_t i;
    json_t *row;
    json_array_foreach(d->param_rows, i, row) {
        const char *name = json_string_value(json_object_get(row, "name"));
        char key[300];
        if (!name || snprintf(key, sizeof(key), "param.%s", name) >= (int)sizeof(key)) {
            d->failed = true;
            continue;
        }
        put(d, schemas, key, param_schema(d, row));
        json_t *p = need(d, json_pack("{s:s, s:s, s:b, s:o}", "name", name, "in", "query", "required", 0, "schema",
                                      schema_ref(d, key)));
        put(d, p, "description", param_description(d, row));
        put(d, parameters, name, p);
    }
}

static const char *text_of(const json_t *v)
{
    const char *s = json_string_value(v);
    return s ? s : "";
}

/* The frame routes' description (Markdown): lead, then the looks and the rules across parameters. */
static json_t *looks_and_rules(doc *d, const char *lead)
{
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    if (!f)
        return need(d, NULL);
    fprintf(f, "%s\n\nLooks (`look=NAME` sets several parameters at once; the request's own parameters override "
            "them):\n", lead ? lead : "");
    size_t i;
    json_t *item;
    json_array_foreach(d->looks, i, item)
        fprintf(f, "\n- `%s`: %s", text_of(json_object_get(item, "name")),
                text_of(json_object_get(item, "description")));
    fprintf(f, "\n\nRules across parameters (a request that breaks one is answered 400 naming the field):\n");
    json_array_foreach(d->rules, i, item)
        fprintf(f, "\n- %s", text_of(json_object_get(item, "description")));
    bool written = !ferror(f);
    if (fclose(f) != 0)
        written = false;
    json_t *out = written && text ? json_string(text) : NULL;
    free(text);
    return need(d, out);
}

/* --- The fixed components ------------------------------------------------------------------------------- */

/* What the routes answer, as their files build it: api/http/reply.c (Error), api/frames/render_reply.c (RenderResult,
 * AnalyzeResult and their parts), api/routes/gpu_status.c and api/http/live_stats.c (Gpu, Stats), api/frames/params_json.c
 * (ParamTable). Answers may gain fields: only what a client can count on is required. */
static const struct {
    const char *name, *text;
} fixed_schemas[] = {
    {"Error", JSON_TEXT({
        "type": "object", "required": ["error"], "additionalProperties": false,
        "description": "The one error shape of every route (api/http/reply.c). Each error response lists the codes it carries in x-error-codes.",
        "properties": {"error": {
            "type": "object", "required": ["code", "message", "field"], "additionalProperties": false,
            "properties": {
                "code": {"type": "string", "pattern": "^[a-z][a-z0-9_]*$",
                         "description": "A stable snake_case word to branch on: invalid_parameter, queue_full, not_ready, ..."},
                "message": {"type": "string", "description": "What was wrong and what is accepted, for a person."},
                "field": {"type": ["string", "null"],
                          "description": "The request field at fault (a parameter's dotted name, a form part: frame, depth, params), or null."}}}}})},
    {"ServiceState", JSON_TEXT({
        "type": "string", "enum": ["starting", "ready", "draining", "device_lost"],
        "description": "starting: HTTP up, the GPU being chosen and pipelines warming; ready: every pipeline warm; draining: stopping, requests in flight finish; device_lost: the GPU was lost for the rest of the process."})},
    {"InflightMemory", JSON_TEXT({
        "type": "object", "required": ["used_bytes", "limit_bytes"],
        "description": "The bytes requests in flight hold now (bodies, decoded frames, images) and max_inflight_mb in bytes.",
        "properties": {"used_bytes": {"type": "integer", "minimum": 0}, "limit_bytes": {"type": "integer", "minimum": 0}}})},
    {"LuminanceStats", JSON_TEXT({
        "type": "object", "required": ["pixels", "finite_pixels", "nonfinite_pixels", "log_average", "mean", "min", "max"],
        "description": "The frame's luminance, NaN and infinite pixels left out (they are counted, and come out black).",
        "properties": {
            "pixels": {"type": "integer", "minimum": 0}, "finite_pixels": {"type": "integer", "minimum": 0},
            "nonfinite_pixels": {"type": "integer", "minimum": 0},
            "log_average": {"type": "number"}, "mean": {"type": "number"}, "min": {"type": "number"}, "max": {"type": "number"},
            "histogram": {
                "type": "object", "required": ["min_log2", "max_log2", "counts"],
                "description": "/v1/analyze only: 256 bins of log2 luminance over [min_log2, max_log2]; bin 0 holds what is below 2^min_log2.",
                "properties": {"min_log2": {"type": "number"}, "max_log2": {"type": "number"},
                               "counts": {"type": "array", "minItems": 256, "maxItems": 256, "items": {"type": "integer", "minimum": 0}}}}}})},
    {"Timings", JSON_TEXT({
        "type": "object", "required": ["recv", "decode", "queue", "total"],
        "description": "Each phase in milliseconds, named as in Server-Timing: recv, decode, queue, the GPU stages (upload, reduce, tonemap, dof, png_gpu, download), encode and encode_cpu (render), total.",
        "additionalProperties": {"type": "number"}})},
    {"Colorspaces", JSON_TEXT({
        "type": "object", "required": ["input", "source", "output"],
        "properties": {
            "input": {"type": "string", "description": "The primaries and white the frame's RGB was read in: rec709, rec2020, acescg, aces2065, p3d65, or custom."},
            "source": {"type": "string", "enum": ["parameter", "attribute", "default"],
                       "description": "Why: input.colorspace named it, the file's chromaticities, or neither (Rec.709)."},
            "output": {"$ref": "#/components/schemas/param.output.colorspace"}}})},
    {"ExrChannels", JSON_TEXT({
        "type": "object", "required": ["part", "layer", "channels", "depth"],
        "description": "OpenEXR frames only: the part read, the layer (\"\" for plain or one-by-one channels) and the channel behind each of R, G, B, A and the depth (null: none).",
        "properties": {
            "part": {"type": "integer", "minimum": 0}, "layer": {"type": "string"},
            "channels": {"type": "object", "required": ["r", "g", "b", "a"],
                         "properties": {"r": {"type": ["string", "null"]}, "g": {"type": ["string", "null"]},
                                        "b": {"type": ["string", "null"]}, "a": {"type": ["string", "null"]}}},
            "depth": {"type": ["string", "null"]}}})},
    {"DepthOfField", JSON_TEXT({
        "type": "object", "required": ["method", "focus_distance_m", "focal_length_mm", "f_stop", "coc_at_infinity_px"],
        "description": "What depth of field resolved to (auto focus and lens included), when dof.enabled.",
        "properties": {
            "method": {"type": "string", "enum": ["gather", "sat"]},
            "focus_distance_m": {"type": "number"}, "focal_length_mm": {"type": "number"}, "f_stop": {"type": "number"},
            "coc_at_infinity_px": {"type": "number"},
            "bokeh": {"type": "object", "required": ["sprites", "wanted", "budget", "budget_reached"],
                      "properties": {"sprites": {"type": "integer", "minimum": 0}, "wanted": {"type": "integer", "minimum": 0},
                                     "budget": {"type": "integer", "minimum": 0}, "budget_reached": {"type": "boolean"}}}}})},
    {"RenderResult", JSON_TEXT({
        "type": "object",
        "required": ["input_format", "gpu_input", "width", "height", "stats", "timings_ms", "decoded_while_receiving",
                     "colorspace", "image", "exposure", "params"],
        "description": "POST /v1/render's answer with Accept: application/json: the image in base64 with what the frame did.",
        "properties": {
            "input_format": {"type": "string", "enum": ["exr", "rgbe", "pfm", "raw"]},
            "gpu_input": {"type": "string", "description": "The pixel format the frame went to the GPU in: rgba16f for an OpenEXR whose colour channels are all half, rgba32f otherwise."},
            "width": {"type": "integer", "minimum": 1}, "height": {"type": "integer", "minimum": 1},
            "exr": {"$ref": "#/components/schemas/ExrChannels"},
            "decoded_while_receiving": {"type": "boolean"},
            "colorspace": {"$ref": "#/components/schemas/Colorspaces"},
            "stats": {"$ref": "#/components/schemas/LuminanceStats"},
            "timings_ms": {"$ref": "#/components/schemas/Timings"},
            "dof": {"$ref": "#/components/schemas/DepthOfField"},
            "image": {"type": "object", "required": ["mime", "bytes", "alpha", "base64"],
                      "properties": {"mime": {"type": "string", "enum": ["image/webp", "image/png"]},
                                     "bytes": {"type": "integer", "minimum": 0},
                                     "alpha": {"type": "boolean", "description": "Whether the frame's alpha went to the encoder (output.alpha)."},
                                     "base64": {"type": "string", "contentEncoding": "base64"}}},
            "exposure": {"type": "object", "required": ["scale", "key", "adaptation", "white"],
                         "description": "What the exposure stage decided.",
                         "properties": {"scale": {"type": "number"}, "key": {"type": "number"},
                                        "adaptation": {"type": "number"}, "white": {"type": "number"}}},
            "params": {"$ref": "#/components/schemas/Params", "description": "The effective parameters, every one, nested by stage."}}})},
    {"AnalyzeResult", JSON_TEXT({
        "type": "object",
        "required": ["input_format", "gpu_input", "width", "height", "stats", "percentiles", "timings_ms",
                     "decoded_while_receiving", "colorspace"],
        "description": "POST /v1/analyze's answer: the frame's luminance statistics, without tone mapping or encoding.",
        "properties": {
            "input_format": {"type": "string", "enum": ["exr", "rgbe", "pfm", "raw"]},
            "gpu_input": {"type": "string"},
            "width": {"type": "integer", "minimum": 1}, "height": {"type": "integer", "minimum": 1},
            "exr": {"$ref": "#/components/schemas/ExrChannels"},
            "decoded_while_receiving": {"type": "boolean"},
            "colorspace": {"$ref": "#/components/schemas/Colorspaces"},
            "stats": {"allOf": [{"$ref": "#/components/schemas/LuminanceStats"}], "type": "object", "required": ["histogram"]},
            "percentiles": {"type": "object", "required": ["p01", "p50", "p99"],
                            "description": "Luminance percentiles: lower edges of the histogram's bins.",
                            "properties": {"p01": {"type": "number"}, "p50": {"type": "number"}, "p99": {"type": "number"}}},
            "timings_ms": {"$ref": "#/components/schemas/Timings"}}})},
    {"Gpu", JSON_TEXT({
        "type": "object",
        "required": ["state", "device", "device_type", "vendor", "driver", "driver_info", "vulkan", "vendor_id", "device_id", "uuid",
                     "pci_address", "vulkan_index", "memory_heaps", "queue", "pipeline_cache", "pipelines", "frame_graph", "host_memory", "clock_hold"],
        "properties": {
            "state": {"$ref": "#/components/schemas/ServiceState"},
            "device": {"type": "string"},
            "device_type": {"type": "string", "enum": ["discrete", "integrated", "virtual", "cpu", "other"]},
            "vendor": {"type": "string", "enum": ["NVIDIA", "AMD", "Intel", "Mesa", "other"]},
            "driver": {"type": "string"}, "driver_info": {"type": "string"},
            "vulkan": {"type": "string", "pattern": "^[0-9]+\\.[0-9]+\\.[0-9]+$"},
            "vendor_id": {"type": "integer", "minimum": 0}, "device_id": {"type": "integer", "minimum": 0},
            "uuid": {"type": "string", "pattern": "^GPU-[0-9a-f]{8}-([0-9a-f]{4}-){3}[0-9a-f]{12}$",
                     "description": "Vulkan's deviceUUID, written as nvidia-smi -L writes it (the same bytes as NVML's on NVIDIA); --device takes it."},
            "pci_address": {"type": ["string", "null"], "pattern": "^[0-9a-f]{4,8}:[0-9a-f]{2}:[0-9a-f]{2}\\.[0-7]$",
                            "description": "As lspci -D writes it; null where the driver lacks VK_EXT_pci_bus_info. --device takes it."},
            "vulkan_index": {"type": "integer", "minimum": 0, "description": "The device's place in Vulkan's list (--device=N)."},
            "memory_heaps": {"type": "array", "items": {
                "type": "object", "required": ["size_bytes", "device_local"],
                "description": "budget_bytes and usage_bytes where the driver has VK_EXT_memory_budget.",
                "properties": {"size_bytes": {"type": "integer", "minimum": 0}, "device_local": {"type": "boolean"},
                               "budget_bytes": {"type": "integer", "minimum": 0}, "usage_bytes": {"type": "integer", "minimum": 0}}}},
            "queue": {"type": "object", "required": ["depth", "capacity", "frames_in_flight"],
                      "properties": {"depth": {"type": "integer", "minimum": 0}, "capacity": {"type": "integer", "minimum": 0},
                                     "frames_in_flight": {"type": "integer", "minimum": 0}}},
            "pipeline_cache": {"type": "object", "required": ["state", "bytes_loaded"],
                               "properties": {"state": {"type": "string", "enum": ["none", "absent", "loaded", "foreign", "corrupt"]},
                                              "bytes_loaded": {"type": "integer", "minimum": 0}}},
            "pipelines": {"type": "object", "required": ["created", "from_cache"],
                          "properties": {"created": {"type": "integer", "minimum": 0}, "from_cache": {"type": "integer", "minimum": 0}}},
            "frame_graph": {"type": "object", "required": ["sizes_kept", "device_bytes"],
                            "properties": {"sizes_kept": {"type": "integer", "minimum": 0}, "device_bytes": {"type": "integer", "minimum": 0}}},
            "host_memory": {"type": "object", "required": ["blocks_in_use", "kept_bytes", "kept_device_bytes"],
                            "properties": {"blocks_in_use": {"type": "integer", "minimum": 0}, "kept_bytes": {"type": "integer", "minimum": 0},
                                           "kept_device_bytes": {"type": "integer", "minimum": 0}}},
            "clock_hold": {"type": "object", "required": ["enabled", "holds", "gpu_seconds"],
                           "description": "Small dispatches keeping the GPU busy while frames are on their way, so that its clocks stay up (gpu_clock_hold).",
                           "properties": {"enabled": {"type": "boolean"}, "holds": {"type": "integer", "minimum": 0},
                                          "gpu_seconds": {"type": "number", "minimum": 0}}},
            "inflight_memory": {"$ref": "#/components/schemas/InflightMemory"},
            "nvml": {"type": "object", "description": "Where libnvidia-ml is on the host; a field it cannot read is left out.",
                     "properties": {"utilization_percent": {"type": "integer"}, "memory_utilization_percent": {"type": "integer"},
                                    "temperature_celsius": {"type": "integer"}, "power_watts": {"type": "number"},
                                    "index": {"type": "integer", "minimum": 0, "description": "nvidia-smi's index of this GPU."}}}}})},
    {"Stats", JSON_TEXT({
        "type": "object",
        "required": ["version", "uptime_s", "state", "ready", "reason", "device", "queue", "gpu_memory", "inflight_memory",
                     "window_s", "per_second", "requests_per_s", "frames_per_s", "status_counts", "errors_by_code",
                     "recent_errors", "stages_ms"],
        "description": "The last minute on this node (api/http/live_stats.h): what the console's live view draws.",
        "properties": {
            "version": {"type": "string"}, "uptime_s": {"type": "number", "minimum": 0},
            "state": {"$ref": "#/components/schemas/ServiceState"}, "ready": {"type": "boolean"},
            "reason": {"type": ["string", "null"], "description": "Why the daemon is not ready; null when it is."},
            "device": {"type": ["object", "null"], "required": ["name", "driver", "driver_info"],
                       "properties": {"name": {"type": "string"}, "driver": {"type": "string"}, "driver_info": {"type": "string"}}},
            "queue": {"type": ["object", "null"], "required": ["depth", "capacity", "in_flight"],
                      "properties": {"depth": {"type": "integer", "minimum": 0}, "capacity": {"type": "integer", "minimum": 0},
                                     "in_flight": {"type": "integer", "minimum": 0}}},
            "gpu_memory": {"type": ["object", "null"], "required": ["used_bytes", "budget_bytes"],
                           "description": "The device-local heaps' budget and this process's use of them (VK_EXT_memory_budget), or null.",
                           "properties": {"used_bytes": {"type": "integer", "minimum": 0}, "budget_bytes": {"type": "integer", "minimum": 0}}},
            "inflight_memory": {"anyOf": [{"$ref": "#/components/schemas/InflightMemory"}, {"type": "null"}]},
            "window_s": {"type": "integer", "minimum": 1},
            "per_second": {"type": "object", "required": ["t_end", "requests", "frames", "errors", "stages_ms"],
                           "description": "One entry per second of the window, oldest first, the last ending at t_end (Unix seconds).",
                           "properties": {
                               "t_end": {"type": "integer"},
                               "requests": {"type": "array", "items": {"type": "integer", "minimum": 0}},
                               "frames": {"type": "array", "items": {"type": "integer", "minimum": 0}},
                               "errors": {"type": "array", "items": {"type": "integer", "minimum": 0}},
                               "stages_ms": {"type": "object", "description": "Each stage's mean milliseconds per second; null for a second without frames.",
                                             "additionalProperties": {"type": "array", "items": {"type": ["number", "null"]}}}}},
            "requests_per_s": {"type": "number", "minimum": 0}, "frames_per_s": {"type": "number", "minimum": 0},
            "status_counts": {"type": "object", "additionalProperties": {"type": "integer", "minimum": 0}},
            "errors_by_code": {"type": "object", "additionalProperties": {"type": "integer", "minimum": 0}},
            "recent_errors": {"type": "array", "description": "The latest errors, newest first.",
                              "items": {"type": "object", "required": ["time", "status", "code", "message", "path"],
                                        "properties": {"time": {"type": "integer"}, "status": {"type": "integer"},
                                                       "code": {"type": "string"}, "message": {"type": "string"},
                                                       "path": {"type": "string"}}}},
            "stages_ms": {"type": "object", "description": "Each stage's p50 and p99 over the latest frames.",
                          "additionalProperties": {"type": "object", "required": ["p50", "p99", "count"],
                                                   "properties": {"p50": {"type": "number"}, "p99": {"type": "number"},
                                                                  "count": {"type": "integer", "minimum": 1}}}}}})},
    {"ParamTable", JSON_TEXT({
        "type": "object", "required": ["parameters", "looks", "rules"],
        "description": "The parameter table as data (GET /v1/params), made from the table the parsers read; this document's query parameters and Params are made from it.",
        "properties": {
            "parameters": {"type": "array", "items": {
                "type": "object", "required": ["name", "group", "type", "default", "unit", "applies", "description"],
                "additionalProperties": false,
                "properties": {
                    "name": {"type": "string"}, "group": {"type": "string"},
                    "type": {"type": "string", "enum": ["number", "number_or_auto", "integer", "boolean", "enum", "string"]},
                    "default": {"description": "The default, in the parameter's JSON type (\"auto\" for number_or_auto)."},
                    "minimum": {"type": "number"}, "exclusiveMinimum": {"type": "number"},
                    "maximum": {"type": "number"}, "exclusiveMaximum": {"type": "number"},
                    "choices": {"type": "array", "items": {"type": ["string", "integer"]}},
                    "maxLength": {"type": "integer", "minimum": 0},
                    "unit": {"type": "string"}, "applies": {"type": ["string", "null"]}, "description": {"type": "string"}}}},
            "looks": {"type": "array", "items": {
                "type": "object", "required": ["name", "sets", "description", "studio"],
                "properties": {"name": {"type": "string"}, "description": {"type": "string"},
                               "studio": {"type": "boolean", "description": "The daemon's own look (its studio_looks setting), not a built-in one."},
                               "sets": {"type": "object", "additionalProperties": {"type": "string"},
                                        "description": "Dotted parameter name: value, as the parameter reads it (escapes decoded)."}}}},
            "rules": {"type": "array", "items": {
                "type": "object", "required": ["field", "description"],
                "properties": {"field": {"type": "string"}, "description": {"type": "string"}}}}}})},
};

/* Response headers (components/headers), request header X-Request-Id, the bearer scheme, and the answers any
 * path may get beside its operations' own. */
static const char fixed_headers[] = JSON_TEXT({
    "X-Request-Id": {"description": "The request's id: the client's X-Request-Id when it is 1-128 characters of [A-Za-z0-9._:@/+=-], else a generated one. Logged with the request.",
                     "schema": {"type": "string"}},
    "Retry-After": {"description": "Seconds after which a retry may succeed.", "schema": {"type": "integer", "minimum": 0}},
    "WWW-Authenticate": {"description": "Bearer.", "schema": {"type": "string"}},
    "Allow": {"description": "The methods the path has.", "schema": {"type": "string"}},
    "Server-Timing": {"description": "Every phase in milliseconds, GPU stages from timestamp queries: recv, decode, queue, upload, reduce, tonemap, dof, png_gpu, download, encode, encode_cpu (render), total.",
                      "schema": {"type": "string"}},
    "X-Luminance-Stats": {"description": "finite=N; nonfinite=N; log_average=X; mean=X; min=X; max=X (image answers).", "schema": {"type": "string"}},
    "X-Exposure": {"description": "scale=X; key=X; adaptation=X: what the exposure stage decided (image answers).", "schema": {"type": "string"}},
    "X-Input-Colorspace": {"description": "NAME; source=parameter|attribute|default: the frame's colour space and why (image answers).", "schema": {"type": "string"}},
    "X-Output-Colorspace": {"description": "The display the image was made for: srgb, display_p3 or rec2020 (image answers).", "schema": {"type": "string"}},
    "X-Depth-Of-Field": {"description": "focus_m=X; focal_mm=X; f_stop=X; coc_infinity_px=X, with dof.enabled (image answers).", "schema": {"type": "string"}},
    "X-Bokeh": {"description": "sprites=N; wanted=N; budget=N; budget_reached=true|false, with bokeh.enabled (image answers).", "schema": {"type": "string"}},
    "ETag": {"description": "The file's SHA-256, in part.", "schema": {"type": "string"}},
    "Content-Security-Policy": {"description": "A page of ours runs its own scripts only and is never framed.", "schema": {"type": "string"}},
    "X-Frame-Options": {"description": "DENY.", "schema": {"type": "string"}},
    "Referrer-Policy": {"description": "no-referrer.", "schema": {"type": "string"}},
    "Cross-Origin-Opener-Policy": {"description": "same-origin.", "schema": {"type": "string"}},
    "Connection": {"description": "close: the connection is closed after the answer.", "schema": {"type": "string"}}
});

static const char fixed_security_schemes[] = JSON_TEXT({
    "bearerAuth": {"type": "http", "scheme": "bearer",
                   "description": "The daemon's auth_token, as Authorization: Bearer TOKEN. Without an auth_token set, no route asks for it; with metrics_open, /metrics does not either."}
});

static const char fixed_request_id[] = JSON_TEXT({
    "name": "X-Request-Id", "in": "header", "required": false,
    "description": "An id for the request, echoed in the answer's X-Request-Id and logged, when it is 1-128 characters of [A-Za-z0-9._:@/+=-]; otherwise one is made.",
    "schema": {"type": "string"}
});

/* --- Operations ------------------------------------------------------------------------------------------ */

/* An error answer an operation gives: its status, its codes (space-separated, as the routes' files pass them to
 * hp_reply_error) and when. */
typedef struct error_doc {
    unsigned status;
    const char *codes;
    const char *when;
    const char *headers; /* header components beside X-Request-Id, space-separated; or NULL */
} error_doc;

#define FRAMING_CODES "bad_framing bad_host bad_url"
#define FRAMING_WHEN                                                                                          \
    "More than one Content-Length, or one with Transfer-Encoding; an HTTP/1.1 request with no Host or two; a " \
    "%00 in the path or query. The connection is closed after the answer."
/* Every route: malformed framing, and a body over 64 MiB where none is taken (api/http/http.c). */
#define FRAMING_400 {400, FRAMING_CODES, FRAMING_WHEN, "Connection"}
#define NO_BODY_413 {413, "body_too_large", "A body of more than 64 MiB sent to a route that takes none.", NULL}
#define OOM_503 {503, "out_of_memory", "Out of memory building the answer.", NULL}

typedef struct op_doc {
    const char *method, *route; /* the row of the route table (api/routes/routes.c) */
    const char *path;           /* in the document (a prefix route's template); NULL: the route's */
    const char *id, *tag, *summary, *description;
    void (*build)(doc *d, json_t *op); /* parameters, request body, the 200 */
    error_doc errors[10];
} op_doc;

static json_t *json_ok(doc *d, const char *description, const char *headers, json_t *schema)
{
    json_t *content = need(d, json_object());
    media(d, content, "application/json", schema);
    return response(d, description, headers, content);
}

static void build_livez(doc *d, json_t *op)
{
    put(d, json_object_get(op, "responses"), "200",
        json_ok(d, "Alive.", NULL, parse(d, "livez", JSON_TEXT({"type": "object", "required": ["status"],
                                                                 "properties": {"status": {"const": "alive"}}}))));
}

static void build_readyz(doc *d, json_t *op)
{
    put(d, json_object_get(op, "responses"), "200",
        json_ok(d, "Ready: every pipeline is warm.", NULL,
                parse(d, "readyz", JSON_TEXT({"type": "object", "required": ["status"],
                                              "properties": {"status": {"const": "ready"}}}))));
}

/* Both frame routes: every parameter as a query key, and the frame as the raw body or a form. */
static void frame_request(doc *d, json_t *op)
{
    json_t *params = json_object_get(op, "parameters");
    size_t i;
    json_t *row;
    json_array_foreach(d->param_rows, i, row)
        append(d, params, ref(d, "#/components/parameters/", json_string_value(json_object_get(row, "name"))));

    json_t *content = need(d, json_object());
    media(d, content, "application/octet-stream",
          parse(d, "the raw body", JSON_TEXT({
              "type": "string", "contentMediaType": "application/octet-stream",
              "description": "The frame as the body: an OpenEXR (scanline or tiled, any compression, half/float/uint channels), Radiance HDR or PFM file, recognised from its bytes; or raw little-endian float32 or float16 samples, interleaved, rows top to bottom, described by input.width, input.height, input.channels and input.type (the body must hold exactly that many). A body with any Content-Type but multipart/form-data is read this way."})));
    media(d, content, "multipart/form-data",
          parse(d, "the form", JSON_TEXT({
              "type": "object", "required": ["frame"], "additionalProperties": false,
              "description": "A form: the frame, an optional depth image and optional parameters as JSON. Each part at most once; an empty part, an unknown or unnamed one is refused (400). The query's parameters apply over the params part's.",
              "properties": {
                  "frame": {"type": "string", "contentMediaType": "application/octet-stream",
                            "description": "The frame: an OpenEXR, Radiance HDR or PFM file."},
                  "depth": {"type": "string", "contentMediaType": "application/octet-stream",
                            "description": "A depth image of the frame's size for depth of field: an OpenEXR with a Z channel, or any image whose first channel holds the depth. It wins over the frame's own depth."},
                  "params": {"$ref": "#/components/schemas/Params"}}})));
    json_t *form = json_object_get(content, "multipart/form-data");
    put(d, form, "encoding",
        parse(d, "the form's encoding", JSON_TEXT({"frame": {"contentType": "application/octet-stream"},
                                                   "depth": {"contentType": "application/octet-stream"},
                                                   "params": {"contentType": "application/json"}})));
    put(d, op, "description", looks_and_rules(d, json_string_value(json_object_get(op, "description"))));
    put(d, op, "requestBody",
        need(d, json_pack("{s:b, s:s, s:o}", "required", 1, "description",
                          "The frame. Its parameters come as query keys, or as the form's params part.", "content",
                          content)));
}

static void build_render(doc *d, json_t *op)
{
    frame_request(d, op);
    json_t *content = need(d, json_object());
    media(d, content, "image/webp", parse(d, "webp", JSON_TEXT({"type": "string", "contentMediaType": "image/webp"})));
    media(d, content, "image/png", parse(d, "png", JSON_TEXT({"type": "string", "contentMediaType": "image/png"})));
    media(d, content, "application/json", schema_ref(d, "RenderResult"));
    put(d, json_object_get(op, "responses"), "200",
        response(d,
                 "The image (output.format: image/webp by default; an Accept header naming image/png, image/webp, "
                 "image/jpeg or image/avif chooses it when output.format is not set), or with Accept: "
                 "application/json the JSON answer with the image in base64. The X- headers come with the image.",
                 "Server-Timing X-Luminance-Stats X-Exposure X-Input-Colorspace X-Output-Colorspace X-Depth-Of-Field "
                 "X-Bokeh",
                 content));
}

static void build_analyze(doc *d, json_t *op)
{
    frame_request(d, op);
    put(d, json_object_get(op, "responses"), "200",
        json_ok(d, "The frame's luminance statistics.", "Server-Timing", schema_ref(d, "AnalyzeResult")));
}

static void build_gpu(doc *d, json_t *op)
{
    put(d, json_object_get(op, "responses"), "200", json_ok(d, "The device, its memory and the queue.", NULL,
                                                            schema_ref(d, "Gpu")));
}

static void build_metrics(doc *d, json_t *op)
{
    json_t *content = need(d, json_object());
    media(d, content, "text/plain; version=0.0.4; charset=utf-8",
          parse(d, "metrics", JSON_TEXT({"type": "string",
                                         "description": "Prometheus text format 0.0.4; every name starts with hdrpost_ (docs/API.md lists them)."})));
    put(d, json_object_get(op, "responses"), "200", response(d, "The metrics.", NULL, content));
}

static void build_stats(doc *d, json_t *op)
{
    put(d, json_object_get(op, "responses"), "200", json_ok(d, "The last minute.", NULL, schema_ref(d, "Stats")));
}

static void build_params(doc *d, json_t *op)
{
    put(d, json_object_get(op, "responses"), "200",
        json_ok(d, "The parameter table, the looks and the rules across parameters.", NULL,
                schema_ref(d, "ParamTable")));
}

static void build_ocio(doc *d, json_t *op)
{
    put(d, json_object_get(op, "responses"), "200",
        json_ok(d, "The OCIO config, or config null without one.", NULL,
                parse(d, "ocio", JSON_TEXT({
                    "type": "object", "additionalProperties": false,
                    "required": ["config", "default_display", "scene_linear", "displays", "looks", "colorspaces", "roles", "programs"],
                    "properties": {
                        "config": {"type": ["object", "null"], "required": ["path", "name", "description"],
                                   "properties": {"path": {"type": "string"}, "name": {"type": "string"},
                                                  "description": {"type": "string"}}},
                        "default_display": {"type": ["string", "null"]},
                        "scene_linear": {"type": ["string", "null"], "description": "The colour space of a frame that names none."},
                        "displays": {"type": "array", "items": {"type": "object", "required": ["name", "default_view", "views"],
                                     "properties": {"name": {"type": "string"}, "default_view": {"type": "string"},
                                                    "views": {"type": "array", "items": {"type": "string"}}}}},
                        "looks": {"type": "array", "items": {"type": "string"}},
                        "colorspaces": {"type": "array", "items": {"type": "string"}},
                        "roles": {"type": "object", "additionalProperties": {"type": "string"}},
                        "programs": {"type": ["object", "null"], "description": "The GPU programs made from the config: kept, made, found kept, evicted, failed, and the time spent making them.",
                                     "properties": {"kept": {"type": "integer"}, "made": {"type": "integer"},
                                                    "found": {"type": "integer"}, "evicted": {"type": "integer"},
                                                    "failed": {"type": "integer"}, "made_ms_total": {"type": "number"},
                                                    "made_ms_last": {"type": "number"}}}}}))));
}

static void build_openapi(doc *d, json_t *op)
{
    put(d, json_object_get(op, "responses"), "200",
        json_ok(d, "This document.", NULL,
                parse(d, "openapi", JSON_TEXT({"type": "object", "required": ["openapi", "info", "paths"],
                                               "description": "An OpenAPI 3.1 document."}))));
}

static const char console_headers[] = "Content-Security-Policy X-Frame-Options Referrer-Policy "
                                      "Cross-Origin-Opener-Policy ETag";

static json_t *file_schema(doc *d, const char *content_type)
{
    return need(d, json_pack("{s:s, s:s}", "type", "string", "contentMediaType", content_type));
}

/* A console file the browser holds already (If-None-Match names its ETag; the files say Cache-Control:
 * no-cache, so it asks every time): no body (api/routes/console.c). */
static json_t *not_modified(doc *d)
{
    return response(d, "Not modified: the copy whose ETag If-None-Match names is current.", console_headers, NULL);
}

static void build_console_index(doc *d, json_t *op)
{
    json_t *content = need(d, json_object());
    for (size_t i = 0; i < hp_console_asset_count; i++)
        if (!strcmp(hp_console_assets[i].path, "/console/index.html"))
            media(d, content, hp_console_assets[i].content_type, file_schema(d, hp_console_assets[i].content_type));
    put(d, json_object_get(op, "responses"), "200", response(d, "The console's page.", console_headers, content));
    put(d, json_object_get(op, "responses"), "304", not_modified(d));
}

/* The files this build embeds (console/meson.build): their names and types. */
static void build_console_file(doc *d, json_t *op)
{
    json_t *names = need(d, json_array());
    json_t *content = need(d, json_object());
    for (size_t i = 0; i < hp_console_asset_count; i++) {
        const hp_asset *a = &hp_console_assets[i];
        if (!strncmp(a->path, "/console/", 9))
            append(d, names, need(d, json_string(a->path + 9)));
        if (!json_object_get(content, a->content_type))
            media(d, content, a->content_type, file_schema(d, a->content_type));
    }
    json_t *file = need(d, json_pack("{s:s, s:s, s:b, s:s, s:{s:s, s:o}}", "name", "file", "in", "path", "required", 1,
                                     "description",
                                     "A file of the console, by its path under /console/ (this build's files are "
                                     "listed; a path with '/' in it is sent as it is, not escaped).",
                                     "schema", "type", "string", "enum", names));
    append(d, json_object_get(op, "parameters"), file);
    put(d, json_object_get(op, "responses"), "200", response(d, "The file.", console_headers, content));
    put(d, json_object_get(op, "responses"), "304", not_modified(d));
}

/* The frame routes' errors (api/http/http.c, api/frames/form.c, api/frames/render.c, api/frames/render_reply.c). */
#define FRAME_ERRORS(encode_413, encode_500)                                                                   \
    {400,                                                                                                       \
     "invalid_parameter malformed_params malformed_multipart missing_frame unknown_part duplicate_part "       \
     "empty_part malformed_image no_ocio_config ocio_conflict " FRAMING_CODES,                                  \
     "A parameter unknown, of the wrong type or out of range (the message names it and what it accepts, "      \
     "field its dotted name); the body, a form part or the image malformed; a form part repeated, empty or "   \
     "unknown (field names it); ocio.* without an OCIO config, or with a parameter the view replaces. Or: "    \
     FRAMING_WHEN,                                                                                              \
     NULL},                                                                                                     \
    {411, "length_required", "A body without Content-Length and not chunked.", NULL},                           \
    {413, "body_too_large too_large",                                                                           \
     "The body is over max_body_mb (from Content-Length, unread); the image over max_width, max_height or "    \
     "max_megapixels, or declaring more pixels than its body can hold (from its header, undecoded); the "      \
     "request needs more memory than all of max_inflight_mb" encode_413 ".",                                   \
     NULL},                                                                                                     \
    {415, "unsupported_format", "The bytes are not OpenEXR, Radiance HDR or PFM.", NULL},                       \
    {422, "unusable_image depth_size_differs depth_missing",                                                    \
     "A valid file that cannot be used: no colour channels, a layer or channel named in input.* that the "     \
     "file does not have (the message lists those it has), chromaticities that make no RGB space, a depth "    \
     "image of another size, or dof.enabled without any depth.",                                               \
     NULL},                                                                                                     \
    {429, "queue_full", "queue_depth frames are waiting already; retry after Retry-After.", "Retry-After"},     \
    {500, "internal_error internal ocio_failed" encode_500,                                                     \
     "A failure of the daemon's own (the message says which), or an OCIO view that could not be made for the GPU.", \
     NULL},                                                                                                     \
    {503, "not_ready device_lost memory_full out_of_memory",                                                    \
     "Starting (Retry-After: 1), draining, or the GPU was lost (Retry-After: 1 only for a frame a trusted "   \
     "proxy relays: another replica may take it); the requests in flight hold so much of max_inflight_mb "    \
     "that this one does not fit now (Retry-After: 1); out of memory.",                                         \
     "Retry-After"},                                                                                            \
    {504, "deadline_exceeded", "The frame waited in the queue longer than request_timeout_s.", NULL}

static const op_doc ops[] = {
    {"GET", "/livez", NULL, "livez", "health", "Liveness",
     "Whether the process is worth keeping: 503 only after the GPU is lost, which nothing short of a new "
     "process recovers from. Also on probe_listen.",
     build_livez,
     {FRAMING_400, NO_BODY_413, {503, "device_lost", "The GPU was lost: restart the process.", NULL}}},
    {"GET", "/readyz", NULL, "readyz", "health", "Readiness",
     "Whether the daemon should get work: 503 until every pipeline is warm, while draining, and after the GPU is "
     "lost. Also on probe_listen.",
     build_readyz,
     {FRAMING_400, NO_BODY_413,
      {503, "not_ready", "Starting (with Retry-After: 1), draining, or the device lost (no Retry-After).",
       "Retry-After"}}},
    {"POST", "/v1/render", NULL, "render", "frames", "Tone-map a frame",
     "A frame in, a display-ready image out (docs/API.md). The parameters are docs/PARAMETERS.md's, as query "
     "keys or as the form's params part.",
     build_render, {FRAME_ERRORS("; the image too large for its encoder", " encode_failed")}},
    {"POST", "/v1/analyze", NULL, "analyze", "frames", "A frame's luminance statistics",
     "The same input as /v1/render; the luminance statistics as JSON, without tone mapping or encoding: what a "
     "render farm needs to hold one exposure for a whole shot (exposure.mode=fixed&exposure.adaptation=...).",
     build_analyze, {FRAME_ERRORS("", "")}},
    {"GET", "/v1/gpu", NULL, "gpu", "status", "The device and the queue", NULL, build_gpu,
     {FRAMING_400, NO_BODY_413, {503, "not_ready", "The device is not up yet.", NULL}}},
    {"GET", "/metrics", NULL, "metrics", "status", "Prometheus metrics",
     "Needs the token unless metrics_open is set.", build_metrics, {FRAMING_400, NO_BODY_413, OOM_503}},
    {"GET", "/v1/stats", NULL, "stats", "status", "The last minute", NULL, build_stats,
     {FRAMING_400, NO_BODY_413, OOM_503}},
    {"GET", "/v1/params", NULL, "params", "describe", "The parameter table",
     "Every request parameter with its type, default, range or choices, unit and description, the looks and "
     "the rules across parameters, made from the table the parsers read (the console builds its form from it).",
     build_params, {FRAMING_400, NO_BODY_413, OOM_503}},
    {"GET", "/v1/ocio", NULL, "ocio", "describe", "The studio's OCIO config",
     "The OpenColorIO config the daemon loaded (ocio_config; docs/COLOR.md): its displays with their views, looks, "
     "colour spaces and roles, the names ocio.display, ocio.view, ocio.looks and input.colorspace take.",
     build_ocio, {FRAMING_400, NO_BODY_413, OOM_503}},
    {"GET", "/openapi.json", NULL, "openapi", "describe", "This document",
     "The API as OpenAPI 3.1, made from the route table and the parameter table the server runs on.",
     build_openapi, {FRAMING_400, NO_BODY_413, OOM_503}},
    {"GET", "/", NULL, "consoleIndex", "console", "The web console",
     "The console's page (docs/CONSOLE.md), when the console is on. Public: the page asks for the token and sends "
     "it with every API call it makes.",
     build_console_index,
     {FRAMING_400, NO_BODY_413, {404, "not_found", "The console is off.", NULL}, OOM_503}},
    {"GET", "/console/", "/console/{file}", "consoleFile", "console", "A file of the web console", NULL,
     build_console_file,
     {FRAMING_400, NO_BODY_413, {404, "not_found", "The console is off, or has no such file.", NULL}, OOM_503}},
};

static json_t *error_response(doc *d, const error_doc *e)
{
    json_t *content = need(d, json_object());
    media(d, content, "application/json", schema_ref(d, "Error"));
    json_t *r = response(d, e->when, e->headers, content);
    json_t *codes = need(d, json_array());
    words(d, e->codes, codes, NULL);
    put(d, r, "x-error-codes", codes);
    return r;
}

static const op_doc *op_for(const char *method, const char *route)
{
    for (size_t i = 0; i < sizeof(ops) / sizeof(ops[0]); i++)
        if (!strcmp(ops[i].method, method) && !strcmp(ops[i].route, route))
            return &ops[i];
    return NULL;
}

/* The operation of route i of the route table (api/routes/routes.c); *path gets its path in the document. */
static json_t *operation(doc *d, size_t i, const char **path)
{
    const char *method = hp_api_routes[i].method, *route = hp_api_routes[i].path;
    const op_doc *o = op_for(method, route);
    *path = o && o->path ? o->path : route;
    json_t *op = need(d, json_pack("{s:s, s:[o], s:{}}", "summary", o ? o->summary : route, "parameters",
                                   ref(d, "#/components/parameters/", "X-Request-Id"), "responses"));
    json_t *responses = json_object_get(op, "responses");
    if (o) {
        put(d, op, "operationId", need(d, json_string(o->id)));
        put(d, op, "tags", need(d, json_pack("[s]", o->tag)));
        if (o->description)
            put(d, op, "description", need(d, json_string(o->description)));
        o->build(d, op);
        for (size_t k = 0; k < sizeof(o->errors) / sizeof(o->errors[0]) && o->errors[k].status; k++) {
            char status[16];
            snprintf(status, sizeof(status), "%u", o->errors[k].status);
            put(d, responses, status, error_response(d, &o->errors[k]));
        }
    } else {
        /* A route added to the table without a description here: still in the document, and marked so the
         * test says which. */
        put(d, op, "x-hdrpost-undescribed", json_true());
        put(d, responses, "default", response(d, "Not described yet (api/routes/openapi.c).", NULL, NULL));
    }
    /* The table's open column: open routes are answered without the token; the others answer 401 without it
     * (when the daemon has an auth_token). */
    if (hp_api_routes[i].open || (d->metrics_open && !strcmp(hp_api_routes[i].path, "/metrics"))) {
        put(d, op, "security", need(d, json_array()));
    } else {
        put(d, op, "security", need(d, json_pack("[{s:[]}]", "bearerAuth")));
        error_doc unauthorized = {401, "unauthorized", "No Authorization: Bearer TOKEN, or the wrong token.",
                                  "WWW-Authenticate"};
        put(d, responses, "401", error_response(d, &unauthorized));
    }
    return op;
}

static void lowercase(const char *in, char *out, size_t size)
{
    size_t n = 0;
    for (; in[n] && n + 1 < size; n++)
        out[n] = (char)(in[n] >= 'A' && in[n] <= 'Z' ? in[n] - 'A' + 'a' : in[n]);
    out[n] = '\0';
}

static json_t *paths_object(doc *d)
{
    json_t *paths = need(d, json_object());
    for (size_t i = 0; i < hp_api_route_count; i++) {
        const char *path;
        json_t *op = operation(d, i, &path);
        json_t *item = json_object_get(paths, path);
        if (!item) {
            put(d, paths, path, need(d, json_object()));
            item = json_object_get(paths, path);
        }
        char method[16];
        lowercase(hp_api_routes[i].method, method, sizeof(method));
        put(d, item, method, op);
    }
    return paths;
}

/* Answers that any path may get, which belong to no operation of this document: listed for clients. */
static json_t *any_path_responses(doc *d)
{
    json_t *out = need(d, json_object());
    error_doc not_found = {404, "not_found", "No such path.", NULL};
    error_doc not_allowed = {405, "method_not_allowed",
                             "The path exists for other methods, which Allow lists (every GET path also answers "
                             "HEAD).",
                             "Allow"};
    put(d, out, "NotFound", error_response(d, &not_found));
    put(d, out, "MethodNotAllowed", error_response(d, &not_allowed));
    return out;
}

static json_t *components(doc *d)
{
    json_t *c = need(d, json_pack("{s:{}, s:{}}", "schemas", "parameters"));
    json_t *schemas = json_object_get(c, "schemas"), *parameters = json_object_get(c, "parameters");
    for (size_t i = 0; i < sizeof(fixed_schemas) / sizeof(fixed_schemas[0]); i++)
        put(d, schemas, fixed_schemas[i].name, parse(d, fixed_schemas[i].name, fixed_schemas[i].text));
    param_components(d, parameters, schemas);
    params_object(d, schemas);
    put(d, parameters, "X-Request-Id", parse(d, "X-Request-Id", fixed_request_id));
    put(d, c, "headers", parse(d, "the headers", fixed_headers));
    put(d, c, "securitySchemes", parse(d, "the security schemes", fixed_security_schemes));
    put(d, c, "responses", any_path_responses(d));
    return c;
}

json_t *hp_openapi_document(const char *version, bool metrics_open)
{
    json_t *table = hp_param_schema_json();
    if (!table)
        return NULL;
    doc d = {.param_rows = json_object_get(table, "parameters"), .looks = json_object_get(table, "looks"),
             .rules = json_object_get(table, "rules"), .metrics_open = metrics_open};
    json_t *root = need(&d, json_pack(
        "{s:s, s:{s:s, s:s, s:s, s:s}, s:[{s:s, s:s}, {s:s, s:s}, {s:s, s:s}, {s:s, s:s}, {s:s, s:s}]}", "openapi",
        "3.1.0", "info", "title", "hdrpostd", "version", version ? version : "unknown", "summary",
        "Tone-maps HDR frames on the GPU.", "description",
        "Frames in (OpenEXR, Radiance HDR, PFM, raw samples), display-ready images or statistics out "
        "(docs/API.md). Every GET also answers HEAD. Every answer carries X-Request-Id, X-Content-Type-Options: "
        "nosniff and Cache-Control: no-store (the console's files: no-cache with an ETag, 304 to a matching "
        "If-None-Match). Errors have one shape (components/schemas/Error); beside each "
        "operation's own, any path may answer 404 not_found or 405 method_not_allowed "
        "(components/responses). A request with a body is judged from its headers before the body is stored: "
        "framing, 411, 413, 401, 503 not_ready, 429 and the memory budget, in that order.",
        "tags", "name", "frames", "description", "Frames in, images or statistics out.", "name", "health",
        "description", "For supervisors and load balancers.", "name", "status", "description",
        "How the daemon is doing.", "name", "describe", "description", "The API described for programs.", "name",
        "console", "description", "The web console's files."));
    put(&d, root, "paths", paths_object(&d));
    put(&d, root, "components", components(&d));
    json_decref(table);
    if (d.failed) {
        json_decref(root);
        return NULL;
    }
    return root;
}
