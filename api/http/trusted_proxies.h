/* Proxies the daemon trusts (trusted_proxies, issue 37): HAProxy or an ingress in front of replicas. Every
 * connection of theirs carries many clients, so max_connections_per_ip does not hold them to one client's
 * share, and the client a request's log line names is the one they pass on in X-Forwarded-For. A connection
 * from anywhere else is its own client, whatever its headers say (anyone can write X-Forwarded-For).
 * libmicrohttpd has no PROXY protocol, so the header it is. */
#ifndef HP_TRUSTED_PROXIES_H
#define HP_TRUSTED_PROXIES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#include "common/error.h"

#define HP_TRUSTED_PROXIES_MAX 32

typedef struct hp_trusted_proxies {
    unsigned count;
    struct {
        uint8_t addr[16]; /* IPv4 as IPv4-mapped IPv6 (::ffff:a.b.c.d), so that either form of a peer matches */
        uint8_t bits;     /* prefix length over the 128 */
    } nets[HP_TRUSTED_PROXIES_MAX];
} hp_trusted_proxies;

/* "127.0.0.1, 10.0.0.0/8, ::1, fd00::/8": addresses or networks, commas between; empty: none. */
hp_code hp_trusted_proxies_parse(const char *list, hp_trusted_proxies *out, hp_err *err);

bool hp_trusted_proxies_has(const hp_trusted_proxies *t, const struct sockaddr *peer);

/* The client behind a trusted proxy: the right-most address of an X-Forwarded-For list that is not itself a
 * trusted proxy (each proxy appends the address it saw), written to out. HP_XFF_FOUND; HP_XFF_ONLY_PROXIES when
 * every address is a trusted proxy's (an earlier line of the header may go on); HP_XFF_NONE at anything not
 * an address (a name, a port, garbage: nothing before it can be believed). */
typedef enum { HP_XFF_NONE = -1, HP_XFF_ONLY_PROXIES = 0, HP_XFF_FOUND = 1 } hp_xff_result;
hp_xff_result hp_trusted_proxies_client(const hp_trusted_proxies *t, const char *forwarded_for, char *out,
                                        size_t size);

#endif
