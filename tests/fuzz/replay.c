/* Replays inputs through a fuzz target's entry point in the ordinary build (no libFuzzer): every seed of
 * its corpus and every regression input (an input that once failed, kept so it never fails again), one TAP
 * point each. A target reports a failure by aborting, which loses the plan line: meson then counts the
 * suite failed, and the input that did it is the last one named. */
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/tap.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int by_name(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

static void replay_dir(const char *dir)
{
    DIR *d = opendir(dir);
    if (!d)
        return; /* no regression inputs yet */
    char *names[4096];
    size_t count = 0;
    for (struct dirent *e; (e = readdir(d)) != NULL && count < 4096;)
        if (e->d_name[0] != '.')
            names[count++] = strdup(e->d_name);
    closedir(d);
    qsort(names, count, sizeof(names[0]), by_name);
    for (size_t i = 0; i < count; i++) {
        char path[4096];
        snprintf(path, sizeof(path), "%s/%s", dir, names[i]);
        FILE *f = fopen(path, "rb");
        uint8_t *buf = malloc(1 << 20);
        size_t n = f && buf ? fread(buf, 1, 1 << 20, f) : 0;
        if (f)
            fclose(f);
        printf("# %s\n", path);
        fflush(stdout);
        LLVMFuzzerTestOneInput(buf, n);
        tap_ok(buf != NULL, "%s: %zu bytes, answered without a failure", path, n);
        free(buf);
        free(names[i]);
    }
}

int main(int argc, char **argv)
{
    for (int i = 1; i < argc; i++)
        replay_dir(argv[i]);
    return tap_done();
}
