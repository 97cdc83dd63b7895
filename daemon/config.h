/* The daemon's settings: one table (config.c) that parses flags, environment variables and the config
 * file, validates every value, prints --help and logs the effective configuration (the redis habit: one
 * place to add a setting).
 *
 * Precedence, highest first: a flag (--name=value, --name value, --flag, --no-flag), the environment
 * variable HDRPOST_<NAME>, the config file (--config FILE or HDRPOST_CONFIG; lines "name = value"), the
 * default. Adding a setting is one row in config.c's table plus its field here. */
#ifndef HP_CONFIG_H
#define HP_CONFIG_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "common/error.h"

/* Room for the table's rows in hp_config.source; config.c static-asserts the table fits. */
#define HP_CONFIG_MAX_SETTINGS 64

/* Where a setting's value came from; logged beside it at start-up so an operator can see which layer won. */
typedef enum hp_config_source {
    HP_CONFIG_FROM_DEFAULT = 0,
    HP_CONFIG_FROM_FILE,
    HP_CONFIG_FROM_ENV,
    HP_CONFIG_FROM_FLAG,
} hp_config_source;

typedef struct hp_config {
    /* Address the HTTP API listens on: "A.B.C.D:PORT" or "[IPv6]:PORT", port 0..65535 (0: the kernel picks
     * one, logged at start-up). Default "127.0.0.1:8080". */
    char *listen;
    /* Vulkan device: "" chooses by type, a decimal index, or a case-insensitive name substring. Default "". */
    char *device;
    /* Pipeline cache file, loaded at start-up and saved at exit; "" disables it; "auto" (the default): by the
     * conventions of daemon/cache_dir.h. */
    char *pipeline_cache;
    /* Vulkan validation layer on, its messages logged (0 off, 1 on), default 0. */
    bool validation;
    /* GET /metrics answered without the auth token (api/http/http.h), default false. */
    bool metrics_open;
    /* The web console (GET /, /console/...; issue 18): HP_AUTO (on when listening on loopback), HP_ON
     * or HP_OFF, as the setting says; console_enabled is what it comes to once listen is known. */
    int console;
    bool console_enabled;
    /* An hp_log_level (error, warn, info, debug), default HP_LOG_INFO. Stored as int: the table writes
     * enum settings through an int pointer, and gcc gives these enums an unsigned type. */
    int log_level;
    /* An hp_reduce_variant: the reduction form a frame uses unless its request says otherwise,
     * default HP_REDUCE_SINGLE_PASS. */
    int reduce_variant;
    /* Threads polling HTTP connections, 1..256, default 4. */
    int http_threads;
    /* Seconds a shutdown waits for HTTP requests in flight before closing them, 0..3600, default 30. */
    double shutdown_timeout_s;
    /* Frames waiting for the GPU at most; more are answered 429, 1..4096, default 16. */
    int queue_depth;
    /* Seconds a frame may wait in the queue before it is answered 504, 0.1..3600, default 60. */
    double request_timeout_s;
    /* Largest request body in MiB (413 above it, judged from Content-Length), 1..65536, default 2048. */
    int max_body_mb;
    /* Largest frame side and pixel count accepted (413 above them, judged from the image header). */
    int max_width, max_height;
    double max_megapixels;
    /* Threads that encode finished frames; 0: one per core. 0..256, default 0. */
    int encode_threads;
    /* Threads one EXR frame's chunks are decoded on; 0: one per core. 0..64, default 0. */
    int decode_threads;
    /* Where EXR ZIP chunks are inflated (pipeline/exr_zip_gpu.h): HP_EXR_ZIP_DECODER_*, default auto. */
    int exr_zip_decoder;
    /* With auto, the share of the frames that arrive while others decode inflated whole on the GPU instead of
     * split (daemon/zip_share.h): 0 to 1, default 1 (every one), or negative to adapt. */
    double exr_zip_gpu_share;
    /* A batch of EXR ZIP frames on the GPU with more chunks than this takes the serial inflate, not the wide
     * one (pipeline/exr_zip_gpu.h's hp_exr_zip_gpu_batch_tune); 0: the device's own. 0..1048576, default 0. */
    int exr_zip_wide_chunks;
    /* Batches of EXR ZIP frames on the GPU at once, on the decode queues (hp_exr_zip_gpu_batches_in_flight).
     * 1..8, default 2. */
    int exr_zip_gpu_batches;
    /* Holding the GPU's clocks while frames come (pipeline/clock_hold.h): HP_AUTO (on a GPU, not a CPU
     * device), HP_ON or HP_OFF. Default auto. */
    int gpu_clock_hold;
    /* Threads one large PNG is deflated on (api/codecs/encode.h); 0: one per core. 0..256, default 0. */
    int png_threads;
    /* Bearer token for every route but /livez and /readyz; "" disables authentication. Default "". */
    char *auth_token;
    /* The probe listener's address ("" none), the connection limits and deadlines (api/http/http.h), and the
     * memory budget of requests in flight in MiB (0: half the memory limit; common/budget.h). */
    char *probe_listen;
    /* A studio's OpenColorIO config (ocio/config.h): its path ("" none; the OCIO environment variable when set
     * nowhere else), the programs kept compiled, those made before ready (pipeline/ocio_stage.h). */
    char *ocio_config;
    int ocio_cache;
    char *ocio_warm;
    /* The daemon's own named looks, after the built-in ones (daemon/looks_setup.h): "NAME: QUERY; ..." ("" none). */
    char *studio_looks;
    /* Origins besides the daemon's own whose pages may call the API (api/http/http.h); "" none. */
    char *allowed_origins;
    /* Proxies trusted to pass the client on (api/http/trusted_proxies.h); "" none. */
    char *trusted_proxies;
    int max_connections, max_connections_per_ip;
    double header_timeout_s;
    int min_body_rate_kbs;
    int max_inflight_mb;
    /* Listening on a non-loopback address without auth_token is refused unless this is set. Default false. */
    bool allow_no_auth;
    /* PEM certificate and key files: both given, the API speaks HTTPS. Default "" (plain HTTP). */
    char *tls_cert, *tls_key;
    /* The frame size warmed before the daemon reports ready: "auto" (3840x2160 on a GPU, none on a CPU
     * device), "none", or WIDTHxHEIGHT. Default "auto". */
    char *warm_frame;
    /* For tests only: milliseconds the GPU thread sleeps before each frame it runs (daemon/worker.h), so
     * that tests of queueing, deadlines and draining see slow frames on any GPU. 0..60000, default 0. */
    int test_gpu_delay_ms;
    /* For tests only: the Nth frame the GPU finishes is reported as a lost device (daemon/worker.h). 0: off. */
    int test_lose_device_after;
    /* For tests only: the Nth GPU inflate of an EXR frame is reported as a lost device (daemon/main.c). 0: off. */
    int test_lose_device_in_decode;
    /* For tests only: after the warm-up, host memory for frames fails (pipeline/host_pool.h,
     * hp_host_pool_test_fail): 1 the pinned blocks, 2 ordinary memory as well. 0: off. */
    int test_fail_host_memory;

    /* The config file read, or NULL when none was given. */
    char *config_file;
    /* Per table row, an hp_config_source. */
    unsigned char source[HP_CONFIG_MAX_SETTINGS];
} hp_config;

typedef enum hp_config_result {
    HP_CONFIG_RUN = 0, /* *config is filled: start the daemon */
    HP_CONFIG_HELP,    /* --help was given: print hp_config_print_help() and exit 0 */
    HP_CONFIG_VERSION, /* --version was given: print the version and exit 0 */
    HP_CONFIG_LIST_DEVICES, /* --list-devices: print the Vulkan devices (hp_gpu_list_devices) and exit */
    HP_CONFIG_INVALID, /* err says which setting, which value and what is allowed: exit 2 */
} hp_config_result;

/* Fills *config from the defaults, the config file, the environment (getenv) and argv, in that order, each
 * layer overriding the last. Every value from every layer is validated, so a bad value in the config file
 * is reported even when a flag overrides it. On HP_CONFIG_INVALID, *config holds nothing to free. */
hp_config_result hp_config_load(hp_config *config, int argc, char **argv, hp_err *err);

/* Every setting with its type, allowed values, default, environment variable and help, from the table. */
void hp_config_print_help(FILE *out, const char *program);

/* One info line per setting: name, value and where it came from. */
void hp_config_log(const hp_config *config);

void hp_config_free(hp_config *config);

/* The warm_frame setting as a size: false when value is malformed; 0 x 0 for none (and for auto when
 * on_gpu is false). */
bool hp_config_warm_size(const char *value, bool on_gpu, uint32_t *width, uint32_t *height);

enum { HP_AUTO = 0, HP_ON = 1, HP_OFF = 2 };
/* An auto/on/off setting's value by name (console, gpu_clock_hold), -1 for another. */
int hp_auto_on_off_parse(const char *name);

/* exr_zip_decoder: auto splits a frame that arrives while others are decoding (the cores are then the bound:
 * inflated on the CPU, the rest on the GPU), and decodes a frame alone on the CPU (its rows uploaded as they
 * are decoded, the shortest answer); never the GPU where the device is a CPU (lavapipe) or has no compute
 * queue beside the frame graph's (daemon/main.c says why). */
enum { HP_EXR_ZIP_DECODER_AUTO, HP_EXR_ZIP_DECODER_CPU, HP_EXR_ZIP_DECODER_GPU, HP_EXR_ZIP_DECODER_SPLIT };
int hp_exr_zip_decoder_parse(const char *name);

#endif
