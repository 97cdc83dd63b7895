/* Fuzz target: the multipart/form-data reader of POST /v1/render and /v1/analyze (api/frames/render.c, through
 * libmicrohttpd's post processor) and the request path around it (api/http/http.c: admission from the headers,
 * refusals answered before or after the body, the memory budget), driven as a client drives them: each
 * input is one form posted over loopback to a real hp_http server in this process. The input's first byte
 * chooses the request's shape (the route, a Content-Length or chunks, Expect: 100-continue or not, the
 * token or none); the rest is the form's body. The server's backend stands in for the GPU: a frame that
 * gets that far is answered 422 at once (through the deferred reply, as a real frame is).
 *
 * Beyond "no crash, no sanitizer report", every request must be answered, whole (its Content-Length), with
 * no 5xx but 503, and every byte it took from the memory budget must be given back once it is over: a
 * connection closed without an answer is a failure (the daemon's empty-part crash, issue 21, looked like
 * that to a client). */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <strings.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "api/http/http.h"
#include "api/routes/routes.h"
#include "common/budget.h"
#include "common/log.h"
#include "api/frames/job.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define BOUNDARY "hdrpostdfuzz"
#define TOKEN "fuzz-token"

/* The first byte of an input. */
enum shape {
    SHAPE_ANALYZE = 1,  /* /v1/analyze, else /v1/render */
    SHAPE_CHUNKED = 2,  /* Transfer-Encoding: chunked (in up to three chunks), else Content-Length */
    SHAPE_EXPECT = 4,   /* Expect: 100-continue: the body is sent only after 100 Continue */
    SHAPE_NO_TOKEN = 8, /* no Authorization: refused (401) from the headers */
};

static hp_http *server;
static uint16_t port;
/* Small enough that forms of a few KiB and their frames run into it now and then. */
static hp_budget budget;

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
    params.routes = hp_api_routes;
    params.route_count = hp_api_route_count;
    params.listen = "127.0.0.1:0";
    params.threads = 2;
    params.max_connections_per_ip = 0; /* thousands of connections a second from 127.0.0.1, closing behind */
    params.auth_token = TOKEN;
    hp_budget_init(&budget, 1 << 20);
    params.budget = &budget;
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

/* What the client has read from its connection, kept across reads: a 100 Continue and the final answer
 * may come in one piece. */
typedef struct reader {
    int fd;
    char *buf;
    size_t len, cap;
    bool closed; /* the server closed before a whole response */
} reader;

/* The length of the whole response at the start of r->buf (its headers and its Content-Length bytes, the
 * length looked for in its own headers), or 0 while it is not all there. */
static size_t response_length(const reader *r)
{
    const char *end = strstr(r->buf, "\r\n\r\n");
    if (!end)
        return 0;
    size_t head = (size_t)(end + 4 - r->buf), body = 0;
    for (const char *line = strstr(r->buf, "\r\n"); line && line < end; line = strstr(line + 2, "\r\n"))
        if (strncasecmp(line + 2, "Content-Length:", 15) == 0)
            body = (size_t)strtoull(line + 17, NULL, 10);
    return r->len >= head + body ? head + body : 0;
}

/* Reads until a whole response is at the start of the buffer; its length, or 0 when the server closed first.
 * libFuzzer's timer (SIGALRM, every second for -timeout) interrupts the calls: they are retried. */
static size_t read_response(reader *r)
{
    for (;;) {
        size_t whole = r->buf ? response_length(r) : 0;
        if (whole)
            return whole;
        if (!r->buf || r->len == r->cap) {
            size_t cap = r->cap ? 2 * r->cap : 1 << 16;
            char *grown = realloc(r->buf, cap + 1);
            if (!grown)
                return 0;
            r->buf = grown;
            r->cap = cap;
            r->buf[r->len] = '\0';
        }
        ssize_t n = recv(r->fd, r->buf + r->len, r->cap - r->len, 0);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0) {
            r->closed = true;
            return 0;
        }
        r->len += (size_t)n;
        r->buf[r->len] = '\0';
    }
}

/* Drops the first `n` bytes (an interim 100 Continue). */
static void reader_skip(reader *r, size_t n)
{
    memmove(r->buf, r->buf + n, r->len - n + 1);
    r->len -= n;
}

static bool send_all(int fd, const void *buf, size_t n)
{
    for (size_t off = 0; off < n;) {
        ssize_t w = send(fd, (const char *)buf + off, n - off, MSG_NOSIGNAL);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return false;
        off += (size_t)w;
    }
    return true;
}

static int connect_server(void)
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
    return fd;
}

/* The body as the shape sends it: as it is, or in up to three chunks and the last, empty one. */
static bool send_body(int fd, const uint8_t *body, size_t size, unsigned shape)
{
    if (!(shape & SHAPE_CHUNKED))
        return send_all(fd, body, size);
    size_t third = size / 3 + 1;
    for (size_t off = 0; off < size; off += third) {
        size_t n = size - off < third ? size - off : third;
        char line[32];
        int k = snprintf(line, sizeof(line), "%zx\r\n", n);
        if (!send_all(fd, line, (size_t)k) || !send_all(fd, body + off, n) || !send_all(fd, "\r\n", 2))
            return false;
    }
    return send_all(fd, "0\r\n\r\n", 5);
}

/* Sends the request in its shape and reads the final response (after a 100 Continue, when asked for): the
 * reader's buffer holds it. The client closes with a reset: thousands of connections a second would
 * otherwise leave as many in TIME_WAIT and run out of loopback ports within seconds. */
static void exchange(const uint8_t *body, size_t size, unsigned shape, reader *r)
{
    r->fd = connect_server();
    char head[512], length[64];
    snprintf(length, sizeof(length), shape & SHAPE_CHUNKED ? "Transfer-Encoding: chunked" : "Content-Length: %zu",
             size);
    int n = snprintf(head, sizeof(head), "POST %s HTTP/1.1\r\nHost: localhost\r\n%s%s"
                     "Content-Type: multipart/form-data; boundary=" BOUNDARY "\r\n%s\r\n\r\n",
                     shape & SHAPE_ANALYZE ? "/v1/analyze" : "/v1/render",
                     shape & SHAPE_NO_TOKEN ? "" : "Authorization: Bearer " TOKEN "\r\n",
                     shape & SHAPE_EXPECT ? "Expect: 100-continue\r\n" : "", length);
    bool sent = send_all(r->fd, head, (size_t)n);
    if (sent && (shape & SHAPE_EXPECT)) {
        size_t first = read_response(r);
        if (first && strncmp(r->buf, "HTTP/1.1 100 ", 13) == 0) {
            reader_skip(r, first);
            /* The final answer may have come with it (a body of 0 bytes is not waited for). */
            if (!response_length(r))
                sent = send_body(r->fd, body, size, shape);
            read_response(r);
        }
    } else if (sent && send_body(r->fd, body, size, shape)) {
        read_response(r);
    }
    struct linger reset = {.l_onoff = 1, .l_linger = 0};
    setsockopt(r->fd, SOL_SOCKET, SO_LINGER, &reset, sizeof(reset));
    close(r->fd);
}

/* Every request gives its bytes back when it ends, just after its answer is sent: waited for, 5 s at most. */
static bool budget_given_back(void)
{
    for (int i = 0; i < 5000; i++) {
        if (hp_budget_used(&budget) == 0)
            return true;
        nanosleep(&(struct timespec){.tv_nsec = 1000000}, NULL);
    }
    return false;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (!server)
        start_server();
    unsigned shape = size ? data[0] : 0;
    reader r = {.fd = -1};
    exchange(size ? data + 1 : data, size ? size - 1 : 0, shape, &r);
    /* An answer, whole: a status line, and a JSON body (every error) or an image; no 5xx but 503. */
    size_t whole = r.buf ? response_length(&r) : 0;
    const char *body = whole ? strstr(r.buf, "\r\n\r\n") : NULL;
    int status = whole && strncmp(r.buf, "HTTP/1.1 ", 9) == 0 ? atoi(r.buf + 9) : 0;
    if (!body || !status || (body[4] != '{' && status != 200) || (status >= 500 && status != 503)) {
        fprintf(stderr, "fuzz_form: shape %u: no whole answer, not the API's, or a 5xx (%zu bytes): %.300s\n", shape,
                r.len, r.buf ? r.buf : "");
        abort();
    }
    free(r.buf);
    if (!budget_given_back()) {
        fprintf(stderr, "fuzz_form: shape %u: %llu bytes of the budget still held after the answer\n", shape,
                (unsigned long long)hp_budget_used(&budget));
        abort();
    }
    return 0;
}
