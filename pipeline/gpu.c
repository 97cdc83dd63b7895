/* The Vulkan core: instance, validation messenger, device choice, queues, buffers, compute pipelines.
 * The pipeline cache file lives in pipeline_cache.c, which knows nothing of hp_gpu: it is given the device. */
#include "pipeline/gpu.h"

#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "common/log.h"
#include "pipeline/gpu_internal.h"

/* Vulkan 1.2 core gives buffer device addresses, timeline semaphores and subgroup properties. */
#define HP_MIN_VULKAN_API VK_API_VERSION_1_2

/* --- Validation messages ------------------------------------------------------------------------- */

/* Process-wide, so that messages reported during vkDestroyDevice/vkDestroyInstance still count. */
static _Atomic uint32_t g_validation_messages;

static VKAPI_ATTR VkBool32 VKAPI_CALL on_debug_message(VkDebugUtilsMessageSeverityFlagBitsEXT severity,
                                                       VkDebugUtilsMessageTypeFlagsEXT types,
                                                       const VkDebugUtilsMessengerCallbackDataEXT *data,
                                                       void *user)
{
    (void)types;
    (void)user;
    const char *id = data->pMessageIdName ? data->pMessageIdName : "";
    if (severity >= VK_DEBUG_UTILS_MESSAGE_SEVERITY_WARNING_BIT_EXT) {
        atomic_fetch_add(&g_validation_messages, 1);
        hp_log(severity >= VK_DEBUG_UTILS_MESSAGE_SEVERITY_ERROR_BIT_EXT ? HP_LOG_ERROR : HP_LOG_WARN,
               "vulkan validation: [%s] %s", id, data->pMessage);
    } else {
        hp_debug("vulkan: [%s] %s", id, data->pMessage);
    }
    return VK_FALSE; /* never abort the call: the test decides from the count */
}

uint32_t hp_gpu_validation_messages(void) { return atomic_load(&g_validation_messages); }

/* --- Instance ------------------------------------------------------------------------------------ */

static bool has_layer(const char *name)
{
    uint32_t n = 0;
    vkEnumerateInstanceLayerProperties(&n, NULL);
    VkLayerProperties *props = calloc(n ? n : 1, sizeof(*props));
    if (!props)
        return false;
    vkEnumerateInstanceLayerProperties(&n, props);
    bool found = false;
    for (uint32_t i = 0; i < n && !found; i++)
        found = strcmp(props[i].layerName, name) == 0;
    free(props);
    return found;
}

static bool has_instance_extension(const char *name)
{
    uint32_t n = 0;
    vkEnumerateInstanceExtensionProperties(NULL, &n, NULL);
    VkExtensionProperties *props = calloc(n ? n : 1, sizeof(*props));
    if (!props)
        return false;
    vkEnumerateInstanceExtensionProperties(NULL, &n, props);
    bool found = false;
    for (uint32_t i = 0; i < n && !found; i++)
        found = strcmp(props[i].extensionName, name) == 0;
    free(props);
    return found;
}

static hp_code create_instance(hp_gpu *gpu, const hp_gpu_config *cfg, hp_err *err)
{
    uint32_t loader_version = VK_API_VERSION_1_0;
    PFN_vkEnumerateInstanceVersion enum_version =
        (PFN_vkEnumerateInstanceVersion)vkGetInstanceProcAddr(NULL, "vkEnumerateInstanceVersion");
    if (enum_version)
        enum_version(&loader_version);
    if (loader_version < HP_MIN_VULKAN_API)
        return hp_fail(err, HP_ERR_MISSING_FEATURE,
                       "the Vulkan loader supports API %u.%u; hdrpostd needs 1.2 or newer",
                       VK_API_VERSION_MAJOR(loader_version), VK_API_VERSION_MINOR(loader_version));

    const char *layers[1];
    uint32_t layer_count = 0;
    const char *exts[2];
    uint32_t ext_count = 0;

    if (cfg->validation) {
        if (!has_layer("VK_LAYER_KHRONOS_validation"))
            return hp_fail(err, HP_ERR_MISSING_FEATURE,
                           "validation was requested but VK_LAYER_KHRONOS_validation is not installed "
                           "(Debian package vulkan-validationlayers)");
        layers[layer_count++] = "VK_LAYER_KHRONOS_validation";
    }
    gpu->has_debug_utils = has_instance_extension(VK_EXT_DEBUG_UTILS_EXTENSION_NAME);
    if (gpu->has_debug_utils)
        exts[ext_count++] = VK_EXT_DEBUG_UTILS_EXTENSION_NAME;
    else if (cfg->validation)
        return hp_fail(err, HP_ERR_MISSING_FEATURE,
                       "validation was requested but VK_EXT_debug_utils is missing: its messages could "
                       "not be counted");

    VkApplicationInfo app = {
        .sType = VK_STRUCTURE_TYPE_APPLICATION_INFO,
        .pApplicationName = "hdrpostd",
        .applicationVersion = VK_MAKE_API_VERSION(0, 0, 1, 0),
        .pEngineName = "hdrpostd",
        .engineVersion = VK_MAKE_API_VERSION(0, 0, 1, 0),
        .apiVersion = loader_version >= VK_API_VERSION_1_3 ? VK_API_VERSION_1_3 : VK_API_VERSION_1_2,
    };
    /* The messenger is chained at creation too, so vkCreateInstance/vkDestroyInstance are covered. */
    VkDebugUtilsMessengerCreateInfoEXT messenger_info = {
        .sType = VK_STRUCTURE_TYPE_DEBUG_UTILS_MESSENGER_CREATE_INFO_EXT,
        .messageSeverity = VK_DEBUG_UTILS_MESSAGE_SEVERITY_VERBOSE_BIT_EXT |
                           VK_DEBUG_UTILS_MESSAGE_SEVERITY_INFO_BIT_EXT |
                           VK_DEBUG_UTILS_MESSAGE_SEVERITY_WARNING_BIT_EXT |
                           VK_DEBUG_UTILS_MESSAGE_SEVERITY_ERROR_BIT_EXT,
        .messageType = VK_DEBUG_UTILS_MESSAGE_TYPE_GENERAL_BIT_EXT |
                       VK_DEBUG_UTILS_MESSAGE_TYPE_VALIDATION_BIT_EXT |
                       VK_DEBUG_UTILS_MESSAGE_TYPE_PERFORMANCE_BIT_EXT,
        .pfnUserCallback = on_debug_message,
        .pUserData = gpu,
    };
    VkInstanceCreateInfo info = {
        .sType = VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO,
        .pNext = cfg->validation ? &messenger_info : NULL,
        .pApplicationInfo = &app,
        .enabledLayerCount = layer_count,
        .ppEnabledLayerNames = layers,
        .enabledExtensionCount = ext_count,
        .ppEnabledExtensionNames = exts,
    };
    VkResult res = vkCreateInstance(&info, NULL, &gpu->instance);
    if (res != VK_SUCCESS)
        return hp_vk_fail(err, res, "vkCreateInstance");
    gpu->instance_api = app.apiVersion;

    if (gpu->has_debug_utils) {
        gpu->set_object_name = (PFN_vkSetDebugUtilsObjectNameEXT)vkGetInstanceProcAddr(
            gpu->instance, "vkSetDebugUtilsObjectNameEXT");
    }
    if (cfg->validation) {
        PFN_vkCreateDebugUtilsMessengerEXT create_messenger = (PFN_vkCreateDebugUtilsMessengerEXT)
            vkGetInstanceProcAddr(gpu->instance, "vkCreateDebugUtilsMessengerEXT");
        if (!create_messenger)
            return hp_fail(err, HP_ERR_MISSING_FEATURE, "vkCreateDebugUtilsMessengerEXT is missing");
        res = create_messenger(gpu->instance, &messenger_info, NULL, &gpu->messenger);
        if (res != VK_SUCCESS)
            return hp_vk_fail(err, res, "vkCreateDebugUtilsMessengerEXT");
        hp_info("vulkan: validation layer on");
    }
    return HP_OK;
}

/* --- Device choice ------------------------------------------------------------------------------- */

static const char *device_type_name(VkPhysicalDeviceType type)
{
    switch (type) {
    case VK_PHYSICAL_DEVICE_TYPE_DISCRETE_GPU: return "discrete GPU";
    case VK_PHYSICAL_DEVICE_TYPE_INTEGRATED_GPU: return "integrated GPU";
    case VK_PHYSICAL_DEVICE_TYPE_VIRTUAL_GPU: return "virtual GPU";
    case VK_PHYSICAL_DEVICE_TYPE_CPU: return "CPU";
    default: return "other";
    }
}

/* Discrete first, then integrated, virtual, CPU (lavapipe) last: the order a render service wants. */
static int device_type_rank(VkPhysicalDeviceType type)
{
    switch (type) {
    case VK_PHYSICAL_DEVICE_TYPE_DISCRETE_GPU: return 4;
    case VK_PHYSICAL_DEVICE_TYPE_INTEGRATED_GPU: return 3;
    case VK_PHYSICAL_DEVICE_TYPE_VIRTUAL_GPU: return 2;
    case VK_PHYSICAL_DEVICE_TYPE_CPU: return 1;
    default: return 0;
    }
}

static bool has_device_extension(VkPhysicalDevice pd, const char *name);

/* Returns NULL when the device has everything hdrpostd needs, else the first thing it lacks. */
static const char *missing_requirement(VkPhysicalDevice pd, char *buf, size_t len)
{
    VkPhysicalDeviceProperties props;
    vkGetPhysicalDeviceProperties(pd, &props);
    if (props.apiVersion < HP_MIN_VULKAN_API) {
        snprintf(buf, len, "Vulkan %u.%u (1.2 needed)", VK_API_VERSION_MAJOR(props.apiVersion),
                 VK_API_VERSION_MINOR(props.apiVersion));
        return buf;
    }
    VkPhysicalDeviceShaderAtomicFloatFeaturesEXT fa = {
        .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_ATOMIC_FLOAT_FEATURES_EXT};
    bool has_atomic_float = has_device_extension(pd, VK_EXT_SHADER_ATOMIC_FLOAT_EXTENSION_NAME);
    VkPhysicalDeviceVulkan12Features f12 = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_2_FEATURES,
                                            .pNext = has_atomic_float ? &fa : NULL};
    VkPhysicalDeviceFeatures2 f = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2, .pNext = &f12};
    vkGetPhysicalDeviceFeatures2(pd, &f);
    if (!f12.bufferDeviceAddress)
        return "the bufferDeviceAddress feature";
    if (!f12.timelineSemaphore)
        return "the timelineSemaphore feature";
    /* Depth of field: 64-bit integer summed-area tables (shaders/dof_sat.comp) and bokeh sprites added
     * into the frame with float atomics (shaders/bokeh_splat.comp). */
    if (!f.features.shaderInt64)
        return "the shaderInt64 feature";
    if (!fa.shaderBufferFloat32AtomicAdd)
        return "VK_EXT_shader_atomic_float's shaderBufferFloat32AtomicAdd";
    if (!f12.shaderSubgroupExtendedTypes) /* the SAT's 64-bit subgroup sums */
        return "the shaderSubgroupExtendedTypes feature";

    VkPhysicalDeviceSubgroupProperties sub = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SUBGROUP_PROPERTIES};
    VkPhysicalDeviceProperties2 p2 = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2, .pNext = &sub};
    vkGetPhysicalDeviceProperties2(pd, &p2);
    if (!(sub.supportedStages & VK_SHADER_STAGE_COMPUTE_BIT))
        return "subgroup operations in compute shaders";
    VkSubgroupFeatureFlags need = VK_SUBGROUP_FEATURE_BASIC_BIT | VK_SUBGROUP_FEATURE_ARITHMETIC_BIT;
    if ((sub.supportedOperations & need) != need)
        return "subgroup arithmetic (VK_SUBGROUP_FEATURE_ARITHMETIC_BIT)";
    if (props.limits.maxComputeWorkGroupInvocations < 256 || props.limits.maxComputeWorkGroupSize[0] < 256)
        return "256 invocations per workgroup";
    if (props.limits.maxComputeSharedMemorySize < 16384)
        return "16 KiB of shared memory per workgroup";
    return NULL;
}

/* The device's queue families, read once for the choices below (NULL when out of memory). */
static VkQueueFamilyProperties *queue_families(VkPhysicalDevice pd, uint32_t *n)
{
    *n = 0;
    vkGetPhysicalDeviceQueueFamilyProperties(pd, n, NULL);
    VkQueueFamilyProperties *fams = calloc(*n ? *n : 1, sizeof(*fams));
    if (fams)
        vkGetPhysicalDeviceQueueFamilyProperties(pd, n, fams);
    return fams;
}

static int find_compute_family(const VkQueueFamilyProperties *fams, uint32_t n, bool *timestamps)
{
    int best = -1;
    /* Prefer a compute family with timestamps; among those, one without graphics (async compute) is
     * not better for us: we own the whole device, so take the first. */
    for (uint32_t i = 0; i < n && best < 0; i++)
        if ((fams[i].queueFlags & VK_QUEUE_COMPUTE_BIT) && fams[i].timestampValidBits > 0)
            best = (int)i;
    *timestamps = best >= 0;
    for (uint32_t i = 0; i < n && best < 0; i++)
        if (fams[i].queueFlags & VK_QUEUE_COMPUTE_BIT)
            best = (int)i;
    return best;
}

static int find_transfer_family(const VkQueueFamilyProperties *fams, uint32_t n)
{
    for (uint32_t i = 0; i < n; i++) {
        VkQueueFlags f = fams[i].queueFlags;
        if ((f & VK_QUEUE_TRANSFER_BIT) && !(f & (VK_QUEUE_COMPUTE_BIT | VK_QUEUE_GRAPHICS_BIT)))
            return (int)i;
    }
    return -1;
}

/* The decode queues' family (hp_gpu_decode_submit_wait): another compute family with timestamps where the device has
 * one, else -1 (then a second queue of the compute family, else the compute queue itself). On the H200
 * (docs/BENCHMARKS.md) a second queue of the same family ran the frames' inflate passes, tens of
 * milliseconds each, in turn with the frame graph's (16 clients: 25 frames/s, the GPU thread waiting for
 * its frames 88% of the time); the compute-only family's queue runs them beside it (82-89 frames/s). */
static int find_decode_family(const VkQueueFamilyProperties *fams, uint32_t n, uint32_t compute)
{
    for (uint32_t i = 0; i < n; i++)
        if (i != compute && (fams[i].queueFlags & VK_QUEUE_COMPUTE_BIT) && fams[i].timestampValidBits > 0)
            return (int)i;
    return -1;
}

static bool has_device_extension(VkPhysicalDevice pd, const char *name)
{
    uint32_t n = 0;
    vkEnumerateDeviceExtensionProperties(pd, NULL, &n, NULL);
    VkExtensionProperties *props = calloc(n ? n : 1, sizeof(*props));
    if (!props)
        return false;
    vkEnumerateDeviceExtensionProperties(pd, NULL, &n, props);
    bool found = false;
    for (uint32_t i = 0; i < n && !found; i++)
        found = strcmp(props[i].extensionName, name) == 0;
    free(props);
    return found;
}

static bool is_decimal(const char *s)
{
    if (!*s)
        return false;
    for (; *s; s++)
        if (*s < '0' || *s > '9')
            return false;
    return true;
}

/* The instance's devices (*pds malloc'd; none when *n is 0). */
static hp_code physical_devices(hp_gpu *gpu, VkPhysicalDevice **pds, uint32_t *n, hp_err *err)
{
    *pds = NULL;
    *n = 0;
    VkResult res = vkEnumeratePhysicalDevices(gpu->instance, n, NULL);
    if (res != VK_SUCCESS)
        return hp_vk_fail(err, res, "vkEnumeratePhysicalDevices");
    if (*n == 0)
        return HP_OK;
    if (!(*pds = calloc(*n, sizeof(**pds))))
        return hp_fail(err, HP_ERR_OUT_OF_MEMORY, "out of host memory");
    res = vkEnumeratePhysicalDevices(gpu->instance, n, *pds);
    if (res != VK_SUCCESS && res != VK_INCOMPLETE) {
        free(*pds);
        *pds = NULL;
        return hp_vk_fail(err, res, "vkEnumeratePhysicalDevices");
    }
    return HP_OK;
}

/* What the log and --list-devices say of a device: its properties, identity, and what it lacks (NULL: none). */
typedef struct device_view {
    VkPhysicalDeviceProperties props;
    hp_gpu_identity id;
    const char *missing;
    char buf[96];
} device_view;

static void view_device(VkPhysicalDevice pd, device_view *v)
{
    vkGetPhysicalDeviceProperties(pd, &v->props);
    hp_gpu_identity_of(pd, &v->id);
    v->missing = missing_requirement(pd, v->buf, sizeof(v->buf));
}

static hp_code choose_device(hp_gpu *gpu, const hp_gpu_config *cfg, hp_err *err)
{
    uint32_t n = 0;
    VkPhysicalDevice *pds = NULL;
    hp_code rc = physical_devices(gpu, &pds, &n, err);
    if (rc != HP_OK)
        return rc;
    if (n == 0)
        return hp_fail(err, HP_ERR_NO_DEVICE,
                       "no Vulkan device found (install a driver, or Mesa's lavapipe: mesa-vulkan-drivers)");

    const char *want = cfg->device && *cfg->device ? cfg->device : NULL;
    int chosen = -1, best_rank = -1;
    char reason[160] = "";
    for (uint32_t i = 0; i < n; i++) {
        device_view v;
        view_device(pds[i], &v);
        const VkPhysicalDeviceProperties props = v.props;
        const char *missing = v.missing;
        hp_info("vulkan: device %u: %s (%s, Vulkan %u.%u), %s%s%s%s%s", i, props.deviceName,
                device_type_name(props.deviceType), VK_API_VERSION_MAJOR(props.apiVersion),
                VK_API_VERSION_MINOR(props.apiVersion), v.id.uuid, v.id.has_pci ? ", PCI " : "", v.id.pci_address,
                missing ? ": unusable, lacks " : "", missing ? missing : "");
        bool selected;
        if (want && is_decimal(want))
            selected = strtoul(want, NULL, 10) == i;
        else if (want && hp_gpu_selector_of(want) != HP_GPU_BY_OTHER)
            selected = hp_gpu_identity_matches(&v.id, want);
        else if (want)
            selected = strcasestr(props.deviceName, want) != NULL;
        else
            selected = true;
        if (!selected)
            continue;
        if (missing) {
            if (want) {
                free(pds);
                return hp_fail(err, HP_ERR_MISSING_FEATURE, "device %u (%s), selected by device=\"%s\", lacks %s",
                               i, props.deviceName, want, missing);
            }
            continue;
        }
        int rank = device_type_rank(props.deviceType);
        if (rank > best_rank) {
            best_rank = rank;
            chosen = (int)i;
            if (want)
                snprintf(reason, sizeof(reason), "selected by device=\"%s\"", want);
            else
                snprintf(reason, sizeof(reason), "the first %s among the usable devices",
                         device_type_name(props.deviceType));
        }
        if (want)
            break; /* the first match wins */
    }
    if (chosen < 0) {
        free(pds);
        if (want)
            return hp_fail(err, HP_ERR_NO_DEVICE,
                           "no Vulkan device matches device=\"%s\" (a device index, a UUID as nvidia-smi -L prints "
                           "it, a PCI address, or a name substring; the devices found are logged above)", want);
        return hp_fail(err, HP_ERR_NO_DEVICE, "none of the %u Vulkan devices has what hdrpostd needs "
                       "(see the log above for what each lacks)", n);
    }
    gpu->physical = pds[chosen];
    free(pds);

    VkPhysicalDeviceProperties props;
    vkGetPhysicalDeviceProperties(gpu->physical, &props);
    gpu->info.vulkan_index = (uint32_t)chosen;
    hp_gpu_identity_of(gpu->physical, &gpu->info.identity);
    hp_info("vulkan: using device %d: %s, %s%s%s, %s", chosen, props.deviceName, gpu->info.identity.uuid,
            gpu->info.identity.has_pci ? ", PCI " : "", gpu->info.identity.pci_address, reason);
    return HP_OK;
}

/* --- Logical device ------------------------------------------------------------------------------ */

/* Which queues the device is made with: the compute family's (two queues where no other family computes, the
 * second for decoding), a transfer family's, and another compute family's for decoding (up to
 * HP_GPU_DECODE_QUEUES_MAX). */
typedef struct queue_plan {
    int compute, transfer, other; /* families; -1 none */
    uint32_t compute_queues, decode_queues;
} queue_plan;

static hp_code plan_queues(VkPhysicalDevice physical, queue_plan *q, hp_err *err)
{
    uint32_t nfam;
    VkQueueFamilyProperties *fams = queue_families(physical, &nfam);
    if (!fams)
        return hp_fail(err, HP_ERR_OUT_OF_MEMORY, "out of host memory");
    bool timestamps = false;
    q->compute = find_compute_family(fams, nfam, &timestamps);
    q->transfer = find_transfer_family(fams, nfam);
    q->other = q->compute >= 0 ? find_decode_family(fams, nfam, (uint32_t)q->compute) : -1;
    q->compute_queues = q->compute >= 0 && q->other < 0 && fams[q->compute].queueCount >= 2 ? 2 : 1;
    q->decode_queues = q->other >= 0 ? fams[q->other].queueCount : 0;
    if (q->decode_queues > HP_GPU_DECODE_QUEUES_MAX)
        q->decode_queues = HP_GPU_DECODE_QUEUES_MAX;
    free(fams);
    if (q->compute < 0)
        return hp_fail(err, HP_ERR_MISSING_FEATURE, "the device has no compute queue");
    if (!timestamps)
        return hp_fail(err, HP_ERR_MISSING_FEATURE,
                       "the device's compute queue has no timestamps (timestampValidBits = 0): "
                       "hdrpostd reports every stage's GPU time from them");
    return HP_OK;
}

/* What the device is made with beyond its queues: the features (a pNext chain through this struct's own
 * members, so it lives as long as the struct) and the extensions. */
typedef struct device_features {
    VkPhysicalDeviceFeatures2 features;
    VkPhysicalDeviceVulkan12Features f12;
    VkPhysicalDevicePipelineExecutablePropertiesFeaturesKHR exec_props;
    VkPhysicalDeviceShaderAtomicFloatFeaturesEXT atomic_float;
    VkPhysicalDeviceShaderClockFeaturesKHR clock;
    const char *exts[8]; /* the one required and every optional one choose_features adds fit */
    uint32_t ext_count;
} device_features;

/* The required features (checked by missing_requirement()) and the optional ones the device has, noted in
 * gpu: 8-bit storage, memory budgets, the PCI address, and, when cfg asks, pipeline statistics and shader
 * clocks. */
static void choose_features(hp_gpu *gpu, const hp_gpu_config *cfg, device_features *d)
{
    /* Optional: pipeline creation feedback (core in 1.3) tells whether the cache served a pipeline. */
    VkPhysicalDeviceProperties props;
    vkGetPhysicalDeviceProperties(gpu->physical, &props);
    gpu->has_creation_feedback = props.apiVersion >= VK_API_VERSION_1_3 && gpu->instance_api >= VK_API_VERSION_1_3;

    /* Optional: bytes in storage buffers, for the wide inflate alone (pipeline/exr_zip_gpu.h). */
    VkPhysicalDeviceVulkan12Features have12 = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_2_FEATURES};
    VkPhysicalDeviceFeatures2 have2 = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2, .pNext = &have12};
    vkGetPhysicalDeviceFeatures2(gpu->physical, &have2);
    gpu->info.has_8bit_storage = have12.storageBuffer8BitAccess && have12.shaderInt8;
    *d = (device_features){
        .features = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2, .features = {.shaderInt64 = VK_TRUE}},
        .f12 = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_2_FEATURES,
                .bufferDeviceAddress = VK_TRUE,
                .timelineSemaphore = VK_TRUE,
                .shaderSubgroupExtendedTypes = VK_TRUE,
                .storageBuffer8BitAccess = gpu->info.has_8bit_storage,
                .shaderInt8 = gpu->info.has_8bit_storage},
        .exec_props = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PIPELINE_EXECUTABLE_PROPERTIES_FEATURES_KHR,
                       .pipelineExecutableInfo = VK_TRUE},
        .atomic_float = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_ATOMIC_FLOAT_FEATURES_EXT,
                         .shaderBufferFloat32AtomicAdd = VK_TRUE},
        .clock = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_CLOCK_FEATURES_KHR,
                  .shaderSubgroupClock = VK_TRUE,
                  .shaderDeviceClock = VK_TRUE},
    };
    d->features.pNext = &d->f12;
    d->f12.pNext = &d->atomic_float;
    d->exts[d->ext_count++] = VK_EXT_SHADER_ATOMIC_FLOAT_EXTENSION_NAME;
    /* For /v1/gpu: memory budgets, and the PCI address that finds the same device in NVML. */
    if (has_device_extension(gpu->physical, VK_EXT_MEMORY_BUDGET_EXTENSION_NAME)) {
        d->exts[d->ext_count++] = VK_EXT_MEMORY_BUDGET_EXTENSION_NAME;
        gpu->has_memory_budget = true;
    }
    if (has_device_extension(gpu->physical, VK_EXT_PCI_BUS_INFO_EXTENSION_NAME)) {
        d->exts[d->ext_count++] = VK_EXT_PCI_BUS_INFO_EXTENSION_NAME;
        gpu->has_pci_bus_info = true;
    }
    if (cfg->capture_statistics) {
        if (has_device_extension(gpu->physical, VK_KHR_PIPELINE_EXECUTABLE_PROPERTIES_EXTENSION_NAME)) {
            d->exts[d->ext_count++] = VK_KHR_PIPELINE_EXECUTABLE_PROPERTIES_EXTENSION_NAME;
            d->atomic_float.pNext = &d->exec_props;
            gpu->capture_statistics = true;
        } else {
            hp_warn("vulkan: pipeline statistics asked for, but the driver lacks %s",
                    VK_KHR_PIPELINE_EXECUTABLE_PROPERTIES_EXTENSION_NAME);
        }
    }
    if (cfg->shader_clock) {
        VkPhysicalDeviceShaderClockFeaturesKHR have = {
            .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_CLOCK_FEATURES_KHR};
        VkPhysicalDeviceFeatures2 f2 = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2, .pNext = &have};
        if (has_device_extension(gpu->physical, VK_KHR_SHADER_CLOCK_EXTENSION_NAME))
            vkGetPhysicalDeviceFeatures2(gpu->physical, &f2);
        if (have.shaderSubgroupClock && have.shaderDeviceClock) {
            d->exts[d->ext_count++] = VK_KHR_SHADER_CLOCK_EXTENSION_NAME;
            d->clock.pNext = d->atomic_float.pNext;
            d->atomic_float.pNext = &d->clock;
            gpu->info.has_shader_clock = true;
        } else {
            hp_warn("vulkan: shader clocks asked for, but the driver lacks %s with both clocks",
                    VK_KHR_SHADER_CLOCK_EXTENSION_NAME);
        }
    }
}

/* The queues of the device just made, by q: decoding takes the compute queue itself where the device has no
 * other. */
static void get_queues(hp_gpu *gpu, const queue_plan *q)
{
    vkGetDeviceQueue(gpu->device, gpu->compute_family, 0, &gpu->compute_queue);
    gpu->decode_queues[0] = gpu->compute_queue;
    gpu->decode_queue_count = 1;
    gpu->decode_family = gpu->compute_family;
    if (q->compute_queues == 2)
        vkGetDeviceQueue(gpu->device, gpu->compute_family, 1, &gpu->decode_queues[0]);
    if (q->other >= 0) {
        gpu->decode_family = (uint32_t)q->other;
        gpu->decode_queue_count = q->decode_queues;
        for (uint32_t i = 0; i < q->decode_queues; i++)
            vkGetDeviceQueue(gpu->device, gpu->decode_family, i, &gpu->decode_queues[i]);
    }
    if (q->transfer >= 0) {
        gpu->transfer_family = (uint32_t)q->transfer;
        vkGetDeviceQueue(gpu->device, gpu->transfer_family, 0, &gpu->transfer_queue);
    }
}

/* The device's properties in hp_gpu_info (name, driver, limits, SMs), its pipeline cache UUID and its memory
 * types; the fields that say what was enabled are set where it is (choose_features, create_device). */
static void describe_device(hp_gpu *gpu)
{
    hp_gpu_info *gi = &gpu->info;
    VkPhysicalDeviceDriverProperties drv = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_DRIVER_PROPERTIES};
    VkPhysicalDeviceSubgroupProperties sub = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SUBGROUP_PROPERTIES,
                                              .pNext = &drv};
    /* The SM count sizes grids to what is resident at once (pipeline/reduce.c). Only NVIDIA tells. */
    VkPhysicalDeviceShaderSMBuiltinsPropertiesNV sm = {
        .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_SM_BUILTINS_PROPERTIES_NV, .pNext = &sub};
    bool has_sm = has_device_extension(gpu->physical, VK_NV_SHADER_SM_BUILTINS_EXTENSION_NAME);
    VkPhysicalDeviceMaintenance3Properties m3 = {
        .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_MAINTENANCE_3_PROPERTIES, .pNext = has_sm ? (void *)&sm : (void *)&sub};
    VkPhysicalDeviceProperties2 p2 = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2, .pNext = &m3};
    vkGetPhysicalDeviceProperties2(gpu->physical, &p2);
    const VkPhysicalDeviceProperties *props = &p2.properties;
    memcpy(gi->device_name, props->deviceName, sizeof(gi->device_name));
    gi->device_type = props->deviceType;
    gi->vendor_id = props->vendorID;
    gi->device_id = props->deviceID;
    gi->api_version = props->apiVersion;
    gi->driver_version = props->driverVersion;
    memcpy(gi->driver_name, drv.driverName, sizeof(gi->driver_name));
    memcpy(gi->driver_info, drv.driverInfo, sizeof(gi->driver_info));
    gi->subgroup_size = sub.subgroupSize;
    gi->max_workgroup_invocations = props->limits.maxComputeWorkGroupInvocations;
    gi->max_workgroup_size_x = props->limits.maxComputeWorkGroupSize[0];
    gi->max_shared_memory = props->limits.maxComputeSharedMemorySize;
    gi->timestamp_period_ns = props->limits.timestampPeriod;
    gi->max_allocation_size = m3.maxMemoryAllocationSize;
    gi->sm_count = has_sm ? sm.shaderSMCount : 0;
    gi->warps_per_sm = has_sm ? sm.shaderWarpsPerSM : 0;
    memcpy(gpu->pipeline_cache_uuid, props->pipelineCacheUUID, VK_UUID_SIZE);
    vkGetPhysicalDeviceMemoryProperties(gpu->physical, &gpu->memory_props);
}

static hp_code create_device(hp_gpu *gpu, const hp_gpu_config *cfg, hp_err *err)
{
    queue_plan q = {0};
    hp_code rc = plan_queues(gpu->physical, &q, err);
    if (rc != HP_OK)
        return rc;
    gpu->compute_family = (uint32_t)q.compute;
    const float priority[HP_GPU_DECODE_QUEUES_MAX] = {1.0f, 1.0f, 1.0f, 1.0f, 1.0f, 1.0f, 1.0f, 1.0f};
    VkDeviceQueueCreateInfo queues[3] = {
        {.sType = VK_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO, .queueFamilyIndex = gpu->compute_family,
         .queueCount = q.compute_queues, .pQueuePriorities = priority},
        {.sType = VK_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO, .queueFamilyIndex = (uint32_t)q.transfer,
         .queueCount = 1, .pQueuePriorities = priority},
        {.sType = VK_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO, .queueFamilyIndex = (uint32_t)q.other,
         .queueCount = q.decode_queues, .pQueuePriorities = priority},
    };
    uint32_t queue_infos = q.transfer >= 0 ? 2 : 1;
    if (q.other >= 0) {
        if (q.transfer < 0)
            queues[1] = queues[2];
        queue_infos++;
    }
    device_features d;
    choose_features(gpu, cfg, &d);
    VkDeviceCreateInfo info = {
        .sType = VK_STRUCTURE_TYPE_DEVICE_CREATE_INFO,
        .pNext = &d.features,
        .queueCreateInfoCount = queue_infos,
        .pQueueCreateInfos = queues,
        .enabledExtensionCount = d.ext_count,
        .ppEnabledExtensionNames = d.exts,
    };
    VkResult res = vkCreateDevice(gpu->physical, &info, NULL, &gpu->device);
    if (res != VK_SUCCESS)
        return hp_vk_fail(err, res, "vkCreateDevice");
    get_queues(gpu, &q);
    describe_device(gpu);
    hp_gpu_info *gi = &gpu->info;
    gi->has_transfer_queue = q.transfer >= 0;
    hp_info("vulkan: %s, driver %s (%s), API %u.%u.%u, subgroup %u, %s transfer queue", gi->device_name,
            gi->driver_name, gi->driver_info, VK_API_VERSION_MAJOR(gi->api_version),
            VK_API_VERSION_MINOR(gi->api_version), VK_API_VERSION_PATCH(gi->api_version), gi->subgroup_size,
            gi->has_transfer_queue ? "with a" : "no separate");
    return HP_OK;
}

/* --- Pipeline cache (pipeline/pipeline_cache.h: the file) ------------------------------------------------- */

static hp_cache_identity cache_identity(const hp_gpu *gpu)
{
    hp_cache_identity id = {.vendor_id = gpu->info.vendor_id, .device_id = gpu->info.device_id,
                            .driver_version = gpu->info.driver_version};
    memcpy(id.uuid, gpu->pipeline_cache_uuid, VK_UUID_SIZE);
    return id;
}

static hp_code load_pipeline_cache(hp_gpu *gpu, hp_err *err)
{
    hp_cache_identity id = cache_identity(gpu);
    return hp_pipeline_cache_load(gpu->device, &id, gpu->cache_path, &gpu->pipeline_cache, &gpu->info.cache_state,
                                  &gpu->info.cache_bytes_loaded, err);
}

hp_code hp_gpu_save_pipeline_cache(hp_gpu *gpu, hp_err *err)
{
    hp_cache_identity id = cache_identity(gpu);
    return hp_pipeline_cache_save(gpu->device, &id, gpu->cache_path, gpu->pipeline_cache, err);
}

/* An empty hp_gpu whose locks are made: hp_gpu_destroy takes it at any stage. */
static hp_gpu *gpu_alloc(void)
{
    hp_gpu *gpu = calloc(1, sizeof(*gpu));
    if (!gpu)
        return NULL;
    pthread_mutex_init(&gpu->compute_lock, NULL);
    for (uint32_t q = 0; q < HP_GPU_DECODE_QUEUES_MAX; q++)
        pthread_mutex_init(&gpu->decode_locks[q], NULL);
    pthread_mutex_init(&gpu->decode_take_lock, NULL);
    return gpu;
}

hp_code hp_gpu_list_devices(FILE *out, hp_err *err)
{
    hp_gpu_config cfg = HP_GPU_CONFIG_DEFAULTS;
    cfg.validation = false;
    hp_gpu *gpu = gpu_alloc();
    if (!gpu)
        return hp_fail(err, HP_ERR_OUT_OF_MEMORY, "out of host memory");
    hp_code rc = create_instance(gpu, &cfg, err);
    uint32_t n = 0;
    VkPhysicalDevice *pds = NULL;
    if (rc == HP_OK)
        rc = physical_devices(gpu, &pds, &n, err);
    if (rc == HP_OK && n == 0) /* as the daemon's start would say it */
        rc = hp_fail(err, HP_ERR_NO_DEVICE,
                     "no Vulkan device found (install a driver, or Mesa's lavapipe: mesa-vulkan-drivers)");
    if (rc == HP_OK)
        fprintf(out, "# index\tuuid\tpci_address\ttype\tusable\tname\n");
    for (uint32_t i = 0; rc == HP_OK && i < n; i++) {
        device_view v;
        view_device(pds[i], &v);
        fprintf(out, "%u\t%s\t%s\t%s\t%s%s\t%s\n", i, v.id.uuid, v.id.has_pci ? v.id.pci_address : "-",
                device_type_name(v.props.deviceType), v.missing ? "lacks: " : "usable", v.missing ? v.missing : "",
                v.props.deviceName);
    }
    free(pds);
    hp_gpu_destroy(&gpu);
    return rc;
}

hp_code hp_gpu_create(const hp_gpu_config *config, hp_gpu **out, hp_err *err)
{
    hp_gpu_config defaults = HP_GPU_CONFIG_DEFAULTS;
    const hp_gpu_config *cfg = config ? config : &defaults;
    *out = NULL;
    hp_gpu *gpu = gpu_alloc();
    if (!gpu)
        return hp_fail(err, HP_ERR_OUT_OF_MEMORY, "out of host memory");
    if (cfg->pipeline_cache_path && *cfg->pipeline_cache_path) {
        gpu->cache_path = strdup(cfg->pipeline_cache_path);
        if (!gpu->cache_path) {
            free(gpu);
            return hp_fail(err, HP_ERR_OUT_OF_MEMORY, "out of host memory");
        }
    }

    hp_code rc = create_instance(gpu, cfg, err);
    if (rc == HP_OK)
        rc = choose_device(gpu, cfg, err);
    if (rc == HP_OK)
        rc = create_device(gpu, cfg, err);
    if (rc == HP_OK)
        rc = load_pipeline_cache(gpu, err);
    if (rc != HP_OK) {
        hp_gpu_destroy(&gpu);
        return rc;
    }
    *out = gpu;
    return HP_OK;
}

void hp_gpu_destroy(hp_gpu **pgpu)
{
    hp_gpu *gpu = *pgpu;
    if (!gpu)
        return;
    if (gpu->device) {
        vkDeviceWaitIdle(gpu->device);
        if (gpu->pipeline_cache)
            vkDestroyPipelineCache(gpu->device, gpu->pipeline_cache, NULL);
        vkDestroyDevice(gpu->device, NULL);
    }
    if (gpu->messenger) {
        PFN_vkDestroyDebugUtilsMessengerEXT destroy = (PFN_vkDestroyDebugUtilsMessengerEXT)
            vkGetInstanceProcAddr(gpu->instance, "vkDestroyDebugUtilsMessengerEXT");
        if (destroy)
            destroy(gpu->instance, gpu->messenger, NULL);
    }
    if (gpu->instance)
        vkDestroyInstance(gpu->instance, NULL);
    free(gpu->cache_path);
    pthread_mutex_destroy(&gpu->compute_lock);
    for (uint32_t q = 0; q < HP_GPU_DECODE_QUEUES_MAX; q++)
        pthread_mutex_destroy(&gpu->decode_locks[q]);
    pthread_mutex_destroy(&gpu->decode_take_lock);
    free(gpu);
    *pgpu = NULL;
}

const hp_gpu_info *hp_gpu_get_info(const hp_gpu *gpu) { return &gpu->info; }
void hp_gpu_info_copy(const hp_gpu *gpu, hp_gpu_info *out)
{
    *out = gpu->info;
    out->pipelines_created = atomic_load_explicit(&gpu->pipelines_created, memory_order_relaxed);
    out->pipelines_from_cache = atomic_load_explicit(&gpu->pipelines_from_cache, memory_order_relaxed);
}

uint32_t hp_gpu_buffers_created(const hp_gpu *gpu)
{
    return atomic_load_explicit(&gpu->buffers_created, memory_order_relaxed);
}

void hp_gpu_memory_report(hp_gpu *gpu, hp_gpu_memory *out)
{
    memset(out, 0, sizeof(*out));
    VkPhysicalDeviceMemoryBudgetPropertiesEXT budget = {
        .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_MEMORY_BUDGET_PROPERTIES_EXT};
    VkPhysicalDeviceMemoryProperties2 mp = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_MEMORY_PROPERTIES_2,
                                            .pNext = gpu->has_memory_budget ? &budget : NULL};
    vkGetPhysicalDeviceMemoryProperties2(gpu->physical, &mp);
    out->heap_count = mp.memoryProperties.memoryHeapCount;
    out->has_budget = gpu->has_memory_budget;
    for (uint32_t i = 0; i < out->heap_count; i++) {
        out->heaps[i].size = mp.memoryProperties.memoryHeaps[i].size;
        out->heaps[i].device_local = mp.memoryProperties.memoryHeaps[i].flags & VK_MEMORY_HEAP_DEVICE_LOCAL_BIT;
        if (gpu->has_memory_budget) {
            out->heaps[i].budget = budget.heapBudget[i];
            out->heaps[i].usage = budget.heapUsage[i];
        }
    }
    if (gpu->has_pci_bus_info) {
        VkPhysicalDevicePCIBusInfoPropertiesEXT pci = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PCI_BUS_INFO_PROPERTIES_EXT};
        VkPhysicalDeviceProperties2 p2 = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2, .pNext = &pci};
        vkGetPhysicalDeviceProperties2(gpu->physical, &p2);
        out->has_pci = true;
        out->pci_domain = pci.pciDomain;
        out->pci_bus = pci.pciBus;
        out->pci_device = pci.pciDevice;
        out->pci_function = pci.pciFunction;
    }
}
VkDevice hp_gpu_device(const hp_gpu *gpu) { return gpu->device; }
VkQueue hp_gpu_compute_queue(const hp_gpu *gpu) { return gpu->compute_queue; }
uint32_t hp_gpu_compute_family(const hp_gpu *gpu) { return gpu->compute_family; }

bool hp_gpu_has_decode_queue(const hp_gpu *gpu) { return gpu->decode_queues[0] != gpu->compute_queue; }
uint32_t hp_gpu_decode_family(const hp_gpu *gpu) { return gpu->decode_family; }
bool hp_gpu_decode_runs_beside(const hp_gpu *gpu) { return gpu->decode_family != gpu->compute_family; }
uint32_t hp_gpu_decode_queue_count(const hp_gpu *gpu) { return gpu->decode_queue_count; }

/* The decode queue with the fewest runs in flight, its count raised. */
static uint32_t decode_take(hp_gpu *gpu)
{
    pthread_mutex_lock(&gpu->decode_take_lock);
    uint32_t best = 0;
    for (uint32_t q = 1; q < gpu->decode_queue_count; q++)
        if (gpu->decode_runs[q] < gpu->decode_runs[best])
            best = q;
    gpu->decode_runs[best]++;
    pthread_mutex_unlock(&gpu->decode_take_lock);
    return best;
}

static void decode_give(hp_gpu *gpu, uint32_t queue)
{
    pthread_mutex_lock(&gpu->decode_take_lock);
    gpu->decode_runs[queue]--;
    pthread_mutex_unlock(&gpu->decode_take_lock);
}

/* Under the queue's lock (Vulkan's external synchronisation); one queue, one lock: the decode queue is the
 * compute queue where the device has no other. */
static VkResult submit_locked(pthread_mutex_t *lock, VkQueue queue, const VkSubmitInfo *submit, VkFence fence)
{
    pthread_mutex_lock(lock);
    VkResult res = vkQueueSubmit(queue, 1, submit, fence);
    pthread_mutex_unlock(lock);
    return res;
}

VkResult hp_gpu_submit(hp_gpu *gpu, const VkSubmitInfo *submit, VkFence fence)
{
    return submit_locked(&gpu->compute_lock, gpu->compute_queue, submit, fence);
}

VkResult hp_gpu_queue_wait_idle(hp_gpu *gpu)
{
    pthread_mutex_lock(&gpu->compute_lock);
    VkResult res = vkQueueWaitIdle(gpu->compute_queue);
    pthread_mutex_unlock(&gpu->compute_lock);
    return res;
}

VkResult hp_gpu_decode_submit_wait(hp_gpu *gpu, const VkSubmitInfo *submit, VkFence fence, uint64_t timeout_ns)
{
    uint32_t q = decode_take(gpu);
    pthread_mutex_t *lock = hp_gpu_has_decode_queue(gpu) ? &gpu->decode_locks[q] : &gpu->compute_lock;
    VkResult res = submit_locked(lock, gpu->decode_queues[q], submit, fence);
    if (res == VK_SUCCESS)
        res = vkWaitForFences(gpu->device, 1, &fence, VK_TRUE, timeout_ns);
    decode_give(gpu, q);
    return res;
}

void hp_gpu_set_name(hp_gpu *gpu, VkObjectType type, uint64_t handle, const char *name)
{
    if (!gpu->set_object_name || !name)
        return;
    VkDebugUtilsObjectNameInfoEXT info = {
        .sType = VK_STRUCTURE_TYPE_DEBUG_UTILS_OBJECT_NAME_INFO_EXT,
        .objectType = type,
        .objectHandle = handle,
        .pObjectName = name,
    };
    gpu->set_object_name(gpu->device, &info);
}

/* --- Buffers --------------------------------------------------------------------------------------
 * One VkDeviceMemory per buffer. hdrpostd allocates a handful of long-lived buffers per frame size and
 * reuses them for every later frame of that size, so a sub-allocator (VMA, which is C++ and not packaged
 * for Debian 12) would buy nothing: it too gives large buffers dedicated allocations. */

int hp_gpu_memory_type(const hp_gpu *gpu, uint32_t type_bits, VkMemoryPropertyFlags want,
                       VkMemoryPropertyFlags avoid)
{
    const VkPhysicalDeviceMemoryProperties *mp = &gpu->memory_props;
    for (uint32_t i = 0; i < mp->memoryTypeCount; i++) {
        VkMemoryPropertyFlags f = mp->memoryTypes[i].propertyFlags;
        if ((type_bits & (1u << i)) && (f & want) == want && !(f & avoid))
            return (int)i;
    }
    return -1;
}

/* The VkBuffer of a buffer of this kind: the usages its kind allows, shared by the compute and decode families
 * where they differ. */
static hp_code create_vk_buffer(hp_gpu *gpu, VkDeviceSize size, bool addressed, const char *name, hp_buffer *out,
                                hp_err *err)
{
    VkBufferUsageFlags usage = VK_BUFFER_USAGE_TRANSFER_SRC_BIT | VK_BUFFER_USAGE_TRANSFER_DST_BIT;
    if (addressed)
        usage |= VK_BUFFER_USAGE_STORAGE_BUFFER_BIT | VK_BUFFER_USAGE_SHADER_DEVICE_ADDRESS_BIT |
                 VK_BUFFER_USAGE_INDIRECT_BUFFER_BIT; /* the bokeh splat is dispatched from a GPU count */
    VkBufferCreateInfo bi = {
        .sType = VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO,
        .size = size,
        .usage = usage,
        .sharingMode = VK_SHARING_MODE_EXCLUSIVE,
    };
    /* With a decode queue of another family, a buffer may pass from one family to the other (a pooled block
     * is a frame's decoded image on the decode queue, then the frame graph's input): shared by both, so that
     * no ownership transfer is needed. Buffers, unlike images, lose nothing to it. */
    uint32_t families[2] = {gpu->compute_family, gpu->decode_family};
    if (gpu->decode_family != gpu->compute_family) {
        bi.sharingMode = VK_SHARING_MODE_CONCURRENT;
        bi.queueFamilyIndexCount = 2;
        bi.pQueueFamilyIndices = families;
    }
    VkResult res = vkCreateBuffer(gpu->device, &bi, NULL, &out->buffer);
    if (res != VK_SUCCESS)
        return hp_vk_fail(err, res, "vkCreateBuffer");
    hp_gpu_set_name(gpu, VK_OBJECT_TYPE_BUFFER, (uint64_t)out->buffer, name);
    return HP_OK;
}

/* The memory type for a kind among memory_type_bits: device-local; write-combined host memory for uploads (the
 * fastest for a one-way stream of writes); cached host memory for what the host reads. -1: none fits. */
static int memory_type_for(hp_gpu *gpu, hp_mem_kind kind, uint32_t memory_type_bits)
{
    int type = -1;
    switch (kind) {
    case HP_MEM_DEVICE:
        type = hp_gpu_memory_type(gpu, memory_type_bits, VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT, 0);
        break;
    case HP_MEM_UPLOAD:
        type = hp_gpu_memory_type(gpu, memory_type_bits,
                                VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT | VK_MEMORY_PROPERTY_HOST_COHERENT_BIT,
                                VK_MEMORY_PROPERTY_HOST_CACHED_BIT);
        break;
    case HP_MEM_READBACK:
    case HP_MEM_READBACK_SHADER:
        type = hp_gpu_memory_type(gpu, memory_type_bits,
                                VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT | VK_MEMORY_PROPERTY_HOST_CACHED_BIT, 0);
        break;
    }
    if (type < 0) { /* any host-visible type will do: a fallback is logged, never silent */
        VkMemoryPropertyFlags need = kind == HP_MEM_DEVICE ? 0 : VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT;
        type = hp_gpu_memory_type(gpu, memory_type_bits, need, 0);
    }
    return type;
}

/* The buffer's own memory (a dedicated allocation, with device addresses where the buffer is addressed),
 * bound to it. */
static hp_code allocate_and_bind(hp_gpu *gpu, const VkMemoryRequirements *req, int type, bool addressed,
                                 const char *name, hp_buffer *out, hp_err *err)
{
    VkMemoryAllocateFlagsInfo flags = {
        .sType = VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_FLAGS_INFO,
        .flags = VK_MEMORY_ALLOCATE_DEVICE_ADDRESS_BIT,
    };
    VkMemoryDedicatedAllocateInfo dedicated = {
        .sType = VK_STRUCTURE_TYPE_MEMORY_DEDICATED_ALLOCATE_INFO,
        .pNext = addressed ? &flags : NULL,
        .buffer = out->buffer,
    };
    VkMemoryAllocateInfo ai = {
        .sType = VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO,
        .pNext = &dedicated,
        .allocationSize = req->size,
        .memoryTypeIndex = (uint32_t)type,
    };
    VkResult res = vkAllocateMemory(gpu->device, &ai, NULL, &out->memory);
    if (res != VK_SUCCESS) {
        hp_vk_fail(err, res, "vkAllocateMemory");
        return hp_fail(err, err ? err->code : HP_ERR_OUT_OF_MEMORY, "cannot allocate %llu bytes for %s: %s",
                       (unsigned long long)req->size, name, hp_vk_result_name(res));
    }
    hp_gpu_set_name(gpu, VK_OBJECT_TYPE_DEVICE_MEMORY, (uint64_t)out->memory, name);
    res = vkBindBufferMemory(gpu->device, out->buffer, out->memory, 0);
    if (res != VK_SUCCESS)
        return hp_vk_fail(err, res, "vkBindBufferMemory");
    return HP_OK;
}

hp_code hp_buffer_create(hp_gpu *gpu, VkDeviceSize size, hp_mem_kind kind, const char *name, hp_buffer *out,
                         hp_err *err)
{
    memset(out, 0, sizeof(*out));
    if (size == 0)
        size = 16;
    if (size > gpu->info.max_allocation_size)
        return hp_fail(err, HP_ERR_TOO_LARGE,
                       "%s needs %llu bytes, over this device's maxMemoryAllocationSize of %llu", name,
                       (unsigned long long)size, (unsigned long long)gpu->info.max_allocation_size);
    bool addressed = kind == HP_MEM_DEVICE || kind == HP_MEM_READBACK_SHADER;
    hp_code rc = create_vk_buffer(gpu, size, addressed, name, out, err);
    if (rc != HP_OK)
        return rc;
    VkMemoryRequirements req;
    vkGetBufferMemoryRequirements(gpu->device, out->buffer, &req);
    int type = memory_type_for(gpu, kind, req.memoryTypeBits);
    if (type < 0) {
        hp_buffer_destroy(gpu, out);
        return hp_fail(err, HP_ERR_MISSING_FEATURE, "no memory type fits %s", name);
    }
    if ((rc = allocate_and_bind(gpu, &req, type, addressed, name, out, err)) != HP_OK) {
        hp_buffer_destroy(gpu, out);
        return rc;
    }
    out->size = size;
    /* Atomic: the host pool (host_pool.h) creates buffers from the HTTP threads too. */
    atomic_fetch_add_explicit(&gpu->buffers_created, 1, memory_order_relaxed);

    VkMemoryPropertyFlags mf = gpu->memory_props.memoryTypes[type].propertyFlags;
    if (mf & VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT && kind != HP_MEM_DEVICE) {
        VkResult res = vkMapMemory(gpu->device, out->memory, 0, VK_WHOLE_SIZE, 0, &out->mapped);
        if (res != VK_SUCCESS) {
            hp_buffer_destroy(gpu, out);
            return hp_vk_fail(err, res, "vkMapMemory");
        }
        out->coherent = mf & VK_MEMORY_PROPERTY_HOST_COHERENT_BIT;
    }
    if (addressed) {
        VkBufferDeviceAddressInfo ai = {.sType = VK_STRUCTURE_TYPE_BUFFER_DEVICE_ADDRESS_INFO, .buffer = out->buffer};
        out->address = vkGetBufferDeviceAddress(gpu->device, &ai);
    }
    return HP_OK;
}

void hp_buffer_destroy(hp_gpu *gpu, hp_buffer *buf)
{
    if (buf->buffer)
        vkDestroyBuffer(gpu->device, buf->buffer, NULL);
    if (buf->memory)
        vkFreeMemory(gpu->device, buf->memory, NULL); /* unmaps implicitly */
    memset(buf, 0, sizeof(*buf));
}

void hp_buffer_flush(hp_gpu *gpu, const hp_buffer *buf)
{
    if (buf->coherent || !buf->mapped)
        return;
    VkMappedMemoryRange r = {.sType = VK_STRUCTURE_TYPE_MAPPED_MEMORY_RANGE, .memory = buf->memory,
                             .size = VK_WHOLE_SIZE};
    vkFlushMappedMemoryRanges(gpu->device, 1, &r);
}

void hp_buffer_invalidate(hp_gpu *gpu, const hp_buffer *buf)
{
    if (buf->coherent || !buf->mapped)
        return;
    VkMappedMemoryRange r = {.sType = VK_STRUCTURE_TYPE_MAPPED_MEMORY_RANGE, .memory = buf->memory,
                             .size = VK_WHOLE_SIZE};
    vkInvalidateMappedMemoryRanges(gpu->device, 1, &r);
}

/* --- Compute pipelines --------------------------------------------------------------------------- */

hp_code hp_compute_create(hp_gpu *gpu, const hp_compute_desc *desc, hp_compute *out, hp_err *err)
{
    memset(out, 0, sizeof(*out));
    if (desc->push_constant_size > 128 || desc->spec_count > 16)
        return hp_fail(err, HP_ERR_INTERNAL, "%s: %u bytes of push constants, %u specialization constants",
                       desc->name, desc->push_constant_size, desc->spec_count);

    VkShaderModuleCreateInfo smi = {
        .sType = VK_STRUCTURE_TYPE_SHADER_MODULE_CREATE_INFO,
        .codeSize = desc->spirv_size,
        .pCode = desc->spirv,
    };
    VkShaderModule module;
    VkResult res = vkCreateShaderModule(gpu->device, &smi, NULL, &module);
    if (res != VK_SUCCESS)
        return hp_vk_fail(err, res, "vkCreateShaderModule");

    VkPushConstantRange range = {.stageFlags = VK_SHADER_STAGE_COMPUTE_BIT, .size = desc->push_constant_size};
    VkPipelineLayoutCreateInfo li = {
        .sType = VK_STRUCTURE_TYPE_PIPELINE_LAYOUT_CREATE_INFO,
        .setLayoutCount = desc->set_layout ? 1 : 0,
        .pSetLayouts = &desc->set_layout,
        .pushConstantRangeCount = desc->push_constant_size ? 1 : 0,
        .pPushConstantRanges = &range,
    };
    res = vkCreatePipelineLayout(gpu->device, &li, NULL, &out->layout);
    if (res != VK_SUCCESS) {
        vkDestroyShaderModule(gpu->device, module, NULL);
        return hp_vk_fail(err, res, "vkCreatePipelineLayout");
    }

    VkSpecializationMapEntry entries[16];
    for (uint32_t i = 0; i < desc->spec_count; i++)
        entries[i] = (VkSpecializationMapEntry){.constantID = i, .offset = 4 * i, .size = 4};
    VkSpecializationInfo spec = {
        .mapEntryCount = desc->spec_count,
        .pMapEntries = entries,
        .dataSize = 4 * (size_t)desc->spec_count,
        .pData = desc->spec_values,
    };
    VkPipelineCreationFeedback feedback = {0};
    VkPipelineCreationFeedbackCreateInfo feedback_info = {
        .sType = VK_STRUCTURE_TYPE_PIPELINE_CREATION_FEEDBACK_CREATE_INFO,
        .pPipelineCreationFeedback = &feedback,
    };
    VkComputePipelineCreateInfo ci = {
        .sType = VK_STRUCTURE_TYPE_COMPUTE_PIPELINE_CREATE_INFO,
        .pNext = gpu->has_creation_feedback ? &feedback_info : NULL,
        .flags = gpu->capture_statistics ? VK_PIPELINE_CREATE_CAPTURE_STATISTICS_BIT_KHR : 0,
        .stage = {
            .sType = VK_STRUCTURE_TYPE_PIPELINE_SHADER_STAGE_CREATE_INFO,
            .stage = VK_SHADER_STAGE_COMPUTE_BIT,
            .module = module,
            .pName = "main",
            .pSpecializationInfo = desc->spec_count ? &spec : NULL,
        },
        .layout = out->layout,
    };
    res = vkCreateComputePipelines(gpu->device, gpu->pipeline_cache, 1, &ci, NULL, &out->pipeline);
    vkDestroyShaderModule(gpu->device, module, NULL);
    if (res != VK_SUCCESS) {
        hp_compute_destroy(gpu, out);
        hp_vk_fail(err, res, "vkCreateComputePipelines");
        return hp_fail(err, err ? err->code : HP_ERR_VULKAN, "creating pipeline %s: %s", desc->name,
                       hp_vk_result_name(res));
    }
    hp_gpu_set_name(gpu, VK_OBJECT_TYPE_PIPELINE, (uint64_t)out->pipeline, desc->name);
    out->push_constant_size = desc->push_constant_size;
    atomic_fetch_add(&gpu->pipelines_created, 1);
    bool hit = (feedback.flags & VK_PIPELINE_CREATION_FEEDBACK_VALID_BIT) &&
               (feedback.flags & VK_PIPELINE_CREATION_FEEDBACK_APPLICATION_PIPELINE_CACHE_HIT_BIT);
    if (hit)
        atomic_fetch_add(&gpu->pipelines_from_cache, 1);
    hp_debug("vulkan: pipeline %s created in %.2f ms%s", desc->name, feedback.duration / 1e6,
             hit ? " (pipeline cache hit)" : "");
    return HP_OK;
}

void hp_compute_statistics(hp_gpu *gpu, const hp_compute *c, char *buf, size_t len)
{
    if (len)
        buf[0] = '\0';
    if (!gpu->capture_statistics || !c->pipeline)
        return;
    PFN_vkGetPipelineExecutableStatisticsKHR get_stats = (PFN_vkGetPipelineExecutableStatisticsKHR)
        vkGetDeviceProcAddr(gpu->device, "vkGetPipelineExecutableStatisticsKHR");
    if (!get_stats)
        return;
    VkPipelineExecutableInfoKHR exe = {.sType = VK_STRUCTURE_TYPE_PIPELINE_EXECUTABLE_INFO_KHR,
                                       .pipeline = c->pipeline, .executableIndex = 0};
    VkPipelineExecutableStatisticKHR stats[32];
    uint32_t n = 32;
    for (uint32_t i = 0; i < n; i++)
        stats[i] = (VkPipelineExecutableStatisticKHR){.sType = VK_STRUCTURE_TYPE_PIPELINE_EXECUTABLE_STATISTIC_KHR};
    VkResult res = get_stats(gpu->device, &exe, &n, stats);
    if (res != VK_SUCCESS && res != VK_INCOMPLETE)
        return;
    size_t used = 0;
    for (uint32_t i = 0; i < n && used + 1 < len; i++) {
        int w = 0;
        const char *sep = i ? ", " : "";
        switch (stats[i].format) {
        case VK_PIPELINE_EXECUTABLE_STATISTIC_FORMAT_BOOL32_KHR:
            w = snprintf(buf + used, len - used, "%s%s=%s", sep, stats[i].name, stats[i].value.b32 ? "yes" : "no");
            break;
        case VK_PIPELINE_EXECUTABLE_STATISTIC_FORMAT_INT64_KHR:
            w = snprintf(buf + used, len - used, "%s%s=%lld", sep, stats[i].name, (long long)stats[i].value.i64);
            break;
        case VK_PIPELINE_EXECUTABLE_STATISTIC_FORMAT_UINT64_KHR:
            w = snprintf(buf + used, len - used, "%s%s=%llu", sep, stats[i].name,
                         (unsigned long long)stats[i].value.u64);
            break;
        case VK_PIPELINE_EXECUTABLE_STATISTIC_FORMAT_FLOAT64_KHR:
            w = snprintf(buf + used, len - used, "%s%s=%g", sep, stats[i].name, stats[i].value.f64);
            break;
        default:
            break;
        }
        if (w < 0)
            break;
        used += (size_t)w < len - used ? (size_t)w : len - used - 1;
    }
}

void hp_compute_destroy(hp_gpu *gpu, hp_compute *c)
{
    if (c->pipeline)
        vkDestroyPipeline(gpu->device, c->pipeline, NULL);
    if (c->layout)
        vkDestroyPipelineLayout(gpu->device, c->layout, NULL);
    memset(c, 0, sizeof(*c));
}
