/* Whole files: reading them (the tools and tests; the daemon reads its frames from sockets), and writing
 * them so that the name only ever holds a whole file (the pipeline cache, the client's outputs). */
#ifndef HP_FILE_H
#define HP_FILE_H

#include <stddef.h>
#include <stdint.h>

/* The file's bytes (malloc'd, with a NUL after them for text) and their count; NULL with errno set when
 * it cannot be read. */
uint8_t *hp_read_file(const char *path, size_t *len);

typedef struct hp_file_piece {
    const void *data;
    size_t len;
} hp_file_piece;

/* The pieces, one after the other, written to a new temporary file beside path (mkstemp: a name nobody can
 * have planted a link at), flushed to the disk (fsync), given `mode` and renamed over path. A crash at any
 * point leaves path as it was or whole. 0, or the errno of the first step that failed (ENOSPC on a full
 * disk); the temporary file is then removed. */
int hp_write_file_atomically(const char *path, const hp_file_piece *pieces, size_t count, unsigned mode);

#endif
