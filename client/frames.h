/* The frames of a shot as a render farm names them: files, directories, or numbered patterns
 * (`beauty.####.exr`, `beauty.%04d.exr`) with a range (`--frames 1001-1240`), in frame order. Each frame
 * gets the name its output takes (`beauty.1001`). */
#ifndef HP_CLIENT_FRAMES_H
#define HP_CLIENT_FRAMES_H

#include <stdbool.h>
#include <stddef.h>

#include "common/error.h"

typedef struct hp_frame {
    char *path; /* the file posted */
    char *name; /* its file name without the extension: the output's name */
} hp_frame;

typedef struct hp_frame_list {
    hp_frame *items;
    size_t count, cap;
} hp_frame_list;

/* A range "A-B" or a single frame "A" (inclusive, A <= B, at most 1,000,000 frames). */
bool hp_frame_range_parse(const char *text, long *first, long *last);

/* Adds the frames one argument names: a file; a directory (its .exr, .hdr and .pfm files, sorted by name);
 * or a pattern with a run of '#' or a printf "%0Nd", expanded over [first, last] (has_range false: an
 * error, the pattern needs --frames), a frame whose file does not exist being an error naming it. */
hp_code hp_frames_add(hp_frame_list *list, const char *arg, bool has_range, long first, long last, hp_err *err);

/* Whether two frames would write the same output (same name): the first such pair, or false. */
bool hp_frames_name_clash(const hp_frame_list *list, size_t *a, size_t *b);

void hp_frames_free(hp_frame_list *list);

#endif
