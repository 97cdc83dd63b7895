/* How a request carries its frame and parameters (private to api/): a multipart/form-data body with the
 * parts frame, depth and params (JSON), read with libmicrohttpd's post processor; and the query string,
 * whose parameters apply in both forms, after a params part. The frame's bytes are found, not decoded,
 * here: the handler (render.c) decodes them. */
#ifndef HP_FORM_H
#define HP_FORM_H

#include <microhttpd.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "api/http/route.h"
#include "pipeline/params.h"

typedef struct hp_form_part {
    uint8_t *data;
    size_t len, cap;
    bool present;
} hp_form_part;

typedef struct hp_form {
    hp_form_part frame, depth, params;
    size_t body_len; /* the whole form's size: bounds a part's, and sizes a frame part at once */
    char unknown[64]; /* the first part name that is none of those */
    char repeated[16]; /* the first of them sent twice */
    bool unnamed;      /* a part without a name, or name="" */
    bool params_too_large; /* the params part ran past HP_PARAMS_PART_MAX */
    bool oom;
} hp_form;

/* A multipart/form-data body read into *f and its parts checked (unknown, unnamed, repeated, empty, no
 * frame). False: the reply says why. */
bool hp_form_read(hp_request *req, hp_form *f, hp_reply *reply);
/* The largest params part: the API's parameters (GET /v1/params) fit in a few hundred bytes, a look's every
 * setting in about 2 KiB. A longer part is answered 413 before any of it is parsed: a 151 MB part of 8 M keys
 * took 18.9 s to parse and 4.2 GB of memory. */
#define HP_PARAMS_PART_MAX (16 << 10)
/* The memory jansson may take parsing a params part, as a multiple of its bytes, taken from the budget for
 * the parse: 84 measured for the worst text ("[{},{},...]": an empty object's table for every 3 bytes),
 * rounded up (tests/test_params.c holds jansson to it). */
#define HP_PARAMS_PARSE_FACTOR 128

/* The params part, a JSON object, applied on top of *params, its parse's memory taken from the budget while
 * it lasts. False: the reply says why. */
bool hp_form_read_params(hp_request *req, const hp_form_part *pp, hp_params *params, hp_reply *reply);
void hp_form_free(hp_form *f);

/* The query's parameters, applied on top of *params. False: the reply says why. */
bool hp_query_read(struct MHD_Connection *c, hp_params *params, hp_reply *reply);
/* The query as text (libmicrohttpd's split pairs, escaped again): NULL in *text when there is none.
 * False when out of memory. */
bool hp_request_query(struct MHD_Connection *c, char **text);

#endif
