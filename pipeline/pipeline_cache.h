/* The pipeline cache file (pipeline/pipeline_cache.c says its layout and why it is checked): read and
 * checked against the device before the driver sees a byte, and written whole. The Vulkan core
 * (pipeline/gpu.c) keeps the VkPipelineCache and hands this file what it needs to know of the device. */
#ifndef HP_PIPELINE_CACHE_H
#define HP_PIPELINE_CACHE_H

#include <stddef.h>
#include <stdint.h>
#include <vulkan/vulkan.h>

#include "common/error.h"

/* What happened to the pipeline cache file at start-up; reported by /v1/gpu and checked by tests. */
typedef enum hp_cache_state {
    HP_CACHE_NONE = 0,     /* no path configured */
    HP_CACHE_ABSENT,       /* path configured, no file yet: pipelines compiled from scratch */
    HP_CACHE_LOADED,       /* file valid for this device and driver: handed to vkCreatePipelineCache */
    HP_CACHE_FOREIGN,      /* file made by another device or driver (vendor, device or UUID differ): ignored */
    HP_CACHE_CORRUPT,      /* truncated, bad magic or checksum mismatch: ignored */
} hp_cache_state;

const char *hp_cache_state_name(hp_cache_state state);

/* The device a cache belongs to: a file written by another is ignored. */
typedef struct hp_cache_identity {
    uint32_t vendor_id, device_id, driver_version;
    uint8_t uuid[VK_UUID_SIZE]; /* VkPhysicalDeviceProperties.pipelineCacheUUID */
} hp_cache_identity;

/* Creates *cache on device, with path's contents when they pass the checks (path NULL: none, an empty
 * cache). *state says what happened to the file, *bytes_loaded how much the driver was given. A file that is
 * missing, foreign or damaged is not an error: pipelines compile from scratch, with a log line saying why. */
hp_code hp_pipeline_cache_load(VkDevice device, const hp_cache_identity *id, const char *path,
                               VkPipelineCache *cache, hp_cache_state *state, size_t *bytes_loaded, hp_err *err);
/* Writes cache's data to path, whole or not at all. */
hp_code hp_pipeline_cache_save(VkDevice device, const hp_cache_identity *id, const char *path,
                               VkPipelineCache cache, hp_err *err);

#endif
