#include "common/file.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

uint8_t *hp_read_file(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    uint8_t *data = NULL;
    long n = -1;
    if (fseek(f, 0, SEEK_END) == 0 && (n = ftell(f)) >= 0 && fseek(f, 0, SEEK_SET) == 0 &&
        (data = malloc((size_t)n + 1)) != NULL && fread(data, 1, (size_t)n, f) != (size_t)n) {
        free(data);
        data = NULL;
        errno = EIO;
    }
    fclose(f);
    if (data) {
        data[n] = 0;
        *len = (size_t)n;
    }
    return data;
}
