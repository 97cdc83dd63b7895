/* Fuzz target: the request parameters' two parsers (api/params_json.h), which read untrusted text from every
 * request. The first byte chooses the form: even, a JSON body as the params part is parsed (json_loadb, then
 * hp_params_from_json); odd, a query string (hp_params_from_query). Beyond "no crash, no sanitizer report",
 * it checks what the parsers promise: a failure leaves the parameters unchanged and names what was wrong,
 * and a success passes hp_params_check and survives a round trip through hp_params_to_json with every
 * value the same. */
#include <jansson.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "api/params_json.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

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
    json_decref(twice);
    json_decref(round);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
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
        code = hp_params_from_json(obj, &p, &err);
        json_decref(obj);
    } else {
        char *query = malloc(size);
        if (!query)
            return 0;
        memcpy(query, data + 1, size - 1);
        query[size - 1] = '\0';
        code = hp_params_from_query(query, &p, &err);
        free(query);
    }
    check(code, &defaults, &p, &err);
    return 0;
}
