/* The multipart form and the query string (api/frames/form.h). */
#include "api/frames/form.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/frames/params_json.h"
#include "common/bigbuf.h"
#include "common/budget.h"

/* --- Multipart ------------------------------------------------------------------------------------- */

/* libmicrohttpd calls this once per piece of a part, with off the piece's offset in its part: off 0 starts
 * a part, and a part of 0 bytes is that one call with size 0 (so no buffer is made for it). A name sent
 * twice is refused rather than concatenated: an image split over two parts is not one a client meant. */
static enum MHD_Result on_form_part(void *cls, enum MHD_ValueKind kind, const char *key, const char *filename,
                                    const char *content_type, const char *transfer_encoding, const char *data,
                                    uint64_t off, size_t size)
{
    (void)kind, (void)filename, (void)content_type, (void)transfer_encoding;
    hp_form *f = cls;
    /* A part whose Content-Disposition has no name comes with key NULL (found by tests/fuzz/fuzz_form: it
     * was passed to strcmp); name="" comes as "", and was kept and ignored. */
    if (!key || !key[0]) {
        f->unnamed = true;
        return MHD_YES;
    }
    hp_form_part *p = !strcmp(key, "frame") ? &f->frame : !strcmp(key, "depth") ? &f->depth
                                                 : !strcmp(key, "params") ? &f->params : NULL;
    if (!p) {
        if (!f->unknown[0])
            snprintf(f->unknown, sizeof(f->unknown), "%s", key);
        return MHD_YES;
    }
    if (off == 0 && p->present) {
        if (!f->repeated[0])
            snprintf(f->repeated, sizeof(f->repeated), "%s", key);
        return MHD_YES;
    }
    p->present = true;
    if (size == 0)
        return MHD_YES;
    if (p == &f->params && (f->params_too_large || p->len + size > HP_PARAMS_PART_MAX)) {
        f->params_too_large = true; /* the rest of it is dropped as it comes: 413 before any parse */
        return MHD_YES;
    }
    if (p->len + size > p->cap) {
        /* An image part is sized for the whole form at once (no doubling copies of a 28 MB frame), from the
         * pool of warm buffers (common/bigbuf.h); params starts small. */
        size_t cap = p->cap ? p->cap * 2 : p == &f->params ? (size_t)HP_PARAMS_PART_MAX : f->body_len;
        if (cap < (size_t)HP_PARAMS_PART_MAX)
            cap = HP_PARAMS_PART_MAX;
        while (cap < p->len + size)
            cap *= 2;
        uint8_t *grown = hp_bigbuf_get(cap + 1);
        if (!grown) {
            f->oom = true;
            return MHD_NO;
        }
        if (p->len)
            memcpy(grown, p->data, p->len);
        hp_bigbuf_put(p->data);
        p->data = grown;
        p->cap = cap;
    }
    memcpy(p->data + p->len, data, size);
    p->len += size;
    p->data[p->len] = 0; /* the params part is parsed as text */
    return MHD_YES;
}

void hp_form_free(hp_form *f)
{
    hp_bigbuf_put(f->frame.data);
    hp_bigbuf_put(f->depth.data);
    hp_bigbuf_put(f->params.data);
}

/* --- Query parameters ---------------------------------------------------------------------------- */

typedef struct query_text {
    char *buf;
    size_t len, cap;
    bool oom;
} query_text;

static bool reserve(query_text *q, size_t more)
{
    if (q->len + more + 1 <= q->cap)
        return true;
    size_t cap = q->cap ? q->cap * 2 : 256;
    while (cap < q->len + more + 1)
        cap *= 2;
    char *grown = realloc(q->buf, cap);
    if (!grown) {
        q->oom = true;
        return false;
    }
    q->buf = grown;
    q->cap = cap;
    return true;
}

static void append_raw(query_text *q, char c)
{
    if (reserve(q, 1)) {
        q->buf[q->len++] = c;
        q->buf[q->len] = 0;
    }
}

static void append_escaped(query_text *q, const char *s)
{
    for (; *s && !q->oom; s++) {
        unsigned char c = (unsigned char)*s;
        bool plain = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' ||
                     c == '_' || c == '-';
        if (plain) {
            append_raw(q, (char)c);
        } else if (reserve(q, 3)) {
            snprintf(q->buf + q->len, 4, "%%%02X", c);
            q->len += 3;
        }
    }
}

/* libmicrohttpd hands the query already split and decoded; api/frames/params_json.c wants the text, so it is
 * re-encoded (one place parses query parameters, with its duplicate and escape rules). */
static enum MHD_Result on_query_arg(void *cls, enum MHD_ValueKind kind, const char *key, const char *value)
{
    (void)kind;
    query_text *q = cls;
    if (q->len)
        append_raw(q, '&');
    append_escaped(q, key);
    if (value) {
        append_raw(q, '=');
        append_escaped(q, value);
    }
    return MHD_YES;
}

bool hp_request_query(struct MHD_Connection *c, char **text)
{
    query_text q = {0};
    MHD_get_connection_values(c, MHD_GET_ARGUMENT_KIND, on_query_arg, &q);
    if (q.oom) {
        free(q.buf);
        return false;
    }
    *text = q.buf;
    return true;
}

/* The form's parts as the form reader left them: false, with the reply saying which part is wrong, for a
 * part unknown, unnamed, repeated or empty, or no frame. */
static bool form_parts_ok(const hp_form *f, hp_reply *reply)
{
    /* An empty params or depth part is a mistake (an empty file attached), not a request for defaults. */
    const char *empty = f->params.present && !f->params.len ? "params" : f->depth.present && !f->depth.len ? "depth"
                                                                                                          : NULL;
    if (f->unknown[0])
        hp_reply_error(reply, 400, "unknown_part", f->unknown,
                       "unknown form part \"%s\"; the parts are frame, depth and params", f->unknown);
    else if (f->unnamed)
        hp_reply_error(reply, 400, "unknown_part", NULL, "a form part has no name; the parts are frame, depth and "
                       "params (Content-Disposition: form-data; name=\"frame\")");
    else if (f->params_too_large)
        hp_reply_error(reply, 413, "params_too_large", "params", "the params part is over %d KiB; the API's "
                       "parameters (GET /v1/params) fit in a few hundred bytes", HP_PARAMS_PART_MAX >> 10);
    else if (f->repeated[0])
        hp_reply_error(reply, 400, "duplicate_part", f->repeated,
                       "the form has more than one \"%s\" part; send each of frame, depth and params once",
                       f->repeated);
    else if (!f->frame.present || f->frame.len == 0)
        hp_reply_error(reply, 400, "missing_frame", "frame", f->frame.present ? "the form's \"frame\" part is empty"
                       : "the form has no \"frame\" part with the image");
    else if (empty)
        hp_reply_error(reply, 400, "empty_part", empty, "the form's \"%s\" part is empty; leave it out, or send %s",
                       empty, !strcmp(empty, "params") ? "a JSON object" : "the depth image");
    else
        return true;
    return false;
}

/* The params part's JSON, parsed (NULL: jerr says why), applied on top of *params. */
static bool params_from_object(json_t *obj, const json_error_t *jerr, hp_params *params, hp_reply *reply)
{
    if (!obj || !json_is_object(obj)) {
        hp_reply_error(reply, 400, "malformed_params", "params", "the params part is not a JSON object: %s (line %d, "
                       "column %d)", obj ? "not an object" : jerr->text, jerr->line, jerr->column);
        return false;
    }
    hp_err err = {0};
    hp_code pc = hp_params_from_json(obj, params, &err);
    if (pc != HP_OK)
        hp_reply_error(reply, 400, err.word ? err.word : "invalid_parameter", err.field[0] ? err.field : NULL, "%s", err.message);
    return pc == HP_OK;
}

bool hp_form_read_params(hp_request *req, const hp_form_part *pp, hp_params *params, hp_reply *reply)
{
    /* The parse's memory is the request's while it lasts (docs/SECURITY.md): a part of the largest size the
     * form reader keeps, at jansson's worst measured ratio, is 2 MiB. */
    uint64_t parse_bytes = (uint64_t)pp->len * HP_PARAMS_PARSE_FACTOR;
    if (hp_budget_refused(req->http, parse_bytes, req->budget_bytes, "parsing the params part", reply))
        return false;
    json_error_t jerr;
    json_t *obj = json_loadb((const char *)pp->data, pp->len, 0, &jerr);
    bool ok = params_from_object(obj, &jerr, params, reply);
    json_decref(obj);
    hp_budget_give(hp_http_budget(req->http), parse_bytes);
    return ok;
}

/* A multipart/form-data body read into *f (libmicrohttpd's post processor, on_form_part) and its parts
 * checked. False: the reply says why. */
bool hp_form_read(hp_request *req, hp_form *f, hp_reply *reply)
{
    struct MHD_PostProcessor *pp = MHD_create_post_processor(req->connection, 65536, on_form_part, f);
    bool parsed = pp && MHD_post_process(pp, (const char *)req->body, req->body_len) == MHD_YES;
    if (pp)
        MHD_destroy_post_processor(pp);
    if (!parsed) {
        hp_reply_error(reply, f->oom ? 503 : 400, f->oom ? "out_of_memory" : "malformed_multipart", NULL,
                       "the multipart/form-data body cannot be parsed");
        return false;
    }
    return form_parts_ok(f, reply);
}

/* The query's parameters, applied on top of *params (after a params part: the query wins). */
bool hp_query_read(struct MHD_Connection *c, hp_params *params, hp_reply *reply)
{
    char *query = NULL;
    if (!hp_request_query(c, &query)) {
        hp_reply_error(reply, 503, "out_of_memory", NULL, "out of memory reading the query");
        return false;
    }
    hp_err err = {0};
    hp_code pc = query && query[0] ? hp_params_from_query(query, params, &err) : HP_OK;
    free(query);
    if (pc != HP_OK)
        hp_reply_error(reply, 400, err.word ? err.word : "invalid_parameter", err.field[0] ? err.field : NULL, "%s", err.message);
    return pc == HP_OK;
}

