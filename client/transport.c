#include "client/transport.h"

#include <stdatomic.h>
#include <curl/curl.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

struct hp_client {
    CURL *curl;
    _Atomic int *stop;
    int abort_at;
    char server[512];
    struct curl_slist *auth; /* "Authorization: Bearer ..." or NULL */
    unsigned seed;           /* the jitter's, per thread */
};

hp_client *hp_client_new(const char *server, const char *token, _Atomic int *stop, int abort_at)
{
    hp_client *c = calloc(1, sizeof(*c));
    if (!c || !(c->curl = curl_easy_init())) {
        free(c);
        return NULL;
    }
    c->stop = stop;
    c->abort_at = abort_at;
    size_t n = strlen(server);
    while (n && server[n - 1] == '/')
        n--;
    snprintf(c->server, sizeof(c->server), "%.*s", (int)n, server);
    if (token && *token) {
        char header[1024];
        snprintf(header, sizeof(header), "Authorization: Bearer %s", token);
        c->auth = curl_slist_append(NULL, header);
    }
    c->seed = (unsigned)time(NULL) ^ (unsigned)(uintptr_t)c;
    return c;
}

void hp_client_use(hp_client *c, const char *server)
{
    if (strcmp(c->server, server))
        snprintf(c->server, sizeof(c->server), "%s", server);
}

const char *hp_client_server(const hp_client *c) { return c->server; }

double hp_client_jitter(hp_client *c) { return 1.0 + 0.25 * rand_r(&c->seed) / (double)RAND_MAX; }

double hp_now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

void hp_client_free(hp_client *c)
{
    if (!c)
        return;
    curl_slist_free_all(c->auth);
    curl_easy_cleanup(c->curl);
    free(c);
}

static size_t on_body(char *data, size_t size, size_t count, void *user)
{
    hp_response *r = user;
    size_t n = size * count;
    uint8_t *grown = realloc(r->body, r->len + n + 1);
    if (!grown)
        return 0; /* libcurl then fails the transfer: out of memory, said as a transport error */
    memcpy(grown + r->len, data, n);
    r->body = grown;
    r->len += n;
    r->body[r->len] = 0;
    return n;
}

/* The headers the client reads: Retry-After (seconds; a date is taken as 1 s), Server-Timing, Content-Type.
 * A 100 Continue's headers come first and are ignored by the same rules. */
static size_t on_header(char *data, size_t size, size_t count, void *user)
{
    hp_response *r = user;
    size_t n = size * count;
    char line[600];
    size_t k = n < sizeof(line) - 1 ? n : sizeof(line) - 1;
    memcpy(line, data, k);
    line[k] = 0;
    line[strcspn(line, "\r\n")] = 0;
    char *colon = strchr(line, ':');
    if (!colon)
        return n;
    *colon = 0;
    const char *value = colon + 1 + strspn(colon + 1, " \t");
    if (!strcasecmp(line, "Retry-After")) {
        char *end;
        double s = strtod(value, &end);
        r->retry_after_s = end != value && s >= 0 ? s : 1.0;
    } else if (!strcasecmp(line, "Server-Timing")) {
        snprintf(r->server_timing, sizeof(r->server_timing), "%s", value);
    } else if (!strcasecmp(line, "Content-Type")) {
        snprintf(r->content_type, sizeof(r->content_type), "%s", value);
    }
    return n;
}

/* The daemon's error body, {"error": {"code", "message"}}, as "code: message". */
static void daemon_error(hp_response *r)
{
    json_t *doc = r->body ? json_loadb((const char *)r->body, r->len, 0, NULL) : NULL;
    json_t *e = json_object_get(doc, "error");
    const char *code = json_string_value(json_object_get(e, "code"));
    const char *message = json_string_value(json_object_get(e, "message"));
    if (code && message)
        snprintf(r->error, sizeof(r->error), "%s: %s", code, message);
    else
        snprintf(r->error, sizeof(r->error), "HTTP %ld", r->status);
    json_decref(doc);
}

/* libcurl's progress callback, called about once a second even when nothing moves: a daemon that hangs
 * (stopped, a network gone quiet) holds an exchange until the user asks to abandon it. */
static int on_progress(void *user, curl_off_t dltotal, curl_off_t dlnow, curl_off_t ultotal, curl_off_t ulnow)
{
    (void)dltotal, (void)dlnow, (void)ultotal, (void)ulnow;
    const hp_client *c = user;
    return c->stop && *c->stop >= c->abort_at; /* non-zero: abandoned (CURLE_ABORTED_BY_CALLBACK) */
}

void hp_client_send(hp_client *c, const char *path, const uint8_t *body, size_t len, const char *accept,
                    hp_response *out)
{
    hp_response_free(out);
    out->retry_after_s = -1;
    char *url = NULL;
    if (asprintf(&url, "%s%s", c->server, path) < 0) {
        snprintf(out->error, sizeof(out->error), "out of memory");
        return;
    }
    struct curl_slist *headers = NULL;
    for (struct curl_slist *h = c->auth; h; h = h->next)
        headers = curl_slist_append(headers, h->data);
    char accept_header[128];
    if (accept) {
        snprintf(accept_header, sizeof(accept_header), "Accept: %s", accept);
        headers = curl_slist_append(headers, accept_header);
    }
    if (body)
        headers = curl_slist_append(headers, "Content-Type: application/octet-stream");
    CURL *h = c->curl;
    curl_easy_reset(h);
    curl_easy_setopt(h, CURLOPT_URL, url);
    curl_easy_setopt(h, CURLOPT_HTTPHEADER, headers);
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, out);
    curl_easy_setopt(h, CURLOPT_HEADERFUNCTION, on_header);
    curl_easy_setopt(h, CURLOPT_HEADERDATA, out);
    curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L); /* threads: no SIGALRM for timeouts */
    curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT, 10L);
    curl_easy_setopt(h, CURLOPT_NOPROGRESS, 0L);
    curl_easy_setopt(h, CURLOPT_XFERINFOFUNCTION, on_progress);
    curl_easy_setopt(h, CURLOPT_XFERINFODATA, c);
    /* A frame may wait in the daemon's queue (request_timeout_s, 60 s by default) and take long on a CPU
     * device; a question without a body never should. */
    curl_easy_setopt(h, CURLOPT_TIMEOUT, body ? 1800L : 30L);
    if (body) {
        curl_easy_setopt(h, CURLOPT_POST, 1L);
        curl_easy_setopt(h, CURLOPT_POSTFIELDS, (const char *)body);
        curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)len);
    }
    char curl_error[CURL_ERROR_SIZE] = "";
    curl_easy_setopt(h, CURLOPT_ERRORBUFFER, curl_error);
    CURLcode rc = curl_easy_perform(h);
    out->attempts = 1;
    if (rc != CURLE_OK) {
        out->status = 0;
        snprintf(out->error, sizeof(out->error), "%s", curl_error[0] ? curl_error : curl_easy_strerror(rc));
    } else {
        curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &out->status);
        if (out->status >= 400)
            daemon_error(out);
    }
    curl_slist_free_all(headers);
    free(url);
}

void hp_pause(double seconds, _Atomic int *stop)
{
    struct timespec step = {.tv_nsec = 50 * 1000000L};
    for (double slept = 0; slept < seconds && !(stop && *stop); slept += 0.05)
        nanosleep(&step, NULL);
}

bool hp_response_names_device_lost(const hp_response *r)
{
    return r->status == 503 && strstr(r->error, "device_lost");
}

void hp_response_free(hp_response *r)
{
    free(r->body);
    *r = (hp_response){.retry_after_s = -1};
}

void hp_auth_refusal(const hp_response *r, bool sent_token, char *out, size_t size)
{
    if (sent_token)
        snprintf(out, size, "the daemon refused the token given (--token or HDRPOST_TOKEN): HTTP %ld, %s", r->status,
                 r->error);
    else
        snprintf(out, size, "the daemon needs a token and none was given: --token TOKEN or HDRPOST_TOKEN (HTTP %ld, "
                 "%s)", r->status, r->error);
}

bool hp_response_refused(const hp_response *r) { return r->status >= 400 && r->status < 500 && r->status != 429; }
