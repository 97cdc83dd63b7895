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

#include "api/route.h"
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
    bool unnamed;      /* a part without a name */
    bool oom;
} hp_form;

/* A multipart/form-data body read into *f and its parts checked (unknown, unnamed, repeated, empty, no
 * frame). False: the reply says why. */
bool hp_form_read(hp_request *req, hp_form *f, hp_reply *reply);
/* The params part, a JSON object, applied on top of *params. False: the reply says why. */
bool hp_form_read_params(const hp_form_part *pp, hp_params *params, hp_reply *reply);
void hp_form_free(hp_form *f);

/* The query's parameters, applied on top of *params. False: the reply says why. */
bool hp_query_read(struct MHD_Connection *c, hp_params *params, hp_reply *reply);
/* The query as text (libmicrohttpd's split pairs, escaped again): NULL in *text when there is none.
 * False when out of memory. */
bool hp_request_query(struct MHD_Connection *c, char **text);

#endif
