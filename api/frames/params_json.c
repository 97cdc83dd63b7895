#include "api/frames/params_json.h"

#include <ctype.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "pipeline/looks.h"

/* Longest dotted name we build from nested keys; longer keys cannot be parameters. */
#define NAME_MAX_LEN 256

/* --- Names: groups and suggestions --------------------------------------------------------------------- */

/* The first parameter inside a group ("tonemap.hable" -> "tonemap.hable.shoulder_strength"), or NULL when
 * name is not a group. */
static const hp_param_def *group_member(const char *name)
{
    size_t n = strlen(name);
    for (size_t i = 0; i < hp_param_schema_count; i++)
        if (strncmp(hp_param_schema[i].name, name, n) == 0 && hp_param_schema[i].name[n] == '.')
            return &hp_param_schema[i];
    return NULL;
}

/* Levenshtein distance, ignoring case; both strings shorter than NAME_MAX_LEN. */
static size_t edit_distance(const char *a, const char *b)
{
    size_t la = strlen(a), lb = strlen(b);
    size_t row[NAME_MAX_LEN + 1];
    for (size_t j = 0; j <= lb; j++)
        row[j] = j;
    for (size_t i = 1; i <= la; i++) {
        size_t diag = row[0];
        row[0] = i;
        for (size_t j = 1; j <= lb; j++) {
            size_t up = row[j];
            size_t cost = tolower((unsigned char)a[i - 1]) != tolower((unsigned char)b[j - 1]);
            size_t best = diag + cost;
            if (up + 1 < best)
                best = up + 1;
            if (row[j - 1] + 1 < best)
                best = row[j - 1] + 1;
            row[j] = best;
            diag = up;
        }
    }
    return row[lb];
}

static void consider(const char *unknown, const char *candidate, size_t len, size_t *best, char *out,
                     size_t size)
{
    char name[NAME_MAX_LEN];
    if (len >= sizeof(name))
        return;
    memcpy(name, candidate, len);
    name[len] = '\0';
    size_t d = edit_distance(unknown, name);
    if (d < *best) {
        *best = d;
        snprintf(out, size, "%s", name);
    }
}

/* The known name (parameter or group) nearest to an unknown one, when near enough to be a typo (one edit
 * per eight characters, plus one), or else the one parameter whose name ends with the unknown key (a
 * stage left out: "operator" -> "tonemap.operator"). Empty when nothing fits. */
static void suggest(const char *unknown, char *out, size_t size)
{
    out[0] = '\0';
    size_t len = strlen(unknown);
    if (len == 0 || len >= NAME_MAX_LEN)
        return;
    size_t best = 1 + len / 8 + 1; /* strictly greater than the largest distance accepted */
    for (size_t i = 0; i < hp_param_schema_count; i++) {
        /* The parameter and each group above it ("tonemap.hable", "tonemap"). */
        const char *name = hp_param_schema[i].name;
        consider(unknown, name, strlen(name), &best, out, size);
        for (const char *dot = name; (dot = strchr(dot, '.')); dot++)
            consider(unknown, name, (size_t)(dot - name), &best, out, size);
    }
    if (out[0])
        return;
    const char *only = NULL;
    for (size_t i = 0; i < hp_param_schema_count; i++) {
        const char *name = hp_param_schema[i].name;
        size_t n = strlen(name);
        if (n > len && name[n - len - 1] == '.' && strcmp(name + n - len, unknown) == 0) {
            if (only)
                return; /* ambiguous: say nothing rather than guess */
            only = name;
        }
    }
    if (only)
        snprintf(out, size, "%s", only);
}

static hp_code fail_unknown(const char *name, hp_err *err)
{
    char near[NAME_MAX_LEN];
    suggest(name, near, sizeof(near));
    if (near[0])
        return hp_fail_field(err, HP_ERR_INVALID_ARGUMENT, name, "unknown parameter %.200s (did you mean %s?)",
                             name, near);
    return hp_fail_field(err, HP_ERR_INVALID_ARGUMENT, name, "unknown parameter %.200s", name);
}

static hp_code fail_group(const char *name, const hp_param_def *member, const char *got, hp_err *err)
{
    return hp_fail_field(err, HP_ERR_INVALID_ARGUMENT, name,
                         "%s is a group of parameters such as %s, so it takes an object, got %s", name,
                         member->name, got);
}

static hp_code fail_twice(const hp_param_def *def, const char *where, hp_err *err)
{
    return hp_fail_field(err, HP_ERR_INVALID_ARGUMENT, def->name, "%s is given twice %s", def->name, where);
}

/* The JSON type a parameter takes, completing "<name> must be ..." when the JSON type is wrong. The range
 * comes with the setter's own message once the type is right. */
static void type_phrase(const hp_param_def *def, char *out, size_t size)
{
    switch (def->type) {
    case HP_PARAM_NUMBER: snprintf(out, size, "a number"); return;
    case HP_PARAM_NUMBER_OR_AUTO: snprintf(out, size, "a number or the string \"auto\""); return;
    case HP_PARAM_INTEGER: snprintf(out, size, "an integer"); return;
    case HP_PARAM_BOOL: snprintf(out, size, "true or false"); return;
    case HP_PARAM_ENUM: {
        size_t n = (size_t)snprintf(out, size, "a string, one of ");
        if (n < size)
            hp_param_choices_text(def, out + n, size - n);
        return;
    }
    case HP_PARAM_STRING: snprintf(out, size, "a string"); return;
    }
    snprintf(out, size, "a value");
}

static hp_code fail_type(const hp_param_def *def, const char *got, hp_err *err)
{
    char phrase[300];
    type_phrase(def, phrase, sizeof(phrase));
    return hp_fail_field(err, HP_ERR_INVALID_ARGUMENT, def->name, "%s must be %s, got %s", def->name, phrase, got);
}

static const char *json_kind(const json_t *v)
{
    switch (json_typeof(v)) {
    case JSON_OBJECT: return "an object";
    case JSON_ARRAY: return "an array";
    case JSON_STRING: return "a string";
    case JSON_INTEGER:
    case JSON_REAL: return "a number";
    case JSON_TRUE:
    case JSON_FALSE: return "a boolean";
    case JSON_NULL: return "null";
    }
    return "a value";
}

/* --- JSON in ------------------------------------------------------------------------------------------- */

static hp_code set_from_json(hp_params *p, const hp_param_def *def, const json_t *value, hp_err *err)
{
    if (json_is_number(value))
        return hp_param_set_number(p, def, json_number_value(value), err);
    if (json_is_boolean(value))
        return hp_param_set_bool(p, def, json_is_true(value), err);
    if (json_is_string(value)) {
        const char *s = json_string_value(value);
        /* Choices and names are strings, and so is "auto"; a number in quotes is a type error, as JSON
         * means it. */
        if (def->type == HP_PARAM_ENUM || def->type == HP_PARAM_STRING ||
            (def->type == HP_PARAM_NUMBER_OR_AUTO && strcmp(s, "auto") == 0)) {
            if (strlen(s) != json_string_length(value))
                return fail_type(def, "a string with a NUL character", err);
            return hp_param_set_string(p, def, s, err);
        }
        char got[100];
        snprintf(got, sizeof(got), strlen(s) > 40 ? "the string \"%.40s...\"" : "the string \"%s\"", s);
        return fail_type(def, got, err);
    }
    return fail_type(def, json_kind(value), err);
}

static hp_code walk_object(const json_t *obj, const char *prefix, hp_params *p, bool *seen, hp_err *err)
{
    const char *key;
    json_t *value;
    json_object_foreach((json_t *)obj, key, value) {
        char name[NAME_MAX_LEN];
        int n = prefix ? snprintf(name, sizeof(name), "%s.%s", prefix, key) : snprintf(name, sizeof(name), "%s", key);
        if (n < 0 || (size_t)n >= sizeof(name))
            return hp_fail_field(err, HP_ERR_INVALID_ARGUMENT, name, "unknown parameter %.60s...: the name is "
                                 "longer than any parameter's", name);

        const hp_param_def *def = hp_param_find(name);
        if (def) {
            size_t index = (size_t)(def - hp_param_schema);
            if (seen[index])
                return fail_twice(def, "(a nested key and a dotted key name the same parameter)", err);
            seen[index] = true;
            hp_code code = set_from_json(p, def, value, err);
            if (code != HP_OK)
                return code;
            continue;
        }
        const hp_param_def *member = group_member(name);
        if (member && !json_is_object(value))
            return fail_group(name, member, json_kind(value), err);
        /* Under an unknown key, go on to the first name inside, so the error names the full key. */
        if (json_is_object(value) && json_object_size(value) > 0) {
            hp_code code = walk_object(value, name, p, seen, err);
            if (code != HP_OK)
                return code;
            continue;
        }
        if (!member)
            return fail_unknown(name, err);
    }
    return HP_OK;
}

hp_code hp_params_from_json(const json_t *obj, hp_params *p, hp_err *err)
{
    if (!obj || !json_is_object(obj))
        return hp_fail(err, HP_ERR_INVALID_ARGUMENT, "parameters must be a JSON object, got %s",
                       obj ? json_kind(obj) : "nothing");
    bool *seen = calloc(hp_param_schema_count, sizeof(bool)); /* by schema index */
    if (!seen)
        return hp_fail(err, HP_ERR_OUT_OF_MEMORY, "out of memory parsing the parameters");
    hp_params next = *p;
    hp_code code = walk_object(obj, NULL, &next, seen, err);
    free(seen);
    if (code == HP_OK)
        code = hp_params_check(&next, err);
    if (code == HP_OK)
        *p = next;
    return code;
}

/* --- Query strings in ---------------------------------------------------------------------------------- */

static int hex_digit(char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

/* Decodes len bytes of src (percent escapes, '+' as space) into out, which holds len + 1 bytes. Returns
 * false on a bad escape or an encoded NUL, with *bad at the offending '%'. */
static bool url_decode(const char *src, size_t len, char *out, const char **bad)
{
    size_t o = 0;
    for (size_t i = 0; i < len; i++) {
        if (src[i] == '+') {
            out[o++] = ' ';
        } else if (src[i] == '%') {
            int hi = i + 1 < len ? hex_digit(src[i + 1]) : -1;
            int lo = i + 2 < len ? hex_digit(src[i + 2]) : -1;
            if (hi < 0 || lo < 0 || (hi == 0 && lo == 0)) {
                *bad = src + i;
                return false;
            }
            out[o++] = (char)(hi * 16 + lo);
            i += 2;
        } else {
            out[o++] = src[i];
        }
    }
    out[o] = '\0';
    return true;
}

static hp_code fail_escape(const char *key, const char *bad, hp_err *err)
{
    return hp_fail_field(err, HP_ERR_INVALID_ARGUMENT, key,
                         "bad percent-escape \"%.3s\" in the query string%s%s: expected %% and two hex digits "
                         "other than 00",
                         bad, key[0] ? " at " : "", key);
}

static hp_code query_pair(const char *pair, size_t len, hp_params *p, bool *seen, char *key, char *value,
                          hp_err *err)
{
    if (len == 0)
        return hp_fail(err, HP_ERR_INVALID_ARGUMENT,
                       "empty parameter in the query string (two '&' in a row, or a '&' at an end)");
    const char *eq = memchr(pair, '=', len);
    size_t key_len = eq ? (size_t)(eq - pair) : len;
    const char *bad;
    if (!url_decode(pair, key_len, key, &bad))
        return fail_escape("", bad, err);
    if (key[0] == '\0')
        return hp_fail(err, HP_ERR_INVALID_ARGUMENT, "a query parameter has no name (\"=%.*s\")",
                       (int)(len > 40 ? 40 : len - 1), eq + 1);

    const hp_param_def *def = hp_param_find(key);
    if (!def) {
        const hp_param_def *member = group_member(key);
        if (member)
            return hp_fail_field(err, HP_ERR_INVALID_ARGUMENT, key,
                                 "%s is a group of parameters, not one: name a parameter such as %s", key,
                                 member->name);
        return fail_unknown(key, err);
    }
    size_t index = (size_t)(def - hp_param_schema);
    if (seen[index])
        return fail_twice(def, "in the query string", err);
    seen[index] = true;

    char phrase[300];
    if (!eq || eq + 1 == pair + len) {
        type_phrase(def, phrase, sizeof(phrase));
        return hp_fail_field(err, HP_ERR_INVALID_ARGUMENT, def->name, "%s has %s value in the query string: "
                             "expected %s=VALUE with VALUE %s", def->name, eq ? "an empty" : "no", def->name,
                             phrase);
    }
    if (!url_decode(eq + 1, len - key_len - 1, value, &bad))
        return fail_escape(def->name, bad, err);
    return hp_param_set_string(p, def, value, err);
}

hp_code hp_params_from_query(const char *query, hp_params *p, hp_err *err)
{
    if (!query || !query[0]) {
        hp_params next = *p;
        return hp_params_check(&next, err);
    }
    size_t total = strlen(query);
    char *key = malloc(total + 1), *value = malloc(total + 1);
    bool *seen = calloc(hp_param_schema_count, sizeof(bool));
    if (!key || !value || !seen) {
        free(key);
        free(value);
        free(seen);
        return hp_fail(err, HP_ERR_OUT_OF_MEMORY, "out of memory parsing the query string");
    }
    hp_params next = *p;
    hp_code code = HP_OK;
    for (const char *pair = query; code == HP_OK;) {
        const char *amp = strchr(pair, '&');
        size_t len = amp ? (size_t)(amp - pair) : strlen(pair);
        code = query_pair(pair, len, &next, seen, key, value, err);
        if (!amp)
            break;
        pair = amp + 1;
    }
    free(key);
    free(value);
    free(seen);
    if (code == HP_OK)
        code = hp_params_check(&next, err);
    if (code == HP_OK)
        *p = next;
    return code;
}

/* --- JSON out ------------------------------------------------------------------------------------------ */

static json_t *value_json(const hp_params *p, const hp_param_def *def)
{
    const char *field = (const char *)p + def->offset;
    double number;
    uint32_t u32;
    switch (def->type) {
    case HP_PARAM_NUMBER_OR_AUTO:
        if (*(const bool *)((const char *)p + def->aux_offset))
            return json_string("auto");
        /* fall through */
    case HP_PARAM_NUMBER:
        memcpy(&number, field, sizeof(number));
        return isfinite(number) ? json_real(number) : json_null(); /* JSON has no NaN */
    case HP_PARAM_INTEGER:
        memcpy(&u32, field, sizeof(u32));
        return json_integer((json_int_t)u32);
    case HP_PARAM_BOOL: return json_boolean(*(const bool *)field);
    case HP_PARAM_ENUM: {
        /* An open enum's name from the OCIO config (input.colorspace "ACEScg") is what the request chose. */
        const char *open = def->open_offset ? (const char *)p + def->open_offset : NULL;
        if (open && open[0])
            return memchr(open, '\0', HP_PARAM_STRING_MAX + 1) ? json_string(open) : json_null();
        memcpy(&u32, field, sizeof(u32));
        for (uint32_t i = 0; def->choices[i]; i++)
            if (i == u32)
                return json_string(def->choices[i]);
        return json_null(); /* not a valid choice: hp_params_check would refuse it */
    }
    case HP_PARAM_STRING: {
        /* The setters allow UTF-8 only; text put there in C and never checked is echoed as null rather
         * than failing the whole echo (jansson refuses bytes that are not UTF-8). */
        json_t *text = json_stringn(field, strnlen(field, HP_PARAM_STRING_MAX + 1));
        return text ? text : json_null();
    }
    }
    return json_null();
}

json_t *hp_params_to_json(const hp_params *p)
{
    json_t *root = json_object();
    if (!root)
        return NULL;
    for (size_t i = 0; i < hp_param_schema_count; i++) {
        const hp_param_def *def = &hp_param_schema[i];
        json_t *parent = root;
        const char *segment = def->name;
        for (const char *dot; (dot = strchr(segment, '.')); segment = dot + 1) {
            char group[NAME_MAX_LEN];
            snprintf(group, sizeof(group), "%.*s", (int)(dot - segment), segment);
            json_t *child = json_object_get(parent, group);
            if (!child) {
                child = json_object();
                if (!child || json_object_set_new(parent, group, child) != 0)
                    goto oom;
            }
            parent = child;
        }
        json_t *value = value_json(p, def);
        if (!value || json_object_set_new(parent, segment, value) != 0)
            goto oom;
    }
    return root;
oom:
    json_decref(root);
    return NULL;
}

static const char *type_name(hp_param_type type)
{
    switch (type) {
    case HP_PARAM_NUMBER: return "number";
    case HP_PARAM_NUMBER_OR_AUTO: return "number_or_auto";
    case HP_PARAM_INTEGER: return "integer";
    case HP_PARAM_BOOL: return "boolean";
    case HP_PARAM_ENUM: return "enum";
    case HP_PARAM_STRING: return "string";
    }
    return "unknown";
}

/* One row of the table as data. defaults: hp_params_defaults(), for the default in its JSON form. */
static json_t *param_json(const hp_param_def *def, const hp_params *defaults)
{
    char group[NAME_MAX_LEN];
    snprintf(group, sizeof(group), "%.*s", (int)strcspn(def->name, "."), def->name);
    json_t *o = json_pack("{s:s, s:s, s:s, s:o, s:s, s:s, s:s?}", "name", def->name, "group", group, "type",
                          type_name(def->type), "default", value_json(defaults, def), "unit", def->unit, "description",
                          def->help, "applies", def->applies);
    if (!o)
        return NULL;
    int rc = 0;
    if (def->type == HP_PARAM_NUMBER || def->type == HP_PARAM_NUMBER_OR_AUTO ||
        (def->type == HP_PARAM_INTEGER && !def->choices)) {
        bool max_exclusive;
        double max = hp_param_max(def, &max_exclusive);
        rc |= json_object_set_new(o, def->min_exclusive ? "exclusiveMinimum" : "minimum", json_real(def->min));
        rc |= json_object_set_new(o, max_exclusive ? "exclusiveMaximum" : "maximum", json_real(max));
    }
    if (def->choices) {
        json_t *choices = json_array();
        for (size_t i = 0; choices && def->choices[i]; i++)
            rc |= json_array_append_new(choices, def->type == HP_PARAM_INTEGER
                                                     ? json_integer(strtol(def->choices[i], NULL, 10))
                                                     : json_string(def->choices[i]));
        rc |= json_object_set_new(o, "choices", choices);
    }
    if (def->type == HP_PARAM_STRING)
        rc |= json_object_set_new(o, "maxLength", json_integer((json_int_t)def->max));
    if (rc != 0) {
        json_decref(o);
        return NULL;
    }
    return o;
}

/* A look's settings ("a=1&b=x") as {"a": "1", "b": "x"}: names and values as the parameters read them, escapes
 * decoded (a studio look's query is URL-encoded: its view's spaces). */
static json_t *look_settings_json(const char *settings)
{
    json_t *o = json_object();
    for (const char *at = settings; o && *at;) {
        size_t len = strcspn(at, "&");
        const char *eq = memchr(at, '=', len);
        if (eq) {
            size_t klen = (size_t)(eq - at), vlen = len - klen - 1;
            char *key = malloc(klen + 1), *value = malloc(vlen + 1);
            const char *bad = NULL;
            bool ok = key && value && url_decode(at, klen, key, &bad) && url_decode(eq + 1, vlen, value, &bad) &&
                      json_object_set_new(o, key, json_string(value)) == 0;
            free(key);
            free(value);
            if (!ok) {
                json_decref(o);
                return NULL;
            }
        }
        at += len + (at[len] == '&');
    }
    return o;
}

json_t *hp_param_schema_json(void)
{
    hp_params defaults;
    hp_params_defaults(&defaults);
    json_t *params = json_array(), *looks = json_array(), *rules = json_array();
    json_t *root = json_pack("{s:o, s:o, s:o}", "parameters", params, "looks", looks, "rules", rules);
    if (!root)
        return NULL;
    int rc = 0;
    for (size_t i = 0; i < hp_param_schema_count; i++)
        rc |= json_array_append_new(params, param_json(&hp_param_schema[i], &defaults));
    for (size_t i = 0; i < hp_look_total(); i++)
        rc |= json_array_append_new(looks, json_pack("{s:s, s:o, s:s, s:b}", "name", hp_look_at(i)->name, "sets",
                                                     look_settings_json(hp_look_at(i)->settings), "description",
                                                     hp_look_at(i)->help, "studio", i >= hp_look_count));
    const char *field, *doc;
    for (size_t i = 0; (doc = hp_param_rule_doc(i, &field)); i++)
        rc |= json_array_append_new(rules, json_pack("{s:s, s:s}", "field", field, "description", doc));
    if (rc != 0) {
        json_decref(root);
        return NULL;
    }
    return root;
}

hp_code hp_params_apply_look(hp_params *p, uint32_t look, hp_err *err)
{
    if (look >= hp_look_total())
        return hp_fail_field(err, HP_ERR_INVALID_ARGUMENT, "look", "look %u is not one of the %zu looks", look,
                             hp_look_total());
    const char *settings = hp_look_at(look)->settings;
    hp_code code = settings[0] ? hp_params_from_query(settings, p, err) : HP_OK;
    if (code == HP_OK)
        p->look = look;
    return code;
}

hp_code hp_params_read_with_look(hp_params_reader read, const void *src, hp_params *p, hp_err *err)
{
    hp_params first = *p;
    hp_code code = read(src, &first, err);
    if (code != HP_OK || first.look == 0) {
        if (code == HP_OK)
            *p = first;
        return code;
    }
    hp_params base = *p;
    code = hp_params_apply_look(&base, first.look, err);
    if (code == HP_OK)
        code = read(src, &base, err);
    if (code == HP_OK)
        *p = base;
    return code;
}

static hp_code read_json(const void *src, hp_params *p, hp_err *err) { return hp_params_from_json(src, p, err); }
static hp_code read_query(const void *src, hp_params *p, hp_err *err) { return hp_params_from_query(src, p, err); }

hp_code hp_params_from_json_with_look(const json_t *obj, hp_params *p, hp_err *err)
{
    return hp_params_read_with_look(read_json, obj, p, err);
}

hp_code hp_params_from_query_with_look(const char *query, hp_params *p, hp_err *err)
{
    return hp_params_read_with_look(read_query, query, p, err);
}
