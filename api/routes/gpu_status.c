/* GET /v1/gpu and GET /metrics: how the device and the queue are doing.
 *
 * Utilization, temperature and power come from NVML when libnvidia-ml is on the host. It is loaded at
 * run time with dlopen, so the daemon runs without it (the fields are then absent, never invented), and
 * its few entry points are declared here: NVML's header is not in Debian main. */
#include <dlfcn.h>
#include <jansson.h>
#include <malloc.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

#include "api/frames/early_decode.h"
#include "api/http/live_stats.h"
#include "api/http/metrics.h"
#include "common/bigbuf.h"
#include "common/budget.h"
#include "api/routes/routes.h"

typedef int nvml_return;
typedef struct nvml_device_st *nvml_device;
typedef struct nvml_utilization {
    unsigned int gpu;    /* percent of time a kernel ran */
    unsigned int memory; /* percent of time memory was read or written */
} nvml_utilization;

static struct {
    bool loaded;
    nvml_return (*init)(void);
    nvml_return (*by_pci)(const char *pci_bus_id, nvml_device *device);
    nvml_return (*by_index)(unsigned int index, nvml_device *device);
    nvml_return (*count)(unsigned int *count);
    nvml_return (*utilization)(nvml_device device, nvml_utilization *u);
    nvml_return (*temperature)(nvml_device device, int sensor, unsigned int *celsius);
    nvml_return (*power)(nvml_device device, unsigned int *milliwatts);
    nvml_return (*by_uuid)(const char *uuid, nvml_device *device);     /* may be missing: then by PCI only */
    nvml_return (*index)(nvml_device device, unsigned int *index);      /* nvidia-smi's index; may be missing */
} nvml;
static pthread_once_t nvml_once = PTHREAD_ONCE_INIT;

static void nvml_load(void)
{
    void *lib = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!lib)
        return;
    nvml.init = (nvml_return(*)(void))dlsym(lib, "nvmlInit_v2");
    nvml.by_pci = (nvml_return(*)(const char *, nvml_device *))dlsym(lib, "nvmlDeviceGetHandleByPciBusId_v2");
    nvml.by_index = (nvml_return(*)(unsigned int, nvml_device *))dlsym(lib, "nvmlDeviceGetHandleByIndex_v2");
    nvml.count = (nvml_return(*)(unsigned int *))dlsym(lib, "nvmlDeviceGetCount_v2");
    nvml.utilization = (nvml_return(*)(nvml_device, nvml_utilization *))dlsym(lib, "nvmlDeviceGetUtilizationRates");
    nvml.temperature = (nvml_return(*)(nvml_device, int, unsigned int *))dlsym(lib, "nvmlDeviceGetTemperature");
    nvml.power = (nvml_return(*)(nvml_device, unsigned int *))dlsym(lib, "nvmlDeviceGetPowerUsage");
    nvml.by_uuid = (nvml_return(*)(const char *, nvml_device *))dlsym(lib, "nvmlDeviceGetHandleByUUID");
    nvml.index = (nvml_return(*)(nvml_device, unsigned int *))dlsym(lib, "nvmlDeviceGetIndex");
    nvml.loaded = nvml.init && nvml.by_index && nvml.count && nvml.utilization && nvml.temperature && nvml.power &&
                  nvml.init() == 0;
}

/* NVML's device for ours: by UUID (NVIDIA's Vulkan deviceUUID is NVML's), else by PCI address when Vulkan
 * told it, else the only NVIDIA device. */
static bool nvml_device_for(const hp_gpu_report *r, nvml_device *dev)
{
    pthread_once(&nvml_once, nvml_load);
    if (!nvml.loaded || r->info.vendor_id != 0x10de)
        return false;
    if (nvml.by_uuid && nvml.by_uuid(r->info.identity.uuid, dev) == 0)
        return true;
    if (r->memory.has_pci && nvml.by_pci) {
        char id[32];
        snprintf(id, sizeof(id), "%08x:%02x:%02x.%x", r->memory.pci_domain, r->memory.pci_bus, r->memory.pci_device,
                 r->memory.pci_function);
        return nvml.by_pci(id, dev) == 0;
    }
    unsigned int n = 0;
    return nvml.count(&n) == 0 && n == 1 && nvml.by_index(0, dev) == 0;
}

static bool report(hp_request *req, hp_gpu_report *r)
{
    const hp_http_backend *be = hp_http_get_backend(req->http);
    if (!be->report)
        return false;
    *r = (hp_gpu_report){0}; /* what the backend has not (no clock hold, no host pool) reads as none */
    be->report(be->ctx, r);
    return true;
}

/* VkPhysicalDeviceType as a word (what gpu_clock_hold's auto goes by: daemon/main.c). */
static const char *device_type_name(VkPhysicalDeviceType t)
{
    switch (t) {
    case VK_PHYSICAL_DEVICE_TYPE_DISCRETE_GPU: return "discrete";
    case VK_PHYSICAL_DEVICE_TYPE_INTEGRATED_GPU: return "integrated";
    case VK_PHYSICAL_DEVICE_TYPE_VIRTUAL_GPU: return "virtual";
    case VK_PHYSICAL_DEVICE_TYPE_CPU: return "cpu";
    default: return "other";
    }
}

void hp_route_gpu(hp_request *req, hp_reply *reply)
{
    hp_gpu_report r;
    if (!report(req, &r)) {
        hp_service_state state = hp_http_get_state(req->http);
        hp_reply_error(reply, 503, "not_ready", NULL, "%s: the device is not up", hp_service_state_name(state));
        /* As /readyz (api/routes/health.c): worth retrying soon while starting; a drain or a lost device is not. */
        if (state == HP_SERVICE_STARTING)
            hp_reply_header_add(reply, "Retry-After", "1");
        return;
    }
    json_t *heaps = json_array();
    for (uint32_t i = 0; i < r.memory.heap_count; i++) {
        json_t *h = json_pack("{s:I, s:b}", "size_bytes", (json_int_t)r.memory.heaps[i].size, "device_local",
                              r.memory.heaps[i].device_local);
        if (r.memory.has_budget) {
            json_object_set_new(h, "budget_bytes", json_integer((json_int_t)r.memory.heaps[i].budget));
            json_object_set_new(h, "usage_bytes", json_integer((json_int_t)r.memory.heaps[i].usage));
        }
        json_array_append_new(heaps, h);
    }
    char vulkan[32];
    snprintf(vulkan, sizeof(vulkan), "%u.%u.%u", VK_API_VERSION_MAJOR(r.info.api_version),
             VK_API_VERSION_MINOR(r.info.api_version), VK_API_VERSION_PATCH(r.info.api_version));
    json_t *body = json_pack(
        "{s:s, s:s, s:s, s:s, s:s, s:i, s:i, s:o, s:{s:i, s:i, s:i}, s:{s:s, s:I}, s:{s:i, s:I}}", "state",
        hp_service_state_name(hp_http_get_state(req->http)), "device", r.info.device_name, "vendor",
        r.info.vendor_id == 0x10de ? "NVIDIA" : r.info.vendor_id == 0x1002 ? "AMD" : r.info.vendor_id == 0x8086 ? "Intel"
                                                                            : r.info.vendor_id == 0x10005 ? "Mesa"
                                                                                                           : "other",
        "driver", r.info.driver_name, "driver_info", r.info.driver_info, "vendor_id", (int)r.info.vendor_id,
        "device_id", (int)r.info.device_id, "memory_heaps", heaps, "queue", "depth", (int)r.queue_depth, "capacity",
        (int)r.queue_capacity, "frames_in_flight", (int)r.in_flight, "pipeline_cache", "state",
        hp_cache_state_name(r.info.cache_state), "bytes_loaded", (json_int_t)r.info.cache_bytes_loaded, "frame_graph",
        "sizes_kept", (int)r.frame_sizes_kept, "device_bytes", (json_int_t)r.frame_graph_bytes);
    json_object_set_new(body, "vulkan", json_string(vulkan));
    /* Which of the host's GPUs (issue 37): what nvidia-smi -L and lspci -D say of it, and device= takes. */
    const hp_gpu_identity *id = &r.info.identity;
    json_object_set_new(body, "uuid", json_string(id->uuid));
    json_object_set_new(body, "pci_address", id->has_pci ? json_string(id->pci_address) : json_null());
    json_object_set_new(body, "vulkan_index", json_integer(r.info.vulkan_index));
    json_object_set_new(body, "device_type", json_string(device_type_name(r.info.device_type)));
    json_object_set_new(body, "host_memory", json_pack("{s:i, s:I, s:I}", "blocks_in_use", (int)r.host_blocks_out,
                                                       "kept_bytes", (json_int_t)r.host_kept_bytes,
                                                       "kept_device_bytes", (json_int_t)r.host_kept_device_bytes));
    json_object_set_new(body, "clock_hold", json_pack("{s:b, s:I, s:f}", "enabled", r.clock_hold, "holds",
                                                      (json_int_t)r.clock_holds, "gpu_seconds", r.clock_hold_seconds));
    json_object_set_new(body, "pipelines", json_pack("{s:i, s:i}", "created", (int)r.info.pipelines_created,
                                                     "from_cache", (int)r.info.pipelines_from_cache));
    /* The memory budget of requests in flight (max_inflight_mb, common/budget.h): what they hold now. */
    const hp_budget *budget = hp_http_budget(req->http);
    if (budget)
        json_object_set_new(body, "inflight_memory", json_pack("{s:I, s:I}", "used_bytes",
                                                               (json_int_t)hp_budget_used(budget), "limit_bytes",
                                                               (json_int_t)budget->limit));
    nvml_device dev;
    if (nvml_device_for(&r, &dev)) {
        nvml_utilization u;
        unsigned int celsius, mw;
        json_t *n = json_object();
        if (nvml.utilization(dev, &u) == 0) {
            json_object_set_new(n, "utilization_percent", json_integer(u.gpu));
            json_object_set_new(n, "memory_utilization_percent", json_integer(u.memory));
        }
        if (nvml.temperature(dev, 0 /* NVML_TEMPERATURE_GPU */, &celsius) == 0)
            json_object_set_new(n, "temperature_celsius", json_integer(celsius));
        if (nvml.power(dev, &mw) == 0)
            json_object_set_new(n, "power_watts", json_real(mw / 1000.0));
        unsigned int index;
        if (nvml.index && nvml.index(dev, &index) == 0)
            json_object_set_new(n, "index", json_integer(index));
        json_object_set_new(body, "nvml", n);
    }
    hp_reply_json(reply, 200, body);
}

/* A label value in Prometheus's text format: backslash, double quote and newline escaped. */
static void label_value(char *out, size_t size, const char *in)
{
    size_t o = 0;
    for (; *in && o + 3 < size; in++) {
        if (*in == '\\' || *in == '"' || *in == '\n')
            out[o++] = '\\';
        out[o++] = *in == '\n' ? 'n' : *in;
    }
    out[o] = '\0';
}

/* hdrpost_gpu_info: which GPU this daemon holds, as labels (the info-metric convention: a constant 1 to join
 * the other series on), so that a dashboard of a host's replicas names each one's GPU. */
static int gpu_info_metric(char **buf, size_t *len, size_t *cap, const hp_gpu_report *r)
{
    char name[2 * VK_MAX_PHYSICAL_DEVICE_NAME_SIZE], nvml_index[32] = "";
    label_value(name, sizeof(name), r->info.device_name);
    nvml_device dev;
    unsigned int index;
    if (nvml_device_for(r, &dev) && nvml.index && nvml.index(dev, &index) == 0)
        snprintf(nvml_index, sizeof(nvml_index), ",nvml_index=\"%u\"", index);
    return hp_metrics_printf(buf, len, cap,
                             "# HELP hdrpost_gpu_info The GPU this daemon holds: its name, UUID (as nvidia-smi -L "
                             "prints it), PCI address and indices; always 1.\n# TYPE hdrpost_gpu_info gauge\n"
                             "hdrpost_gpu_info{device=\"%s\",uuid=\"%s\",pci_address=\"%s\",vulkan_index=\"%u\"%s} 1\n",
                             name, r->info.identity.uuid, r->info.identity.pci_address, r->info.vulkan_index,
                             nvml_index);
}

/* The EXR ZIP decoder's batches on the GPU (exr_zip_gpu_batches, exr_zip_wide_chunks): which inflate took
 * them and how many frames they held, to say why exr_zip_decoder gpu serves the frames per second it does. */
static int zip_batch_metrics(char **buf, size_t *len, size_t *cap, const hp_exr_zip_batch_stats *s)
{
    static const char *const inflates[2] = {"serial", "wide"};
    int rc = hp_metrics_printf(buf, len, cap,
                               "# HELP hdrpost_exr_zip_gpu_batches_total Batches of EXR ZIP frames inflated together "
                               "on the GPU, by the inflate that took them: wide (a chunk a workgroup) or serial (a "
                               "chunk an invocation).\n# TYPE hdrpost_exr_zip_gpu_batches_total counter\n");
    for (int i = 0; i < 2; i++)
        rc |= hp_metrics_printf(buf, len, cap, "hdrpost_exr_zip_gpu_batches_total{inflate=\"%s\"} %llu\n", inflates[i],
                                (unsigned long long)s->batches[i]);
    rc |= hp_metrics_printf(buf, len, cap,
                            "# HELP hdrpost_exr_zip_gpu_batch_gpu_seconds_total Those batches' time on the GPU, by "
                            "inflate, each from its first timestamp to its last: batches side by side "
                            "(exr_zip_gpu_batches) each count their whole span, so the sum may pass the wall "
                            "time.\n# TYPE hdrpost_exr_zip_gpu_batch_gpu_seconds_total counter\n");
    for (int i = 0; i < 2; i++)
        rc |= hp_metrics_printf(buf, len, cap, "hdrpost_exr_zip_gpu_batch_gpu_seconds_total{inflate=\"%s\"} %.6f\n",
                                inflates[i], s->gpu_seconds[i]);
    rc |= hp_metrics_printf(buf, len, cap,
                            "# HELP hdrpost_exr_zip_gpu_batches_beside_total Batches that began while another was on "
                            "the GPU (exr_zip_gpu_batches above 1).\n# TYPE hdrpost_exr_zip_gpu_batches_beside_total "
                            "counter\nhdrpost_exr_zip_gpu_batches_beside_total %llu\n"
                            "# HELP hdrpost_exr_zip_gpu_batch_frames Frames a batch held.\n"
                            "# TYPE hdrpost_exr_zip_gpu_batch_frames histogram\n", (unsigned long long)s->beside);
    uint64_t count = 0;
    for (int b = 0; b < HP_EXR_ZIP_BATCH_BOUNDS; b++) {
        count += s->sizes[b];
        rc |= hp_metrics_printf(buf, len, cap, "hdrpost_exr_zip_gpu_batch_frames_bucket{le=\"%u\"} %llu\n",
                                hp_exr_zip_batch_bounds[b], (unsigned long long)count);
    }
    count += s->sizes[HP_EXR_ZIP_BATCH_BOUNDS];
    return rc | hp_metrics_printf(buf, len, cap,
                                  "hdrpost_exr_zip_gpu_batch_frames_bucket{le=\"+Inf\"} %llu\n"
                                  "hdrpost_exr_zip_gpu_batch_frames_sum %llu\n"
                                  "hdrpost_exr_zip_gpu_batch_frames_count %llu\n",
                                  (unsigned long long)count, (unsigned long long)(s->frames[0] + s->frames[1]),
                                  (unsigned long long)count);
}

/* Whether /readyz says 200, for an alert on a node out of rotation (Prometheus's own "up" says only that the
 * scrape answered), and the state behind it. */
static int state_metrics(char **buf, size_t *len, size_t *cap, hp_request *req)
{
    hp_service_state state = hp_http_get_state(req->http);
    bool ready = state == HP_SERVICE_READY && hp_http_accepting(req->http);
    static const hp_service_state states[] = {HP_SERVICE_STARTING, HP_SERVICE_READY, HP_SERVICE_DRAINING,
                                              HP_SERVICE_DEVICE_LOST};
    int rc = hp_metrics_printf(buf, len, cap,
                               "# HELP hdrpost_ready Whether /readyz answers 200 (1) or 503 (0) now.\n"
                               "# TYPE hdrpost_ready gauge\nhdrpost_ready %d\n"
                               "# HELP hdrpost_state The daemon's state: 1 for the one it is in.\n"
                               "# TYPE hdrpost_state gauge\n", ready ? 1 : 0);
    for (size_t i = 0; rc == 0 && i < sizeof states / sizeof states[0]; i++)
        rc |= hp_metrics_printf(buf, len, cap, "hdrpost_state{state=\"%s\"} %d\n", hp_service_state_name(states[i]),
                                states[i] == state ? 1 : 0);
    return rc;
}

/* The queue, the frames on the GPU and the memory kept for frames. */
static int queue_metrics(char **buf, size_t *len, size_t *cap, const hp_gpu_report *r)
{
    return hp_metrics_printf(buf, len, cap,
                             "# HELP hdrpost_queue_depth Frames waiting for the GPU.\n# TYPE hdrpost_queue_depth gauge\n"
                             "hdrpost_queue_depth %u\n"
                             "# HELP hdrpost_queue_capacity Frames the queue holds before answering 429.\n"
                             "# TYPE hdrpost_queue_capacity gauge\nhdrpost_queue_capacity %u\n"
                             "# HELP hdrpost_frames_in_flight Frames on the GPU now.\n"
                             "# TYPE hdrpost_frames_in_flight gauge\nhdrpost_frames_in_flight %u\n"
                             "# HELP hdrpost_frame_graph_device_bytes Device memory kept for frame sizes seen.\n"
                             "# TYPE hdrpost_frame_graph_device_bytes gauge\nhdrpost_frame_graph_device_bytes %llu\n"
                             "# HELP hdrpost_host_memory_blocks Mapped host memory blocks holding a request's frame "
                             "or image now.\n# TYPE hdrpost_host_memory_blocks gauge\nhdrpost_host_memory_blocks %u\n"
                             "# HELP hdrpost_host_memory_kept_bytes Mapped host memory kept warm for the next "
                             "frames.\n# TYPE hdrpost_host_memory_kept_bytes gauge\nhdrpost_host_memory_kept_bytes %llu\n",
                             r->queue_depth, r->queue_capacity, r->in_flight, (unsigned long long)r->frame_graph_bytes,
                             r->host_blocks_out, (unsigned long long)r->host_kept_bytes);
}

/* The host pool's blocks: made while a request waited, made ahead, freed, and the time making them. */
static int host_pool_metrics(char **buf, size_t *len, size_t *cap, const hp_gpu_report *r)
{
    return hp_metrics_printf(buf, len, cap,
                             "# HELP hdrpost_host_memory_blocks_made_total Mapped host and device blocks made "
                             "because none kept fitted, while a request waited (pinning takes milliseconds): "
                             "steady after warm-up where the pool keeps up.\n"
                             "# TYPE hdrpost_host_memory_blocks_made_total counter\n"
                             "hdrpost_host_memory_blocks_made_total %llu\n"
                             "# HELP hdrpost_host_memory_blocks_made_ahead_total Blocks the pool's own thread made "
                             "ahead of the requests, spares for a load that grows (no request waited on them).\n"
                             "# TYPE hdrpost_host_memory_blocks_made_ahead_total counter\n"
                             "hdrpost_host_memory_blocks_made_ahead_total %llu\n"
                             "# HELP hdrpost_host_memory_make_ahead_seconds_total Time the pool's own thread spent "
                             "making blocks ahead.\n# TYPE hdrpost_host_memory_make_ahead_seconds_total counter\n"
                             "hdrpost_host_memory_make_ahead_seconds_total %.6f\n"
                             "# HELP hdrpost_host_memory_blocks_freed_total Blocks freed, the kept ones past their "
                             "limit or a load's peak passed, or a spare that found no room once made.\n"
                             "# TYPE hdrpost_host_memory_blocks_freed_total counter\n"
                             "hdrpost_host_memory_blocks_freed_total %llu\n"
                             "# HELP hdrpost_host_memory_make_seconds_total Time spent making blocks, on the "
                             "threads that asked for them.\n# TYPE hdrpost_host_memory_make_seconds_total counter\n"
                             "hdrpost_host_memory_make_seconds_total %.6f\n"
                             "# HELP hdrpost_host_memory_kept_device_bytes Device memory the host pool keeps warm "
                             "for the next frames' decoded images (EXR ZIP on the GPU).\n"
                             "# TYPE hdrpost_host_memory_kept_device_bytes gauge\n"
                             "hdrpost_host_memory_kept_device_bytes %llu\n",
                             (unsigned long long)r->host_blocks_made, (unsigned long long)r->host_blocks_made_ahead,
                             r->host_make_ahead_seconds, (unsigned long long)r->host_blocks_freed, r->host_make_seconds,
                             (unsigned long long)r->host_kept_device_bytes);
}

/* The GPU thread's time by state, and the clock holds. */
static int gpu_thread_metrics(char **buf, size_t *len, size_t *cap, const hp_gpu_report *r)
{
    return hp_metrics_printf(buf, len, cap,
                             "# HELP hdrpost_gpu_thread_seconds_total The GPU thread's time by state: the one "
                             "serial step of a frame, so where it is never idle its other states say what bounds "
                             "the frames per second.\n# TYPE hdrpost_gpu_thread_seconds_total counter\n"
                             "hdrpost_gpu_thread_seconds_total{state=\"idle\"} %.6f\n"
                             "hdrpost_gpu_thread_seconds_total{state=\"decode_wait\"} %.6f\n"
                             "hdrpost_gpu_thread_seconds_total{state=\"gpu_wait\"} %.6f\n"
                             "hdrpost_gpu_thread_seconds_total{state=\"encoder_wait\"} %.6f\n"
                             "hdrpost_gpu_thread_seconds_total{state=\"work\"} %.6f\n"
                             "# HELP hdrpost_gpu_clock_holds_total Small dispatches that kept the GPU busy while "
                             "frames were on their way, so that its clocks stayed up (gpu_clock_hold).\n"
                             "# TYPE hdrpost_gpu_clock_holds_total counter\nhdrpost_gpu_clock_holds_total %llu\n"
                             "# HELP hdrpost_gpu_clock_hold_seconds_total The GPU time of those holds.\n"
                             "# TYPE hdrpost_gpu_clock_hold_seconds_total counter\n"
                             "hdrpost_gpu_clock_hold_seconds_total %.6f\n",
                             r->gpu_thread_idle_s, r->gpu_thread_decode_wait_s, r->gpu_thread_gpu_wait_s,
                             r->gpu_thread_encoder_wait_s, r->gpu_thread_work_s, (unsigned long long)r->clock_holds,
                             r->clock_hold_seconds);
}

/* The device's memory heaps: budget and this process's usage (VK_EXT_memory_budget). */
static int heap_metrics(char **buf, size_t *len, size_t *cap, const hp_gpu_report *r)
{
    int rc = hp_metrics_printf(buf, len, cap,
                               "# HELP hdrpost_gpu_memory_bytes GPU memory heaps: budget and this process's usage.\n"
                               "# TYPE hdrpost_gpu_memory_bytes gauge\n");
    for (uint32_t i = 0; rc == 0 && i < r->memory.heap_count; i++)
        rc |= hp_metrics_printf(buf, len, cap,
                                "hdrpost_gpu_memory_bytes{heap=\"%u\",kind=\"budget\"} %llu\n"
                                "hdrpost_gpu_memory_bytes{heap=\"%u\",kind=\"usage\"} %llu\n",
                                i, (unsigned long long)r->memory.heaps[i].budget, i,
                                (unsigned long long)r->memory.heaps[i].usage);
    return rc;
}

/* The API's connections, and the process's heap. */
static int process_metrics(char **buf, size_t *len, size_t *cap, hp_request *req)
{
    unsigned open = 0;
    uint64_t evicted = 0;
    hp_http_connections(req->http, &open, &evicted);
    struct mallinfo2 mi = mallinfo2();
    return hp_metrics_printf(buf, len, cap,
                             "# HELP hdrpost_connections_open Connections open on the API's address.\n"
                             "# TYPE hdrpost_connections_open gauge\nhdrpost_connections_open %u\n"
                             "# HELP hdrpost_accepting Whether the API's address takes connections (0: some have "
                             "waited a second with none taken; /readyz says 503).\n"
                             "# TYPE hdrpost_accepting gauge\nhdrpost_accepting %d\n"
                             "# HELP hdrpost_malloc_bytes The C heap (glibc's malloc, every arena): in_use by the "
                             "process, free (held by the allocator for reuse, given back to the system after a "
                             "second idle).\n# TYPE hdrpost_malloc_bytes gauge\n"
                             "hdrpost_malloc_bytes{state=\"in_use\"} %zu\nhdrpost_malloc_bytes{state=\"free\"} %zu\n"
                             "# HELP hdrpost_warm_buffers_bytes Large buffers (frames, depth, images) kept for the "
                             "next requests instead of being freed (common/bigbuf.h), part of the heap in use.\n"
                             "# TYPE hdrpost_warm_buffers_bytes gauge\nhdrpost_warm_buffers_bytes %zu\n",
                             open, hp_http_accepting(req->http) ? 1 : 0, mi.uordblks + mi.hblkhd, mi.fordblks,
                             hp_bigbuf_kept());
}

/* The memory budget of requests in flight (max_inflight_mb). */
static int budget_metrics(char **buf, size_t *len, size_t *cap, const hp_budget *budget)
{
    return hp_metrics_printf(buf, len, cap,
                             "# HELP hdrpost_inflight_bytes Memory held by requests in flight (bodies, frames, "
                             "images), admitted against max_inflight_mb.\n# TYPE hdrpost_inflight_bytes gauge\n"
                             "hdrpost_inflight_bytes %llu\n"
                             "# HELP hdrpost_inflight_limit_bytes max_inflight_mb in bytes.\n"
                             "# TYPE hdrpost_inflight_limit_bytes gauge\nhdrpost_inflight_limit_bytes %llu\n"
                             "# HELP hdrpost_inflight_arriving_bytes Of those, what frames decoded as their "
                             "bodies arrive hold from the share of bodies still arriving (a quarter of "
                             "max_inflight_mb); 0 with none arriving.\n"
                             "# TYPE hdrpost_inflight_arriving_bytes gauge\nhdrpost_inflight_arriving_bytes %llu\n",
                             (unsigned long long)hp_budget_used(budget), (unsigned long long)budget->limit,
                             (unsigned long long)hp_early_share_in_use());
}

void hp_route_metrics(hp_request *req, hp_reply *reply)
{
    char *buf = NULL;
    size_t len = 0, cap = 0;
    int rc = hp_metrics_format(&buf, &len, &cap);
    if (rc == 0)
        rc |= state_metrics(&buf, &len, &cap, req);
    hp_gpu_report r;
    if (rc == 0 && report(req, &r)) {
        rc |= gpu_info_metric(&buf, &len, &cap, &r);
        rc |= queue_metrics(&buf, &len, &cap, &r);
        rc |= host_pool_metrics(&buf, &len, &cap, &r);
        rc |= gpu_thread_metrics(&buf, &len, &cap, &r);
        if (r.has_zip_batches)
            rc |= zip_batch_metrics(&buf, &len, &cap, &r.zip_batches);
        if (r.memory.has_budget)
            rc |= heap_metrics(&buf, &len, &cap, &r);
    }
    if (rc == 0)
        rc |= process_metrics(&buf, &len, &cap, req);
    const hp_budget *budget = hp_http_budget(req->http);
    if (rc == 0 && budget)
        rc |= budget_metrics(&buf, &len, &cap, budget);
    if (rc != 0) {
        free(buf);
        hp_reply_error(reply, 503, "out_of_memory", NULL, "out of memory formatting the metrics");
        return;
    }
    hp_reply_bytes(reply, 200, "text/plain; version=0.0.4; charset=utf-8", (uint8_t *)buf, len);
}

/* Why the daemon is not ready, for a person (the /readyz messages, shorter). */
static const char *not_ready_reason(hp_service_state state)
{
    switch (state) {
    case HP_SERVICE_STARTING: return "starting: choosing the GPU and warming pipelines";
    case HP_SERVICE_DRAINING: return "draining: shutting down, finishing requests in flight";
    case HP_SERVICE_DEVICE_LOST: return "device lost: the GPU stopped responding; restart the process";
    case HP_SERVICE_READY: return NULL;
    }
    return "unknown state";
}

/* The device-local heaps' budget and this process's use of them (VK_EXT_memory_budget), or null. */
static json_t *gpu_memory_json(const hp_gpu_report *r)
{
    if (!r->memory.has_budget)
        return json_null();
    uint64_t used = 0, budget = 0;
    for (uint32_t i = 0; i < r->memory.heap_count; i++)
        if (r->memory.heaps[i].device_local) {
            used += r->memory.heaps[i].usage;
            budget += r->memory.heaps[i].budget;
        }
    return json_pack("{s:I, s:I}", "used_bytes", (json_int_t)used, "budget_bytes", (json_int_t)budget);
}

void hp_route_stats(hp_request *req, hp_reply *reply)
{
    hp_service_state state = hp_http_get_state(req->http);
    const char *reason = not_ready_reason(state);
    json_t *body = json_pack("{s:s, s:f, s:s, s:b, s:s?}", "version", hp_http_version(req->http), "uptime_s",
                             hp_http_uptime_s(req->http), "state", hp_service_state_name(state), "ready",
                             state == HP_SERVICE_READY, "reason", reason);
    hp_gpu_report r;
    int rc = body ? 0 : -1;
    if (rc == 0 && report(req, &r)) {
        rc |= json_object_set_new(body, "device", json_pack("{s:s, s:s, s:s}", "name", r.info.device_name, "driver",
                                                            r.info.driver_name, "driver_info", r.info.driver_info));
        rc |= json_object_set_new(body, "queue", json_pack("{s:i, s:i, s:i}", "depth", (int)r.queue_depth,
                                                           "capacity", (int)r.queue_capacity, "in_flight",
                                                           (int)r.in_flight));
        rc |= json_object_set_new(body, "gpu_memory", gpu_memory_json(&r));
    } else if (rc == 0) {
        rc |= json_object_set_new(body, "device", json_null());
        rc |= json_object_set_new(body, "queue", json_null());
        rc |= json_object_set_new(body, "gpu_memory", json_null());
    }
    const hp_budget *budget = hp_http_budget(req->http);
    if (rc == 0)
        rc |= json_object_set_new(body, "inflight_memory",
                                  budget ? json_pack("{s:I, s:I}", "used_bytes", (json_int_t)hp_budget_used(budget),
                                                     "limit_bytes", (json_int_t)budget->limit)
                                         : json_null());
    if (rc == 0)
        rc |= hp_live_stats_json(body);
    if (rc != 0) {
        json_decref(body);
        hp_reply_error(reply, 503, "out_of_memory", NULL, "out of memory describing the last minute");
        return;
    }
    hp_reply_json(reply, 200, body);
}
