/* pipeline/gpu_identity.h: what a device= value names (issue 37), on identities written here: a UUID spelled the
 * ways operators paste it (nvidia-smi -L, NVML, CUDA_VISIBLE_DEVICES), PCI addresses in sysfs's and NVML's forms,
 * and values that are neither (an index, a name) left to the caller. */
#include <stdio.h>
#include <string.h>

#include "pipeline/gpu_identity.h"
#include "tap.h"

static const hp_gpu_identity h200 = {.uuid = "GPU-1a2b3c4d-5e6f-7081-92a3-b4c5d6e7f809", .has_pci = true,
                                     .pci_domain = 0, .pci_bus = 0x3b, .pci_device = 0, .pci_function = 0,
                                     .pci_address = "0000:3b:00.0"};
static const hp_gpu_identity lavapipe = {.uuid = "GPU-6d657361-3232-2e33-2e36-000000000000"};

static void expect(const char *want, hp_gpu_selector kind, bool matches_h200, bool matches_lavapipe)
{
    hp_gpu_selector got = hp_gpu_selector_of(want);
    bool a = hp_gpu_identity_matches(&h200, want), b = hp_gpu_identity_matches(&lavapipe, want);
    static const char *const kinds[] = {"other", "a UUID", "a PCI address"};
    tap_ok(got == kind && a == matches_h200 && b == matches_lavapipe, "\"%s\" is %s (got %s); names the H200: %s (%s), "
           "lavapipe: %s (%s)", want, kinds[kind], kinds[got], matches_h200 ? "yes" : "no", a ? "yes" : "no",
           matches_lavapipe ? "yes" : "no", b ? "yes" : "no");
}

int main(void)
{
    /* UUIDs */
    expect("GPU-1a2b3c4d-5e6f-7081-92a3-b4c5d6e7f809", HP_GPU_BY_UUID, true, false);
    expect("gpu-1A2B3C4D-5E6F-7081-92A3-B4C5D6E7F809", HP_GPU_BY_UUID, true, false);
    expect("1a2b3c4d5e6f708192a3b4c5d6e7f809", HP_GPU_BY_UUID, true, false);
    expect("1a2b3c4d-5e6f-7081-92a3-b4c5d6e7f809", HP_GPU_BY_UUID, true, false);
    expect("GPU-6d657361-3232-2e33-2e36-000000000000", HP_GPU_BY_UUID, false, true);
    expect("GPU-00000000-0000-0000-0000-000000000000", HP_GPU_BY_UUID, false, false);
    /* PCI addresses: sysfs's, NVML's, without the domain */
    expect("0000:3b:00.0", HP_GPU_BY_PCI, true, false);
    expect("00000000:3B:00.0", HP_GPU_BY_PCI, true, false);
    expect("3b:00.0", HP_GPU_BY_PCI, true, false);
    expect("0000:3b:00.1", HP_GPU_BY_PCI, false, false); /* another function: no; and lavapipe has no address */
    expect("0001:3b:00.0", HP_GPU_BY_PCI, false, false);
    /* neither: the caller's (an index, a name substring) */
    expect("0", HP_GPU_BY_OTHER, false, false);
    expect("H200", HP_GPU_BY_OTHER, false, false);
    expect("GPU-1a2b3c4d", HP_GPU_BY_OTHER, false, false);              /* too short for a UUID */
    expect("1a2b3c4d5e6f708192a3b4c5d6e7f8090", HP_GPU_BY_OTHER, false, false); /* 33 digits */
    expect("3b:00", HP_GPU_BY_OTHER, false, false);                     /* no function */
    expect("3b:20.0", HP_GPU_BY_OTHER, false, false);                   /* device past 0x1f */
    expect("3b:00.8", HP_GPU_BY_OTHER, false, false);                   /* function past 7 */
    expect("100:00.0", HP_GPU_BY_OTHER, false, false);                  /* bus past 0xff */
    expect("0000:3b:00.0x", HP_GPU_BY_OTHER, false, false);
    expect("0:10000003b:00.0", HP_GPU_BY_OTHER, false, false);           /* a bus past 0xff, not narrowed */
    expect("", HP_GPU_BY_OTHER, false, false);
    return tap_done();
}
