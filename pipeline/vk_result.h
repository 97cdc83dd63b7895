/* A VkResult in words, and as an hp_code: for every file of pipeline/ that calls Vulkan. */
#ifndef HP_VK_RESULT_H
#define HP_VK_RESULT_H

#include <vulkan/vulkan.h>

#include "common/error.h"

/* Maps a VkResult to a code: device lost and out-of-memory keep their meaning, the rest is HP_ERR_VULKAN. */
hp_code hp_vk_fail(hp_err *err, VkResult res, const char *what);
const char *hp_vk_result_name(VkResult res);

#endif
