/* The HTTP server: libmicrohttpd with an internal pool of polling threads, a route table (the service's:
 * api/routes/routes.c) and one JSON error shape for every failure. The daemon creates it first thing, so /livez answers while the GPU
 * warms, and moves its service state as start-up and shutdown progress.
 *
 * Threading: hp_http_set_state() may be called from any thread; create and destroy from one. */
#ifndef HP_HTTP_H
#define HP_HTTP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#include "common/error.h"
#include "api/http/metrics.h"
#include "pipeline/exr_zip_gpu.h"
#include "pipeline/gpu.h"

/* What /readyz reports. Set by the daemon, read by every request thread (an atomic). */
typedef enum hp_service_state {
    HP_SERVICE_STARTING = 0, /* HTTP up, GPU being chosen and pipelines warming: /readyz 503 */
    HP_SERVICE_READY,        /* every pipeline warm: /readyz 200 */
    HP_SERVICE_DRAINING,     /* stop requested: requests in flight finish, /readyz 503 */
    HP_SERVICE_DEVICE_LOST,  /* the GPU was lost: /readyz and /livez 503 for the rest of the process */
} hp_service_state;

const char *hp_service_state_name(hp_service_state state);

/* A listen address as parsed from "A.B.C.D:PORT" or "[IPv6]:PORT". Numeric only: a name would need a
 * resolver at start-up and could resolve to several addresses, and a daemon should bind what it was told. */
typedef struct hp_listen_addr {
    struct sockaddr_storage addr;
    socklen_t addr_len;
    int family;     /* AF_INET or AF_INET6 */
    uint16_t port;  /* 0: the kernel picks one */
} hp_listen_addr;

/* On failure err says what was wrong and what is expected. */
hp_code hp_listen_addr_parse(const char *text, hp_listen_addr *out, hp_err *err);

typedef struct hp_http_params {
    const char *listen;        /* "A.B.C.D:PORT" or "[IPv6]:PORT"; required */
    unsigned threads;          /* polling threads, 1..256, default 4 */
    unsigned idle_timeout_s;   /* an idle connection is closed after this many seconds, default 60 */
    double drain_timeout_s;    /* hp_http_destroy() waits this long for requests in flight, default 30 */
    uint64_t max_body_bytes;   /* a larger body is refused with 413 (from Content-Length when sent) */
    const char *auth_token;    /* non-empty: every route but /livez and /readyz needs "Bearer <token>" */
    bool metrics_open;         /* /metrics answered without the token as well */
    const struct hp_route *routes; /* the service's table (api/routes/routes.h); required */
    size_t route_count;
    bool console;              /* serve the web console (GET /, /console/...): its static pages, open */
    const char *version;       /* the daemon's, for /v1/stats (a literal; NULL: "unknown") */
    const char *tls_cert;      /* PEM certificate chain file; with tls_key, HTTPS instead of HTTP */
    const char *tls_key;       /* PEM private key file */
    /* Connections (docs/SECURITY.md): at most max_connections at once, max_connections_per_ip from one
     * address (0: no per-address limit); a request's headers within header_timeout_s of the connection's
     * start or its previous request's end; a body at min_body_rate bytes/s or more after its first
     * body_grace_s. 0 turns a deadline off. */
    unsigned max_connections;
    unsigned max_connections_per_ip;
    double header_timeout_s;
    uint64_t min_body_rate;
    double body_grace_s;
    /* Origins whose pages may call the API besides the daemon's own (comma-separated, "*" for any): a request
     * with another Origin is refused 403 (a web page's simple POST needs no preflight). NULL or "": none. */
    const char *allowed_origins;
    /* Proxies trusted to pass the client on (api/http/trusted_proxies.h): "ADDR[/BITS], ...". NULL or "": none. */
    const char *trusted_proxies;
    /* A second address answering /livez and /readyz alone (a kubelet's probes), with connections of its
     * own: they answer while the API's limit is full. NULL or "": none. */
    const char *probe_listen;
    /* The bytes that requests in flight may hold (bodies, decoded frames, images): common/budget.h. It must
     * outlive the server (a frame finished after the drain gives its bytes back). NULL: no limit. */
    struct hp_budget *budget;
} hp_http_params;

#define HP_HTTP_PARAMS_DEFAULTS \
    {.listen = "127.0.0.1:8080", .threads = 4, .idle_timeout_s = 60, .drain_timeout_s = 30.0, \
     .max_body_bytes = 1ull << 30, .auth_token = NULL, .tls_cert = NULL, .tls_key = NULL, \
     .max_connections = 512, .max_connections_per_ip = 64, .header_timeout_s = 30.0, \
     .min_body_rate = 64u << 10, .body_grace_s = 10.0, .probe_listen = NULL, .budget = NULL}

/* What GET /v1/gpu and /metrics report about the device and the queue. */
typedef struct hp_gpu_report {
    hp_gpu_info info;
    hp_gpu_memory memory;
    unsigned queue_depth, queue_capacity, in_flight;
    uint64_t frame_graph_bytes; /* device memory the frame graph holds for the sizes it keeps */
    uint32_t frame_sizes_kept;
    /* Mapped host memory for frames and images (pipeline/host_pool.h): blocks with requests now, and
     * bytes kept warm for the next ones. */
    uint32_t host_blocks_out;
    uint64_t host_kept_bytes;
    uint64_t host_kept_device_bytes; /* hp_host_pool_counts_get's, as the three below */
    uint64_t host_blocks_made, host_blocks_freed;
    double host_make_seconds;
    uint64_t host_blocks_made_ahead; /* by the pool's own thread, no request waiting (hp_host_pool_make_ahead) */
    double host_make_ahead_seconds;
    /* The GPU thread's seconds since start by state (daemon/worker.h hp_gpu_thread_time): idle, waiting
     * for the next frame's decoding, for the GPU, for the encoders, and working. */
    double gpu_thread_idle_s, gpu_thread_decode_wait_s, gpu_thread_gpu_wait_s, gpu_thread_encoder_wait_s,
        gpu_thread_work_s;
    /* Holds of the GPU's clocks while frames come (gpu_clock_hold, pipeline/clock_hold.h): whether the daemon
     * holds them, the holds submitted since start and their GPU seconds. */
    bool clock_hold;
    uint64_t clock_holds;
    double clock_hold_seconds;
    /* EXR ZIP frames' batches on the GPU (pipeline/exr_zip_gpu.h), where the daemon inflates on it. */
    bool has_zip_batches;
    hp_exr_zip_batch_stats zip_batches;
} hp_gpu_report;

/* What the HTTP routes hand work to: the daemon's queue and GPU, behind function pointers that daemon/
 * provides at start-up, so that api/ knows no thread or device. The job is api/frames/job.h's. */
struct hp_job;
typedef struct hp_http_backend {
    void *ctx;
    bool (*submit)(void *ctx, struct hp_job *job); /* false: queue full (429) or stopping (503) */
    /* The job's client has gone: a job still waiting is taken out of the queue and finished at once
     * (cancelled, its memory given back); one the GPU has already is finished as cancelled when it comes
     * back. True when it was taken out of the queue. May be NULL. */
    bool (*cancel)(void *ctx, struct hp_job *job);
    /* A frame's body has begun to arrive on a route that renders or analyses it: the GPU will have work
     * soon (the daemon holds its clocks up meanwhile, pipeline/clock_hold.h). May be NULL. */
    void (*frame_coming)(void *ctx);
    unsigned (*queue_depth)(void *ctx);
    unsigned (*queue_capacity)(void *ctx);
    void (*report)(void *ctx, hp_gpu_report *out);
    /* Mapped GPU host memory that frames are decoded into (pipeline/host_pool.h); NULL: ordinary memory. */
    struct hp_host_pool *host_pool;
    double request_timeout_s;   /* a job not started within this is dropped: 504 */
    unsigned decode_threads;    /* threads one EXR frame's chunks are decoded on */
    /* EXR ZIP frames and the GPU (pipeline/exr_zip_gpu.h), all NULL where the daemon does not use it.
     * zip_route: where a frame that qualifies, arriving now, is decoded (exr_zip_decoder): HP_EXR_ZIP_ON_CPU,
     * HP_EXR_ZIP_ON_GPU or HP_EXR_ZIP_SPLIT (api/http/metrics.h).
     * zip_gpu_run: a route's passes over `input` (host memory: HP_EXR_ZIP_ON_GPU hp_image_zip_gather's layout,
     * HP_EXR_ZIP_SPLIT hp_image_zip_inflate's) into `output` (a device block, the RGBA16F image at its start),
     * waited for: the decoding thread's call; any failure but HP_ERR_DEVICE_LOST leaves the frame to the CPU
     * (api/frames/early_decode.c). */
    hp_exr_zip_decoded (*zip_route)(void *ctx);
    hp_code (*zip_gpu_run)(void *ctx, hp_exr_zip_decoded route, const hp_exr_zip_frame *frame,
                           const hp_buffer *input, const hp_buffer *output, hp_err *err);
    /* The CPU's decoding of a frame the GPU did not finish, copied into the device block output. */
    hp_code (*zip_gpu_upload)(void *ctx, const hp_buffer *host, const hp_buffer *output, size_t bytes, hp_err *err);
    uint32_t max_width, max_height;
    uint64_t max_pixels;
    /* A studio's OCIO programs (pipeline/ocio_stage.h), NULL without a config; it outlives the server. */
    struct hp_ocio_stage *ocio;
} hp_http_backend;

typedef struct hp_http hp_http;

/* Binds the address and starts answering, in state HP_SERVICE_STARTING. Fails with HP_ERR_INVALID_ARGUMENT
 * for a bad address and HP_ERR_IO when the address cannot be bound (in use, not local, privileged). */
hp_code hp_http_create(const hp_http_params *params, hp_http **out, hp_err *err);

/* True when the server speaks HTTPS (tls_cert and tls_key were given). */
bool hp_http_is_tls(const hp_http *http);

/* The address actually bound, e.g. "127.0.0.1:8080" (the kernel's port when the listen port was 0). */
const char *hp_http_address(const hp_http *http);

/* The address of the probe listener, or NULL when there is none. */
const char *hp_http_probe_address(const hp_http *http);

/* The memory budget of requests in flight (common/budget.h); the routes take a frame's bytes from it. */
struct hp_budget *hp_http_budget(hp_http *http);

/* Whether the web console is served (hp_http_params.console), and /metrics answered without the token. */
bool hp_http_console(const hp_http *http);
bool hp_http_metrics_open(const hp_http *http);
/* hp_http_params.version, and the seconds since hp_http_create. */
const char *hp_http_version(const hp_http *http);
double hp_http_uptime_s(const hp_http *http);

/* Set once, before the state becomes ready. */
void hp_http_set_backend(hp_http *http, const hp_http_backend *backend);
const hp_http_backend *hp_http_get_backend(const hp_http *http);

void hp_http_set_state(hp_http *http, hp_service_state state);
/* Sets the state to `to` only if it is `from` (atomically); returns whether it did. */
bool hp_http_advance_state(hp_http *http, hp_service_state from, hp_service_state to);
hp_service_state hp_http_get_state(const hp_http *http);
/* Whether the API's address takes connections: false while some have waited to be accepted for a second
 * with none taken (every slot holds a request in progress; api/http/http_guard.h). /readyz says 503 then. */
bool hp_http_accepting(const hp_http *http);
/* The API's connections open now, and those closed to make room while its slots ran short. */
void hp_http_connections(const hp_http *http, unsigned *open, uint64_t *evicted);

/* Stops accepting connections, waits up to drain_timeout_s for the requests in flight to be answered, then
 * stops the threads and frees everything; sets *http to NULL. Sets the state to draining if it was not. */
void hp_http_destroy(hp_http **http);

#endif
