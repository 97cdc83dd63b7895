/* The Vulkan core: instance, device, queues, pipeline cache, buffers and compute pipelines.
 *
 * One hp_gpu lives for the whole life of the daemon. Every pipeline is created at start-up through it,
 * with the pipeline cache, before the daemon reports ready; per-frame values travel in push constants and
 * the workgroup shape in specialization constants chosen from the device's properties (the VkFFT habit:
 * pipelines are never rebuilt because a parameter changed).
 *
 * Buffers are reached from shaders through buffer device addresses (Vulkan 1.2 core) passed in push
 * constants, not through descriptor sets: a 16384x16384 RGBA fp32 frame is 4 GiB, over
 * maxStorageBufferRange on every driver we know (128 MiB on lavapipe, 4 GiB - 1 on NVIDIA), and an
 * address has no such range. It also leaves stages with no descriptor layouts to keep in sync. */
#ifndef HP_GPU_H
#define HP_GPU_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <vulkan/vulkan.h>

#include "common/error.h"
#include "pipeline/gpu_identity.h"
#include "pipeline/pipeline_cache.h"
#include "pipeline/vk_result.h"

typedef struct hp_gpu_config {
    /* Which device: NULL or "" chooses by type (discrete, then integrated, then virtual, then CPU);
     * a decimal number picks that index of vkEnumeratePhysicalDevices; anything else is a
     * case-insensitive substring of the device name. Default NULL. */
    const char *device;
    /* Pipeline cache file, loaded at start-up and saved by hp_gpu_save_pipeline_cache(); NULL: none. */
    const char *pipeline_cache_path;
    /* Enable VK_LAYER_KHRONOS_validation and route its messages to the log (0 off, 1 on), default 0.
     * Tests turn it on and fail on any warning or error it reports (hp_gpu_validation_messages()). */
    bool validation;
    /* Ask the driver for each pipeline's compile statistics (registers, shared memory...) through
     * VK_KHR_pipeline_executable_properties, where supported (0 off, 1 on), default 0. Benchmarks print
     * them with hp_compute_statistics(). */
    bool capture_statistics;
    /* Enable VK_KHR_shader_clock (subgroup and device clocks) where supported, default 0: the reduction
     * benchmark's timeline of its workgroups (bench_reduce --timeline). hp_gpu_info.has_shader_clock
     * says whether it is on. */
    bool shader_clock;
} hp_gpu_config;

#define HP_GPU_CONFIG_DEFAULTS                                                                           \
    {.device = NULL, .pipeline_cache_path = NULL, .validation = false, .capture_statistics = false,      \
     .shader_clock = false}


typedef struct hp_gpu_info {
    char device_name[VK_MAX_PHYSICAL_DEVICE_NAME_SIZE];
    hp_gpu_identity identity;        /* its UUID and PCI address: which of a host's GPUs (pipeline/gpu_identity.h) */
    uint32_t vulkan_index;           /* its index among the instance's devices (device=N) */
    VkPhysicalDeviceType device_type;
    uint32_t vendor_id, device_id;
    uint32_t api_version, driver_version;
    char driver_name[VK_MAX_DRIVER_NAME_SIZE];
    char driver_info[VK_MAX_DRIVER_INFO_SIZE];
    uint32_t subgroup_size;
    uint32_t max_workgroup_invocations;
    uint32_t max_workgroup_size_x;   /* maxComputeWorkGroupSize[0] */
    uint32_t max_shared_memory;
    double timestamp_period_ns;      /* nanoseconds per timestamp tick */
    uint64_t max_allocation_size;
    uint32_t sm_count;               /* streaming multiprocessors (VK_NV_shader_sm_builtins); 0: unknown */
    uint32_t warps_per_sm;           /* resident warps per SM, likewise; 0: unknown */
    bool has_transfer_queue;         /* a queue family with transfer but not compute/graphics */
    bool has_shader_clock;           /* VK_KHR_shader_clock enabled (hp_gpu_config.shader_clock) */
    bool has_8bit_storage;           /* storageBuffer8BitAccess and shaderInt8 enabled: the wide inflate */
    hp_cache_state cache_state;
    size_t cache_bytes_loaded;       /* bytes of cache data handed to the driver at start-up */
    /* Filled by hp_gpu_info_copy() only (the OCIO stage makes pipelines while the daemon serves): */
    uint32_t pipelines_created;
    uint32_t pipelines_from_cache;   /* pipelines the driver reported as cache hits (creation feedback) */
} hp_gpu_info;

typedef struct hp_gpu hp_gpu;

/* Memory heaps, with the driver's budget and usage where VK_EXT_memory_budget is there; the PCI address
 * where VK_EXT_pci_bus_info is (to match NVML's device). Safe from any thread. */
#define HP_GPU_MAX_HEAPS VK_MAX_MEMORY_HEAPS
typedef struct hp_gpu_memory {
    uint32_t heap_count;
    struct {
        uint64_t size;
        uint64_t budget; /* 0: unknown */
        uint64_t usage;  /* by this process; 0: unknown */
        bool device_local;
    } heaps[HP_GPU_MAX_HEAPS];
    bool has_budget;
    bool has_pci;
    uint32_t pci_domain, pci_bus, pci_device, pci_function;
} hp_gpu_memory;

void hp_gpu_memory_report(hp_gpu *gpu, hp_gpu_memory *out);

hp_code hp_gpu_create(const hp_gpu_config *config, hp_gpu **out, hp_err *err);
/* Waits for the device to go idle and destroys everything. Does not save the pipeline cache. */
void hp_gpu_destroy(hp_gpu **gpu);

/* Every Vulkan device the loader lists, a line each, tab-separated after a header line that starts with #:
 * its index, UUID, PCI address ("-" without one), type, "usable" or "lacks: ..." and name. What device=
 * takes (pipeline/gpu_identity.h); deploy/replicas.py reads it to write a unit per GPU. */
hp_code hp_gpu_list_devices(FILE *out, hp_err *err);

const hp_gpu_info *hp_gpu_get_info(const hp_gpu *gpu);
/* A copy with the pipeline counts as they are now; safe from any thread. */
void hp_gpu_info_copy(const hp_gpu *gpu, hp_gpu_info *out);
/* Every hp_buffer_create since start-up (tests check reuse with it). Not in hp_gpu_info: buffers are created
 * from the HTTP threads too (the host pool), while /v1/gpu copies the info (ThreadSanitizer saw that race). */
uint32_t hp_gpu_buffers_created(const hp_gpu *gpu);
/* Writes the cache atomically (temporary file, then rename) with a header naming the device, driver and a
 * checksum of the data. */
hp_code hp_gpu_save_pipeline_cache(hp_gpu *gpu, hp_err *err);
/* Warnings and errors the validation layer reported in this process, by any hp_gpu, counting those
 * reported while it was destroyed (leaked objects are reported by vkDestroyDevice): call it after
 * hp_gpu_destroy() for the final word. */
uint32_t hp_gpu_validation_messages(void);

VkDevice hp_gpu_device(const hp_gpu *gpu);
VkQueue hp_gpu_compute_queue(const hp_gpu *gpu);
uint32_t hp_gpu_compute_family(const hp_gpu *gpu);

/* The queues the daemon submits to from more than one thread: the frame graph's (the GPU thread) and the
 * EXR decoder's (decoding threads, pipeline/exr_zip_gpu.h): queues of another compute family where the
 * device has one (NVIDIA's compute-only family: its work runs beside the frame graph's), else a second
 * queue of the compute family (the frame graph's barriers then never wait for a decoding frame's passes,
 * though the two queues may take turns), else the compute queue itself. With another family every buffer
 * is shared by both (VK_SHARING_MODE_CONCURRENT). Each submission holds its queue's lock (Vulkan's
 * external synchronisation); a single-threaded user (the tests) may submit to hp_gpu_compute_queue
 * directly. */
VkResult hp_gpu_submit(hp_gpu *gpu, const VkSubmitInfo *submit, VkFence fence);
VkResult hp_gpu_queue_wait_idle(hp_gpu *gpu);
/* With another family the decoder has up to HP_GPU_DECODE_QUEUES_MAX of its queues: submissions on one queue
 * run one after the other, and on NVIDIA those on different queues at once (docs/BENCHMARKS.md). A run is
 * submitted on the queue with the fewest runs in flight and waited for (vkWaitForFences' result: VK_TIMEOUT
 * after timeout_ns). */
#define HP_GPU_DECODE_QUEUES_MAX 8u
VkResult hp_gpu_decode_submit_wait(hp_gpu *gpu, const VkSubmitInfo *submit, VkFence fence, uint64_t timeout_ns);
uint32_t hp_gpu_decode_queue_count(const hp_gpu *gpu);
bool hp_gpu_has_decode_queue(const hp_gpu *gpu);
uint32_t hp_gpu_decode_family(const hp_gpu *gpu);
/* The decode queue is of another family than the frame graph's: its passes run beside the graph's. */
bool hp_gpu_decode_runs_beside(const hp_gpu *gpu);

/* --- Buffers ------------------------------------------------------------------------------------- */

typedef enum hp_mem_kind {
    HP_MEM_DEVICE,   /* device-local; shaders reach it by address */
    HP_MEM_UPLOAD,   /* host-visible, write-combined where possible: staging for uploads */
    HP_MEM_READBACK, /* host-visible, cached where possible: results copied back */
    HP_MEM_READBACK_SHADER, /* as HP_MEM_READBACK, and shaders write it by address: a result whose size is
                             * known only on the GPU (PNG's deflate stream) crosses the bus once, only its
                             * bytes */
} hp_mem_kind;

typedef struct hp_buffer {
    VkBuffer buffer;
    VkDeviceMemory memory;
    VkDeviceSize size;
    VkDeviceAddress address; /* 0 unless HP_MEM_DEVICE or HP_MEM_READBACK_SHADER */
    void *mapped;            /* NULL unless host-visible */
    bool coherent;           /* host-visible memory is HOST_COHERENT: no flush/invalidate needed */
} hp_buffer;

hp_code hp_buffer_create(hp_gpu *gpu, VkDeviceSize size, hp_mem_kind kind, const char *name, hp_buffer *out,
                         hp_err *err);
void hp_buffer_destroy(hp_gpu *gpu, hp_buffer *buf);
/* Makes host writes visible to the device (no-op on coherent memory). */
void hp_buffer_flush(hp_gpu *gpu, const hp_buffer *buf);
/* Makes device writes visible to the host (no-op on coherent memory). */
void hp_buffer_invalidate(hp_gpu *gpu, const hp_buffer *buf);

/* --- Compute pipelines --------------------------------------------------------------------------- */

typedef struct hp_compute_desc {
    const char *name;            /* for logs and debug names */
    const uint32_t *spirv;       /* SPIR-V words, embedded at build time */
    size_t spirv_size;           /* bytes */
    uint32_t push_constant_size; /* bytes, at most 128 (the minimum every device supports) */
    const uint32_t *spec_values; /* specialization constants 0..spec_count-1, as 32-bit words */
    uint32_t spec_count;
    /* Set 0's layout, or VK_NULL_HANDLE (every stage but one): buffers travel by address. The OCIO stage's
     * LUTs are sampled images, which have no address (pipeline/ocio_program.h). */
    VkDescriptorSetLayout set_layout;
} hp_compute_desc;

typedef struct hp_compute {
    VkPipelineLayout layout;
    VkPipeline pipeline;
    uint32_t push_constant_size;
} hp_compute;

hp_code hp_compute_create(hp_gpu *gpu, const hp_compute_desc *desc, hp_compute *out, hp_err *err);
/* The driver's statistics for the pipeline as "name=value, ..." (empty unless capture_statistics was
 * asked for and the driver supports it). */
void hp_compute_statistics(hp_gpu *gpu, const hp_compute *c, char *buf, size_t len);
void hp_compute_destroy(hp_gpu *gpu, hp_compute *c);

/* Names a Vulkan object for validation messages and captures (no-op without debug utils). */
void hp_gpu_set_name(hp_gpu *gpu, VkObjectType type, uint64_t handle, const char *name);


#endif
