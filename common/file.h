/* Whole-file reading for the tools and tests (the daemon reads its frames from sockets, not files). */
#ifndef HP_FILE_H
#define HP_FILE_H

#include <stddef.h>
#include <stdint.h>

/* The file's bytes (malloc'd, with a NUL after them for text) and their count; NULL with errno set when
 * it cannot be read. */
uint8_t *hp_read_file(const char *path, size_t *len);

#endif
