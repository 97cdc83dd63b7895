#include "client/frames.h"

#include "client/grow.h"

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>

#define MAX_FRAMES 1000000L

bool hp_frame_range_parse(const char *text, long *first, long *last)
{
    char *end;
    errno = 0;
    *first = strtol(text, &end, 10);
    if (end == text || errno)
        return false;
    if (*end == '\0') {
        *last = *first;
    } else {
        if (*end != '-')
            return false;
        const char *second = end + 1;
        *last = strtol(second, &end, 10);
        if (end == second || *end != '\0' || errno)
            return false;
    }
    return *first <= *last && *last - *first < MAX_FRAMES;
}

static hp_code push(hp_frame_list *list, const char *path, hp_err *err)
{
    if (!hp_grow(&list->items, &list->cap, list->count, sizeof(*list->items), 64))
        return hp_fail(err, HP_ERR_OUT_OF_MEMORY, "out of memory listing frames");
    const char *base = strrchr(path, '/');
    base = base ? base + 1 : path;
    const char *dot = strrchr(base, '.');
    size_t n = dot && dot != base ? (size_t)(dot - base) : strlen(base);
    hp_frame f = {.path = strdup(path), .name = strndup(base, n)};
    if (!f.path || !f.name) {
        free(f.path);
        free(f.name);
        return hp_fail(err, HP_ERR_OUT_OF_MEMORY, "out of memory listing frames");
    }
    list->items[list->count++] = f;
    return HP_OK;
}

static bool is_frame_file(const char *name)
{
    const char *dot = strrchr(name, '.');
    return dot && (!strcasecmp(dot, ".exr") || !strcasecmp(dot, ".hdr") || !strcasecmp(dot, ".pfm"));
}

static int by_name(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

static hp_code add_directory(hp_frame_list *list, const char *dir, hp_err *err)
{
    DIR *d = opendir(dir);
    if (!d)
        return hp_fail(err, HP_ERR_IO, "cannot read the directory %s: %s", dir, strerror(errno));
    char **names = NULL;
    size_t count = 0, cap = 0;
    hp_code code = HP_OK;
    for (struct dirent *e; code == HP_OK && (e = readdir(d)) != NULL;) {
        if (e->d_name[0] == '.' || !is_frame_file(e->d_name))
            continue;
        if (!hp_grow(&names, &cap, count, sizeof(*names), 64)) {
            code = hp_fail(err, HP_ERR_OUT_OF_MEMORY, "out of memory listing %s", dir);
            break;
        }
        if (!(names[count] = strdup(e->d_name)))
            code = hp_fail(err, HP_ERR_OUT_OF_MEMORY, "out of memory listing %s", dir);
        else
            count++;
    }
    closedir(d);
    qsort(names, count, sizeof(*names), by_name);
    for (size_t i = 0; i < count; i++) {
        char path[4096];
        snprintf(path, sizeof(path), "%s/%s", dir, names[i]);
        if (code == HP_OK)
            code = push(list, path, err);
        free(names[i]);
    }
    free(names);
    if (code == HP_OK && count == 0)
        code = hp_fail(err, HP_ERR_INVALID_ARGUMENT, "the directory %s holds no .exr, .hdr or .pfm file", dir);
    return code;
}

/* The pattern's frame-number field: a run of '#' (its length is the padding) or "%0Nd" / "%d". Sets the
 * prefix length, the field's length in the pattern and its padding; false when there is none. */
static bool pattern_field(const char *arg, size_t *at, size_t *len, int *pad)
{
    const char *base = strrchr(arg, '/');
    base = base ? base + 1 : arg; /* a directory's name may hold a '#' or a '%' */
    const char *hash = strchr(base, '#');
    if (hash) {
        *at = (size_t)(hash - arg);
        *len = strspn(hash, "#");
        *pad = (int)*len;
        return true;
    }
    for (const char *p = strchr(base, '%'); p; p = strchr(p + 1, '%')) {
        const char *q = p + 1;
        int width = 0;
        if (*q == '0')
            q++;
        while (*q >= '0' && *q <= '9')
            width = width * 10 + (*q++ - '0');
        if (*q == 'd' && width <= 12) {
            *at = (size_t)(p - arg);
            *len = (size_t)(q + 1 - p);
            *pad = width;
            return true;
        }
    }
    return false;
}

hp_code hp_frames_add(hp_frame_list *list, const char *arg, bool has_range, long first, long last, hp_err *err)
{
    size_t at, len;
    int pad;
    struct stat st;
    if (stat(arg, &st) == 0 || !pattern_field(arg, &at, &len, &pad)) { /* a file whose name has a '#' is a file */
        if (stat(arg, &st) != 0)
            return hp_fail(err, HP_ERR_IO, "%s: %s", arg, strerror(errno));
        return S_ISDIR(st.st_mode) ? add_directory(list, arg, err) : push(list, arg, err);
    }
    if (!has_range)
        return hp_fail(err, HP_ERR_INVALID_ARGUMENT, "%s is a numbered pattern: say which frames with --frames "
                       "FIRST-LAST (e.g. --frames 1001-1240)", arg);
    for (long f = first; f <= last; f++) {
        char path[4096];
        snprintf(path, sizeof(path), "%.*s%0*ld%s", (int)at, arg, pad, f, arg + at + len);
        if (stat(path, &st) != 0)
            return hp_fail(err, HP_ERR_IO, "frame %ld of %s: %s: %s", f, arg, path, strerror(errno));
        hp_code code = push(list, path, err);
        if (code != HP_OK)
            return code;
    }
    return HP_OK;
}

bool hp_frames_name_clash(const hp_frame_list *list, size_t *a, size_t *b)
{
    /* Quadratic, but on names only: a shot of a few thousand frames is checked in milliseconds. */
    for (size_t i = 0; i < list->count; i++)
        for (size_t j = i + 1; j < list->count; j++)
            if (!strcmp(list->items[i].name, list->items[j].name)) {
                *a = i, *b = j;
                return true;
            }
    return false;
}

void hp_frames_free(hp_frame_list *list)
{
    for (size_t i = 0; i < list->count; i++) {
        free(list->items[i].path);
        free(list->items[i].name);
    }
    free(list->items);
    *list = (hp_frame_list){0};
}
