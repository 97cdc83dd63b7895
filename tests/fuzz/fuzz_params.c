/* Fuzz target: the request parameters' two parsers (api/frames/params_json.h), which read untrusted text from every
 * request. The first byte chooses the form: bit 0 clear, a JSON body as the params part is parsed (json_loadb,
 * then hp_params_from_json); set, a query string (hp_params_from_query). Bit 1 registers the ACES test config
 * (tests/data/ocio/aces_builtin, issue 34), as a daemon with ocio_config has: ocio.* and input.colorspace's
 * config names are then checked against it; clear, no config, and they are refused (no_ocio_config). Bit 2,
 * without the config, accepts open names as hdrpost (client/) does. Bit 3 adds a daemon's own look (studio_looks:
 * "review", a view at a fixed exposure) for the input, reads it with the look applied first (the _with_look
 * parsers) and makes GET /v1/params' table with it. Beyond "no crash, no sanitizer report",
 * it checks what the parsers promise: a failure leaves the parameters unchanged and names what was wrong,
 * and a success passes hp_params_check and survives a round trip through hp_params_to_json with every
 * value the same, input.colorspace's kept config name too. */
#include <jansson.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/frames/params_json.h"
#include "pipeline/looks.h"
#include "ocio/config.h"

#ifndef HP_FUZZ_OCIO_CONFIG
#error "HP_FUZZ_OCIO_CONFIG: the ACES test config's path (tests/fuzz/meson.build)"
#endif

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static hp_ocio_config *aces; /* loaded once, kept for the process (reachable: not a leak) */

static void load_config(void)
{
    if (aces)
        return;
    hp_err err = {0};
    if (hp_ocio_config_load(HP_FUZZ_OCIO_CONFIG, &aces, &err) != HP_OK) {
        fprintf(stderr, "fuzz_params: the OCIO config did not load: %s\n", err.message);
        abort(); /* the OCIO branches would go untested without a word */
    }
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc, (void)argv;
    load_config(); /* before the first input: the config builds every display's processor */
    return 0;
}

static void check(hp_code code, const hp_params *before, const hp_params *after, const hp_err *err)
{
    if (code != HP_OK) {
        if (memcmp(before, after, sizeof(*before)) != 0 || !err->message[0])
            abort(); /* a refusal changed the parameters, or said nothing */
        return;
    }
    hp_err again = {0};
    if (hp_params_check(after, &again) != HP_OK)
        abort(); /* accepted parameters the checker refuses */
    /* The daemon's own answer ("params" in a JSON response) parses, to the same values. */
    json_t *round = hp_params_to_json(after);
    hp_params back;
    hp_params_defaults(&back);
    if (round && hp_params_from_json(round, &back, &again) != HP_OK)
        abort();
    json_t *twice = round ? hp_params_to_json(&back) : NULL;
    if (round && twice && !json_equal(round, twice))
        abort();
    if (round && strcmp(back.ocio.input, after->ocio.input) != 0)
        abort(); /* the echo lost input.colorspace's config name (it reads back as another space) */
    if (round && (back.look != after->look || strcmp(back.look_name, after->look_name) != 0))
        abort(); /* the echo lost the look, or hdrpost's kept name of one */
    json_decref(twice);
    json_decref(round);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    load_config(); /* replay.c calls no LLVMFuzzerInitialize */
    hp_params_use_ocio(data[0] & 2 ? aces : NULL);
    hp_params_accept_open_names(!(data[0] & 2) && (data[0] & 4));
    bool studio = data[0] & 8;
    hp_looks_reset(); /* whatever an input before left (its early returns skip the reset at the end) */
    if (studio) {
        hp_err added = {0};
        if (hp_looks_add("review", "ocio.view=Raw&exposure.mode=fixed&exposure.stops=0.5", "fuzz", &added) != HP_OK)
            abort();
        json_t *table = hp_param_schema_json(); /* the looks' sets decoded, the studio look among them */
        if (!table)
            abort();
        json_decref(table);
    }
    hp_params defaults, p;
    hp_params_defaults(&defaults);
    p = defaults;
    hp_err err = {0};
    hp_code code;
    if (data[0] % 2 == 0) {
        json_error_t jerr;
        json_t *obj = json_loadb((const char *)data + 1, size - 1, 0, &jerr);
        if (!obj || !json_is_object(obj)) {
            json_decref(obj);
            return 0; /* the handler answers malformed_params before the parameters are read */
        }
        code = studio ? hp_params_from_json_with_look(obj, &p, &err) : hp_params_from_json(obj, &p, &err);
        json_decref(obj);
    } else {
        char *query = malloc(size);
        if (!query)
            return 0;
        memcpy(query, data + 1, size - 1);
        query[size - 1] = '\0';
        code = studio ? hp_params_from_query_with_look(query, &p, &err) : hp_params_from_query(query, &p, &err);
        free(query);
    }
    check(code, &defaults, &p, &err);
    if (studio)
        hp_looks_reset();
    return 0;
}
