/* The web console's files (console/, embedded by tools/embed_files.py; docs/CONSOLE.md). They are static
 * and public, like any page a browser opens before it can be given a token: the page asks for the token and
 * sends it with every API call it makes. */
#include <microhttpd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/routes/assets.h"
#include "api/routes/routes.h"

/* A page of ours runs its own scripts and nothing else, and is never framed: the console shows images from
 * a frame a stranger may have sent, and holds a bearer token. */
static void security_headers(hp_reply *reply)
{
    hp_reply_header_add(reply, "Content-Security-Policy",
                        "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' blob: data:; "
                        "connect-src 'self'; font-src 'self'; object-src 'none'; base-uri 'none'; "
                        "form-action 'none'; frame-ancestors 'none'");
    hp_reply_header_add(reply, "X-Frame-Options", "DENY");
    hp_reply_header_add(reply, "Referrer-Policy", "no-referrer");
    hp_reply_header_add(reply, "Cross-Origin-Opener-Policy", "same-origin");
}

static const hp_asset *asset_for(const char *path)
{
    if (strcmp(path, "/") == 0)
        path = "/console/index.html";
    for (size_t i = 0; i < hp_console_asset_count; i++)
        if (strcmp(hp_console_assets[i].path, path) == 0)
            return &hp_console_assets[i];
    return NULL;
}

void hp_route_console(hp_request *request, hp_reply *reply)
{
    security_headers(reply);
    if (!hp_http_console(request->http)) {
        hp_reply_error(reply, 404, "not_found", NULL,
                       "the console is off: console = off, or listen is not a loopback address (set console = on)");
        return;
    }
    const hp_asset *a = asset_for(request->path);
    if (!a) {
        hp_reply_error(reply, 404, "not_found", NULL, "no console file %.200s", request->path);
        return;
    }
    /* The browser keeps a copy and asks whether it is still good (no-cache: revalidate every time, so a new
     * daemon's files are never stale); the answer to an unchanged file is 304 and no body (RFC 9110 13.1.2,
     * 15.4.5). The ETag is the file's SHA-256, cut. */
    char etag[40];
    snprintf(etag, sizeof(etag), "\"%.32s\"", a->sha256);
    hp_reply_header_add(reply, "Cache-Control", "no-cache");
    hp_reply_header_add(reply, "ETag", "%s", etag);
    const char *if_none = MHD_lookup_connection_value(request->connection, MHD_HEADER_KIND,
                                                      MHD_HTTP_HEADER_IF_NONE_MATCH);
    if (if_none && (strstr(if_none, etag) || !strcmp(if_none, "*"))) {
        uint8_t *none = malloc(1);
        if (none) {
            hp_reply_bytes(reply, 304, a->content_type, none, 0);
            return;
        }
    }
    /* Served from the binary's read-only data: the reply frees what it holds, so it gets a copy (the largest
     * file is a sample frame of a few hundred KiB). */
    uint8_t *copy = malloc(a->size ? a->size : 1);
    if (!copy) {
        hp_reply_error(reply, 503, "out_of_memory", NULL, "out of memory for a console file of %zu bytes", a->size);
        return;
    }
    memcpy(copy, a->data, a->size);
    hp_reply_bytes(reply, 200, a->content_type, copy, a->size);
}
