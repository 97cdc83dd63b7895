/* A VkResult in words, and as an hp_code (pipeline/vk_result.h). */
#include "pipeline/vk_result.h"

const char *hp_vk_result_name(VkResult res)
{
    switch (res) {
#define R(x) case x: return #x;
    R(VK_SUCCESS) R(VK_NOT_READY) R(VK_TIMEOUT) R(VK_INCOMPLETE)
    R(VK_ERROR_OUT_OF_HOST_MEMORY) R(VK_ERROR_OUT_OF_DEVICE_MEMORY) R(VK_ERROR_INITIALIZATION_FAILED)
    R(VK_ERROR_DEVICE_LOST) R(VK_ERROR_MEMORY_MAP_FAILED) R(VK_ERROR_LAYER_NOT_PRESENT)
    R(VK_ERROR_EXTENSION_NOT_PRESENT) R(VK_ERROR_FEATURE_NOT_PRESENT) R(VK_ERROR_INCOMPATIBLE_DRIVER)
    R(VK_ERROR_TOO_MANY_OBJECTS) R(VK_ERROR_FORMAT_NOT_SUPPORTED) R(VK_ERROR_FRAGMENTED_POOL)
    R(VK_ERROR_OUT_OF_POOL_MEMORY) R(VK_ERROR_INVALID_EXTERNAL_HANDLE)
    R(VK_ERROR_INVALID_OPAQUE_CAPTURE_ADDRESS) R(VK_PIPELINE_COMPILE_REQUIRED)
#undef R
    default: return "VK_ERROR_UNKNOWN";
    }
}

hp_code hp_vk_fail(hp_err *err, VkResult res, const char *what)
{
    hp_code code = HP_ERR_VULKAN;
    if (res == VK_ERROR_DEVICE_LOST)
        code = HP_ERR_DEVICE_LOST;
    else if (res == VK_ERROR_OUT_OF_HOST_MEMORY || res == VK_ERROR_OUT_OF_DEVICE_MEMORY)
        code = HP_ERR_OUT_OF_MEMORY;
    return hp_fail(err, code, "%s failed: %s", what, hp_vk_result_name(res));
}
