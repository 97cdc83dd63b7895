/* Which GPU a daemon holds, in the words an operator's tools use (issue 37): the UUID that nvidia-smi and
 * NVML print (VkPhysicalDeviceIDProperties.deviceUUID is the same sixteen bytes on NVIDIA's driver), and the
 * PCI address of sysfs and lspci -D (VK_EXT_pci_bus_info). On a host of several identical GPUs the name and
 * the device id say nothing; these tell the replicas apart, and --device takes either. */
#ifndef HP_GPU_IDENTITY_H
#define HP_GPU_IDENTITY_H

#include <stdbool.h>
#include <stdint.h>
#include <vulkan/vulkan.h>

typedef struct hp_gpu_identity {
    char uuid[48];         /* "GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx", lower-case hex, as nvidia-smi writes it */
    bool has_pci;          /* the driver has VK_EXT_pci_bus_info (lavapipe has none) */
    uint32_t pci_domain, pci_bus, pci_device, pci_function;
    char pci_address[24];  /* "0000:3b:00.0", sysfs's form; "" without */
} hp_gpu_identity;

/* The device's identity (Vulkan 1.1's properties2; the PCI address only where the device has the extension). */
void hp_gpu_identity_of(VkPhysicalDevice pd, hp_gpu_identity *out);

/* What a device= value names. HP_GPU_BY_UUID: 32 hex digits, with or without "GPU-", dashes anywhere, any
 * case. HP_GPU_BY_PCI: "[domain:]bus:device.function" in hex (NVML's "00000000:3B:00.0" and sysfs's
 * "0000:3b:00.0" alike). Anything else is for the caller (an index, a name). */
typedef enum { HP_GPU_BY_OTHER, HP_GPU_BY_UUID, HP_GPU_BY_PCI } hp_gpu_selector;
hp_gpu_selector hp_gpu_selector_of(const char *want);

/* Whether want (a UUID or PCI address, hp_gpu_selector_of) names this device. */
bool hp_gpu_identity_matches(const hp_gpu_identity *id, const char *want);

#endif
