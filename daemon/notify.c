/* We speak the protocol ourselves rather than link libsystemd: a notice is one datagram to one
 * AF_UNIX socket, and a dependency (with its own dependencies) in every container image is a high
 * price for sendto(). Linux only, like the rest of the daemon. */
#include "daemon/notify.h"

#include <errno.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

int hp_notify(const char *state)
{
    const char *path = getenv("NOTIFY_SOCKET");
    if (!path || !*path)
        return 0;

    struct sockaddr_un addr = {.sun_family = AF_UNIX};
    size_t len = strlen(path);
    /* '@' names a socket in the abstract namespace: a leading NUL, and the length is exact (no NUL at
     * the end), as systemd documents for NOTIFY_SOCKET. */
    if ((path[0] != '/' && path[0] != '@') || len >= sizeof(addr.sun_path))
        return -EINVAL;
    memcpy(addr.sun_path, path, len);
    if (path[0] == '@')
        addr.sun_path[0] = '\0';
    socklen_t addr_len = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + len + (path[0] == '/'));

    int fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -errno;
    ssize_t sent = sendto(fd, state, strlen(state), MSG_NOSIGNAL, (const struct sockaddr *)&addr, addr_len);
    int e = errno;
    close(fd);
    return sent < 0 ? -e : 1;
}
