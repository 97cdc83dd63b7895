/* Files embedded in the binary at build time (tools/embed_files.py): the web console (console/, issue 18). */
#ifndef HP_ASSETS_H
#define HP_ASSETS_H

#include <stddef.h>

typedef struct hp_asset {
    const char *path;          /* the URL path it answers, e.g. "/console/app.js" */
    const char *content_type;  /* from its extension */
    const unsigned char *data;
    size_t size;               /* bytes */
    const char *sha256;        /* of data, hex: the ETag */
} hp_asset;

extern const hp_asset hp_console_assets[];
extern const size_t hp_console_asset_count;

#endif
