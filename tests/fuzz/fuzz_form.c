/* Fuzz target: the multipart/form-data reader of POST /v1/render (api/render.c, through libmicrohttpd's
 * post processor), driven as a client drives it: each input is the body of one form posted over loopback
 * to a real hp_http server in this process. The server's backend stands in for the GPU: a frame that gets
 * that far is answered 422 at once (it goes through the deferred reply as a real frame does). Beyond
 * "no crash, no sanitizer report", every request must be answered with an HTTP status and the API's JSON
 * error or image: a connection closed without an answer is a failure (the daemon's empty-part crash,
 * issue 21, looked like that to a client). */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <strings.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "api/http.h"
#include "common/log.h"
#include "daemon/worker.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define BOUNDARY "hdrpostdfuzz"

static hp_http *server;
static uint16_t port;

static bool no_gpu_submit(void *ctx, hp_job *job)
{
    (void)ctx;
    job->code = hp_fail(&job->err, HP_ERR_UNUSABLE, "fuzz: no GPU here");
    job->finish(job);
    return true;
}
static unsigned zero(void *ctx) { (void)ctx; return 0; }
static unsigned sixteen(void *ctx) { (void)ctx; return 16; }

static void start_server(void)
{
    hp_log_set_level(HP_LOG_ERROR);
    hp_http_params params = HP_HTTP_PARAMS_DEFAULTS;
    params.listen = "127.0.0.1:0";
    params.threads = 2;
    params.max_connections_per_ip = 0; /* thousands of connections a second from 127.0.0.1, closing behind */
    hp_err err = {0};
    if (hp_http_create(&params, &server, &err) != HP_OK) {
        fprintf(stderr, "fuzz_form: %s\n", err.message);
        abort();
    }
    hp_http_backend be = {.submit = no_gpu_submit, .queue_depth = zero, .queue_capacity = sixteen,
                          .decode_threads = 1, .request_timeout_s = 10};
    hp_http_set_backend(server, &be);
    hp_http_set_state(server, HP_SERVICE_READY);
    const char *colon = strrchr(hp_http_address(server), ':');
    port = (uint16_t)atoi(colon + 1);
}

/* The body's length from a response's headers (0 without one). */
static size_t content_length(const char *head)
{
    const char *cl = strcasestr(head, "\r\nContent-Length:");
    return cl ? (size_t)strtoull(cl + 17, NULL, 10) : 0;
}

/* Sends the request and reads one response (its headers and Content-Length bytes, or until the server
 * closes); NUL-terminated, or NULL. The client closes with a reset: thousands of connections a second
 * would otherwise leave as many in TIME_WAIT and run out of loopback ports within seconds. */
static char *exchange(const uint8_t *body, size_t size, size_t *got)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in sin = {.sin_family = AF_INET, .sin_port = htons(port)};
    sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    int c = -1;
    while (fd >= 0 && (c = connect(fd, (struct sockaddr *)&sin, sizeof(sin))) != 0 &&
           (errno == EINTR || errno == EALREADY))
        ; /* an interrupted connect goes on: asked again, it answers EALREADY, then EISCONN */
    if (fd < 0 || (c != 0 && errno != EISCONN)) {
        perror("fuzz_form: connect");
        abort();
    }
    char head[256];
    int n = snprintf(head, sizeof(head), "POST /v1/render HTTP/1.1\r\nHost: fuzz\r\n"
                     "Content-Type: multipart/form-data; boundary=" BOUNDARY "\r\nContent-Length: %zu\r\n\r\n", size);
    ssize_t h;
    while ((h = send(fd, head, (size_t)n, MSG_NOSIGNAL)) < 0 && errno == EINTR)
        ;
    bool sent = h == n;
    for (size_t off = 0; sent && off < size;) {
        ssize_t w = send(fd, body + off, size - off, MSG_NOSIGNAL);
        sent = w > 0 || (w < 0 && errno == EINTR);
        off += w > 0 ? (size_t)w : 0;
    }
    size_t cap = 1 << 16, len = 0;
    char *out = malloc(cap + 1);
    ssize_t r = 0;
    /* libFuzzer's timer (SIGALRM, every second for -timeout) interrupts the calls: they are retried. */
    while (out && ((r = recv(fd, out + len, cap - len, 0)) > 0 || (r < 0 && errno == EINTR))) {
        if (r < 0)
            continue;
        len += (size_t)r;
        out[len] = '\0';
        const char *end = strstr(out, "\r\n\r\n");
        if (end && len >= (size_t)(end + 4 - out) + content_length(out))
            break;
        if (len == cap) {
            char *grown = realloc(out, 2 * cap + 1);
            if (!grown)
                break;
            out = grown;
            cap *= 2;
        }
    }
    if (r < 0)
        fprintf(stderr, "fuzz_form: recv after %zu bytes: %s\n", len, strerror(errno));
    struct linger reset = {.l_onoff = 1, .l_linger = 0};
    setsockopt(fd, SOL_SOCKET, SO_LINGER, &reset, sizeof(reset));
    close(fd);
    if (out)
        out[len] = '\0';
    *got = len;
    return out;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (!server)
        start_server();
    size_t len = 0;
    char *answer = exchange(data, size, &len);
    /* An answer: a status line, and a JSON body (every error) or an image. */
    bool answered = answer && len > 12 && strncmp(answer, "HTTP/1.1 ", 9) == 0;
    const char *body = answered ? strstr(answer, "\r\n\r\n") : NULL;
    if (!answered || !body || (body[4] != '{' && strncmp(answer + 9, "200", 3) != 0)) {
        fprintf(stderr, "fuzz_form: no answer or not the API's (%zu bytes): %.200s\n", len, answer ? answer : "");
        abort();
    }
    free(answer);
    return 0;
}
