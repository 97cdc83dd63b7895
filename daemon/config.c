#include "api/http/trusted_proxies.h"
#include "daemon/config.h"

#include <ctype.h>
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <math.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "api/http/http.h"
#include "common/log.h"
#include "daemon/worker.h"
#include "pipeline/reduce.h"

typedef enum hp_setting_type {
    HP_SETTING_STRING,
    HP_SETTING_INT,
    HP_SETTING_BOOL,
    HP_SETTING_ENUM,
    HP_SETTING_DOUBLE,
} hp_setting_type;

static const char *const setting_type_names[] = {"string", "int", "bool", "enum", "double"};

/* One row per setting. The default is text parsed like any other source, so it passes the same
 * validation and --help shows exactly what an operator would type. The environment variable is not a
 * column: it is always HDRPOST_ plus the name in upper case, so it cannot drift from the flag. */
typedef struct hp_setting {
    const char *name;
    hp_setting_type type;
    size_t offset;               /* of the field in hp_config: char * / int / bool / int / double */
    const char *default_value;
    double min, max;             /* int and double: inclusive range */
    const char *const *choices;  /* enum: the allowed names, NULL-terminated, for --help and errors */
    int (*parse_choice)(const char *name); /* enum: the owner module's parser, -1 when not allowed */
    /* string: NULL, or a check that fills why (a phrase naming what is allowed) and returns false. */
    bool (*check)(const char *value, char *why, size_t why_size);
    const char *metavar;         /* for --help: --name=METAVAR */
    const char *help;
    /* A secret (the bearer token): its value never reaches the log, whose lines are read by more people
     * than the process's environment is (log shippers, support bundles); only whether it is set. */
    bool secret;
} hp_setting;

static bool check_listen(const char *value, char *why, size_t why_size)
{
    hp_err err = {0};
    if (hp_listen_addr_parse(value, &(hp_listen_addr){0}, &err) == HP_OK)
        return true;
    snprintf(why, why_size, "%s", err.message);
    return false;
}

/* allowed_origins: "*" or origins as a browser sends them (RFC 6454: scheme://host[:port], no path, no
 * wildcard in the host: a browser sends one origin, which is matched whole). */
static bool check_trusted_proxies(const char *value, char *why, size_t why_size)
{
    hp_trusted_proxies t;
    hp_err err = {0};
    if (hp_trusted_proxies_parse(value, &t, &err) == HP_OK)
        return true;
    snprintf(why, why_size, "%s (addresses or networks, comma-separated: 127.0.0.1, 10.0.0.0/8, ::1, fd00::/8)",
             err.message);
    return false;
}

static bool check_allowed_origins(const char *value, char *why, size_t why_size)
{
    for (const char *p = value; *p;) {
        p += strspn(p, ", \t");
        size_t n = strcspn(p, ", \t");
        if (!n)
            break;
        const char *host = n > 7 && !strncasecmp(p, "http://", 7)    ? p + 7
                           : n > 8 && !strncasecmp(p, "https://", 8) ? p + 8
                                                                     : NULL;
        size_t host_len = host ? n - (size_t)(host - p) : 0;
        bool ok = (n == 1 && *p == '*') ||
                  (host && host_len && !memchr(host, '/', host_len) && !memchr(host, '*', host_len));
        if (!ok) {
            snprintf(why, why_size, "\"%.*s\" is not an origin: write scheme://host[:port] (no path), as "
                     "http://review.example:8080, or *", (int)(n > 80 ? 80 : n), p);
            return false;
        }
        p += n;
    }
    return true;
}

/* The probe listener: an address as for listen, or "" for none. */
static bool check_probe_listen(const char *value, char *why, size_t why_size)
{
    return !*value || check_listen(value, why, why_size);
}

/* "auto", "none" or WIDTHxHEIGHT within the largest frame (hp_config_warm_size parses it). */
static bool check_warm_frame(const char *value, char *why, size_t why_size)
{
    uint32_t w, h;
    if (hp_config_warm_size(value, true, &w, &h))
        return true;
    snprintf(why, why_size, "auto, none, or WIDTHxHEIGHT with each side 1 to 16384");
    return false;
}

bool hp_config_warm_size(const char *value, bool on_gpu, uint32_t *width, uint32_t *height)
{
    *width = *height = 0;
    if (strcmp(value, "none") == 0)
        return true;
    if (strcmp(value, "auto") == 0) {
        if (on_gpu)
            *width = 3840, *height = 2160;
        return true;
    }
    char *end;
    errno = 0;
    unsigned long w = strtoul(value, &end, 10);
    if (end == value || (*end != 'x' && *end != 'X') || !isdigit((unsigned char)value[0]))
        return false;
    const char *hs = end + 1;
    unsigned long h = strtoul(hs, &end, 10);
    if (end == hs || *end != '\0' || !isdigit((unsigned char)hs[0]) || errno || w < 1 || h < 1 || w > 16384 ||
        h > 16384)
        return false;
    *width = (uint32_t)w, *height = (uint32_t)h;
    return true;
}

static const char *const log_level_choices[] = {"error", "warn", "info", "debug", NULL};
static const char *const reduce_variant_choices[] = {"single_pass", "two_pass", NULL};
static const char *const auto_on_off_choices[] = {"auto", "on", "off", NULL};
static const char *const exr_zip_decoder_choices[] = {"auto", "cpu", "gpu", "split", NULL};

int hp_exr_zip_decoder_parse(const char *name)
{
    for (int i = 0; exr_zip_decoder_choices[i]; i++)
        if (strcmp(name, exr_zip_decoder_choices[i]) == 0)
            return i;
    return -1;
}

int hp_auto_on_off_parse(const char *name)
{
    for (int i = 0; auto_on_off_choices[i]; i++)
        if (strcmp(name, auto_on_off_choices[i]) == 0)
            return i;
    return -1;
}

#define FIELD(f) offsetof(hp_config, f)

static const hp_setting settings[] = {
    {.name = "listen", .type = HP_SETTING_STRING, .offset = FIELD(listen), .default_value = "127.0.0.1:8080",
     .check = check_listen, .metavar = "HOST:PORT",
     .help = "Address for the HTTP API: an IPv4 address or a bracketed IPv6 address, a colon and a port "
             "(0: any free port)."},
    {.name = "device", .type = HP_SETTING_STRING, .offset = FIELD(device), .default_value = "",
     .metavar = "DEVICE",
     .help = "Vulkan device: empty chooses discrete, then integrated, virtual, CPU; a number is an index "
             "into the device list; a UUID as nvidia-smi -L prints it (GPU-..., any case, dashes optional); a PCI "
             "address ([domain:]bus:device.function, hex: 0000:3b:00.0); anything else is a case-insensitive "
             "substring of the device name. /v1/gpu and the start-up log say each device's UUID and address."},
    {.name = "pipeline_cache", .type = HP_SETTING_STRING, .offset = FIELD(pipeline_cache),
     .default_value = "auto", .metavar = "PATH",
     .help = "Pipeline cache file, read at start-up to warm faster and written at exit; empty disables it. "
             "auto: $CACHE_DIRECTORY/pipeline.cache under systemd's CacheDirectory=, else "
             "/var/cache/hdrpostd/pipeline.cache for root, else $XDG_CACHE_HOME/hdrpostd/pipeline.cache or "
             "~/.cache/hdrpostd/pipeline.cache for a user."},
    {.name = "validation", .type = HP_SETTING_BOOL, .offset = FIELD(validation), .default_value = "false",
     .help = "Enable the Vulkan validation layer and log its messages; any message makes the exit code 3."},
    {.name = "log_level", .type = HP_SETTING_ENUM, .offset = FIELD(log_level), .default_value = "info",
     .choices = log_level_choices, .parse_choice = hp_log_level_parse,
     .help = "Least severe level logged."},
    {.name = "reduce_variant", .type = HP_SETTING_ENUM, .offset = FIELD(reduce_variant),
     .default_value = "single_pass", .choices = reduce_variant_choices, .parse_choice = hp_reduce_variant_parse,
     .help = "Luminance reduction form for frames that do not choose one."},
    {.name = "http_threads", .type = HP_SETTING_INT, .offset = FIELD(http_threads), .default_value = "4",
     .min = 1, .max = 256, .metavar = "N", .help = "Threads polling HTTP connections."},
    {.name = "shutdown_timeout_s", .type = HP_SETTING_DOUBLE, .offset = FIELD(shutdown_timeout_s),
     .default_value = "30", .min = 0, .max = 3600, .metavar = "SECONDS",
     .help = "On SIGTERM or SIGINT, how long to wait for HTTP requests in flight before closing them."},
    {.name = "queue_depth", .type = HP_SETTING_INT, .offset = FIELD(queue_depth), .default_value = "16",
     .min = 1, .max = 4096, .metavar = "N",
     .help = "Frames waiting for the GPU at most; a frame beyond them is answered 429 with Retry-After."},
    {.name = "request_timeout_s", .type = HP_SETTING_DOUBLE, .offset = FIELD(request_timeout_s),
     .default_value = "60", .min = 0.1, .max = 3600, .metavar = "SECONDS",
     .help = "How long a frame may wait in the queue; past it the request is answered 504."},
    {.name = "max_body_mb", .type = HP_SETTING_INT, .offset = FIELD(max_body_mb), .default_value = "2048",
     .min = 1, .max = 65536, .metavar = "MIB",
     .help = "Largest request body in MiB; larger ones are answered 413 from their Content-Length, unread."},
    {.name = "max_width", .type = HP_SETTING_INT, .offset = FIELD(max_width), .default_value = "16384",
     .min = 1, .max = 16384, .metavar = "PIXELS",
     .help = "Widest frame accepted (413 above it, judged from the image header before decoding)."},
    {.name = "max_height", .type = HP_SETTING_INT, .offset = FIELD(max_height), .default_value = "16384",
     .min = 1, .max = 16384, .metavar = "PIXELS", .help = "Tallest frame accepted (413 above it)."},
    {.name = "max_megapixels", .type = HP_SETTING_DOUBLE, .offset = FIELD(max_megapixels),
     .default_value = "268.435456", .min = 0.000001, .max = 268.435456, .metavar = "MEGAPIXELS",
     .help = "Most pixels in a frame, in millions (413 above it); the default is 16384 x 16384."},
    {.name = "encode_threads", .type = HP_SETTING_INT, .offset = FIELD(encode_threads), .default_value = "0",
     .min = 0, .max = 256, .metavar = "N",
     .help = "Threads that encode finished frames; 0: one per usable CPU (the affinity mask, capped by the "
             "cgroup's CPU quota: a container's, not the node's)."},
    {.name = "png_threads", .type = HP_SETTING_INT, .offset = FIELD(png_threads), .default_value = "0",
     .min = 0, .max = 256, .metavar = "N",
     .help = "Threads one large PNG (1 Mpixel or more) is filtered and deflated on, in strips joined into one "
             "stream; 0: one per usable CPU (as encode_threads), 1: libspng on one thread."},
    {.name = "decode_threads", .type = HP_SETTING_INT, .offset = FIELD(decode_threads), .default_value = "0",
     .min = 0, .max = 64, .metavar = "N",
     .help = "Threads one EXR frame's chunks are decoded on (they are independent); 0: one per usable CPU (as "
             "encode_threads)."},
    {.name = "exr_zip_decoder", .type = HP_SETTING_ENUM, .offset = FIELD(exr_zip_decoder), .default_value = "auto",
     .choices = exr_zip_decoder_choices, .parse_choice = hp_exr_zip_decoder_parse,
     .help = "Where a ZIP or ZIPS EXR frame's chunks are decoded (scanlines, unsampled, posted as the "
             "raw body): cpu with libdeflate on decode_threads as the frame arrives; split inflated so, and EXR's "
             "predictor, byte split and planes undone on the GPU (15-30% less CPU, about 3 ms more a "
             "frame); gpu inflated on the GPU too, the CPU only copying the chunks (a tenth of the CPU, tens of "
             "milliseconds more a frame); a frame the GPU's path refuses or gives up on is decoded by the CPU's, "
             "whose verdict stands; auto, where the device has a compute queue beside the frame graph's "
             "(NVIDIA): gpu for a frame whose header arrives while others are decoding (exr_zip_gpu_share of "
             "them, every one by default, where the device has the wide inflate; the rest split), cpu for a "
             "frame alone; elsewhere cpu. "
             "docs/PIPELINE.md."},
    {.name = "exr_zip_gpu_share", .type = HP_SETTING_DOUBLE, .offset = FIELD(exr_zip_gpu_share),
     .default_value = "1", .min = -1, .max = 1, .metavar = "SHARE",
     .help = "With exr_zip_decoder auto on a GPU: the share of the frames that arrive while others decode "
             "that are inflated whole on the GPU (the wide inflate) instead of split, moving their inflating off "
             "the cores; 1, the default, every one (a frame alone stays the CPU's); 0 none (all split); -1 (any "
             "negative) adapts it, up to 0.5, to keep the GPU thread fed without making it wait on the GPU, "
             "while the cores are the bound. Ignored with other decoders and without the wide inflate. "
             "docs/PIPELINE.md."},
    {.name = "exr_zip_wide_chunks", .type = HP_SETTING_INT, .offset = FIELD(exr_zip_wide_chunks),
     .default_value = "0", .min = 0, .max = 1 << 20, .metavar = "N",
     .help = "A batch of EXR ZIP frames inflated together on the GPU (frames that arrive while others are on it) "
             "with more chunks than N takes the serial inflate, a chunk an invocation, rather than the wide one, a "
             "chunk a workgroup: the wide inflate's time grows with the batch and takes every multiprocessor, the "
             "serial loop's hardly grows until they are full. A lone frame keeps the wide inflate up to 4 N chunks, "
             "for its latency. 0: the device's own, 2 a multiprocessor (264 on an H200: a batch of two 4K ZIP "
             "frames of RGBA takes the serial inflate). Ignored without the wide inflate. docs/PIPELINE.md."},
    {.name = "exr_zip_gpu_batches", .type = HP_SETTING_INT, .offset = FIELD(exr_zip_gpu_batches),
     .default_value = "2", .min = 1, .max = 8, .metavar = "N",
     .help = "Batches of EXR ZIP frames inflated on the GPU at once, each submitted to the least busy of the "
             "device's decode queues (at most as many batches as it has; one on a device with a single decode "
             "queue, such as lavapipe): a frame that arrives while fewer than N are on the GPU goes at once, in "
             "a batch of its own, rather than waiting for the batch on it to end (the serial inflate's takes "
             "its longest chunk's chain, 20-35 ms for a 4K frame, whatever its size). With 16 clients of "
             "exr_zip_decoder gpu on an H200, 2 against 1 served 123 against 117, 155 against 139 and 142 "
             "against 134 frames/s (three 4K frames of real texture, one call); 3 served no more. "
             "docs/PIPELINE.md."},
    {.name = "gpu_clock_hold", .type = HP_SETTING_ENUM, .offset = FIELD(gpu_clock_hold), .default_value = "auto",
     .choices = auto_on_off_choices, .parse_choice = hp_auto_on_off_parse,
     .help = "Keep the GPU busy with a small dispatch (one workgroup, a quarter of a millisecond at a time) while "
             "a frame is on its way (its body arriving, decoding, queued or answered; at most 2 s after the last frame "
             "came, was queued or finished), so that the driver keeps "
             "the clocks up between one client's frames: on an H200 the PNG encode of a 4K frame took 3.7 ms "
             "held and 6.8-21 ms not, for some 50 W more while frames come (none when idle). auto: on a discrete "
             "GPU, not on an integrated one or a CPU device (lavapipe); off: never. docs/PIPELINE.md."},
    {.name = "auth_token", .type = HP_SETTING_STRING, .offset = FIELD(auth_token), .default_value = "",
     .metavar = "TOKEN",
     .help = "Bearer token required on every route but /livez and /readyz (and /metrics with metrics_open); "
             "empty disables authentication. Prefer the environment variable or the config file to a flag, which "
             "other users can see. Logged as (set), never its value.",
     .secret = true},
    {.name = "allow_no_auth", .type = HP_SETTING_BOOL, .offset = FIELD(allow_no_auth), .default_value = "false",
     .help = "Listen on an address other than loopback without an auth token. Without it the daemon refuses to "
             "start that way: anyone who reaches the port could then post frames (docs/SECURITY.md)."},
    {.name = "metrics_open", .type = HP_SETTING_BOOL, .offset = FIELD(metrics_open), .default_value = "false",
     .help = "Answer GET /metrics without the auth token, for a Prometheus that cannot send one (scraping by "
             "pod annotations); every other route still needs it. The metrics are counts, times and memory "
             "sizes, no frame data."},
    {.name = "console", .type = HP_SETTING_ENUM, .offset = FIELD(console), .default_value = "auto",
     .choices = auto_on_off_choices, .parse_choice = hp_auto_on_off_parse,
     .help = "The web console at / (status, live charts, try a frame; docs/CONSOLE.md): auto serves it when "
             "listen is a loopback address, on also elsewhere, off never. Its pages are static and open; every "
             "API call it makes carries the auth token the page asks for."},
    {.name = "allowed_origins", .type = HP_SETTING_STRING, .offset = FIELD(allowed_origins), .default_value = "",
     .check = check_allowed_origins, .metavar = "ORIGINS",
     .help = "Web origins (scheme://host[:port], comma-separated; * for any) whose pages may call the API besides "
             "the daemon's own console. A request from a browser page elsewhere (its Origin header) is refused "
             "403: a page on another site could otherwise make a visitor's browser post frames to it. Clients "
             "that send no Origin (curl, hdrpost, render jobs) are not affected."},
    {.name = "ocio_config", .type = HP_SETTING_STRING, .offset = FIELD(ocio_config), .default_value = "",
     .metavar = "PATH",
     .help = "An OpenColorIO config (config.ocio) whose displays, views, looks and colour spaces requests may name "
             "(ocio.*, input.colorspace; docs/COLOR.md). Not set: the OCIO environment variable, as every OCIO "
             "application reads it; empty: none. Loaded at start with every view built: a config OCIO cannot use, "
             "or a LUT it names that is missing, stops the start with OCIO's message."},
    {.name = "ocio_cache", .type = HP_SETTING_INT, .offset = FIELD(ocio_cache), .default_value = "32", .min = 1,
     .max = 4096, .metavar = "N",
     .help = "OCIO programs kept compiled (one per input colour space, display, view and looks: a shader, its LUTs "
             "on the GPU, its pipelines); past this the least recently used is let go, and made again on its next "
             "use."},
    {.name = "ocio_warm", .type = HP_SETTING_STRING, .offset = FIELD(ocio_warm), .default_value = "",
     .metavar = "LIST",
     .help = "OCIO programs made before the daemon says ready, so that no request waits for one: entries "
             "DISPLAY/VIEW or INPUT:DISPLAY/VIEW separated by ';' (the input: the config's scene_linear when left "
             "out), or * for every display and view from scene_linear. A name the config lacks stops the start."},
    {.name = "studio_looks", .type = HP_SETTING_STRING, .offset = FIELD(studio_looks), .default_value = "",
     .metavar = "LIST",
     .help = "Named looks of this daemon's own, which requests name as look=NAME beside the built-in ones: entries "
             "NAME: QUERY separated by ';', QUERY the parameters the look sets as a query writes them (values "
             "URL-encoded), e.g. \"review: ocio.view=ACES%201.0%20-%20SDR%20Video&exposure.mode=fixed&"
             "exposure.stops=0\" (a ';' inside a value is %3B). NAME is lower-case letters, digits, '_' or '-'. "
             "Each is checked as a request would be, against the OCIO config too (a display's encoding against "
             "output.format included), at start: one that fails stops the start."},
    {.name = "probe_listen", .type = HP_SETTING_STRING, .offset = FIELD(probe_listen), .default_value = "",
     .check = check_probe_listen, .metavar = "HOST:PORT",
     .help = "A second address answering /livez and /readyz alone, over plain HTTP and with connections of its "
             "own, so that health probes answer while the API's connections are all taken (max_connections); "
             "empty: none."},
    {.name = "max_connections", .type = HP_SETTING_INT, .offset = FIELD(max_connections), .default_value = "512",
     .min = 1, .max = 100000, .metavar = "N",
     .help = "Connections open at once on the API's address; more are closed as they come (keep it under the "
             "open-file limit)."},
    {.name = "max_connections_per_ip", .type = HP_SETTING_INT, .offset = FIELD(max_connections_per_ip),
     .default_value = "64", .min = 0, .max = 100000, .metavar = "N",
     .help = "Connections open at once from one client address; 0: no limit. A trusted proxy's connections "
             "(trusted_proxies) are not held to it: they carry many clients."},
    {.name = "trusted_proxies", .type = HP_SETTING_STRING, .offset = FIELD(trusted_proxies), .default_value = "",
     .check = check_trusted_proxies, .metavar = "ADDRS",
     .help = "Proxies in front of the daemon (HAProxy, an ingress): addresses or networks, comma-separated "
             "(127.0.0.1, 10.0.0.0/8, ::1, fd00::/8). Their connections are not held to max_connections_per_ip, "
             "and a request's log line names the client they pass on in X-Forwarded-For (the right-most address "
             "that is not a trusted proxy). Anyone else's X-Forwarded-For is ignored. Empty: none."},
    {.name = "header_timeout_s", .type = HP_SETTING_DOUBLE, .offset = FIELD(header_timeout_s),
     .default_value = "30", .min = 0, .max = 3600, .metavar = "SECONDS",
     .help = "A request's headers must be in within this of the connection's start or its previous request's "
             "end, or the connection is closed (a client trickling bytes holds it otherwise); 0: no limit."},
    {.name = "min_body_rate_kbs", .type = HP_SETTING_INT, .offset = FIELD(min_body_rate_kbs),
     .default_value = "64", .min = 0, .max = 1000000, .metavar = "KIB_PER_S",
     .help = "After the first 10 s of a body, the slowest average rate it may arrive at, in KiB/s; a slower "
             "one is closed. 0: no limit."},
    {.name = "max_inflight_mb", .type = HP_SETTING_INT, .offset = FIELD(max_inflight_mb), .default_value = "0",
     .min = 0, .max = 16777216, .metavar = "MIB",
     .help = "Memory that requests in flight may hold at once (bodies, decoded frames, images), in MiB, taken "
             "before it is allocated; a request that does not fit is answered 503 with Retry-After, one larger "
             "than all of it 413. 0: half the cgroup memory limit, or of physical memory without one."},
    {.name = "tls_cert", .type = HP_SETTING_STRING, .offset = FIELD(tls_cert), .default_value = "",
     .metavar = "PATH", .help = "PEM certificate (chain) file; with tls_key, the API speaks HTTPS."},
    {.name = "tls_key", .type = HP_SETTING_STRING, .offset = FIELD(tls_key), .default_value = "",
     .metavar = "PATH", .help = "PEM private key file for tls_cert."},
    {.name = "warm_frame", .type = HP_SETTING_STRING, .offset = FIELD(warm_frame), .default_value = "auto",
     .check = check_warm_frame, .metavar = "WxH",
     .help = "Frame size made ready before /readyz says 200, so the first request of that size is as fast as "
             "the rest: two frames of it run through the GPU and their host and device memory is kept. "
             "auto: 3840x2160 on a GPU, none on a CPU device (a 4K frame takes seconds there); none; or "
             "WIDTHxHEIGHT."},
    {.name = "test_gpu_delay_ms", .type = HP_SETTING_INT, .offset = FIELD(test_gpu_delay_ms), .default_value = "0",
     .min = 0, .max = 60000, .metavar = "MS",
     .help = "For tests only, never in production: the GPU thread sleeps this long before each frame it runs, "
             "so that end-to-end tests of queueing, deadlines and draining see slow frames whatever the GPU. "
             "0 is off."},
    {.name = "test_lose_device_after", .type = HP_SETTING_INT, .offset = FIELD(test_lose_device_after),
     .default_value = "0", .min = 0, .max = 1000000, .metavar = "N",
     .help = "For tests only, never in production: the Nth frame the GPU finishes (warm-up frames count) is "
             "reported as a lost device (as a frame past its fence's timeout is), so that tests see what the daemon "
             "does then on any GPU. 0 is off."},
    {.name = "test_lose_device_in_decode", .type = HP_SETTING_INT, .offset = FIELD(test_lose_device_in_decode),
     .default_value = "0", .min = 0, .max = 1000000, .metavar = "N",
     .help = "For tests only, never in production: the Nth EXR ZIP frame decoded with the GPU (exr_zip_decoder "
             "gpu or split) is reported as a lost device when its run has finished (as a run past its "
             "timeout is), so that tests see what the daemon does then on any GPU. 0 is off."},
    {.name = "test_fail_host_memory", .type = HP_SETTING_INT, .offset = FIELD(test_fail_host_memory),
     .default_value = "0", .min = 0, .max = 2, .metavar = "LEVEL",
     .help = "For tests only, never in production: after the warm-up, 1 makes every request for a pinned host "
             "block fail (frames then go through ordinary memory), 2 makes ordinary memory for frames fail as "
             "well (frames are answered 503 out_of_memory), so that tests see both on any machine. 0 is off."},
};

#define SETTING_COUNT ((int)(sizeof(settings) / sizeof(settings[0])))
_Static_assert(sizeof(settings) / sizeof(settings[0]) <= HP_CONFIG_MAX_SETTINGS,
               "raise HP_CONFIG_MAX_SETTINGS: hp_config.source has a slot per setting");

static const char *const source_names[] = {"default", "config file", "environment", "flag"};

/* --- Helpers ----------------------------------------------------------------------------------------- */

static void *field(hp_config *config, const hp_setting *s) { return (char *)config + s->offset; }
static const void *cfield(const hp_config *config, const hp_setting *s)
{
    return (const char *)config + s->offset;
}

static void env_name(const hp_setting *s, char *out, size_t size)
{
    size_t n = (size_t)snprintf(out, size, "HDRPOST_%s", s->name);
    for (size_t i = 0; i < n && i < size; i++)
        out[i] = (char)toupper((unsigned char)out[i]);
}

/* Flags and file keys accept dashes for underscores (--log-level), the spelling most tools use. */
static const hp_setting *find_setting(const char *name, size_t len)
{
    for (int i = 0; i < SETTING_COUNT; i++) {
        const char *n = settings[i].name;
        if (strlen(n) != len)
            continue;
        size_t k = 0;
        while (k < len && (name[k] == n[k] || (name[k] == '-' && n[k] == '_')))
            k++;
        if (k == len)
            return &settings[i];
    }
    return NULL;
}

static bool name_is(const char *name, size_t len, const char *want)
{
    return strlen(want) == len && strncmp(name, want, len) == 0;
}

static int parse_bool(const char *v)
{
    static const char *const yes[] = {"true", "yes", "on", "1"}, *const no[] = {"false", "no", "off", "0"};
    for (size_t i = 0; i < 4; i++) {
        if (strcasecmp(v, yes[i]) == 0)
            return 1;
        if (strcasecmp(v, no[i]) == 0)
            return 0;
    }
    return -1;
}

static void join_choices(const char *const *choices, const char *sep, char *out, size_t size)
{
    size_t n = 0;
    out[0] = '\0';
    for (int i = 0; choices[i] && n < size; i++)
        n += (size_t)snprintf(out + n, size - n, "%s%s", i ? sep : "", choices[i]);
}

/* Parses value into the setting's field. where names the source for the error ("flag --listen",
 * "environment HDRPOST_LISTEN", "config file /etc/hdrpostd.conf:3"). */
static hp_code apply(hp_config *config, const hp_setting *s, const char *value, hp_config_source source,
                     const char *where, hp_err *err)
{
    char why[400];
    switch (s->type) {
    case HP_SETTING_STRING: {
        if (s->check && !s->check(value, why, sizeof(why)))
            goto invalid;
        char *copy = strdup(value);
        if (!copy)
            return hp_fail(err, HP_ERR_OUT_OF_MEMORY, "out of memory reading setting %s", s->name);
        char **slot = field(config, s);
        free(*slot);
        *slot = copy;
        break;
    }
    case HP_SETTING_INT: {
        char *end;
        errno = 0;
        long v = strtol(value, &end, 10);
        if (end == value || *end != '\0' || errno == ERANGE || v < s->min || v > s->max) {
            snprintf(why, sizeof(why), "expected an integer from %.0f to %.0f", s->min, s->max);
            goto invalid;
        }
        *(int *)field(config, s) = (int)v;
        break;
    }
    case HP_SETTING_DOUBLE: {
        char *end;
        errno = 0;
        double v = strtod(value, &end);
        if (end == value || *end != '\0' || errno == ERANGE || !isfinite(v) || v < s->min || v > s->max) {
            snprintf(why, sizeof(why), "expected a number from %g to %g", s->min, s->max);
            goto invalid;
        }
        *(double *)field(config, s) = v;
        break;
    }
    case HP_SETTING_BOOL: {
        int v = parse_bool(value);
        if (v < 0) {
            snprintf(why, sizeof(why), "expected true or false (also yes/no, on/off, 1/0)");
            goto invalid;
        }
        *(bool *)field(config, s) = v;
        break;
    }
    case HP_SETTING_ENUM: {
        int v = s->parse_choice(value);
        if (v < 0) {
            char list[256];
            join_choices(s->choices, ", ", list, sizeof(list));
            snprintf(why, sizeof(why), "expected one of %s", list);
            goto invalid;
        }
        *(int *)field(config, s) = v;
        break;
    }
    }
    config->source[s - settings] = (unsigned char)source;
    return HP_OK;

invalid:
    return hp_fail(err, HP_ERR_INVALID_ARGUMENT, "invalid value \"%s\" for setting %s (from %s): %s", value,
                   s->name, where, why);
}

/* --- Sources ----------------------------------------------------------------------------------------- */

static char *trim(char *s)
{
    while (isspace((unsigned char)*s))
        s++;
    char *end = s + strlen(s);
    while (end > s && isspace((unsigned char)end[-1]))
        *--end = '\0';
    return s;
}

/* Lines "name = value". Only whole-line comments: a '#' inside a value (a path, a device name) is data.
 * A value may be wrapped in double quotes to write an empty string or keep edge spaces. */
static hp_code read_file(hp_config *config, const char *path, hp_err *err)
{
    FILE *f = fopen(path, "r");
    if (!f)
        return hp_fail(err, HP_ERR_INVALID_ARGUMENT, "cannot read config file %s: %s", path, strerror(errno));

    hp_code code = HP_OK;
    char *line = NULL;
    size_t cap = 0;
    for (unsigned lineno = 1; getline(&line, &cap, f) >= 0; lineno++) {
        char *text = trim(line);
        if (*text == '\0' || *text == '#')
            continue;
        char *eq = strchr(text, '=');
        if (!eq) {
            code = hp_fail(err, HP_ERR_INVALID_ARGUMENT, "config file %s line %u: expected \"name = value\", "
                           "got \"%s\"", path, lineno, text);
            break;
        }
        *eq = '\0';
        char *key = trim(text), *value = trim(eq + 1);
        size_t vlen = strlen(value);
        if (vlen >= 2 && value[0] == '"' && value[vlen - 1] == '"') {
            value[vlen - 1] = '\0';
            value++;
        }
        const hp_setting *s = find_setting(key, strlen(key));
        if (!s) {
            code = hp_fail(err, HP_ERR_INVALID_ARGUMENT, "config file %s line %u: unknown setting \"%s\" "
                           "(hdrpostd --help lists them)", path, lineno, key);
            break;
        }
        char where[512];
        snprintf(where, sizeof(where), "config file %s:%u", path, lineno);
        if ((code = apply(config, s, value, HP_CONFIG_FROM_FILE, where, err)) != HP_OK)
            break;
    }
    free(line);
    fclose(f);
    return code;
}

static hp_code read_env(hp_config *config, hp_err *err)
{
    for (int i = 0; i < SETTING_COUNT; i++) {
        char name[128], where[160];
        env_name(&settings[i], name, sizeof(name));
        const char *value = getenv(name);
        if (!value)
            continue;
        snprintf(where, sizeof(where), "environment %s", name);
        hp_code code = apply(config, &settings[i], value, HP_CONFIG_FROM_ENV, where, err);
        if (code != HP_OK)
            return code;
    }
    return HP_OK;
}

/* A flag as found in argv, applied after the file and the environment (flags win). */
typedef struct flag_value {
    const hp_setting *setting;
    const char *value;
    const char *arg; /* as typed, for errors */
} flag_value;

static bool is_help(const char *a) { return strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0; }

/* Splits argv into setting values without applying them; finds --config on the way. */
static hp_config_result scan_flags(int argc, char **argv, flag_value *flags, int *flag_count,
                                   const char **config_file, hp_err *err)
{
    *flag_count = 0;
    for (int i = 1; i < argc; i++) {
        const char *arg = argv[i];
        if (strcmp(arg, "--version") == 0)
            return HP_CONFIG_VERSION;
        if (strcmp(arg, "--list-devices") == 0 || strcmp(arg, "--list_devices") == 0)
            return HP_CONFIG_LIST_DEVICES;
        if (strncmp(arg, "--", 2) != 0 || arg[2] == '\0') {
            hp_fail(err, HP_ERR_INVALID_ARGUMENT, "unexpected argument \"%s\": settings are given as "
                    "--name=value (hdrpostd --help lists them)", arg);
            return HP_CONFIG_INVALID;
        }
        const char *name = arg + 2, *eq = strchr(name, '=');
        size_t len = eq ? (size_t)(eq - name) : strlen(name);
        const char *value = eq ? eq + 1 : NULL;

        if (name_is(name, len, "config")) {
            if (!value && i + 1 < argc)
                value = argv[++i];
            if (!value) {
                hp_fail(err, HP_ERR_INVALID_ARGUMENT, "--config needs a file name");
                return HP_CONFIG_INVALID;
            }
            *config_file = value;
            continue;
        }

        const hp_setting *s = find_setting(name, len);
        bool negated = false;
        if (!s && len > 3 && (strncmp(name, "no-", 3) == 0 || strncmp(name, "no_", 3) == 0)) {
            s = find_setting(name + 3, len - 3);
            negated = s != NULL;
        }
        if (!s) {
            hp_fail(err, HP_ERR_INVALID_ARGUMENT, "unknown setting --%.*s (hdrpostd --help lists them)", (int)len,
                    name);
            return HP_CONFIG_INVALID;
        }
        if (negated && (s->type != HP_SETTING_BOOL || value)) {
            hp_fail(err, HP_ERR_INVALID_ARGUMENT, "%s: --no-%s takes no value and only negates a bool setting",
                    arg, s->name);
            return HP_CONFIG_INVALID;
        }
        if (s->type == HP_SETTING_BOOL && !value) {
            /* A bare bool never takes the next argument: "--validation --listen=..." must not eat a flag. */
            value = negated ? "false" : "true";
        } else if (!value) {
            if (i + 1 >= argc) {
                hp_fail(err, HP_ERR_INVALID_ARGUMENT, "setting %s: --%s needs a value", s->name, s->name);
                return HP_CONFIG_INVALID;
            }
            value = argv[++i];
        }
        flags[(*flag_count)++] = (flag_value){.setting = s, .value = value, .arg = arg};
    }
    return HP_CONFIG_RUN;
}

/* --- Public ------------------------------------------------------------------------------------------ */

/* An address other than loopback (127.0.0.0/8, ::1) reaches other machines. */
static bool listen_is_loopback(const char *listen)
{
    hp_listen_addr la;
    hp_err err = {0};
    if (hp_listen_addr_parse(listen, &la, &err) != HP_OK)
        return false;
    if (la.family == AF_INET)
        return (ntohl(((const struct sockaddr_in *)&la.addr)->sin_addr.s_addr) >> 24) == 127;
    return IN6_IS_ADDR_LOOPBACK(&((const struct sockaddr_in6 *)&la.addr)->sin6_addr);
}

/* Settings that are fine alone and dangerous together: the API open to the network with no token, which
 * lets anyone who reaches the port use the GPU. Allowed only when said in plain sight (allow_no_auth). */
static hp_code check_exposure(const hp_config *config, hp_err *err)
{
    if (config->auth_token[0] || config->allow_no_auth || listen_is_loopback(config->listen))
        return HP_OK;
    return hp_fail(err, HP_ERR_INVALID_ARGUMENT,
                   "listen = %s is not a loopback address and no auth_token is set: anyone who can reach the port "
                   "could post frames. Set auth_token (HDRPOST_AUTH_TOKEN), or allow_no_auth = true "
                   "(HDRPOST_ALLOW_NO_AUTH) when something in front (a proxy, a network policy) guards the port",
                   config->listen);
}

hp_config_result hp_config_load(hp_config *config, int argc, char **argv, hp_err *err)
{
    memset(config, 0, sizeof(*config));
    /* --help wins over anything else on the line, even a bad setting beside it. */
    for (int i = 1; i < argc; i++)
        if (is_help(argv[i]))
            return HP_CONFIG_HELP;

    flag_value *flags = calloc((size_t)argc + 1, sizeof(*flags));
    if (!flags) {
        hp_fail(err, HP_ERR_OUT_OF_MEMORY, "out of memory reading the command line");
        return HP_CONFIG_INVALID;
    }
    int flag_count = 0;
    const char *config_file = getenv("HDRPOST_CONFIG");
    hp_config_result result = scan_flags(argc, argv, flags, &flag_count, &config_file, err);
    if (result != HP_CONFIG_RUN)
        goto done;

    result = HP_CONFIG_INVALID;
    for (int i = 0; i < SETTING_COUNT; i++) {
        char where[64];
        snprintf(where, sizeof(where), "the default of %s", settings[i].name);
        if (apply(config, &settings[i], settings[i].default_value, HP_CONFIG_FROM_DEFAULT, where, err) != HP_OK)
            goto done;
    }
    if (config_file && *config_file) {
        if (!(config->config_file = strdup(config_file))) {
            hp_fail(err, HP_ERR_OUT_OF_MEMORY, "out of memory reading the command line");
            goto done;
        }
        if (read_file(config, config_file, err) != HP_OK)
            goto done;
    }
    if (read_env(config, err) != HP_OK)
        goto done;
    for (int i = 0; i < flag_count; i++) {
        char where[160];
        snprintf(where, sizeof(where), "flag %.140s", flags[i].arg);
        if (apply(config, flags[i].setting, flags[i].value, HP_CONFIG_FROM_FLAG, where, err) != HP_OK)
            goto done;
    }
    if (check_exposure(config, err) != HP_OK)
        goto done;
    /* ocio_config set nowhere: the OCIO environment variable, as every OpenColorIO application reads it. */
    const char *ocio_env = getenv("OCIO");
    const hp_setting *ocio = find_setting("ocio_config", strlen("ocio_config"));
    if (ocio_env && *ocio_env && config->source[ocio - settings] == HP_CONFIG_FROM_DEFAULT &&
        apply(config, ocio, ocio_env, HP_CONFIG_FROM_ENV, "environment OCIO", err) != HP_OK)
        goto done;
    config->console_enabled = config->console == HP_ON ||
                              (config->console == HP_AUTO && listen_is_loopback(config->listen));
    result = HP_CONFIG_RUN;

done:
    free(flags);
    if (result != HP_CONFIG_RUN)
        hp_config_free(config);
    return result;
}

/* Prints text word-wrapped to 100 columns, each line indented. */
static void print_wrapped(FILE *out, const char *indent, const char *text)
{
    const int width = 100 - (int)strlen(indent);
    while (*text) {
        int len = (int)strlen(text);
        if (len > width) {
            len = width;
            while (len > 0 && text[len] != ' ')
                len--;
            if (len == 0)
                len = width;
        }
        fprintf(out, "%s%.*s\n", indent, len, text);
        text += len;
        while (*text == ' ')
            text++;
    }
}

void hp_config_print_help(FILE *out, const char *program)
{
    fprintf(out,
            "Usage: %s [--config FILE] [--NAME=VALUE | --NAME VALUE | --FLAG | --no-FLAG]...\n"
            "\n"
            "hdrpostd: HDR post-processing on the GPU (Vulkan compute) behind an HTTP API.\n"
            "\n"
            "Each setting is taken from, highest precedence first: its flag, its environment variable,\n"
            "the config file, its default. Names may be written with '-' for '_'.\n"
            "\n"
            "  --list-devices\n"
            "      Print the Vulkan devices, a line each (index, UUID, PCI address, type, whether usable,\n"
            "      name: what --device takes), and exit.\n"
            "  --version\n"
            "      Print the version and exit.\n"
            "\n"
            "  --config=FILE\n"
            "      env HDRPOST_CONFIG\n"
            "      Config file: lines \"name = value\" (value optionally in double quotes); lines starting\n"
            "      with # are comments.\n",
            program);
    for (int i = 0; i < SETTING_COUNT; i++) {
        const hp_setting *s = &settings[i];
        char env[128], kind[300];
        env_name(s, env, sizeof(env));
        switch (s->type) {
        case HP_SETTING_BOOL:
            fprintf(out, "\n  --%s, --no-%s\n", s->name, s->name);
            snprintf(kind, sizeof(kind), "%s", setting_type_names[s->type]);
            break;
        case HP_SETTING_ENUM: {
            char list[256];
            join_choices(s->choices, "|", list, sizeof(list));
            fprintf(out, "\n  --%s=%s\n", s->name, list);
            snprintf(kind, sizeof(kind), "%s", setting_type_names[s->type]);
            break;
        }
        case HP_SETTING_INT:
        case HP_SETTING_DOUBLE:
            fprintf(out, "\n  --%s=%s\n", s->name, s->metavar);
            snprintf(kind, sizeof(kind), s->type == HP_SETTING_INT ? "%s %.0f..%.0f" : "%s %g..%g",
                     setting_type_names[s->type], s->min, s->max);
            break;
        case HP_SETTING_STRING:
            fprintf(out, "\n  --%s=%s\n", s->name, s->metavar);
            snprintf(kind, sizeof(kind), "%s", setting_type_names[s->type]);
            break;
        }
        fprintf(out, "      %s, default \"%s\", env %s\n", kind, s->default_value, env);
        print_wrapped(out, "      ", s->help);
    }
}

void hp_config_log(const hp_config *config)
{
    if (config->config_file)
        hp_info("config: file %s", config->config_file);
    for (int i = 0; i < SETTING_COUNT; i++) {
        const hp_setting *s = &settings[i];
        const void *f = cfield(config, s);
        const char *from = source_names[config->source[i]];
        switch (s->type) {
        case HP_SETTING_STRING:
            if (s->secret)
                hp_info("config: %s = %s (%s)", s->name, **(char *const *)f ? "(set)" : "(not set)", from);
            else
                hp_info("config: %s = \"%s\" (%s)", s->name, *(char *const *)f, from);
            break;
        case HP_SETTING_INT:
            hp_info("config: %s = %d (%s)", s->name, *(const int *)f, from);
            break;
        case HP_SETTING_DOUBLE:
            hp_info("config: %s = %g (%s)", s->name, *(const double *)f, from);
            break;
        case HP_SETTING_BOOL:
            hp_info("config: %s = %s (%s)", s->name, *(const bool *)f ? "true" : "false", from);
            break;
        case HP_SETTING_ENUM: {
            /* Print the name the owner's parser maps to the stored value. */
            const char *name = "?";
            for (int k = 0; s->choices[k]; k++)
                if (s->parse_choice(s->choices[k]) == *(const int *)f)
                    name = s->choices[k];
            hp_info("config: %s = %s (%s)", s->name, name, from);
            break;
        }
        }
    }
}

void hp_config_free(hp_config *config)
{
    for (int i = 0; i < SETTING_COUNT; i++) {
        if (settings[i].type == HP_SETTING_STRING) {
            char **slot = field(config, &settings[i]);
            free(*slot);
            *slot = NULL;
        }
    }
    free(config->config_file);
    config->config_file = NULL;
}
