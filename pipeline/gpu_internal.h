/* The inside of hp_gpu, shared by the files of pipeline/ only. */
#ifndef HP_GPU_INTERNAL_H
#define HP_GPU_INTERNAL_H

#include <stdatomic.h>

#include <pthread.h>

#include "pipeline/gpu.h"

struct hp_gpu {
    _Atomic uint32_t buffers_created; /* hp_gpu_buffers_created */
    /* hp_gpu_info's counts of pipelines, atomic because the OCIO stage makes pipelines while the daemon
     * serves (pipeline/ocio_stage.h): hp_gpu_info_copy reads them. */
    _Atomic uint32_t pipelines_created, pipelines_from_cache;
    VkInstance instance;
    uint32_t instance_api;
    VkDebugUtilsMessengerEXT messenger;
    bool has_debug_utils;
    PFN_vkSetDebugUtilsObjectNameEXT set_object_name;

    VkPhysicalDevice physical;
    VkPhysicalDeviceMemoryProperties memory_props;
    uint8_t pipeline_cache_uuid[VK_UUID_SIZE];
    bool has_creation_feedback;
    bool capture_statistics; /* VK_KHR_pipeline_executable_properties enabled */
    bool has_memory_budget;  /* VK_EXT_memory_budget enabled */
    bool has_pci_bus_info;   /* VK_EXT_pci_bus_info enabled */

    VkDevice device;
    uint32_t compute_family;
    VkQueue compute_queue;
    /* The EXR decoder's queues (hp_gpu_decode_submit_wait, pipeline/gpu.h): up to HP_GPU_DECODE_QUEUES_MAX queues of
     * another compute family where the device has one, else a second queue of the compute family, else
     * compute_queue. Each queue's submissions under its lock (one lock when the decode queue is the compute
     * queue); decode_runs counts the runs each has in flight. */
    VkQueue decode_queues[HP_GPU_DECODE_QUEUES_MAX];
    uint32_t decode_queue_count;
    uint32_t decode_family;
    pthread_mutex_t compute_lock, decode_locks[HP_GPU_DECODE_QUEUES_MAX];
    pthread_mutex_t decode_take_lock;
    uint32_t decode_runs[HP_GPU_DECODE_QUEUES_MAX];
    uint32_t transfer_family;
    VkQueue transfer_queue; /* VK_NULL_HANDLE when the device has no separate transfer family */

    char *cache_path;
    VkPipelineCache pipeline_cache;

    hp_gpu_info info;
};

/* The first memory type among type_bits with every flag of want and none of avoid; -1 if none. */
int hp_gpu_memory_type(const hp_gpu *gpu, uint32_t type_bits, VkMemoryPropertyFlags want,
                       VkMemoryPropertyFlags avoid);

#endif
