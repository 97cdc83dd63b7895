/* Replies as route handlers build them (api/http/route.h): a status with a JSON body, an error in the house
 * form {"error": {"code", "message", "field"}}, or bytes, and a few headers. http.c sends them. */
#include <jansson.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

#include "api/http/route.h"
#include "common/utf8.h"

static void release_bytes(hp_reply *reply);

/* A JSON body replaces a binary one (send_reply sends bytes first): an owned body goes back at once. */
void hp_reply_json(hp_reply *reply, unsigned status, json_t *body)
{
    if (reply->body)
        json_decref(reply->body);
    release_bytes(reply);
    reply->status = status;
    reply->body = body;
}

void hp_reply_error(hp_reply *reply, unsigned status, const char *code, const char *field, const char *fmt, ...)
{
    char message[1200], field_text[128]; /* an hp_err message and some words around it */
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(message, sizeof(message), fmt, ap);
    va_end(ap);
    /* Client bytes quoted in it (a form part's name, a path) may not be UTF-8: jansson would refuse the whole
     * body, and a 400 became a 500 (found by tests/fuzz/fuzz_form). */
    hp_utf8_clean(message);
    if (field) {
        snprintf(field_text, sizeof(field_text), "%s", field);
        hp_utf8_clean(field_text);
    }
    hp_reply_json(reply, status, json_pack("{s:{s:s, s:s, s:s?}}", "error", "code", code, "message", message,
                                           "field", field ? field_text : NULL));
}

static void release_bytes(hp_reply *reply)
{
    if (reply->bytes_release)
        reply->bytes_release(reply->bytes_owner);
    else
        free(reply->bytes);
    reply->bytes = NULL;
    reply->bytes_release = NULL;
    reply->bytes_owner = NULL;
}

void hp_reply_bytes(hp_reply *reply, unsigned status, const char *content_type, uint8_t *data, size_t len)
{
    reply->status = status;
    json_decref(reply->body);
    reply->body = NULL;
    release_bytes(reply);
    reply->bytes = data;
    reply->bytes_len = len;
    reply->content_type = content_type;
}

void hp_reply_bytes_owned(hp_reply *reply, unsigned status, const char *content_type, uint8_t *data, size_t len,
                          void (*release)(void *owner), void *owner)
{
    hp_reply_bytes(reply, status, content_type, data, len);
    reply->bytes_release = release;
    reply->bytes_owner = owner;
}

void hp_reply_release(hp_reply *reply)
{
    json_decref(reply->body);
    release_bytes(reply);
    reply->body = NULL;
}

void hp_reply_header_add(hp_reply *reply, const char *name, const char *fmt, ...)
{
    if (reply->header_count >= HP_REPLY_MAX_HEADERS)
        return;
    hp_reply_header *h = &reply->headers[reply->header_count++];
    h->name = name;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(h->value, sizeof(h->value), fmt, ap);
    va_end(ap);
}
