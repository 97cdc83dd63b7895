/* Proxies the daemon trusts: api/http/trusted_proxies.h. */
#include "api/http/trusted_proxies.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* An address as 16 bytes, IPv4 mapped into IPv6; false when it is neither. */
static bool addr_of_text(const char *s, uint8_t out[16])
{
    struct in_addr v4;
    if (inet_pton(AF_INET, s, &v4) == 1) {
        memset(out, 0, 10);
        out[10] = out[11] = 0xff;
        memcpy(out + 12, &v4, 4);
        return true;
    }
    return inet_pton(AF_INET6, s, out) == 1;
}

static bool in_net(const uint8_t a[16], const uint8_t net[16], unsigned bits)
{
    unsigned whole = bits / 8, rest = bits % 8;
    if (memcmp(a, net, whole) != 0)
        return false;
    return rest == 0 || ((a[whole] ^ net[whole]) & (uint8_t)(0xff << (8 - rest))) == 0;
}

static bool has_addr(const hp_trusted_proxies *t, const uint8_t a[16])
{
    for (unsigned i = 0; i < t->count; i++)
        if (in_net(a, t->nets[i].addr, t->nets[i].bits))
            return true;
    return false;
}

/* One entry, "ADDR" or "ADDR/BITS" (BITS over the address's own family). */
static hp_code parse_one(const char *s, hp_trusted_proxies *out, hp_err *err)
{
    char text[64];
    const char *slash = strchr(s, '/');
    size_t n = slash ? (size_t)(slash - s) : strlen(s);
    if (n == 0 || n >= sizeof(text))
        return hp_fail(err, HP_ERR_INVALID_ARGUMENT, "trusted_proxies: \"%s\" is not an address or network", s);
    memcpy(text, s, n);
    text[n] = '\0';
    uint8_t a[16];
    if (!addr_of_text(text, a))
        return hp_fail(err, HP_ERR_INVALID_ARGUMENT, "trusted_proxies: \"%s\" is not an IPv4 or IPv6 address", text);
    bool v4 = !strchr(text, ':');
    unsigned max = v4 ? 32 : 128, bits = max;
    if (slash) {
        char *end;
        unsigned long b = strtoul(slash + 1, &end, 10);
        if (slash[1] == '\0' || *end != '\0' || b > max)
            return hp_fail(err, HP_ERR_INVALID_ARGUMENT, "trusted_proxies: \"%s\": the prefix length must be 0 to %u",
                           s, max);
        bits = (unsigned)b;
    }
    if (out->count == HP_TRUSTED_PROXIES_MAX)
        return hp_fail(err, HP_ERR_INVALID_ARGUMENT, "trusted_proxies: more than %d entries", HP_TRUSTED_PROXIES_MAX);
    memcpy(out->nets[out->count].addr, a, 16);
    out->nets[out->count++].bits = (uint8_t)(v4 ? 96 + bits : bits);
    return HP_OK;
}

hp_code hp_trusted_proxies_parse(const char *list, hp_trusted_proxies *out, hp_err *err)
{
    *out = (hp_trusted_proxies){0};
    if (!list)
        return HP_OK;
    char *copy = strdup(list);
    if (!copy)
        return hp_fail(err, HP_ERR_OUT_OF_MEMORY, "out of memory");
    hp_code code = HP_OK;
    char *save = NULL;
    for (char *tok = strtok_r(copy, ",", &save); tok && code == HP_OK; tok = strtok_r(NULL, ",", &save)) {
        while (*tok == ' ' || *tok == '\t')
            tok++;
        char *end = tok + strlen(tok);
        while (end > tok && (end[-1] == ' ' || end[-1] == '\t'))
            *--end = '\0';
        if (*tok)
            code = parse_one(tok, out, err);
    }
    free(copy);
    return code;
}

bool hp_trusted_proxies_has(const hp_trusted_proxies *t, const struct sockaddr *peer)
{
    uint8_t a[16];
    if (!t || !t->count || !peer)
        return false;
    if (peer->sa_family == AF_INET) {
        memset(a, 0, 10);
        a[10] = a[11] = 0xff;
        memcpy(a + 12, &((const struct sockaddr_in *)peer)->sin_addr, 4);
    } else if (peer->sa_family == AF_INET6) {
        memcpy(a, &((const struct sockaddr_in6 *)peer)->sin6_addr, 16);
    } else {
        return false;
    }
    return has_addr(t, a);
}

hp_xff_result hp_trusted_proxies_client(const hp_trusted_proxies *t, const char *forwarded_for, char *out,
                                        size_t size)
{
    if (!forwarded_for || size == 0)
        return HP_XFF_NONE;
    size_t len = strlen(forwarded_for);
    /* From the right: each hop appended the address it saw; the first that is no trusted proxy is the client. */
    while (len > 0) {
        size_t start = len;
        while (start > 0 && forwarded_for[start - 1] != ',')
            start--;
        const char *p = forwarded_for + start;
        size_t n = len - start;
        while (n && (*p == ' ' || *p == '\t'))
            p++, n--;
        while (n && (p[n - 1] == ' ' || p[n - 1] == '\t'))
            n--;
        char text[64];
        uint8_t a[16];
        if (n == 0 || n >= sizeof(text))
            return HP_XFF_NONE;
        memcpy(text, p, n);
        text[n] = '\0';
        if (!addr_of_text(text, a))
            return HP_XFF_NONE; /* not an address (a port, a name, garbage): no client to name */
        if (!has_addr(t, a)) {
            snprintf(out, size, "%s", text);
            return HP_XFF_FOUND;
        }
        len = start > 0 ? start - 1 : 0;
    }
    return HP_XFF_ONLY_PROXIES;
}
