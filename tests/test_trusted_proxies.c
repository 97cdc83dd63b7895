/* api/http/trusted_proxies.h (issue 37): which peers are trusted proxies, and the client one passes on in
 * X-Forwarded-For; addresses written here, no network. */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <string.h>

#include "api/http/trusted_proxies.h"
#include "tap.h"

static struct sockaddr_storage peer(const char *text)
{
    struct sockaddr_storage ss = {0};
    struct sockaddr_in *v4 = (struct sockaddr_in *)&ss;
    struct sockaddr_in6 *v6 = (struct sockaddr_in6 *)&ss;
    if (inet_pton(AF_INET, text, &v4->sin_addr) == 1)
        v4->sin_family = AF_INET;
    else if (inet_pton(AF_INET6, text, &v6->sin6_addr) == 1)
        v6->sin6_family = AF_INET6;
    return ss;
}

static void trusted(const hp_trusted_proxies *t, const char *who, bool want)
{
    struct sockaddr_storage ss = peer(who);
    bool got = hp_trusted_proxies_has(t, (const struct sockaddr *)&ss);
    tap_ok(got == want, "%s is %sa trusted proxy", who, want ? "" : "not ");
}

static void client(const hp_trusted_proxies *t, const char *xff, const char *want)
{
    char out[64] = "";
    bool got = hp_trusted_proxies_client(t, xff, out, sizeof(out)) == HP_XFF_FOUND;
    tap_ok(want ? got && strcmp(out, want) == 0 : !got, "X-Forwarded-For \"%s\": the client is %s (got %s)",
           xff ? xff : "(none)", want ? want : "none named", got ? out : "none");
}

int main(void)
{
    hp_trusted_proxies t;
    hp_err err = {0};
    tap_ok(hp_trusted_proxies_parse(" 127.0.0.1, 10.0.0.0/8 ,::1,fd00::/8", &t, &err) == HP_OK && t.count == 4,
           "four entries parse, spaces around them ignored: %s", err.message);
    trusted(&t, "127.0.0.1", true);
    trusted(&t, "127.0.0.2", false);
    trusted(&t, "10.1.2.3", true);
    trusted(&t, "11.0.0.1", false);
    trusted(&t, "::ffff:10.9.9.9", true); /* an IPv4 peer on a dual-stack socket */
    trusted(&t, "::1", true);
    trusted(&t, "fd12:3456::1", true);
    trusted(&t, "fe80::1", false);
    client(&t, "203.0.113.7", "203.0.113.7");
    client(&t, "203.0.113.7, 10.0.0.5", "203.0.113.7");        /* through two proxies, both trusted */
    client(&t, "198.51.100.1, 203.0.113.7, 10.0.0.5", "203.0.113.7"); /* a client's own header, then ours */
    client(&t, "2001:db8::7", "2001:db8::7");
    client(&t, "10.0.0.5", NULL);                              /* only proxies */
    tap_ok(hp_trusted_proxies_client(&t, "10.0.0.5, 127.0.0.1", (char[64]){0}, 64) == HP_XFF_ONLY_PROXIES &&
               hp_trusted_proxies_client(&t, "203.0.113.7, junk", (char[64]){0}, 64) == HP_XFF_NONE,
           "a line of proxies alone lets an earlier line go on; anything not an address ends the search");
    client(&t, "not-an-address", NULL);
    client(&t, "", NULL);
    client(&t, NULL, NULL);
    static const char *const bad[] = {"127.0.0.1/33", "::1/129", "10.0.0.0/", "example.com", "10.0.0.0/8x",
                                      "1.2.3"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        hp_err e = {0};
        tap_ok(hp_trusted_proxies_parse(bad[i], &t, &e) == HP_ERR_INVALID_ARGUMENT && strstr(e.message, "trusted_proxies"),
               "\"%s\" is refused naming trusted_proxies: %s", bad[i], e.message);
    }
    tap_ok(hp_trusted_proxies_parse("", &t, &err) == HP_OK && t.count == 0, "empty: none");
    return tap_done();
}
