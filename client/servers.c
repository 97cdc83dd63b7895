#include "client/servers.h"

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* --- The list ----------------------------------------------------------------------------------------- */

/* By hand rather than with libcurl's URL API (curl_url, CURLUPART_PASSWORD), weighed and left: the strings that
 * most need hiding are those it refuses ("http://u:pw@host:bad" is CURLUE_BAD_PORT_NUMBER, "u:pw@host" without a
 * scheme CURLUE_UNSUPPORTED_SCHEME), and add()'s messages name exactly those; and what it gives back
 * (CURLUPART_URL) is its own normal form, not the user's text: a '/' added, "../" resolved, the scheme in lower
 * case, so the shown URL would not be the one the user wrote or grep finds in a list. The rule below is RFC
 * 3986's (3.2), with the userinfo ended at the authority's last '@' as WHATWG's URL parser does: libcurl 7.88
 * ends it at the first (and then refuses the '@' left in the host), so what libcurl would send as a password
 * is always within what is hidden here. */
const char *hp_url_redact(const char *url, size_t n, char *out, size_t size)
{
    size_t scheme = 0;
    while (scheme < n && !strchr(":/?#@", url[scheme]))
        scheme++;
    bool has_scheme = scheme + 3 <= n && !memcmp(url + scheme, "://", 3);
    size_t start = has_scheme ? scheme + 3 : 0;
    /* The userinfo ends at the text's last '@', not the authority's: a password may hold '/', '?' or '#'
     * unencoded (libcurl refuses such a URL, and its refusal names the server), and a server's URL has no
     * '@' of its own in a path (the client appends its routes to it), so hiding up to the last '@' hides
     * more only where there is nothing to show. */
    size_t at = SIZE_MAX, colon = SIZE_MAX; /* the last '@', the userinfo's first ':' */
    for (size_t k = start; k < n; k++)
        if (url[k] == '@')
            at = k;
    for (size_t k = start; at != SIZE_MAX && k < at && colon == SIZE_MAX; k++)
        if (url[k] == ':')
            colon = k;
    if (colon == SIZE_MAX || colon + 1 == at) /* no userinfo, no password, or an empty one: nothing to hide */
        snprintf(out, size, "%.*s", (int)(n < INT_MAX ? n : INT_MAX), url);
    else
        snprintf(out, size, "%.*s***%.*s", (int)(colon + 1), url, (int)(n - at < INT_MAX ? n - at : INT_MAX),
                 url + at);
    return out;
}

static bool add(hp_servers *s, const char *url, size_t n, char *why, size_t why_size)
{
    while (n && (url[n - 1] == ' ' || url[n - 1] == '\t'))
        n--;
    while (n && url[n - 1] == '/')
        n--;
    if (!n) {
        snprintf(why, why_size,
                 "an empty server in the list: give URL[,URL...], e.g. http://gpu1:8080,http://gpu2:8080");
        return false;
    }
    /* The refused one named as shown, redacted whole before it is cut to 300 characters: a cut made first could
     * end inside a long password, before the '@' that marks it. */
    char shown[302];
    hp_url_redact(url, n, shown, sizeof shown);
    const char *cut = strlen(shown) > 300 ? "..." : "";
    shown[300] = '\0';
    if (strncmp(url, "http://", 7) && strncmp(url, "https://", 8)) {
        snprintf(why, why_size, "%s%s: not an http:// or https:// URL", shown, cut);
        return false;
    }
    if (n >= sizeof(s->items[0].url)) {
        snprintf(why, why_size, "%s%s: a URL longer than %zu characters", shown, cut, sizeof(s->items[0].url) - 1);
        return false;
    }
    for (size_t k = 0; k < s->count; k++)
        if (strlen(s->items[k].url) == n && !strncmp(s->items[k].url, url, n)) {
            snprintf(why, why_size, "%s given twice: each server once (frames spread by the fewest in flight)",
                     s->items[k].shown);
            return false;
        }
    hp_server *grown = realloc(s->items, (s->count + 1) * sizeof(*grown));
    if (!grown) {
        snprintf(why, why_size, "out of memory");
        return false;
    }
    s->items = grown;
    s->items[s->count] = (hp_server){0};
    snprintf(s->items[s->count].url, sizeof(s->items[0].url), "%.*s", (int)n, url);
    hp_url_redact(url, n, s->items[s->count].shown, sizeof(s->items[0].shown));
    s->count++;
    return true;
}

static void init(hp_servers *s)
{
    *s = (hp_servers){0};
    pthread_mutex_init(&s->lock, NULL);
}

/* The length of the list's next server at p: up to a ',', or to the end; but not at a ',' whose text up to
 * the next one holds an '@' and no "://": that is a password's tail (the password holding a ','), which
 * would otherwise be refused as a server of its own and named in the message. */
static size_t next_server(const char *p)
{
    for (size_t n = 0;; n++) {
        if (!p[n])
            return n;
        if (p[n] != ',')
            continue;
        const char *q = p + n + 1;
        size_t len = strcspn(q, ",");
        bool at = memchr(q, '@', len) != NULL, scheme = false;
        for (size_t k = 0; k + 3 <= len && !scheme; k++)
            scheme = !memcmp(q + k, "://", 3);
        if (!at || scheme)
            return n;
    }
}

bool hp_servers_parse(hp_servers *s, const char *list, char *why, size_t why_size)
{
    init(s);
    for (const char *p = list;; p++) {
        size_t n = next_server(p);
        size_t skip = strspn(p, " \t"); /* "a, b" as written in a shell variable */
        if (!add(s, p + (skip < n ? skip : n), n - (skip < n ? skip : n), why, why_size))
            return false;
        p += n;
        if (!*p)
            return true;
    }
}

bool hp_servers_read(hp_servers *s, const char *path, char *why, size_t why_size)
{
    init(s);
    FILE *f = fopen(path, "r");
    if (!f) {
        snprintf(why, why_size, "%s: %s", path, strerror(errno));
        return false;
    }
    char *line = NULL, message[700];
    size_t cap = 0;
    bool ok = true;
    /* getline: a line of any length is read whole, so a long password is never cut before the '@' that
     * marks it (the message would then name part of it). '#' starts a comment at a line's start or after a
     * blank only: a password may hold one. */
    for (unsigned number = 1; ok && getline(&line, &cap, f) >= 0; number++) {
        line[strcspn(line, "\r\n")] = '\0';
        for (char *h = strchr(line, '#'); h; h = strchr(h + 1, '#'))
            if (h == line || h[-1] == ' ' || h[-1] == '\t') {
                *h = '\0';
                break;
            }
        char *url = line + strspn(line, " \t");
        size_t n = strcspn(url, " \t");
        if (url[n + strspn(url + n, " \t")]) {
            snprintf(why, why_size, "%s line %u: one URL a line ('#' starts a comment)", path, number);
            ok = false;
        } else if (n && !add(s, url, n, message, sizeof message)) {
            snprintf(why, why_size, "%s line %u: %s", path, number, message);
            ok = false;
        }
    }
    free(line);
    fclose(f);
    if (ok && !s->count) {
        snprintf(why, why_size, "%s: no server in it (one URL a line)", path);
        ok = false;
    }
    return ok;
}

void hp_servers_free(hp_servers *s)
{
    free(s->items);
    pthread_mutex_destroy(&s->lock);
    *s = (hp_servers){0};
}

const char *hp_server_state(const hp_server *server)
{
    return server->gone ? "gone" : server->failures_in_a_row || server->back_at > hp_now() ? "left" : "in use";
}

/* --- Where an attempt goes --------------------------------------------------------------------------- */

/* The server the next attempt goes to, counted in flight: of those not gone, the one in use now (else the first
 * back) with the fewest in flight, ties taken in turn. *wait: seconds until it is back (0: now). SIZE_MAX: every
 * server is gone. */
static size_t take(hp_servers *s, double *wait)
{
    pthread_mutex_lock(&s->lock);
    double now = hp_now(), best_wait = 0;
    size_t best = SIZE_MAX;
    for (size_t j = 0; j < s->count; j++) {
        size_t k = (s->turn + j) % s->count;
        const hp_server *v = &s->items[k];
        if (v->gone)
            continue;
        double w = fmax(v->back_at - now, 0);
        if (best == SIZE_MAX || w < best_wait || (w == best_wait && v->in_flight < s->items[best].in_flight))
            best = k, best_wait = w;
    }
    if (best != SIZE_MAX) {
        s->items[best].in_flight++;
        s->turn = best + 1;
    }
    pthread_mutex_unlock(&s->lock);
    *wait = best_wait;
    return best;
}

/* What an answer says of its server, and of the request. */
typedef enum answer_kind {
    ANSWER_FINAL,          /* 200, or a 4xx but 429: the answer */
    ANSWER_BUSY,           /* 429, or 503 with Retry-After: the server is busy, or starting */
    ANSWER_SERVER_FAILED,  /* no answer, 502, 503, 504: the server (or what is behind a proxy) is going or gone */
    ANSWER_REQUEST_FAILED, /* another 5xx (500 internal_error): this request's; the server serves on */
    ANSWER_LOST,           /* its GPU lost: the server takes no frame again */
} answer_kind;

static answer_kind kind_of(const hp_response *r)
{
    /* A replica behind a proxy says device_lost with a Retry-After (api/http/http.c): the proxy has other
     * replicas, so it is a failure of the proxy's, retried there, and not a wait. */
    if (hp_response_names_device_lost(r))
        return r->retry_after_s >= 0 ? ANSWER_SERVER_FAILED : ANSWER_LOST;
    if ((r->status == 429 || r->status == 503) && r->retry_after_s >= 0)
        return ANSWER_BUSY;
    if (r->status == 0 || r->status == 502 || r->status == 503 || r->status == 504)
        return ANSWER_SERVER_FAILED;
    if (r->status >= 500)
        return ANSWER_REQUEST_FAILED;
    return ANSWER_FINAL;
}

/* What the answer makes of server k (the header's rules), and the attempt no longer in flight. */
static void settle(hp_servers *s, size_t k, const hp_response *r, answer_kind kind, double jitter)
{
    pthread_mutex_lock(&s->lock);
    hp_server *v = &s->items[k];
    v->in_flight--;
    double now = hp_now();
    switch (kind) {
    case ANSWER_FINAL:
        v->failures_in_a_row = 0;
        v->answered += r->status == 200;
        break;
    case ANSWER_BUSY: /* it answers: no longer failing */
        v->busy++;
        v->failures_in_a_row = 0;
        v->back_at = fmax(v->back_at, now + fmin(fmax(r->retry_after_s, 0.1), 30.0) * jitter);
        break;
    case ANSWER_SERVER_FAILED:
        /* The back-off doubles once a round: the frames in flight when a server dies all fail at once, and
         * those sent together when its back-off ends too. Only an attempt made after the server came back
         * lengthens it. */
        v->failed++;
        if (now >= v->back_at) {
            v->back_at = now + fmin(0.5 * exp2(v->failures_in_a_row), 10.0) * jitter;
            v->failures_in_a_row++;
        }
        break;
    case ANSWER_REQUEST_FAILED:
        v->failed++;
        break;
    case ANSWER_LOST:
        v->gone = true;
        break;
    }
    if (kind != ANSWER_FINAL)
        snprintf(v->last_error, sizeof(v->last_error), "%s",
                 r->status ? r->error : *r->error ? r->error : "no answer");
    pthread_mutex_unlock(&s->lock);
}

static void release(hp_servers *s, size_t k)
{
    pthread_mutex_lock(&s->lock);
    s->items[k].in_flight--;
    pthread_mutex_unlock(&s->lock);
}

/* The answer of a request no server can take: each one's GPU lost (after another request's answer said so). */
static void every_server_lost(hp_response *out)
{
    hp_response_free(out);
    out->status = 503;
    snprintf(out->error, sizeof(out->error), "device_lost: every server's GPU is lost");
}

void hp_servers_send(hp_servers *s, hp_client *client, const hp_retry_policy *p, const char *path,
                     const uint8_t *body, size_t len, const char *accept, hp_response *out, size_t *server)
{
    /* A request may fail once on each further server before it counts against its retries: a dead server in
     * a list of three costs a frame one attempt, not its budget. */
    unsigned failures = 0, attempts = 0, allowed = p->retries + (unsigned)(s->count - 1);
    double busy_since = -1; /* the first busy answer: max_wait_s is counted from it, on the clock */
    double not_before = 0;  /* this request's own back-off after a failure of its own (ANSWER_REQUEST_FAILED) */
    size_t from = SIZE_MAX;
    *server = SIZE_MAX;
    for (;;) {
        if (p->stop && *p->stop && attempts)
            return; /* no further attempt once asked to stop (the last answer stands) */
        /* The request's own back-off first, then the server: one that died meanwhile is not taken, and none
         * counts this request in flight while it sleeps. */
        double own = not_before - hp_now();
        bool told = false;
        if (own > 0) {
            if (p->on_retry)
                p->on_retry(p->user, &(hp_retry_note){.from = s->items[from].shown, .to = s->items[from].shown,
                                                      .r = out, .retry = attempts, .wait_s = own});
            told = true;
            hp_pause(own, p->stop);
            if (p->stop && *p->stop)
                return;
        }
        double wait;
        size_t k = take(s, &wait);
        if (k == SIZE_MAX) {
            if (!attempts)
                every_server_lost(out);
            return; /* every server's GPU lost: the last answer (device_lost) stands */
        }
        if (attempts && p->on_retry && !told) /* a retry is told once */
            p->on_retry(p->user, &(hp_retry_note){.from = s->items[from].shown, .to = s->items[k].shown, .r = out,
                                                  .retry = attempts, .wait_s = wait});
        if (wait > 0) {
            hp_pause(wait, p->stop);
            if (p->stop && *p->stop && attempts) {
                release(s, k);
                return;
            }
        }
        hp_client_use(client, s->items[k].url);
        hp_client_send(client, path, body, len, accept, out);
        out->attempts = ++attempts;
        *server = from = k;
        answer_kind kind = kind_of(out);
        if (out->status == 0 && p->stop && *p->stop)
            release(s, k); /* abandoned (a second SIGINT), not the server's failure */
        else
            settle(s, k, out, kind, hp_client_jitter(client));
        if (kind == ANSWER_FINAL || (p->stop && *p->stop))
            return;
        if (kind == ANSWER_BUSY) {
            busy_since = busy_since < 0 ? hp_now() : busy_since;
            if (hp_now() - busy_since >= p->max_wait_s)
                return;
        }
        if ((kind == ANSWER_SERVER_FAILED || kind == ANSWER_REQUEST_FAILED) && ++failures > allowed)
            return;
        if (kind == ANSWER_REQUEST_FAILED) /* 0.5, 1, 2, 4, 8, then 10 s, as a server's */
            not_before = hp_now() + fmin(0.5 * exp2(failures - 1), 10.0) * hp_client_jitter(client);
    }
}

void hp_client_send_retrying(hp_client *client, const hp_retry_policy *p, const char *path, const uint8_t *body,
                             size_t len, const char *accept, hp_response *out)
{
    /* The client's server was checked when the list was (hdrpost.c): it is taken as it is. */
    hp_server server = {0};
    snprintf(server.url, sizeof(server.url), "%s", hp_client_server(client));
    hp_url_redact(server.url, strlen(server.url), server.shown, sizeof(server.shown));
    hp_servers one = {.items = &server, .count = 1};
    pthread_mutex_init(&one.lock, NULL);
    size_t index;
    hp_servers_send(&one, client, p, path, body, len, accept, out, &index);
    pthread_mutex_destroy(&one.lock);
}
