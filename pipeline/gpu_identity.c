/* Which GPU: pipeline/gpu_identity.h. */
#include "pipeline/gpu_identity.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

static bool has_extension(VkPhysicalDevice pd, const char *name)
{
    uint32_t n = 0;
    if (vkEnumerateDeviceExtensionProperties(pd, NULL, &n, NULL) != VK_SUCCESS || n == 0)
        return false;
    VkExtensionProperties *e = calloc(n, sizeof(*e));
    bool found = false;
    if (e && vkEnumerateDeviceExtensionProperties(pd, NULL, &n, e) == VK_SUCCESS)
        for (uint32_t i = 0; i < n && !found; i++)
            found = strcmp(e[i].extensionName, name) == 0;
    free(e);
    return found;
}

void hp_gpu_identity_of(VkPhysicalDevice pd, hp_gpu_identity *out)
{
    *out = (hp_gpu_identity){0};
    /* A device extension's properties may be chained when the physical device has it, enabled or not. */
    bool pci = has_extension(pd, VK_EXT_PCI_BUS_INFO_EXTENSION_NAME);
    VkPhysicalDevicePCIBusInfoPropertiesEXT bus = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PCI_BUS_INFO_PROPERTIES_EXT};
    VkPhysicalDeviceIDProperties id = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_ID_PROPERTIES,
                                       .pNext = pci ? &bus : NULL};
    VkPhysicalDeviceProperties2 p2 = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2, .pNext = &id};
    vkGetPhysicalDeviceProperties2(pd, &p2);
    const uint8_t *u = id.deviceUUID;
    snprintf(out->uuid, sizeof(out->uuid),
             "GPU-%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", u[0], u[1], u[2], u[3], u[4],
             u[5], u[6], u[7], u[8], u[9], u[10], u[11], u[12], u[13], u[14], u[15]);
    if (pci) {
        out->has_pci = true;
        out->pci_domain = bus.pciDomain;
        out->pci_bus = bus.pciBus;
        out->pci_device = bus.pciDevice;
        out->pci_function = bus.pciFunction;
        snprintf(out->pci_address, sizeof(out->pci_address), "%04x:%02x:%02x.%x", bus.pciDomain, bus.pciBus,
                 bus.pciDevice, bus.pciFunction);
    }
}

/* The 32 hex digits of a UUID written any of the usual ways, lower-case, in hex[33]; false when it is not one. */
static bool uuid_digits(const char *s, char hex[33])
{
    if (strncasecmp(s, "GPU-", 4) == 0)
        s += 4;
    int n = 0;
    for (; *s; s++) {
        if (*s == '-')
            continue;
        if (!isxdigit((unsigned char)*s) || n == 32)
            return false;
        hex[n++] = (char)tolower((unsigned char)*s);
    }
    hex[n] = '\0';
    return n == 32;
}

/* "[domain:]bus:device.function" in hex; false when it is not one. */
static bool pci_parts(const char *s, uint32_t *domain, uint32_t *bus, uint32_t *device, uint32_t *function)
{
    unsigned long v[4];
    int count = 0;
    const char *p = s;
    char seps[4] = {0};
    while (count < 4) {
        char *end;
        if (!isxdigit((unsigned char)*p))
            return false;
        v[count] = strtoul(p, &end, 16);
        seps[count++] = *end;
        if (*end == '\0')
            break;
        if (*end != ':' && *end != '.')
            return false;
        p = end + 1;
    }
    /* bus:device.function or domain:bus:device.function */
    bool three = count == 3 && seps[0] == ':' && seps[1] == '.' && seps[2] == '\0';
    bool four = count == 4 && seps[0] == ':' && seps[1] == ':' && seps[2] == '.' && seps[3] == '\0';
    if (!three && !four)
        return false;
    int k = four;
    if (v[k] > 0xff || v[k + 1] > 0x1f || v[k + 2] > 7 || (four && v[0] > 0xffffffffu))
        return false; /* checked before narrowing: 0:10000003b:00.0 is no bus 3b */
    *domain = four ? (uint32_t)v[0] : 0;
    *bus = (uint32_t)v[k];
    *device = (uint32_t)v[k + 1];
    *function = (uint32_t)v[k + 2];
    return true;
}

hp_gpu_selector hp_gpu_selector_of(const char *want)
{
    char hex[33];
    uint32_t d, b, dev, f;
    if (want && uuid_digits(want, hex))
        return HP_GPU_BY_UUID;
    if (want && pci_parts(want, &d, &b, &dev, &f))
        return HP_GPU_BY_PCI;
    return HP_GPU_BY_OTHER;
}

bool hp_gpu_identity_matches(const hp_gpu_identity *id, const char *want)
{
    char a[33], b[33];
    uint32_t domain, bus, device, function;
    switch (hp_gpu_selector_of(want)) {
    case HP_GPU_BY_UUID:
        return uuid_digits(want, a) && uuid_digits(id->uuid, b) && strcmp(a, b) == 0;
    case HP_GPU_BY_PCI:
        return id->has_pci && pci_parts(want, &domain, &bus, &device, &function) && domain == id->pci_domain &&
               bus == id->pci_bus && device == id->pci_device && function == id->pci_function;
    default:
        return false;
    }
}
