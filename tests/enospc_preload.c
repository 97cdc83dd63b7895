/* A full disk for one file, for the fault tests (tests/http/test_faults.py): preloaded into the daemon
 * (LD_PRELOAD), it makes every write() to a regular file whose path contains $ENOSPC_MATCH fail with
 * ENOSPC, as a full filesystem does, and passes every other write on. The daemon writes its files with
 * write(2) (common/file.c), so nothing else of it is touched. */
#include <dlfcn.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

ssize_t write(int fd, const void *buf, size_t n);

ssize_t write(int fd, const void *buf, size_t n)
{
    static ssize_t (*real)(int, const void *, size_t);
    if (!real)
        real = (ssize_t(*)(int, const void *, size_t))dlsym(RTLD_NEXT, "write");
    const char *match = getenv("ENOSPC_MATCH");
    if (match && *match) {
        char link[64], path[4096];
        snprintf(link, sizeof(link), "/proc/self/fd/%d", fd);
        ssize_t k = readlink(link, path, sizeof(path) - 1);
        if (k > 0) {
            path[k] = '\0';
            if (path[0] == '/' && strstr(path, match)) {
                errno = ENOSPC;
                return -1;
            }
        }
    }
    return real(fd, buf, n);
}
